// Package executor runs a job's steps as processes, each in its own process
// group, and stops them (and everything they started) on cancel or exit.
// It must not know about HTTP or the store.
package executor
