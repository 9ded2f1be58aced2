package pipeline

import (
	"net/url"
	"regexp"
)

// EnvironmentNamePattern is what an environment's name may be: the same names the
// project's environments and environment secrets accept.
var EnvironmentNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$`)

// compileEnvironment substitutes a job's environment and checks the result: the name
// may come from a matrix value, so it is checked once it is known.
func (d *decoder) compileEnvironment(e *environmentSpec, matrix []MatrixValue, env map[string]string) *Environment {
	out := &Environment{Name: d.substitute(e.name, matrix, env)}
	if !EnvironmentNamePattern.MatchString(out.Name) {
		d.add(ErrInvalid, e.name.node, e.name.path, "environment name %q: use letters, digits and _ . - (at most 100, starting with a letter or digit)", out.Name)
		return nil
	}
	if e.url.node != nil {
		// The run's own values (${{ branch }} ...) are put in when a run is created.
		out.URL = d.substituteRun(e.url, matrix, env)
		if u, err := url.Parse(out.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.add(ErrInvalid, e.url.node, e.url.path, "environment url %q: give an absolute http or https URL", out.URL)
			return nil
		}
	}
	return out
}
