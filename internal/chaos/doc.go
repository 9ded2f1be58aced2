// Package chaos owns the end-to-end chaos suite: a real coordinator and workers, killed and restarted under load, on each store.
// It holds tests only and must not be imported: it checks Gantry's guarantees from outside, through the API, the store and the processes' effects.
package chaos
