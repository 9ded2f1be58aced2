package pipeline

import (
	"fmt"
	"strconv"
	"strings"
)

// This file reads GitHub Actions expressions (the text of an if: or inside ${{ }}) so the
// workflow front end can write them in Gantry's expression language. GitHub's grammar is
// small: literals, context properties (a.b, a['b'], a.*), function calls, ! and the
// comparison and logical operators.

// ghaNode is one node of a parsed GitHub expression.
type ghaNode interface{ pos() int }

type ghaLit struct {
	at   int
	kind byte // 's' string, 'n' number, 'b' boolean, 'z' null
	val  string
}

// ghaRef is a context property: head followed by names ("*" for a filter).
type ghaRef struct {
	at   int
	head string
	path []string
}

type ghaCall struct {
	at   int
	name string
	args []ghaNode
}

type ghaUnary struct {
	at int
	x  ghaNode
}

type ghaBinary struct {
	at   int
	op   string
	l, r ghaNode
}

type ghaParen struct {
	at int
	x  ghaNode
}

func (n *ghaLit) pos() int    { return n.at }
func (n *ghaRef) pos() int    { return n.at }
func (n *ghaCall) pos() int   { return n.at }
func (n *ghaUnary) pos() int  { return n.at }
func (n *ghaBinary) pos() int { return n.at }
func (n *ghaParen) pos() int  { return n.at }

// name is the reference written with dots, as in github.event.pull_request.number.
func (n *ghaRef) name() string {
	if len(n.path) == 0 {
		return n.head
	}
	return n.head + "." + strings.Join(n.path, ".")
}

// ghaExprError is a mistake at a byte offset of an expression.
type ghaExprError struct {
	offset int
	msg    string
}

func (e *ghaExprError) Error() string { return e.msg }

type ghaToken struct {
	at   int
	kind byte // 'i' identifier, 's' string, 'n' number, 'o' operator or punctuation, 0 end
	val  string
}

func lexGHA(src string) ([]ghaToken, *ghaExprError) {
	var out []ghaToken
	i := 0
	for i < len(src) {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '\'':
			var b strings.Builder
			j := i + 1
			for {
				if j >= len(src) {
					return nil, &ghaExprError{i, "string is not closed with '"}
				}
				if src[j] == '\'' {
					if j+1 < len(src) && src[j+1] == '\'' {
						b.WriteByte('\'')
						j += 2
						continue
					}
					break
				}
				b.WriteByte(src[j])
				j++
			}
			out = append(out, ghaToken{i, 's', b.String()})
			i = j + 1
		case c >= '0' && c <= '9' || (c == '-' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9'):
			j := i + 1
			for j < len(src) && (isIdentByte(src[j]) || src[j] == '.') {
				j++
			}
			v := src[i:j]
			if _, err := strconv.ParseFloat(v, 64); err != nil {
				if n, err := strconv.ParseInt(v, 0, 64); err == nil {
					v = strconv.FormatInt(n, 10)
				} else {
					return nil, &ghaExprError{i, fmt.Sprintf("%q is not a number", v)}
				}
			}
			out = append(out, ghaToken{i, 'n', v})
			i = j
		case isIdentByte(c) && !(c >= '0' && c <= '9'):
			j := i
			for j < len(src) && (isIdentByte(src[j]) || src[j] == '-') {
				j++
			}
			out = append(out, ghaToken{i, 'i', src[i:j]})
			i = j
		default:
			two := ""
			if i+1 < len(src) {
				two = src[i : i+2]
			}
			switch two {
			case "==", "!=", "<=", ">=", "&&", "||":
				out = append(out, ghaToken{i, 'o', two})
				i += 2
				continue
			}
			if strings.IndexByte("!<>()[].,*", c) < 0 {
				return nil, &ghaExprError{i, fmt.Sprintf("unexpected %q", string(c))}
			}
			out = append(out, ghaToken{i, 'o', string(c)})
			i++
		}
	}
	return append(out, ghaToken{len(src), 0, ""}), nil
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

type ghaParser struct {
	toks  []ghaToken
	i     int
	depth int
}

// parseGHA parses a GitHub expression (without its ${{ }}).
func parseGHA(src string) (ghaNode, *ghaExprError) {
	toks, err := lexGHA(src)
	if err != nil {
		return nil, err
	}
	p := &ghaParser{toks: toks}
	if p.peek().kind == 0 {
		return nil, &ghaExprError{0, "expression is empty"}
	}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != 0 {
		return nil, &ghaExprError{t.at, fmt.Sprintf("unexpected %q", t.val)}
	}
	return n, nil
}

func (p *ghaParser) peek() ghaToken { return p.toks[p.i] }
func (p *ghaParser) next() ghaToken { t := p.toks[p.i]; p.i++; return t }

func (p *ghaParser) isOp(v string) bool {
	t := p.peek()
	return t.kind == 'o' && t.val == v
}

func (p *ghaParser) binary(ops []string, sub func() (ghaNode, *ghaExprError)) (ghaNode, *ghaExprError) {
	l, err := sub()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		if t.kind != 'o' || !contains(ops, t.val) {
			return l, nil
		}
		p.next()
		r, err := sub()
		if err != nil {
			return nil, err
		}
		l = &ghaBinary{at: t.at, op: t.val, l: l, r: r}
	}
}

func (p *ghaParser) or() (ghaNode, *ghaExprError) {
	return p.binary([]string{"||"}, p.and)
}

func (p *ghaParser) and() (ghaNode, *ghaExprError) {
	return p.binary([]string{"&&"}, p.cmp)
}

func (p *ghaParser) cmp() (ghaNode, *ghaExprError) {
	return p.binary([]string{"==", "!=", "<", "<=", ">", ">="}, p.unary)
}

// maxGHADepth bounds nesting, so a hostile expression cannot exhaust the stack.
const maxGHADepth = 100

func (p *ghaParser) unary() (ghaNode, *ghaExprError) {
	p.depth++
	defer func() { p.depth-- }()
	if p.depth > maxGHADepth {
		return nil, &ghaExprError{p.peek().at, "expression nests too deeply"}
	}
	if t := p.peek(); t.kind == 'o' && t.val == "!" {
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &ghaUnary{at: t.at, x: x}, nil
	}
	return p.primary()
}

func (p *ghaParser) primary() (ghaNode, *ghaExprError) {
	t := p.next()
	switch t.kind {
	case 's':
		return &ghaLit{at: t.at, kind: 's', val: t.val}, nil
	case 'n':
		return &ghaLit{at: t.at, kind: 'n', val: t.val}, nil
	case 'i':
		switch t.val {
		case "true", "false":
			return &ghaLit{at: t.at, kind: 'b', val: t.val}, nil
		case "null":
			return &ghaLit{at: t.at, kind: 'z'}, nil
		}
		if p.isOp("(") {
			p.next()
			c := &ghaCall{at: t.at, name: t.val}
			if p.isOp(")") {
				p.next()
				return c, nil
			}
			for {
				a, err := p.or()
				if err != nil {
					return nil, err
				}
				c.args = append(c.args, a)
				if p.isOp(",") {
					p.next()
					continue
				}
				if !p.isOp(")") {
					return nil, p.expected("',' or ')'")
				}
				p.next()
				return c, nil
			}
		}
		r := &ghaRef{at: t.at, head: t.val}
		for {
			switch {
			case p.isOp("."):
				p.next()
				n := p.next()
				switch {
				case n.kind == 'i':
					r.path = append(r.path, n.val)
				case n.kind == 'o' && n.val == "*":
					r.path = append(r.path, "*")
				default:
					p.i--
					return nil, p.expected("a property name after '.'")
				}
			case p.isOp("["):
				p.next()
				n := p.next()
				switch {
				case n.kind == 's':
					r.path = append(r.path, n.val)
				case n.kind == 'o' && n.val == "*":
					r.path = append(r.path, "*")
				default:
					return nil, &ghaExprError{n.at, "Gantry reads [ ] only with a name written out, as in matrix['go-version']"}
				}
				if !p.isOp("]") {
					return nil, p.expected("']'")
				}
				p.next()
			default:
				return r, nil
			}
		}
	case 'o':
		if t.val == "(" {
			x, err := p.or()
			if err != nil {
				return nil, err
			}
			if !p.isOp(")") {
				return nil, p.expected("')'")
			}
			p.next()
			return &ghaParen{at: t.at, x: x}, nil
		}
	case 0:
		return nil, &ghaExprError{t.at, "expression ends too early"}
	}
	return nil, &ghaExprError{t.at, fmt.Sprintf("unexpected %q", t.val)}
}

func (p *ghaParser) expected(what string) *ghaExprError {
	t := p.peek()
	if t.kind == 0 {
		return &ghaExprError{t.at, "expected " + what + ", found the end"}
	}
	return &ghaExprError{t.at, fmt.Sprintf("expected %s, found %q", what, t.val)}
}

// exprString writes s as a string literal of Gantry's expression language.
func exprString(s string) string { return strconv.Quote(s) }

// isExprIdent reports a name Gantry's expressions can read after a dot.
func isExprIdent(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIdentByte(s[i]) {
			return false
		}
	}
	return true
}

// memberExpr writes base.name, or base["name"] when name is not an identifier.
func memberExpr(base, name string) string {
	if isExprIdent(name) {
		return base + "." + name
	}
	return base + "[" + exprString(name) + "]"
}
