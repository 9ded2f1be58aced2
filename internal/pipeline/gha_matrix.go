package pipeline

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// A workflow's matrix value may be a mapping (build: [{name: gcc, cc: gcc}, ...]), read as
// matrix.build.cc. Gantry's matrix values are scalars, so an axis of mappings becomes an
// axis of indexes ("1".."n") and one include entry per value, {build: "1", build__name:
// gcc, build__cc: gcc}: include adds its keys to every combination with that index, which
// is GitHub's cartesian product. References (matrix.build.cc) are written as the names the
// keys got (matrix.build__cc), and MatrixContext makes the objects again for what the
// worker evaluates.

// matrixKeySep joins a matrix key and a key of its mapping value into one of Gantry's
// matrix names (build__cc), which are letters, digits, '-' and '_'. A workflow's own
// matrix keys may not hold it, so no name is read two ways.
const matrixKeySep = "__"

// flatMatrixKeys are the keys of a job's matrix whose values are mappings: axes of
// mappings and keys to which include entries give mappings. It reads the workflow's
// matrix as written, before it is translated, so that every key of the job (env, name,
// runs-on) is translated knowing them, whatever their order in the file.
// matrixKeys are the keys a job's matrix gives its instances (its axes and the keys its
// include: entries add), and whether they are all known when the plan is made: not when
// the matrix, or a part of it, is an expression. A job without a matrix has none.
func (t *ghaTranslator) matrixKeys(job *yaml.Node) (map[string]bool, bool) {
	d := t.d
	out := map[string]bool{}
	strategy := d.resolve(mappingValue(job, "strategy"))
	if strategy == nil || mappingValue(strategy, "matrix") == nil {
		return out, true
	}
	m := d.resolve(mappingValue(strategy, "matrix"))
	if m == nil || m.Kind != yaml.MappingNode {
		return nil, false
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, v := m.Content[i].Value, d.resolve(m.Content[i+1])
		switch {
		case key == "exclude":
		case v == nil || v.Kind != yaml.SequenceNode:
			return nil, false
		case key != "include":
			out[key] = true
		default:
			for _, item := range v.Content {
				item = d.resolve(item)
				if item == nil || item.Kind != yaml.MappingNode {
					return nil, false
				}
				for k := 0; k+1 < len(item.Content); k += 2 {
					out[item.Content[k].Value] = true
				}
			}
		}
	}
	return out, true
}

// noMatrixKey reports a reference to a key no instance of the job's matrix has, which
// GitHub reads as null ("" in text): a workflow may compare matrix.x with the empty
// string for a key it never set.
func noMatrixKey(r *ghaRef, j *ghaJob) bool {
	return j != nil && j.matrixKeys != nil && len(r.path) >= 1 && r.path[0] != "*" && !j.matrixKeys[r.path[0]]
}

func (t *ghaTranslator) flatMatrixKeys(job *yaml.Node) map[string]bool {
	d := t.d
	m := d.resolve(mappingValue(d.resolve(mappingValue(job, "strategy")), "matrix"))
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	out := map[string]bool{}
	for i := 0; i+1 < len(m.Content); i += 2 {
		key, v := m.Content[i].Value, d.resolve(m.Content[i+1])
		if v == nil || v.Kind != yaml.SequenceNode || key == "exclude" {
			continue
		}
		for _, item := range v.Content {
			item = d.resolve(item)
			if item == nil || item.Kind != yaml.MappingNode {
				continue
			}
			if key != "include" {
				out[key] = true
				continue
			}
			for k := 0; k+1 < len(item.Content); k += 2 {
				if val := d.resolve(item.Content[k+1]); val != nil && val.Kind == yaml.MappingNode {
					out[item.Content[k].Value] = true
				}
			}
		}
	}
	return out
}

// flatMatrixName is the name Gantry's matrix gives a reference to a key of a mapping
// value (matrix.build.cc is build__cc), when r is one.
func flatMatrixName(r *ghaRef, j *ghaJob) (string, bool) {
	if r.head == "matrix" && j != nil && j.dynamic && len(r.path) > 0 {
		// Known only at expansion, when the job is translated again with its values.
		return strings.Join(r.path, matrixKeySep), true
	}
	if r.head != "matrix" || len(r.path) < 2 || j == nil || !j.flat[r.path[0]] || slices.Contains(r.path, "*") {
		return "", false
	}
	return strings.Join(r.path, matrixKeySep), true
}

// wholeMatrixObject is the error for a reference to a mapping value as a whole
// (matrix.build), which Gantry cannot put in where it decides the value when it plans.
func wholeMatrixObject(r *ghaRef) *ghaExprError {
	return &ghaExprError{r.at, fmt.Sprintf("matrix.%s is a mapping; read one of its keys (matrix.%s.KEY)", r.path[0], r.path[0])}
}

// matrix copies a matrix: axes, include and exclude, with mapping values flattened.
func (t *ghaTranslator) matrix(j *ghaJob, g field) *yaml.Node {
	d := t.d
	r := d.resolve(g.val)
	if r == nil || j.dynamic {
		return nil // a computed matrix is the placeholder's (gha_dynmatrix.go)
	}
	if r.Kind == yaml.ScalarNode && strings.Contains(r.Value, "${{") {
		d.add(ErrInvalid, r, g.path, "a matrix computed by an expression is not supported; write its axes out")
		return nil
	}
	m := &ghaMatrixSpec{objects: map[string][]*yaml.Node{}}
	out := gMap(r)
	var include, exclude *field
	for _, f := range d.fields(g.val, g.path, "a mapping of matrix axes to lists of values") {
		v := d.resolve(f.val)
		if v == nil {
			continue
		}
		if v.Kind == yaml.ScalarNode && strings.Contains(v.Value, "${{") {
			d.add(ErrInvalid, v, f.path, "matrix %s computed by an expression is not supported; write its values out", f.key)
			continue
		}
		if strings.Contains(f.key, matrixKeySep) {
			d.add(ErrInvalid, f.keyNode, f.path, "matrix key %q: Gantry names the keys of a mapping value KEY__NAME, so a key may not hold __", f.key)
			continue
		}
		if v.Kind != yaml.SequenceNode {
			out.Content = append(out.Content, f.keyNode, t.plain(f.val))
			continue
		}
		switch f.key {
		case "include":
			include = &f
			continue
		case "exclude":
			exclude = &f
			continue
		}
		if slices.ContainsFunc(v.Content, func(n *yaml.Node) bool { n = d.resolve(n); return n != nil && n.Kind == yaml.MappingNode }) {
			if seq := t.objectAxis(m, f, v); seq != nil {
				out.Content = append(out.Content, f.keyNode, seq)
			}
			continue
		}
		seq := gSeq(v)
		ax := ghaAxis{name: f.key}
		for _, item := range v.Content {
			if item = t.plain(item); item != nil {
				seq.Content = append(seq.Content, item)
				ax.values = append(ax.values, item.Value)
			}
		}
		m.axes = append(m.axes, ax)
		out.Content = append(out.Content, f.keyNode, seq)
	}
	var excl []*yaml.Node
	if exclude != nil {
		excl = t.matrixExclude(m, *exclude)
	}
	m.dropExcluded(&excl)
	if exclude != nil {
		seq := gSeq(d.resolve(exclude.val))
		seq.Content = excl
		out.Content = append(out.Content, exclude.keyNode, seq)
	}
	for _, ax := range m.axes {
		if m.objects[ax.name] != nil {
			t.objectAxes[j.id] = append(t.objectAxes[j.id], ax.name)
		}
	}
	incl := m.include
	if include != nil {
		incl = append(incl, t.matrixInclude(m, *include)...)
	}
	if len(incl) > 0 {
		at := r
		if include != nil {
			at = include.keyNode
		}
		seq := gSeq(at)
		seq.Content = incl
		out.Content = append(out.Content, gStr("include", at), seq)
	}
	return out
}

// ghaMatrixSpec is what translating one matrix collects.
type ghaMatrixSpec struct {
	axes []ghaAxis
	// objects are the values of each axis of mappings: index i+1 is objects[A][i].
	objects map[string][]*yaml.Node
	// include holds an entry per value of an axis of mappings, adding its keys.
	include []*yaml.Node
}

// ghaAxis is an axis as translated: its values, indexes for an axis of mappings.
type ghaAxis struct {
	name   string
	values []string
	seq    *yaml.Node // the axis in the translation
}

// objectAxis translates an axis of mappings into an axis of indexes, adding an include
// entry per value; nil when a value is refused.
func (t *ghaTranslator) objectAxis(m *ghaMatrixSpec, f field, v *yaml.Node) *yaml.Node {
	d := t.d
	seq := gSeq(v)
	ax := ghaAxis{name: f.key, seq: seq}
	var entries, values []*yaml.Node
	refused := false
	for i, item := range v.Content {
		item = d.resolve(item)
		if item == nil {
			continue
		}
		ip := indexPath(f.path, i)
		if item.Kind != yaml.MappingNode {
			d.add(ErrType, item, ip, "matrix %s mixes mappings with other values; write every value as a mapping", f.key)
			refused = true
			continue
		}
		idx := strconv.Itoa(len(values) + 1)
		entry := gMap(item)
		put(entry, f.key, item, gStr(idx, item))
		if !t.flattenInto(entry, f.key, item, ip) {
			refused = true
		}
		entries = append(entries, entry)
		values = append(values, item)
		seq.Content = append(seq.Content, gStr(idx, item))
		ax.values = append(ax.values, idx)
	}
	if refused {
		// The axis is left out rather than left short: its values are reported above,
		// and an axis with none left would be reported again as empty.
		return nil
	}
	m.axes = append(m.axes, ax)
	m.objects[f.key] = values
	m.include = append(m.include, entries...)
	return seq
}

// flattenInto adds the keys of the mapping v to entry as prefix__KEY (nested mappings as
// prefix__KEY__SUB). A null value is left out: it reads as a key not given.
func (t *ghaTranslator) flattenInto(entry *yaml.Node, prefix string, v *yaml.Node, p string) bool {
	d := t.d
	ok := true
	for k := 0; k+1 < len(v.Content); k += 2 {
		kn, val := v.Content[k], d.resolve(v.Content[k+1])
		kp := joinPath(p, kn.Value)
		name := prefix + matrixKeySep + kn.Value
		switch {
		case strings.Contains(kn.Value, matrixKeySep) || !axisNamePattern.MatchString(name):
			d.add(ErrInvalid, kn, kp, "matrix key %q: use letters, digits, '-' and '_', without __, in a name of at most 64 with its parents' (%s)", kn.Value, name)
			ok = false
		case val == nil:
		case val.Kind == yaml.MappingNode:
			ok = t.flattenInto(entry, name, val, kp) && ok
		case val.Kind != yaml.ScalarNode:
			d.add(ErrType, val, kp, "a list inside a matrix value is not supported")
			ok = false
		case val.Tag == "!!null":
		default:
			put(entry, name, kn, t.plain(val))
		}
	}
	return ok
}

// matrixExclude translates exclude entries. One that names a mapping for an axis of
// mappings excludes the values it matches (all of its keys alike; the value may have
// more), so it becomes an entry per index it matches.
func (t *ghaTranslator) matrixExclude(m *ghaMatrixSpec, f field) []*yaml.Node {
	d := t.d
	var out []*yaml.Node
	for i, item := range d.resolve(f.val).Content {
		item = d.resolve(item)
		if item == nil {
			continue
		}
		if item.Kind != yaml.MappingNode {
			out = append(out, t.plain(item))
			continue
		}
		ip := indexPath(f.path, i)
		entries := []*yaml.Node{gMap(item)}
		for k := 0; k+1 < len(item.Content); k += 2 {
			kn, val := item.Content[k], d.resolve(item.Content[k+1])
			if val == nil {
				continue
			}
			kp := joinPath(ip, kn.Value)
			values, object := m.objects[kn.Value]
			switch {
			case val.Kind == yaml.MappingNode && object:
				var idx []string
				for vi, v := range values {
					if matrixSubset(d, val, v) {
						idx = append(idx, strconv.Itoa(vi+1))
					}
				}
				if len(idx) == 0 {
					d.add(ErrInvalid, val, kp, "exclude names a value of matrix %s that none of its values matches", kn.Value)
					entries = nil
					continue
				}
				var next []*yaml.Node
				for _, e := range entries {
					for _, x := range idx {
						c := *e
						c.Content = slices.Clone(e.Content)
						put(&c, kn.Value, kn, gStr(x, val))
						next = append(next, &c)
					}
				}
				entries = next
			case val.Kind != yaml.ScalarNode:
				d.add(ErrType, val, kp, "a matrix value that is a list or mapping is not supported here")
				entries = nil
			default:
				for _, e := range entries {
					put(e, kn.Value, kn, t.plain(val))
				}
			}
		}
		out = append(out, entries...)
	}
	return out
}

// matrixInclude translates include entries. A mapping given for an axis of mappings is
// the index of the value it equals, or, equal to none, a value of its own that the entry
// adds; a mapping given for any other key is flattened as an axis's values are.
func (t *ghaTranslator) matrixInclude(m *ghaMatrixSpec, f field) []*yaml.Node {
	d := t.d
	var out []*yaml.Node
	for i, item := range d.resolve(f.val).Content {
		item = d.resolve(item)
		if item == nil {
			continue
		}
		if item.Kind != yaml.MappingNode {
			out = append(out, t.plain(item))
			continue
		}
		ip := indexPath(f.path, i)
		e := gMap(item)
		ok := true
		for k := 0; k+1 < len(item.Content); k += 2 {
			kn, val := item.Content[k], d.resolve(item.Content[k+1])
			if val == nil {
				continue
			}
			kp := joinPath(ip, kn.Value)
			switch {
			case strings.Contains(kn.Value, matrixKeySep):
				d.add(ErrInvalid, kn, kp, "matrix key %q: Gantry names the keys of a mapping value KEY__NAME, so a key may not hold __", kn.Value)
				ok = false
			case val.Kind == yaml.MappingNode && m.objects[kn.Value] != nil:
				values := m.objects[kn.Value]
				idx := slices.IndexFunc(values, func(v *yaml.Node) bool { return matrixSubset(d, val, v) && matrixSubset(d, v, val) })
				if idx >= 0 {
					put(e, kn.Value, kn, gStr(strconv.Itoa(idx+1), val))
					continue
				}
				m.objects[kn.Value] = append(values, val)
				put(e, kn.Value, kn, gStr(strconv.Itoa(len(values)+1), val))
				ok = t.flattenInto(e, kn.Value, val, kp) && ok
			case val.Kind == yaml.MappingNode:
				ok = t.flattenInto(e, kn.Value, val, kp) && ok
			case val.Kind != yaml.ScalarNode:
				d.add(ErrType, val, kp, "a matrix value that is a list is not supported")
				ok = false
			default:
				put(e, kn.Value, kn, t.plain(val))
			}
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}

// matrixSubset reports whether every key of the mapping a is in the mapping b with the
// same value.
func matrixSubset(d *decoder, a, b *yaml.Node) bool {
	for k := 0; k+1 < len(a.Content); k += 2 {
		av := d.resolve(a.Content[k+1])
		bv := d.resolve(mappingValue(b, a.Content[k].Value))
		switch {
		case av == nil || bv == nil:
			if av != bv {
				return false
			}
		case av.Kind != bv.Kind:
			return false
		case av.Kind == yaml.MappingNode:
			if !matrixSubset(d, av, bv) || !matrixSubset(d, bv, av) {
				return false
			}
		case av.Kind == yaml.ScalarNode:
			if av.Value != bv.Value {
				return false
			}
		default:
			return false
		}
	}
	return true
}

// maxExcludeCheck bounds the combinations dropExcluded looks at for one value; a matrix
// larger than that is refused by the compiler's limit on jobs anyway.
const maxExcludeCheck = 1 << 14

// dropExcluded leaves out of an axis of mappings the values that exclude leaves in no
// combination. Gantry applies include after exclude, and an include entry that matches
// no combination becomes one of its own: the entry that adds the value's keys would
// bring back what exclude took away. The exclude entries naming a dropped value go too,
// as the compiler refuses one naming a value its axis does not have.
func (m *ghaMatrixSpec) dropExcluded(excl *[]*yaml.Node) {
	if len(m.objects) == 0 || len(*excl) == 0 {
		return
	}
	entries := make([][]MatrixValue, len(*excl))
	for i, e := range *excl {
		for k := 0; k+1 < len(e.Content); k += 2 {
			entries[i] = append(entries[i], MatrixValue{Name: e.Content[k].Value, Value: e.Content[k+1].Value})
		}
	}
	excluded := func(in instance) bool {
		return slices.ContainsFunc(entries, func(ex []MatrixValue) bool { return in.matches(ex) })
	}
	for ai := range m.axes {
		ax := &m.axes[ai]
		if m.objects[ax.name] == nil {
			continue
		}
		var dropped []string
		for _, v := range ax.values {
			if !m.survives(ai, v, excluded) {
				dropped = append(dropped, v)
			}
		}
		if len(dropped) == 0 || len(dropped) == len(ax.values) {
			// Every value excluded: the compiler says the matrix has no combinations.
			continue
		}
		ax.values = slices.DeleteFunc(ax.values, func(v string) bool { return slices.Contains(dropped, v) })
		ax.seq.Content = slices.DeleteFunc(ax.seq.Content, func(n *yaml.Node) bool { return slices.Contains(dropped, n.Value) })
		drop := func(n *yaml.Node) bool {
			v := mappingValue(n, ax.name)
			return v != nil && slices.Contains(dropped, v.Value)
		}
		m.include = slices.DeleteFunc(m.include, drop)
		*excl = slices.DeleteFunc(*excl, drop)
	}
}

// survives reports whether some combination with value v of axis ai is not excluded.
func (m *ghaMatrixSpec) survives(ai int, v string, excluded func(instance) bool) bool {
	size := 1
	for i, ax := range m.axes {
		if i != ai {
			size *= max(len(ax.values), 1)
		}
		if size > maxExcludeCheck {
			return true
		}
	}
	for n := range size {
		in := make(instance, 0, len(m.axes))
		rest := n
		for i := len(m.axes) - 1; i >= 0; i-- {
			ax := m.axes[i]
			switch {
			case i == ai:
				in = append(in, MatrixValue{Name: ax.name, Value: v})
			case len(ax.values) > 0:
				in = append(in, MatrixValue{Name: ax.name, Value: ax.values[rest%len(ax.values)]})
				rest /= len(ax.values)
			}
		}
		if !excluded(in) {
			return true
		}
	}
	return false
}

// nameInstances gives the instances of a job with an axis of mappings names without its
// indexes: test (build.name=gcc, build.cc=gcc, os=linux), not test (build=1, ...). A job
// with a name of its own keeps it; one told apart from its like by its matrix values is
// told apart by these.
func (t *ghaTranslator) nameInstances(p *Plan) {
	seen := map[string]int{}
	names := make([]string, len(p.Jobs))
	for i, job := range p.Jobs {
		axes := t.objectAxes[job.Name]
		if len(axes) == 0 || len(job.Matrix) == 0 {
			continue
		}
		var parts []string
		for _, m := range job.Matrix {
			if !slices.Contains(axes, m.Name) {
				parts = append(parts, strings.ReplaceAll(m.Name, matrixKeySep, ".")+"="+m.Value)
			}
		}
		names[i] = "(" + strings.Join(parts, ", ") + ")"
		seen[job.Name+" "+names[i]]++
	}
	for i, job := range p.Jobs {
		if names[i] == "" || seen[job.Name+" "+names[i]] > 1 {
			continue // two values alike: the indexes tell them apart
		}
		values := strings.TrimPrefix(job.Key, job.Name+" ")
		switch {
		case job.DisplayName == "":
			job.DisplayName = job.Name + " " + names[i]
		case strings.HasSuffix(job.DisplayName, " "+values):
			job.DisplayName = strings.TrimSuffix(job.DisplayName, values) + names[i]
		}
	}
}

// MatrixContext is the matrix context a GitHub expression reads for a job's matrix
// values: a workflow's mapping value, which the plan holds as build=1, build__cc=gcc, is
// the object {cc: gcc} again. Values are strings, as the plan holds them.
func MatrixContext(values []MatrixValue) map[string]any {
	out := map[string]any{}
	for _, v := range values {
		if !strings.Contains(v.Name, matrixKeySep) {
			if _, ok := out[v.Name].(map[string]any); !ok {
				out[v.Name] = v.Value
			}
			continue
		}
		parts := strings.Split(v.Name, matrixKeySep)
		cur := out
		for _, k := range parts[:len(parts)-1] {
			next, ok := cur[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				cur[k] = next // the index of an axis of mappings gives way to its object
			}
			cur = next
		}
		cur[parts[len(parts)-1]] = v.Value
	}
	return out
}
