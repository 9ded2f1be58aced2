// Package bench holds the load generators, simulated workers and named scenarios that
// `gantry bench` runs against real coordinator and worker processes, and the report
// (table, JSON, BENCHMARKS.md section) they produce.
//
// It measures; it must not be imported by the coordinator or the worker.
package bench
