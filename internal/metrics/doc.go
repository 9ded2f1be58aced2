// Package metrics defines the coordinator's Prometheus metrics, on a registry of their own,
// and a store decorator that times every call; the worker's are in workermetrics.
// It only counts and reads: it never changes what it observes.
package metrics
