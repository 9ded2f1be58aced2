package pipeline

import (
	"strings"
)

// instance is one combination of matrix values.
type instance []MatrixValue

func (in instance) key(job string) string {
	if len(in) == 0 {
		return job
	}
	parts := make([]string, len(in))
	for i, m := range in {
		parts[i] = m.Name + "=" + m.Value
	}
	return job + " (" + strings.Join(parts, ", ") + ")"
}

func (in instance) matches(values []MatrixValue) bool {
	for _, v := range values {
		got, ok := lookupMatrix(in, v.Name)
		if !ok || got != v.Value {
			return false
		}
	}
	return true
}

// expand turns a job's matrix into its instances: the cartesian product of the axes (the
// first axis varying slowest), minus exclude entries, then include entries, which add
// values to the combinations they match or, matching none, become combinations of their
// own. It returns nil after reporting an error; budget is how many jobs may still be made.
func (d *decoder) expand(j *jobSpec, budget int) ([]instance, bool) {
	m := j.matrix
	if m == nil {
		return []instance{nil}, true
	}
	if len(m.axes) == 0 && len(m.include) == 0 {
		d.add(ErrRequired, m.node, m.path, "matrix has no axes")
		return nil, false
	}
	size := 1
	for _, ax := range m.axes {
		size *= len(ax.values)
		if size > budget {
			d.add(ErrLimit, m.node, m.path, "matrix of job %q expands past the limit of %d jobs", j.name, d.limits.MaxJobs)
			return nil, false
		}
	}
	axisNames := make([]string, len(m.axes))
	for i, ax := range m.axes {
		axisNames[i] = ax.name
	}
	ok := true
	for _, ex := range m.exclude {
		for _, v := range ex.values {
			if !d.knownAxisValue(m, ex, v) {
				ok = false
			}
		}
	}
	if !ok {
		return nil, false
	}

	var out []instance
	if len(m.axes) > 0 {
		idx := make([]int, len(m.axes))
		for {
			in := make(instance, len(m.axes))
			for i, ax := range m.axes {
				in[i] = MatrixValue{Name: ax.name, Value: ax.values[idx[i]].v}
			}
			excluded := false
			for _, ex := range m.exclude {
				if in.matches(ex.values) {
					excluded = true
					break
				}
			}
			if !excluded {
				out = append(out, in)
			}
			i := len(idx) - 1
			for i >= 0 {
				idx[i]++
				if idx[i] < len(m.axes[i].values) {
					break
				}
				idx[i] = 0
				i--
			}
			if i < 0 {
				break
			}
		}
	}
	original := len(out)
	for _, inc := range m.include {
		var axisVals, extra []MatrixValue
		for _, v := range inc.values {
			if contains(axisNames, v.Name) {
				axisVals = append(axisVals, v)
			} else {
				extra = append(extra, v)
			}
		}
		matched := false
		for i := 0; i < original; i++ {
			if !out[i].matches(axisVals) {
				continue
			}
			matched = true
			for _, e := range extra {
				out[i] = setValue(out[i], e)
			}
		}
		if !matched {
			// New combination: axis values in axis order, then the entry's own keys.
			in := make(instance, 0, len(inc.values))
			for _, name := range axisNames {
				if v, ok := lookupMatrix(inc.values, name); ok {
					in = append(in, MatrixValue{Name: name, Value: v})
				}
			}
			in = append(in, extra...)
			out = append(out, in)
		}
	}
	// Identical combinations (two include entries alike) become one job.
	seen := map[string]bool{}
	uniq := out[:0]
	for _, in := range out {
		k := in.key("")
		if !seen[k] {
			seen[k] = true
			uniq = append(uniq, in)
		}
	}
	if len(uniq) == 0 {
		d.add(ErrInvalid, m.node, m.path, "matrix of job %q has no combinations left after exclude", j.name)
		return nil, false
	}
	if len(uniq) > budget {
		d.add(ErrLimit, m.node, m.path, "matrix of job %q expands past the limit of %d jobs", j.name, d.limits.MaxJobs)
		return nil, false
	}
	return uniq, true
}

func setValue(in instance, v MatrixValue) instance {
	out := make(instance, len(in), len(in)+1)
	copy(out, in)
	for i := range out {
		if out[i].Name == v.Name {
			out[i].Value = v.Value
			return out
		}
	}
	return append(out, v)
}

// knownAxisValue checks that an exclude entry names an axis and one of its values, since an
// entry that can never match is a typo that would silently exclude nothing.
func (d *decoder) knownAxisValue(m *matrixSpec, c combo, v MatrixValue) bool {
	for _, ax := range m.axes {
		if ax.name != v.Name {
			continue
		}
		for _, t := range ax.values {
			if t.v == v.Value {
				return true
			}
		}
		d.add(ErrInvalid, c.node, c.path+"."+v.Name, "exclude names %s=%s, which axis %s does not have", v.Name, v.Value, v.Name)
		return false
	}
	names := make([]string, len(m.axes))
	for i, ax := range m.axes {
		names[i] = ax.name
	}
	d.add(ErrUnknownReference, c.node, c.path+"."+v.Name, "exclude names axis %q, which the matrix does not have%s", v.Name, suggest(v.Name, names))
	return false
}
