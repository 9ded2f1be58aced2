// Package ghaexpr owns Gantry's one implementation of GitHub Actions' expression language:
// parsing ${{ }} text, evaluating it against run-time contexts, interpolation and if: rules.
//
// It is pure: no I/O, no clocks, no globals. The only effects are the caller's own
// Context.Status and Context.HashFiles. It does not decide what a context holds; callers do.
package ghaexpr
