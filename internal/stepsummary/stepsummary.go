// Package stepsummary holds what the worker and the coordinator agree on about a step's
// summary ($GANTRY_STEP_SUMMARY, $GITHUB_STEP_SUMMARY): its bounds, GitHub's. The worker
// drops what is past them; the store refuses it.
package stepsummary

const (
	// MaxBytes is the most a step's summary may be: 1 MiB.
	MaxBytes = 1 << 20
	// MaxSteps is how many steps' summaries a job keeps.
	MaxSteps = 20
)
