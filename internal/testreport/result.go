package testreport

import (
	"fmt"
	"time"
)

// Status is a test's outcome in one attempt.
type Status string

// The statuses a result may have. Errored is a test that could not run to a verdict
// (JUnit's <error>, a TAP "Bail out!" before its plan ended, a go test that panicked
// outside any test); it counts as a failure everywhere a failure counts.
const (
	Passed  Status = "passed"
	Failed  Status = "failed"
	Skipped Status = "skipped"
	Errored Status = "errored"
)

// Failing reports whether the status fails the job it belongs to.
func (s Status) Failing() bool { return s == Failed || s == Errored }

// Valid reports whether s is one of the four statuses.
func (s Status) Valid() bool {
	switch s {
	case Passed, Failed, Skipped, Errored:
		return true
	}
	return false
}

// Formats a job's reports may be in, as the pipeline's reports: key names them.
const (
	FormatJUnit      = "junit"
	FormatGoTestJSON = "go-test-json"
	FormatTAP        = "tap"
)

// Formats lists the formats in the order the pipeline's reports: key shows them.
var Formats = []string{FormatJUnit, FormatGoTestJSON, FormatTAP}

// Result is one test's outcome in one report. Suite and Name together are the test's
// identity across attempts and runs: JUnit's testsuite (or classname) and testcase name,
// go test's package and test name (subtests as Parent/Sub), TAP's file and description.
type Result struct {
	Suite    string
	Name     string
	File     string // where the report says the test is; empty when it does not
	Line     int    // 0 when not given
	Status   Status
	Duration time.Duration
	// Message is the failure's or skip's message, at most MaxMessageBytes.
	Message string
	// Output is a bounded excerpt of what the test printed, kept for failing tests only:
	// its last MaxOutputBytes.
	Output string
}

// Bounds on what a report may make of one job. Past MaxTestsPerJob the rest of a
// report's tests are not kept, with a warning; a longer message or output is cut, with
// a mark that says so; a report file over MaxReportBytes is not read at all.
const (
	MaxTestsPerJob  = 100_000
	MaxMessageBytes = 4 << 10
	MaxOutputBytes  = 16 << 10
	MaxNameBytes    = 1 << 10
	MaxReportBytes  = 256 << 20
)

// Warning is something a report held that was not kept or not understood; the worker
// shows it as a warning on the job. The job itself never fails for a report.
type Warning struct {
	File    string // the report file, relative to the workspace
	Line    int    // where in it, when known
	Message string
}

func (w Warning) String() string {
	if w.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", w.File, w.Line, w.Message)
	}
	return fmt.Sprintf("%s: %s", w.File, w.Message)
}

// TestID is a test's identity across attempts and runs.
type TestID struct {
	Suite string
	Name  string
}

func (id TestID) String() string {
	if id.Suite == "" {
		return id.Name
	}
	return id.Suite + "." + id.Name
}
