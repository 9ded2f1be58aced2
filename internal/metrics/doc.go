// Package metrics defines Gantry's Prometheus metrics: the coordinator's and the worker's
// collectors, each on its own registry, and a store decorator that times every call.
// It only counts and reads: it never changes what it observes.
package metrics
