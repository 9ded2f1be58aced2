package ghaexpr

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"unsafe"
)

// Context is what expressions may read.
type Context struct {
	// Values maps the top-level names (github, env, inputs, steps, matrix, needs, runner,
	// job, strategy, secrets, vars) to their values, matched ignoring case. Values should
	// be nil, bool, float64, string, []any and map[string]any; other Go numbers, strings,
	// slices and maps are converted as they are read, which costs a copy on every read,
	// and since GitHub compares objects by identity two reads of one such map are never
	// ==. A GitHub context name missing from Values reads as null; any other unknown name
	// is an ErrUnknownName error, as on GitHub.
	Values map[string]any
	// Status answers the status functions; name is "success", "failure", "cancelled" or
	// "always". Nil means the job is doing well: success() and always() are true,
	// failure() and cancelled() false.
	Status func(name string) bool
	// HashFiles computes hashFiles(patterns...). Nil makes hashFiles an error.
	HashFiles func(patterns []string) (string, error)
}

// githubContexts are the names GitHub defines. One the caller did not fill reads as null
// rather than failing, so an action that reads, say, matrix where there is none gets what
// it would on GitHub in a job without a matrix.
var githubContexts = map[string]bool{
	"github": true, "env": true, "vars": true, "job": true, "jobs": true, "steps": true,
	"runner": true, "secrets": true, "strategy": true, "matrix": true, "needs": true,
	"inputs": true,
}

// Eval evaluates a parsed expression. The result is nil (null), bool, float64, string,
// []any or map[string]any; it may share memory with c.Values, so do not change it. A nil c
// is an empty Context. Errors are *Error, but for a Node that Parse did not make.
func Eval(n Node, c *Context) (any, error) {
	t, ok := n.(*tree)
	if !ok || t == nil {
		return nil, errors.New("ghaexpr: Eval of a Node that Parse did not make")
	}
	if c == nil {
		c = &Context{}
	}
	v, err := t.root.eval(&evaluator{src: t.src, c: c})
	if err != nil {
		return nil, err
	}
	switch kindOf(v) {
	case kindArray, kindObject:
	default:
		return v, nil // a scalar: eval has already converted it
	}
	out, ok := canonDeep(v, 0, map[unsafe.Pointer]bool{})
	if !ok {
		return nil, &Error{Kind: ErrLimit, Expr: t.src, Msg: fmt.Sprintf("The result nests more than %d levels deep", maxValueDepth)}
	}
	return out, nil
}

// EvalString parses src (the text inside ${{ }}) and evaluates it.
func EvalString(src string, c *Context) (any, error) {
	n, err := Parse(src)
	if err != nil {
		return nil, err
	}
	return Eval(n, c)
}

type evaluator struct {
	src string
	c   *Context
}

func (e *evaluator) fail(kind ErrorKind, at int, cause error, format string, args ...any) error {
	return &Error{Kind: kind, Expr: e.src, Offset: at, Msg: fmt.Sprintf(format, args...), Err: cause}
}

func (e *evaluator) status(name string) bool {
	if e.c.Status != nil {
		return e.c.Status(name)
	}
	return name == "success" || name == "always"
}

// Every eval returns a value canon has already converted, so operators need not.

func (n *literal) eval(*evaluator) (any, error) { return n.val, nil }

func (n *named) eval(e *evaluator) (any, error) {
	if v, ok := lookup(e.c.Values, n.name); ok {
		return canon(v), nil
	}
	if githubContexts[strings.ToLower(n.name)] {
		return nil, nil
	}
	return nil, e.fail(ErrUnknownName, n.at, nil, "Unrecognized named-value: '%s'", n.name)
}

func (n *index) eval(e *evaluator) (any, error) {
	x, err := n.x.eval(e)
	if err != nil {
		return nil, err
	}
	// As on GitHub, the key is evaluated only when there is something to index.
	switch kindOf(x) {
	case kindArray, kindObject:
	default:
		if n.wild {
			return filtered{}, nil
		}
		return nil, nil
	}
	var key any
	if !n.wild {
		if key, err = n.key.eval(e); err != nil {
			return nil, err
		}
	}
	switch c := x.(type) {
	case filtered:
		// An index after a filter applies to each element that is a collection.
		out := filtered{}
		for _, item := range c {
			switch it := canon(item).(type) {
			case map[string]any:
				if n.wild {
					out = append(out, values(it)...)
				} else if isPrimitive(key) {
					if v, ok := lookup(it, ToString(key)); ok {
						out = append(out, v)
					}
				}
			case []any:
				if n.wild {
					out = append(out, it...)
				} else if i, ok := intIndex(key); ok && i < len(it) {
					out = append(out, it[i])
				}
			}
		}
		return out, nil
	case map[string]any:
		if n.wild {
			return filtered(values(c)), nil
		}
		if isPrimitive(key) {
			v, _ := lookup(c, ToString(key))
			return canon(v), nil
		}
	case []any:
		if n.wild {
			return append(filtered{}, c...), nil
		}
		if i, ok := intIndex(key); ok && i < len(c) {
			return canon(c[i]), nil
		}
	}
	return nil, nil
}

// intIndex is GitHub's array index: the key as a number, rounded down, from 0 to 2^31-1.
func intIndex(key any) (int, bool) {
	f := toNumber(key)
	if math.IsNaN(f) || f < 0 {
		return 0, false
	}
	f = math.Floor(f)
	if f > math.MaxInt32 {
		return 0, false
	}
	return int(f), true
}

func (n *call) eval(e *evaluator) (any, error) { return n.fn.call(e, n) }

func (n *not) eval(e *evaluator) (any, error) {
	x, err := n.x.eval(e)
	if err != nil {
		return nil, err
	}
	return !Truthy(x), nil
}

func (n *compare) eval(e *evaluator) (any, error) {
	l, err := n.l.eval(e)
	if err != nil {
		return nil, err
	}
	r, err := n.r.eval(e)
	if err != nil {
		return nil, err
	}
	c, ok := looseCompare(l, r)
	switch n.op {
	case "==":
		return looseEqual(l, r), nil
	case "!=":
		return !looseEqual(l, r), nil
	case "<":
		return ok && c < 0, nil
	case ">":
		return ok && c > 0, nil
	case "<=":
		return looseEqual(l, r) || ok && c < 0, nil
	}
	return looseEqual(l, r) || ok && c > 0, nil // >=
}

func (n *logical) eval(e *evaluator) (any, error) {
	var v any
	for _, x := range n.xs {
		var err error
		if v, err = x.eval(e); err != nil {
			return nil, err
		}
		if Truthy(v) != n.and {
			return v, nil
		}
	}
	return v, nil
}

// function is one of GitHub's functions, with the argument counts Parse enforces.
type function struct {
	min, max int
	call     func(e *evaluator, n *call) (any, error)
}

// functions is keyed by lower-cased name: function names are case-insensitive.
var functions = map[string]*function{
	"contains":   {2, 2, fnContains},
	"startswith": {2, 2, fnStartsWith},
	"endswith":   {2, 2, fnEndsWith},
	"format":     {1, 255, fnFormat},
	"join":       {1, 2, fnJoin},
	"tojson":     {1, 1, fnToJSON},
	"fromjson":   {1, 1, fnFromJSON},
	"hashfiles":  {1, 255, fnHashFiles},
	"success":    {0, 0, fnStatus},
	"failure":    {0, 0, fnStatus},
	"cancelled":  {0, 0, fnStatus},
	"always":     {0, 0, fnStatus},
}

// statusFunctions are the calls that stop Condition adding its implicit success().
var statusFunctions = map[string]bool{"success": true, "failure": true, "cancelled": true, "always": true}

// contains(search, item): a case-insensitive substring test when search is a string (or
// other primitive), or whether an array has an element == item.
func fnContains(e *evaluator, n *call) (any, error) {
	search, err := n.args[0].eval(e)
	if err != nil {
		return nil, err
	}
	switch s := search.(type) {
	case []any, filtered:
		items := asArray(s)
		if len(items) == 0 {
			return false, nil
		}
		item, err := n.args[1].eval(e)
		if err != nil {
			return nil, err
		}
		for _, x := range items {
			if looseEqual(item, canon(x)) {
				return true, nil
			}
		}
		return false, nil
	}
	if !isPrimitive(search) {
		return false, nil
	}
	item, err := n.args[1].eval(e)
	if err != nil || !isPrimitive(item) {
		return false, err
	}
	return strings.Contains(upper(ToString(search)), upper(ToString(item))), nil
}

func asArray(v any) []any {
	if f, ok := v.(filtered); ok {
		return f
	}
	a, _ := v.([]any)
	return a
}

func fnStartsWith(e *evaluator, n *call) (any, error) {
	return affix(e, n, strings.HasPrefix)
}

func fnEndsWith(e *evaluator, n *call) (any, error) {
	return affix(e, n, strings.HasSuffix)
}

// affix is startsWith and endsWith: both sides primitives, compared ignoring case.
func affix(e *evaluator, n *call, test func(s, affix string) bool) (any, error) {
	s, err := n.args[0].eval(e)
	if err != nil || !isPrimitive(s) {
		return false, err
	}
	a, err := n.args[1].eval(e)
	if err != nil || !isPrimitive(a) {
		return false, err
	}
	return test(upper(ToString(s)), upper(ToString(a))), nil
}

// format('{0} and {1}', a, b) replaces {N} with argument N as a string; {{ and }} stand for
// { and }. The format string is checked whole before any argument is evaluated, and only
// the arguments it uses are evaluated, as on GitHub.
func fnFormat(e *evaluator, n *call) (any, error) {
	f, err := n.args[0].eval(e)
	if err != nil {
		return nil, err
	}
	s := ToString(f)
	type part struct {
		text string
		arg  int // -1 for text
	}
	var parts []part
	invalid := func() error {
		return e.fail(ErrFunction, n.at, nil, "The following format string is invalid: %s", s)
	}
	for i := 0; i < len(s); {
		l := strings.IndexByte(s[i:], '{')
		r := strings.IndexByte(s[i:], '}')
		switch {
		case l >= 0 && (r < 0 || r > l):
			l += i
			if l+1 < len(s) && s[l+1] == '{' {
				parts = append(parts, part{s[i : l+1], -1})
				i = l + 2
				continue
			}
			j := l + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j == l+1 || j >= len(s) || s[j] != '}' {
				return nil, invalid()
			}
			arg, err := strconv.Atoi(s[l+1 : j])
			if err != nil || arg > 255 {
				return nil, invalid()
			}
			if arg > len(n.args)-2 {
				return nil, e.fail(ErrFunction, n.at, nil, "The following format string references more arguments than were supplied: %s", s)
			}
			parts = append(parts, part{s[i:l], -1}, part{"", arg})
			i = j + 1
		case r >= 0:
			r += i
			if r+1 < len(s) && s[r+1] == '}' {
				parts = append(parts, part{s[i : r+1], -1})
				i = r + 2
				continue
			}
			return nil, invalid()
		default:
			parts = append(parts, part{s[i:], -1})
			i = len(s)
		}
	}
	args := make([]*string, len(n.args)-1)
	var b strings.Builder
	for _, p := range parts {
		if p.arg < 0 {
			b.WriteString(p.text)
			continue
		}
		if args[p.arg] == nil {
			v, err := n.args[p.arg+1].eval(e)
			if err != nil {
				return nil, err
			}
			str := ToString(v)
			args[p.arg] = &str
		}
		b.WriteString(*args[p.arg])
	}
	return b.String(), nil
}

// join(array, separator) joins the elements as strings, with ',' when no separator is given.
// A primitive is returned as a string; an object gives the empty string.
func fnJoin(e *evaluator, n *call) (any, error) {
	v, err := n.args[0].eval(e)
	if err != nil {
		return nil, err
	}
	switch kindOf(v) {
	case kindArray:
	case kindObject:
		return "", nil
	default:
		return ToString(v), nil
	}
	items := asArray(v)
	if len(items) == 0 {
		return "", nil
	}
	sep := ","
	if len(items) > 1 && len(n.args) > 1 {
		s, err := n.args[1].eval(e)
		if err != nil {
			return nil, err
		}
		if isPrimitive(s) {
			sep = ToString(s)
		}
	}
	var b strings.Builder
	for i, x := range items {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(ToString(x))
	}
	return b.String(), nil
}

func fnToJSON(e *evaluator, n *call) (any, error) {
	v, err := n.args[0].eval(e)
	if err != nil {
		return nil, err
	}
	s, ok := toJSON(v)
	if !ok {
		return nil, e.fail(ErrLimit, n.at, nil, "toJSON: the value nests more than %d levels deep", maxValueDepth)
	}
	return s, nil
}

// fromJSON parses its argument, as a string, as one JSON value.
func fnFromJSON(e *evaluator, n *call) (any, error) {
	v, err := n.args[0].eval(e)
	if err != nil {
		return nil, err
	}
	s := ToString(v)
	d := json.NewDecoder(strings.NewReader(s))
	var out any
	if err := d.Decode(&out); err != nil {
		if errors.Is(err, io.EOF) {
			err = errors.New("the text is empty")
		}
		return nil, e.fail(ErrFunction, n.at, err, "fromJSON: %s is not JSON: %v", clip(s), err)
	}
	if _, err := d.Token(); !errors.Is(err, io.EOF) {
		return nil, e.fail(ErrFunction, n.at, nil, "fromJSON: %s is not JSON: text follows the value at byte %d", clip(s), d.InputOffset())
	}
	return out, nil
}

// clip quotes s for an error message, shortened so a large document does not flood it.
func clip(s string) string {
	const most = 60
	if len(s) > most {
		cut := most
		for cut > 0 && s[cut]&0xC0 == 0x80 { // do not split a UTF-8 sequence
			cut--
		}
		return quote(s[:cut] + "...")
	}
	return quote(s)
}

func fnHashFiles(e *evaluator, n *call) (any, error) {
	patterns := make([]string, len(n.args))
	for i, a := range n.args {
		v, err := a.eval(e)
		if err != nil {
			return nil, err
		}
		patterns[i] = ToString(v)
	}
	if e.c.HashFiles == nil {
		return nil, e.fail(ErrFunction, n.at, nil, "hashFiles is not available here")
	}
	h, err := e.c.HashFiles(patterns)
	if err != nil {
		return nil, e.fail(ErrFunction, n.at, err, "hashFiles(%s) failed: %v", strings.Join(quoteAll(patterns), ", "), err)
	}
	return h, nil
}

func quoteAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = quote(s)
	}
	return out
}

func fnStatus(e *evaluator, n *call) (any, error) {
	return e.status(strings.ToLower(n.name)), nil
}
