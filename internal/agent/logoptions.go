package agent

import (
	"strings"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// recorderOptions are the options of a job attempt's log recorder: debug mode, which
// shows the ::debug:: messages of its steps, when the job asks for it as GitHub's are
// asked (docs/logs.md).
func recorderOptions(j claimedJob) logs.RecorderOptions {
	return logs.RecorderOptions{Debug: stepDebug(j)}
}

// stepDebug reports whether ACTIONS_STEP_DEBUG is true for the job: in the run's env
// (gantry submit --env), the job's, or a secret of that name, as on GitHub, where it is
// a secret or a variable.
func stepDebug(j claimedJob) bool {
	const name = "ACTIONS_STEP_DEBUG"
	v, ok := j.RunEnv[name]
	if !ok && j.Spec != nil {
		if v, ok = j.Spec.Env[name]; ok {
			v = pipeline.ExpandSecrets(v, j.Secrets)
		}
	}
	if !ok {
		v = j.Secrets[name]
	}
	v = strings.TrimSpace(v)
	return strings.EqualFold(v, "true") || v == "1"
}
