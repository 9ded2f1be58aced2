// Package pipeline owns Gantry's pipeline definition language: decoding YAML and JSON with
// positions, validation, matrix expansion, stages, the job DAG and `if:` conditions.
//
// It is pure: no I/O, no clocks, no globals. Everything it reports is a typed *Error that
// carries the path, line and column of the mistake.
package pipeline
