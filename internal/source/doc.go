// Package source holds git mirrors (one bare cache per remote, shared safely by goroutines
// and processes), reads files and changed paths at an exact commit, and checks a commit out
// into a workspace. It runs the git binary with a clean environment; it must not know about
// HTTP handlers, the store or pipelines.
package source
