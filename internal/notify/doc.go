// Package notify delivers the outbox: commit statuses to forges and signed outbound
// webhooks, at least once, with backoff, dead-lettering what cannot be delivered.
// It never decides what to report; the store enqueues that with each state change.
package notify
