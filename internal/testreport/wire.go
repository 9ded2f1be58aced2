package testreport

import (
	"strings"
	"time"
)

// Wire is a result as a worker sends it to the coordinator (POST
// /api/v1/agent/jobs/{id}/tests), and as the coordinator reads it.
type Wire struct {
	Suite      string  `json:"suite,omitempty"`
	Name       string  `json:"name"`
	File       string  `json:"file,omitempty"`
	Line       int     `json:"line,omitempty"`
	Status     string  `json:"status"`
	DurationMS float64 `json:"duration_ms"`
	// FailedAttempts are the reruns the test tool made within its report before a pass.
	FailedAttempts int    `json:"failed_attempts,omitempty"`
	Message        string `json:"message,omitempty"`
	Output         string `json:"output,omitempty"`
}

// Result is the wire form read back; its status is checked by the store.
func (w Wire) Result() Result {
	return Result{Suite: w.Suite, Name: w.Name, File: w.File, Line: w.Line, Status: Status(w.Status),
		Duration: time.Duration(w.DurationMS * float64(time.Millisecond)), FailedAttempts: w.FailedAttempts,
		Message: w.Message, Output: w.Output}
}

// Bounds of one batch a worker sends: the coordinator takes at most BatchResults, and a
// batch is cut sooner when its messages and output add up to BatchBytes.
const (
	BatchResults = 1000
	BatchBytes   = 4 << 20
)

// Batches cuts results into the batches a worker sends, in order. A passed test without
// failed reruns carries no message or output; the others' are masked by mask (nil: not
// at all) and bounded again, since masking may lengthen them.
func Batches(results []Result, mask func(string) string) [][]Wire {
	var (
		out   [][]Wire
		batch []Wire
		bytes int
	)
	for _, r := range results {
		w := Wire{Suite: r.Suite, Name: r.Name, File: r.File, Line: r.Line, Status: string(r.Status),
			DurationMS: float64(r.Duration.Microseconds()) / 1000, FailedAttempts: r.FailedAttempts}
		if r.Status != Passed || r.FailedAttempts > 0 {
			w.Message, w.Output = r.Message, r.Output
			if mask != nil {
				w.Message, w.Output = mask(w.Message), mask(w.Output)
			}
			w.Message, w.Output = bound(w.Message, MaxMessageBytes), bound(w.Output, MaxOutputBytes)
		}
		if len(batch) == BatchResults || len(batch) > 0 && bytes+len(w.Message)+len(w.Output) > BatchBytes {
			out, batch, bytes = append(out, batch), nil, 0
		}
		bytes += len(w.Message) + len(w.Output)
		batch = append(batch, w)
	}
	if len(batch) > 0 {
		out = append(out, batch)
	}
	return out
}

// bound cuts s to at most max bytes; a rune the cut split is dropped.
func bound(s string, max int) string {
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max], "")
}
