// Package glob implements the filter patterns of `on:` branches, tags and paths, with the
// semantics GitHub Actions gives them, so that a workflow file means the same in Gantry.
//
// It is pure and has no dependencies beyond the standard library, so that both the pipeline
// decoder (which validates patterns) and the trigger matcher (which applies them) can use it.
//
// Syntax (each element shown in quotes):
//
//	"*"      any run of characters except /
//	"**"     any run of characters, / included; "**/" also matches nothing, so **/x matches x
//	"?"      zero or one of the preceding character (or [...] class): *.jsx? matches a.js and a.jsx
//	"+"      one or more of the preceding character (or [...] class)
//	"[...]"  one character listed or in a range of a-z, A-Z or 0-9: [CB]at, v[0-9]
//	"\c"     the character c itself: \*, \?, \+, \[, \!, \\
//
// In a List, a pattern starting with ! excludes what it matches; patterns are read in
// order and the last one that matches decides.
package glob
