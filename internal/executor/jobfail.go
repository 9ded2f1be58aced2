package executor

import (
	"errors"
)

// The kinds of failure a JobExecutor's Begin (or a Session) reports, tested with
// errors.Is. Each maps to a retry.on failure kind through RetryKind.
var (
	// ErrImage: an image of the job cannot be had (not found, pull refused, an invalid
	// name, a pull that keeps failing).
	ErrImage = errors.New("job image unavailable")
	// ErrUnschedulable: the job's environment was not placed anywhere within its
	// deadline (no node with the resources, labels or taints it needs).
	ErrUnschedulable = errors.New("job environment not scheduled in time")
	// ErrEnvironment: the job's environment started but broke (a container that keeps
	// crashing, ran out of memory, or whose configuration is wrong).
	ErrEnvironment = errors.New("job environment failed")
	// ErrEnvironmentLost: the job's environment went away under it (deleted, evicted,
	// its node lost): not the job's fault.
	ErrEnvironmentLost = errors.New("job environment lost")
)

// The failure kinds of the pipeline's retry.on, as RetryKind returns them.
const (
	KindFailure = "failure"
	KindLost    = "lost"
	KindTimeout = "timeout"
)

// RetryKind names the retry.on failure kind an executor error counts as:
//   - ErrUnschedulable is "timeout": the environment did not start within its deadline;
//   - ErrEnvironmentLost is "lost": the infrastructure lost it, as a worker that stops
//     renewing its lease loses a job;
//   - every other error (ErrImage, ErrEnvironment, anything else) is "failure", as a
//     step that exits non-zero.
func RetryKind(err error) string {
	switch {
	case errors.Is(err, ErrUnschedulable):
		return KindTimeout
	case errors.Is(err, ErrEnvironmentLost):
		return KindLost
	default:
		return KindFailure
	}
}
