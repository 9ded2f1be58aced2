package ghaexpr

import (
	"fmt"
	"math"
	"strings"
)

// MaxLength and MaxDepth are GitHub's limits on one expression: its length in bytes and
// how deeply its syntax tree nests (each operator, call, property access and index is a
// level). They also bound the work Parse and Eval can be made to do.
const (
	MaxLength = 21000
	MaxDepth  = 50
)

// Node is a parsed expression, made by Parse and read by Eval. It holds no context, so one
// Node may be evaluated many times and from many goroutines.
type Node interface {
	// String writes the expression back in GitHub's syntax with every operation
	// parenthesised, which shows how Parse grouped it.
	String() string
	isNode()
}

// tree is the Node Parse returns: the syntax tree and the text it came from, which errors
// quote.
type tree struct {
	src  string
	root node
}

func (t *tree) String() string { return t.root.String() }
func (t *tree) isNode()        {}

// node is one operation of the syntax tree.
type node interface {
	String() string
	depth() int
	eval(e *evaluator) (any, error)
}

// literal is null, true, false, a number or a string.
type literal struct {
	at  int
	val any
}

// named is a top-level context name: github, env, inputs, ...
type named struct {
	at   int
	name string
}

// index is a.b, a['b'], a[0], a.* and a[*]. For a.b key is the name as a string literal.
type index struct {
	at   int
	x    node
	key  node // nil for the object filter
	dot  bool // written a.b rather than a['b']
	wild bool
}

type call struct {
	at   int
	name string // as written
	fn   *function
	args []node
}

type not struct {
	at int
	x  node
}

// compare is == != < <= > >=.
type compare struct {
	at   int
	op   string
	l, r node
}

// logical is a run of && or of ||; GitHub evaluates it left to right and stops at the
// first operand that decides it, which is also the result.
type logical struct {
	at  int
	op  string
	xs  []node
	and bool
}

func (n *literal) depth() int { return 1 }
func (n *named) depth() int   { return 1 }
func (n *index) depth() int {
	d := n.x.depth()
	if n.key != nil {
		d = max(d, n.key.depth())
	}
	return d + 1
}
func (n *call) depth() int    { return 1 + maxDepth(n.args) }
func (n *not) depth() int     { return 1 + n.x.depth() }
func (n *compare) depth() int { return 1 + max(n.l.depth(), n.r.depth()) }
func (n *logical) depth() int { return 1 + maxDepth(n.xs) }

func maxDepth(ns []node) int {
	d := 0
	for _, n := range ns {
		d = max(d, n.depth())
	}
	return d
}

func (n *literal) String() string {
	switch v := n.val.(type) {
	case nil:
		return "null"
	case string:
		return quote(v)
	case float64:
		if math.IsInf(v, -1) {
			return "-Infinity"
		}
	}
	return ToString(n.val)
}

// quote writes s as an expression string literal.
func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

func (n *named) String() string { return n.name }

func (n *index) String() string {
	x := n.x.String()
	switch n.x.(type) {
	case *literal, *not:
		x = "(" + x + ")" // ('a')[0] and (!a).b need theirs
	}
	switch {
	case n.wild && n.dot:
		return x + ".*"
	case n.wild:
		return x + "[*]"
	case n.dot:
		return x + "." + n.key.(*literal).val.(string)
	}
	return x + "[" + n.key.String() + "]"
}

func (n *call) String() string {
	args := make([]string, len(n.args))
	for i, a := range n.args {
		args[i] = a.String()
	}
	return n.name + "(" + strings.Join(args, ", ") + ")"
}

func (n *not) String() string { return "!" + n.x.String() }

func (n *compare) String() string {
	return "(" + n.l.String() + " " + n.op + " " + n.r.String() + ")"
}

func (n *logical) String() string {
	xs := make([]string, len(n.xs))
	for i, x := range n.xs {
		xs[i] = x.String()
	}
	return "(" + strings.Join(xs, " "+n.op+" ") + ")"
}

// Parse reads an expression: the text inside ${{ }}, or a bare if: condition. Its grammar
// and precedence are GitHub's, from tightest to loosest: ( ), [ ] and ., !, < <= > >=,
// == !=, &&, ||. Function names must be GitHub's functions and are checked here, with their
// number of arguments; context names are checked by Eval, against the Context. Errors are
// *Error of kind ErrSyntax or ErrLimit.
func Parse(src string) (Node, error) {
	if len(src) > MaxLength {
		return nil, &Error{Kind: ErrLimit, Expr: src, Msg: fmt.Sprintf("Exceeded max expression length %d", MaxLength)}
	}
	p := &parser{src: src, toks: lex(src)}
	if p.peek().kind == tokEnd {
		return nil, &Error{Kind: ErrSyntax, Expr: src, Msg: "An expression was expected"}
	}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tokEnd {
		return nil, p.unexpected(t)
	}
	if n.depth() > MaxDepth {
		// Nesting is caught where it happens, in unary; this is a long chain of
		// comparisons, which has no one place to point at.
		return nil, &Error{Kind: ErrLimit, Expr: src, Msg: fmt.Sprintf("Exceeded max expression depth %d", MaxDepth)}
	}
	return &tree{src: src, root: n}, nil
}

type parser struct {
	src   string
	toks  []token
	i     int
	depth int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tokEnd {
		p.i++
	}
	return t
}

func (p *parser) is(kind tokKind, raw string) bool {
	t := p.peek()
	return t.kind == kind && t.raw == raw
}

// unexpected reports t where it cannot stand, in GitHub's words. At the end of the text
// GitHub names the last token read.
func (p *parser) unexpected(t token) error {
	if t.kind == tokEnd {
		last := p.toks[max(p.i-1, 0)] // Parse has already refused an empty expression
		return &Error{Kind: ErrSyntax, Expr: p.src, Offset: last.at, Msg: fmt.Sprintf("Unexpected end of expression: '%s'", last.raw)}
	}
	msg := fmt.Sprintf("Unexpected symbol: '%s'", t.raw)
	if strings.HasPrefix(t.raw, `"`) {
		msg += ". Strings are written in single quotes"
	}
	return &Error{Kind: ErrSyntax, Expr: p.src, Offset: t.at, Msg: msg}
}

func (p *parser) tooDeep() error {
	return &Error{Kind: ErrLimit, Expr: p.src, Offset: p.peek().at, Msg: fmt.Sprintf("Exceeded max expression depth %d", MaxDepth)}
}

func (p *parser) expect(kind tokKind, raw string) error {
	if t := p.peek(); t.kind != kind || t.raw != raw {
		return p.unexpected(t)
	}
	p.next()
	return nil
}

func (p *parser) or() (node, error)  { return p.logical("||", p.and) }
func (p *parser) and() (node, error) { return p.logical("&&", p.equality) }

func (p *parser) logical(op string, operand func() (node, error)) (node, error) {
	x, err := operand()
	if err != nil {
		return nil, err
	}
	if !p.is(tokOp, op) {
		return x, nil
	}
	n := &logical{at: p.peek().at, op: op, xs: []node{x}, and: op == "&&"}
	for p.is(tokOp, op) {
		p.next()
		y, err := operand()
		if err != nil {
			return nil, err
		}
		n.xs = append(n.xs, y)
	}
	return n, nil
}

func (p *parser) equality() (node, error) { return p.binary(p.relational, "==", "!=") }
func (p *parser) relational() (node, error) {
	return p.binary(p.unary, "<", "<=", ">", ">=")
}

func (p *parser) binary(operand func() (node, error), ops ...string) (node, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != tokOp || !contains(ops, t.raw) {
			return l, nil
		}
		p.next()
		r, err := operand()
		if err != nil {
			return nil, err
		}
		l = &compare{at: t.at, op: t.raw, l: l, r: r}
	}
}

func contains(ops []string, op string) bool {
	for _, o := range ops {
		if o == op {
			return true
		}
	}
	return false
}

func (p *parser) unary() (node, error) {
	// Counting nesting here stops "((((...", "!!!!..." and "a[a[a[..." before they
	// recurse deeper than the tree could be allowed to be anyway.
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > MaxDepth {
		return nil, p.tooDeep()
	}
	if t := p.peek(); t.kind == tokOp && t.raw == "!" {
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &not{at: t.at, x: x}, nil
	}
	return p.primary()
}

func (p *parser) primary() (node, error) {
	t := p.next()
	switch t.kind {
	case tokString:
		return &literal{at: t.at, val: t.str}, nil
	case tokNumber:
		return &literal{at: t.at, val: t.num}, nil
	case tokWord:
		switch t.raw {
		case "null":
			return &literal{at: t.at}, nil
		case "true":
			return &literal{at: t.at, val: true}, nil
		case "false":
			return &literal{at: t.at, val: false}, nil
		}
		if p.is(tokPunct, "(") {
			n, err := p.call(t)
			if err != nil {
				return nil, err
			}
			return p.postfix(n)
		}
		return p.postfix(&named{at: t.at, name: t.raw})
	case tokPunct:
		if t.raw == "(" {
			x, err := p.or()
			if err != nil {
				return nil, err
			}
			if err := p.expect(tokPunct, ")"); err != nil {
				return nil, err
			}
			return p.postfix(x)
		}
	}
	return nil, p.unexpected(t)
}

func (p *parser) call(name token) (node, error) {
	fn := functions[strings.ToLower(name.raw)]
	if fn == nil {
		return nil, &Error{Kind: ErrSyntax, Expr: p.src, Offset: name.at, Msg: fmt.Sprintf("Unrecognized function: '%s'", name.raw)}
	}
	p.next() // (
	n := &call{at: name.at, name: name.raw, fn: fn}
	if p.is(tokPunct, ")") {
		p.next()
	} else {
		for {
			a, err := p.or()
			if err != nil {
				return nil, err
			}
			n.args = append(n.args, a)
			if p.is(tokPunct, ",") {
				p.next()
				continue
			}
			if err := p.expect(tokPunct, ")"); err != nil {
				return nil, err
			}
			break
		}
	}
	switch {
	case len(n.args) < fn.min:
		return nil, &Error{Kind: ErrSyntax, Expr: p.src, Offset: name.at, Msg: fmt.Sprintf("Too few parameters supplied: '%s'", name.raw)}
	case len(n.args) > fn.max:
		return nil, &Error{Kind: ErrSyntax, Expr: p.src, Offset: name.at, Msg: fmt.Sprintf("Too many parameters supplied: '%s'", name.raw)}
	}
	return n, nil
}

// postfix reads the property accesses and indexes after a context name, a call or a
// parenthesised expression. GitHub allows none after a literal.
func (p *parser) postfix(x node) (node, error) {
	for {
		t := p.peek()
		switch {
		case t.kind == tokPunct && t.raw == ".":
			p.next()
			name := p.next()
			switch {
			case name.kind == tokPunct && name.raw == "*":
				x = &index{at: t.at, x: x, dot: true, wild: true}
			case name.kind == tokWord,
				name.kind == tokNumber && (name.raw == "NaN" || name.raw == "Infinity"):
				x = &index{at: t.at, x: x, dot: true, key: &literal{at: name.at, val: name.raw}}
			default:
				return nil, p.unexpected(name)
			}
		case t.kind == tokPunct && t.raw == "[":
			p.next()
			if p.is(tokPunct, "*") {
				p.next()
				x = &index{at: t.at, x: x, wild: true}
			} else {
				key, err := p.or()
				if err != nil {
					return nil, err
				}
				x = &index{at: t.at, x: x, key: key}
			}
			if err := p.expect(tokPunct, "]"); err != nil {
				return nil, err
			}
		default:
			return x, nil
		}
	}
}
