package ghaexpr

import (
	"fmt"
	"strings"
)

// segment is a piece of text with ${{ }} in it: text to copy, then an expression (nil for
// the last piece).
type segment struct {
	text string
	at   int // byte offset of "${{" in the whole text
	expr *tree
}

const (
	openExpr  = "${{"
	closeExpr = "}}"
)

// split finds every ${{ expr }} in s and parses it. As GitHub's template reader does, it
// takes the first }} that is not inside a single-quoted string as the end, so
// ${{ '}}' }} is one expression. Every expression is parsed before any is evaluated, so a
// mistake anywhere fails the whole text.
func split(s string) ([]segment, error) {
	var segs []segment
	i := 0
	for {
		open := strings.Index(s[i:], openExpr)
		if open < 0 {
			return append(segs, segment{text: s[i:]}), nil
		}
		open += i
		end := -1
		inString := false
		for j := open + len(openExpr); j < len(s) && end < 0; j++ {
			switch {
			case s[j] == '\'':
				inString = !inString // a '' escape toggles twice
			case !inString && strings.HasPrefix(s[j:], closeExpr):
				end = j
			}
		}
		if end < 0 {
			return nil, &Error{Kind: ErrSyntax, Expr: s, Offset: open, Msg: "The expression is not closed. An unescaped ${{ sequence was found, but the closing }} sequence was not found"}
		}
		src := strings.TrimSpace(s[open+len(openExpr) : end])
		n, err := Parse(src)
		if err != nil {
			return nil, fmt.Errorf("${{ }} at byte %d: %w", open, err)
		}
		segs = append(segs, segment{text: s[i:open], at: open, expr: n.(*tree)})
		i = end + len(closeExpr)
	}
}

// Interpolate replaces every ${{ expr }} in s with the string form of its value, as GitHub
// does for step text and with: values: null is the empty string, booleans 'true' and 'false', numbers as
// ToString prints them, strings as they are. Objects and arrays are written as toJSON
// writes them; GitHub itself would write 'Object' or 'Array', which no one wants in a
// command line. There is no escape for a literal ${{; write ${{ '${{' }}.
func Interpolate(s string, c *Context) (string, error) {
	if !strings.Contains(s, openExpr) {
		return s, nil
	}
	segs, err := split(s)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, seg := range segs {
		b.WriteString(seg.text)
		if seg.expr == nil {
			continue
		}
		v, err := Eval(seg.expr, c)
		if err != nil {
			return "", fmt.Errorf("${{ }} at byte %d: %w", seg.at, err)
		}
		str, err := interpolated(seg.expr, v)
		if err != nil {
			return "", fmt.Errorf("${{ }} at byte %d: %w", seg.at, err)
		}
		b.WriteString(str)
	}
	return b.String(), nil
}

func interpolated(t *tree, v any) (string, error) {
	switch kindOf(v) {
	case kindArray, kindObject:
		s, ok := toJSON(v)
		if !ok {
			return "", &Error{Kind: ErrLimit, Expr: t.src, Msg: fmt.Sprintf("The result nests more than %d levels deep", maxValueDepth)}
		}
		return s, nil
	}
	return ToString(v), nil
}

// Condition evaluates an if: the GitHub way. The text may be a bare expression or wrapped
// in ${{ }}; empty means success(). Unless it calls success(), failure(), cancelled() or
// always(), it is read as success() && (expr), so it does not run, nor is it evaluated,
// after a failure. Text with ${{ }} in only part of it (if: ${{ a }} == 'b') is, as on
// GitHub, interpolated into a string, which is true when it is not empty.
func Condition(src string, c *Context) (bool, error) {
	text := strings.TrimSpace(src)
	if c == nil {
		c = &Context{}
	}
	e := &evaluator{c: c}
	if text == "" {
		return e.status("success"), nil
	}
	if !strings.Contains(text, openExpr) {
		n, err := Parse(text)
		if err != nil {
			return false, err
		}
		return condition(n.(*tree), c)
	}
	segs, err := split(text)
	if err != nil {
		return false, err
	}
	if len(segs) == 2 && segs[0].text == "" && segs[1].text == "" {
		return condition(segs[0].expr, c) // the whole text is one ${{ }}
	}
	status := false
	for _, seg := range segs {
		if seg.expr != nil && callsStatus(seg.expr.root) {
			status = true
		}
	}
	if !status && !e.status("success") {
		return false, nil
	}
	s, err := Interpolate(text, c)
	if err != nil {
		return false, err
	}
	return s != "", nil
}

func condition(t *tree, c *Context) (bool, error) {
	if !callsStatus(t.root) && !(&evaluator{c: c}).status("success") {
		return false, nil
	}
	v, err := Eval(t, c)
	if err != nil {
		return false, err
	}
	return Truthy(v), nil
}

// callsStatus reports whether n calls a status function anywhere.
func callsStatus(n node) bool {
	switch x := n.(type) {
	case *call:
		if statusFunctions[strings.ToLower(x.name)] {
			return true
		}
		for _, a := range x.args {
			if callsStatus(a) {
				return true
			}
		}
	case *index:
		return callsStatus(x.x) || x.key != nil && callsStatus(x.key)
	case *not:
		return callsStatus(x.x)
	case *compare:
		return callsStatus(x.l) || callsStatus(x.r)
	case *logical:
		for _, y := range x.xs {
			if callsStatus(y) {
				return true
			}
		}
	}
	return false
}
