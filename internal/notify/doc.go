// Package notify delivers the outbox: commit statuses to forges and signed outbound
// webhooks, and a run's activities to the definitions that listen for them with on:
// workflow_run (through WorkflowRuns), at least once, with backoff, dead-lettering what
// cannot be delivered.
// It never decides what to report; the store enqueues that with each state change.
package notify
