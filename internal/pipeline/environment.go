package pipeline

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// EnvironmentNamePattern is what an environment's name may be: the same names the
// project's environments and environment secrets accept.
var EnvironmentNamePattern = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// compileEnvironment substitutes a job's environment and checks the result: the name
// may come from a matrix value, so it is checked once it is known.
func (d *decoder) compileEnvironment(e *environmentSpec, matrix []MatrixValue, env map[string]string) *Environment {
	out := &Environment{Name: d.substitute(e.name, matrix, env)}
	if !EnvironmentNamePattern.Regexp().MatchString(out.Name) {
		d.add(ErrInvalid, e.name.node, e.name.path, "environment name %q: use letters, digits and _ . - (at most 100, starting with a letter or digit)", out.Name)
		return nil
	}
	if e.url.node != nil {
		// The run's own values (${{ branch }} ...) are put in when a run is created, what
		// the job's needs and steps left when its steps are done (URLTemplate).
		v := d.substituteRun(e.url, matrix, env)
		if knownAtJobEnd(v) {
			out.URLTemplate = v
			if lead, _, _ := strings.Cut(v, "${{"); !urlLead(lead) {
				d.add(ErrInvalid, e.url.node, e.url.path, "environment url %q: give an absolute http or https URL", v)
				return nil
			}
			return out
		}
		out.URL = v
		if CheckEnvironmentURL(out.URL) != nil {
			d.add(ErrInvalid, e.url.node, e.url.path, "environment url %q: give an absolute http or https URL", out.URL)
			return nil
		}
	}
	return out
}

// knownAtJobEnd says whether an environment's url reads what is known only once the
// job's steps are done: its steps' outputs, its needs' outputs (put in when the job is
// claimed) or an expression kept for the worker.
func knownAtJobEnd(s string) bool {
	return strings.Contains(s, "${{") && (stepsRefs.MatchString(s) || needsRefs.MatchString(s) || HasWorkerExprs(s))
}

// urlLead says whether the text before an environment url's first ${{ can begin an
// absolute http or https URL.
func urlLead(lead string) bool {
	l := strings.ToLower(lead)
	for _, scheme := range []string{"https://", "http://"} {
		if strings.HasPrefix(l, scheme) || strings.HasPrefix(scheme, l) {
			return true
		}
	}
	return false
}

// MaxEnvironmentURLBytes bounds an environment's url.
const MaxEnvironmentURLBytes = 2048

// CheckEnvironmentURL says what is wrong with an environment's url as the job's end
// gives it, or nil: it must be an absolute http or https URL of at most
// MaxEnvironmentURLBytes. "" (none) is good.
func CheckEnvironmentURL(s string) error {
	if s == "" {
		return nil
	}
	if len(s) > MaxEnvironmentURLBytes {
		return fmt.Errorf("environment url of %d bytes, more than the limit of %d", len(s), MaxEnvironmentURLBytes)
	}
	if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("environment url %q: not an absolute http or https URL", clip(s, 200))
	}
	return nil
}
