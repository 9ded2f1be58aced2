package ghaexpr

// Ref is a context property an expression reads: the context's name (github, env, ...)
// and the names after it, as far as they are written out (a.b, a['b']); a filter or a
// computed index ends the path.
type Ref struct {
	Context string
	Path    []string
	// At is the reference's offset in the expression.
	At int
}

// Refs lists the context properties n reads, in the order they are written.
func Refs(n Node) []Ref {
	t, ok := n.(*tree)
	if !ok {
		return nil
	}
	var out []Ref
	var walk func(n node)
	walk = func(n node) {
		switch n := n.(type) {
		case *named:
			out = append(out, Ref{Context: n.name, At: n.at})
		case *index:
			if r, ok := refOf(n); ok {
				out = append(out, r)
				// Computed keys inside still read what they read.
				for x := node(n); ; {
					ix, ok := x.(*index)
					if !ok {
						break
					}
					if ix.key != nil {
						if _, lit := ix.key.(*literal); !lit {
							walk(ix.key)
						}
					}
					x = ix.x
				}
				return
			}
			walk(n.x)
			if n.key != nil {
				walk(n.key)
			}
		case *call:
			for _, a := range n.args {
				walk(a)
			}
		case *not:
			walk(n.x)
		case *compare:
			walk(n.l)
			walk(n.r)
		case *logical:
			for _, x := range n.xs {
				walk(x)
			}
		}
	}
	walk(t.root)
	return out
}

// refOf reads a chain of indexes down to a context name as a Ref; false when the chain
// starts elsewhere (a function's result).
func refOf(n *index) (Ref, bool) {
	var path []string
	var x node = n
	for {
		switch v := x.(type) {
		case *index:
			name := "*"
			if lit, ok := v.key.(*literal); ok {
				if s, ok := lit.val.(string); ok {
					name = s
				}
			} else if v.key != nil {
				name = "*"
			}
			path = append([]string{name}, path...)
			x = v.x
			continue
		case *named:
			// Names after a computed index or a filter are not known statically.
			for i, p := range path {
				if p == "*" {
					path = path[:i+1]
					break
				}
			}
			return Ref{Context: v.name, Path: path, At: v.at}, true
		}
		return Ref{}, false
	}
}
