package cli

import (
	"fmt"
	"io"
	"strings"
)

// failureView is why a run failed, as GET /api/v1/runs/{id} says it (failure).
type failureView struct {
	Job         string `json:"job"`
	JobID       string `json:"job_id"`
	Step        string `json:"step"`
	Kind        string `json:"kind"`
	ExitCode    *int   `json:"exit_code"`
	Reason      string `json:"reason"`
	FailedJobs  int    `json:"failed_jobs"`
	CancelledBy string `json:"cancelled_by"`
	Seq         int64  `json:"seq"`
	Lines       []struct {
		Seq  int64  `json:"seq"`
		Text string `json:"text"`
	} `json:"lines"`
	Others []string `json:"others"`
}

// printFailure prints why a run failed: the reason, where to read the log (gantry logs
// JOB), and the first error lines, each cut at width; nothing when f is nil.
func printFailure(w io.Writer, f *failureView, width int) {
	if f == nil {
		return
	}
	width = max(width, 40)
	var b strings.Builder
	b.WriteString("why it failed\n")
	b.WriteString(elide("  "+f.Reason, width))
	b.WriteByte('\n')
	if f.CancelledBy != "" && !strings.Contains(f.Reason, f.CancelledBy) {
		b.WriteString(elide("  cancelled by "+f.CancelledBy, width))
		b.WriteByte('\n')
	}
	for _, l := range f.Lines {
		prefix := "  | "
		if l.Seq > 0 {
			prefix = fmt.Sprintf("  %5d | ", l.Seq)
		}
		b.WriteString(elide(prefix+l.Text, width))
		b.WriteByte('\n')
	}
	if len(f.Others) > 0 {
		b.WriteString(elide("  also failed: "+strings.Join(f.Others, ", "), width))
		b.WriteByte('\n')
	}
	if f.JobID != "" {
		fmt.Fprintf(&b, "  log: gantry logs %s\n", f.JobID)
	}
	io.WriteString(w, b.String())
}
