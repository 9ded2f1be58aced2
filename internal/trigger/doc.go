// Package trigger decides what the `on:` of a pipeline makes of an event: whether a push,
// a pull request, a schedule tick, a manual dispatch or another run's activity
// (workflow_run) starts a run, and why (or why not)
// in words a user can read; which schedule ticks are due; and what dispatch inputs mean.
//
// It is pure: no I/O, no clock (times are arguments), no store. It does not parse
// webhooks (internal/forge does) and does not create runs (its callers do).
package trigger
