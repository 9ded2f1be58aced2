// Package lazyre holds regular expressions that are compiled when first used rather
// than when the program starts. A package-level regexp.MustCompile runs in every process
// that links its package, whether the expression is used or not: the pipeline package's
// forty-one took 4 ms of every gantry command's start, the most of any of Gantry's own
// packages. MustCompileAll compiles every one made so far, for a test to call, so that a
// bad expression still fails a test rather than a user's command.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled on first use; it has the methods of
// *regexp.Regexp that Gantry calls, and Regexp for the rest.
type Regexp struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

var (
	mu  sync.Mutex
	all []*Regexp
)

// New returns expr, to be compiled when first used (as regexp.MustCompile: a bad
// expression panics then).
func New(expr string) *Regexp {
	r := &Regexp{expr: expr}
	mu.Lock()
	all = append(all, r)
	mu.Unlock()
	return r
}

// MustCompileAll compiles every Regexp made so far (a package's are made when it is
// initialised), and panics, as regexp.MustCompile does, at the first that does not
// compile.
func MustCompileAll() {
	mu.Lock()
	rs := append([]*Regexp(nil), all...)
	mu.Unlock()
	for _, r := range rs {
		r.Regexp()
	}
}

// Regexp is the compiled expression.
func (r *Regexp) Regexp() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.expr) })
	return r.re
}

// String is the expression's source text.
func (r *Regexp) String() string { return r.expr }

// MatchString is regexp.Regexp's.
func (r *Regexp) MatchString(s string) bool { return r.Regexp().MatchString(s) }

// FindStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.Regexp().FindStringSubmatch(s) }

// FindAllStringSubmatch is regexp.Regexp's.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.Regexp().FindAllStringSubmatch(s, n)
}

// FindAllStringIndex is regexp.Regexp's.
func (r *Regexp) FindAllStringIndex(s string, n int) [][]int {
	return r.Regexp().FindAllStringIndex(s, n)
}

// ReplaceAllString is regexp.Regexp's.
func (r *Regexp) ReplaceAllString(src, repl string) string {
	return r.Regexp().ReplaceAllString(src, repl)
}

// ReplaceAllStringFunc is regexp.Regexp's.
func (r *Regexp) ReplaceAllStringFunc(src string, repl func(string) string) string {
	return r.Regexp().ReplaceAllStringFunc(src, repl)
}
