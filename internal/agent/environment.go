package agent

import (
	"strings"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// stepsEnd is what a job's steps leave besides its status: the job's outputs and its
// environment's url.
type stepsEnd struct {
	outputs map[string]string
	// environmentURL is the url of the job's environment as the steps left it, for a url
	// that reads them (pipeline.Environment.URLTemplate); nil for any other job.
	environmentURL *string
}

// environmentURL evaluates the url of the job's environment when it reads what the
// steps left, as GitHub does when the job ends; nil for any other job. The expressions
// kept for the worker and the steps' outputs are put in in one pass, so that no output
// is read as an expression. A url that cannot be evaluated, is not an
// absolute http or https URL or holds a secret is told in the log, and the job keeps
// none: as on GitHub, it does not fail the job.
func (a *Agent) environmentURL(rec *logs.Recorder, j claimedJob, ws, stepWS string, files *stepFiles,
	steps map[string]pipeline.StepState, jobStatus func() string) *string {
	e := j.Spec.Environment
	if e == nil || e.URLTemplate == "" {
		return nil
	}
	url, err := a.endValues(j, ws, stepWS, files, steps, jobStatus).Expand(e.URLTemplate)
	if err != nil {
		rec.System("environment " + e.Name + ": its url could not be evaluated, so the job keeps none: " + err.Error())
		return new(string)
	}
	url = strings.TrimSpace(url)
	switch err := pipeline.CheckEnvironmentURL(url); {
	case rec.HoldsSecret(url):
		rec.System("environment " + e.Name + ": its url withheld: it holds a secret value")
		url = ""
	case err != nil:
		rec.System("environment " + e.Name + ": " + err.Error() + ", so the job keeps none")
		url = ""
	}
	return &url
}
