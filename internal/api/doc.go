// Package api serves Gantry's HTTP API: the user-facing REST v1 endpoints for runs, jobs
// and workers, the worker protocol, job logs (reads, search, SSE streams and the
// WebSocket), health checks, and the single JSON error format every endpoint answers with.
// It must not hold state a restart would lose: everything lives in the store and the log
// storage.
package api
