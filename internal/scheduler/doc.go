// Package scheduler runs the coordinator's background loops: reaping expired leases,
// revoking jobs past their hard timeout, promoting due retries, firing the runs of on:
// schedule ticks (Cron; the store lets one replica take each tick), and starting the runs
// of on: workflow_run that the outbox's messages call for (Cron.StartWorkflowRuns, made
// once per message by an idempotency key). It also holds the one
// policy that says why a job waits (Why), pure so that every reader shows the same reason.
//
// Every transition is a compare-and-swap in the store, so the loops are safe to run in
// every replica at once; the package keeps no state a restart would lose.
package scheduler
