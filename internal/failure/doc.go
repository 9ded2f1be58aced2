// Package failure says why a run failed, at a glance: the job that failed, the step, how
// it ended (exit code, timeout, lost with its worker, cancelled and by whom) and its first
// error lines. It reads store records and logs through a narrow Source and never writes.
package failure
