package pipeline

// compileReports substitutes a job's report paths and checks them again: a matrix value
// or an env var may have made one that leaves the workspace.
func (d *decoder) compileReports(r *reportSpec, in []MatrixValue, env map[string]string) *Reports {
	out := &Reports{}
	lists := [3]*[]string{&out.JUnit, &out.GoTestJSON, &out.TAP}
	for i, paths := range r.paths {
		for _, p := range paths {
			v := d.substitute(p, in, env)
			if msg := checkArtifactPath(v); msg != "" {
				d.add(ErrInvalid, p.node, p.path, "report path %q %s", v, msg)
				continue
			}
			*lists[i] = append(*lists[i], v)
		}
	}
	if out.ByFormat() == nil {
		return nil
	}
	return out
}
