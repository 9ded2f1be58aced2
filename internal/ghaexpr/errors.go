package ghaexpr

import "fmt"

// ErrorKind classifies an expression error. Each kind is itself an error, so callers test
// for one with errors.Is(err, ghaexpr.ErrSyntax).
type ErrorKind string

// The kinds of expression error.
const (
	ErrSyntax      ErrorKind = "syntax"       // the text is not an expression: a bad token, an unknown function, a wrong argument count
	ErrLimit       ErrorKind = "limit"        // the expression is longer or nests deeper than GitHub allows
	ErrUnknownName ErrorKind = "unknown_name" // a top-level name that is neither in Context.Values nor one of GitHub's contexts
	ErrFunction    ErrorKind = "function"     // a function failed: a bad format string, fromJSON of text that is not JSON, hashFiles
)

// Error implements error.
func (k ErrorKind) Error() string { return string(k) }

// Error is one mistake in an expression, found by Parse or by Eval. Msg uses GitHub's
// wording where GitHub has one, so a message reads the same as on github.com.
type Error struct {
	Kind   ErrorKind
	Expr   string // the expression's text, without ${{ }}
	Offset int    // byte offset in Expr where the mistake is
	Msg    string
	Err    error // the cause, when another error caused this one (HashFiles's, for one)
}

// Error formats the error the way GitHub does: message, 1-based position and expression.
func (e *Error) Error() string {
	return fmt.Sprintf("%s. Located at position %d within expression: %s", e.Msg, e.Offset+1, e.Expr)
}

// Unwrap returns the kind and the cause, so errors.Is matches on either.
func (e *Error) Unwrap() []error {
	if e.Err == nil {
		return []error{e.Kind}
	}
	return []error{e.Kind, e.Err}
}
