// Package agent is the worker: it registers with a coordinator, claims jobs it can run,
// runs their steps through an executor in a fresh workspace, renews its leases, and
// reports every step and the end of every job.
//
// It talks to the coordinator only over the HTTP protocol of docs/api.md and keeps no
// state that the coordinator does not also have: a worker that dies loses nothing.
package agent
