package testreport

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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
	// FailedAttempts counts the attempts the test tool itself re-ran within this report
	// and that failed before the one Status records (JUnit's flakyFailure, flakyError,
	// rerunFailure and rerunError). A Passed result with FailedAttempts > 0 passed only
	// on a rerun: the report itself shows it flaky, and its Message is the first failed
	// attempt's message.
	FailedAttempts int
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

// Bounds a result's numbers keep, as the store and the API take them: a line is a
// 32-bit integer column, and the API refuses a duration past 100 days. A report's number
// beyond them is taken as 0, with a warning.
const (
	MaxLine     = 1<<31 - 1
	MaxDuration = 100 * 24 * time.Hour
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

// cutMark is the marker cut puts where it cut, naming how much was left out.
func cutMark(n int) string { return "… (cut: " + strconv.Itoa(n) + " bytes more)" }

// cutTailMark is the marker cutTail puts before what it kept, naming how much went.
func cutTailMark(n int) string { return "(cut: " + strconv.Itoa(n) + " bytes before) …" }

// cut returns s if it fits in max bytes, else its head cut on a UTF-8 boundary and
// followed by a marker, the whole at most max bytes. A cut name stays the same from one
// run to the next, so it remains an identity.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	// The marker naming len(s) is at least as long as any marker naming fewer bytes.
	n := max - len(cutMark(len(s)))
	if n < 0 {
		n = 0
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + cutMark(len(s)-n)
}

// cutTail returns s if it fits in max bytes and nothing was dropped before it, else a
// marker followed by the end of s cut on a UTF-8 boundary, the whole at most max bytes.
// dropped counts bytes already dropped before s; the marker counts them too.
func cutTail(s string, max int, dropped int64) string {
	if dropped == 0 && len(s) <= max {
		return s
	}
	total := dropped + int64(len(s))
	keep := max - len(cutTailMark(int(min(total, 1<<62))))
	if keep < 0 {
		keep = 0
	}
	start := len(s) - keep
	if start < 0 {
		start = 0
	}
	for start < len(s) && !utf8.RuneStart(s[start]) {
		start++
	}
	return cutTailMark(int(min(dropped+int64(start), 1<<62))) + s[start:]
}

// clean makes s safe to store as PostgreSQL text: invalid UTF-8 and NUL bytes become
// U+FFFD.
func clean(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.ReplaceAll(s, "\x00", "\uFFFD")
}

// tail keeps the last max bytes written to it, and counts those it let go.
type tail struct {
	buf     []byte
	max     int
	dropped int64
}

// write appends p, letting the oldest bytes go past max.
func (t *tail) write(p []byte) { tailAppend(t, p) }

// writeString appends s, letting the oldest bytes go past max.
func (t *tail) writeString(s string) { tailAppend(t, s) }

// tailAppend compacts only when the buffer holds twice max, so a long stream costs a
// copy per max bytes, not per write.
func tailAppend[T string | []byte](t *tail, s T) {
	if len(s) >= t.max {
		t.dropped += int64(len(t.buf)) + int64(len(s)-t.max)
		t.buf = append(t.buf[:0], s[len(s)-t.max:]...)
		return
	}
	if len(t.buf)+len(s) > 2*t.max {
		if drop := len(t.buf) - t.max; drop > 0 {
			t.dropped += int64(drop)
			t.buf = t.buf[:copy(t.buf, t.buf[drop:])]
		}
	}
	t.buf = append(t.buf, s...)
}

// Len is how many bytes the tail holds.
func (t *tail) Len() int { return len(t.buf) }

// String returns what the tail kept, cleaned and cut to max bytes with a marker when
// anything was let go.
func (t *tail) String() string {
	b := t.buf
	dropped := t.dropped
	if len(b) > t.max {
		dropped += int64(len(b) - t.max)
		b = b[len(b)-t.max:]
	}
	return cutTail(clean(string(b)), t.max, dropped)
}

// Reset empties the tail, keeping its buffer.
func (t *tail) Reset() {
	t.buf = t.buf[:0]
	t.dropped = 0
}
