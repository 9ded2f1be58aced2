package failure

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// Bounds of the error lines a Failure shows.
const (
	MaxLines     = 10  // lines shown at most
	MaxLineChars = 300 // characters of a line shown at most; a longer one is cut
	// tailLines is how much of the end of a log is read to find the failed step's last
	// lines: the steps that run after a failure (always() ones) may have written more.
	tailLines = 500
)

// Kinds of failure, the Failure.Kind values.
const (
	KindExit      = "exit"      // a step ended with a non-zero exit code
	KindTimeout   = "timeout"   // a step or the job ran past its timeout
	KindLost      = "lost"      // the job's worker stopped answering with attempts spent
	KindCancelled = "cancelled" // someone (or a newer run of its concurrency group) cancelled it
	KindMatrix    = "matrix"    // the job's matrix could not be made from its needs' outputs
	KindPipeline  = "pipeline"  // the run's pipeline file is invalid: it never had jobs
	KindFailed    = "failed"    // the job failed without running (its environment refused the ref...)
)

// Sources of a Failure's lines.
const (
	FromAnnotations = "annotations" // the ::error:: annotations the job's steps raised
	FromLog         = "log"         // the failed step's last log lines before it ended
	FromPipeline    = "pipeline"    // the pipeline file's errors
)

// Summary is a run's failure in one line, as a list of runs shows it.
type Summary struct {
	JobID    uuid.UUID `json:"job_id,omitzero"`
	Job      string    `json:"job,omitempty"` // the job's key
	Step     string    `json:"step,omitempty"`
	Kind     string    `json:"kind"`
	ExitCode *int      `json:"exit_code,omitempty"`
	// Reason says it in a sentence: "build: step test failed with exit code 2".
	Reason string `json:"reason"`
	// FailedJobs counts the run's failed jobs (cancelled ones for a cancelled run).
	FailedJobs int `json:"failed_jobs"`
}

// Failure is why a run failed, in full, as its page shows it.
type Failure struct {
	Summary
	Attempt   int `json:"attempt,omitempty"`
	StepIndex int `json:"step_index"` // -1 when no step is to blame
	// CancelledBy names who cancelled the run or job, when the audit log knows.
	CancelledBy string `json:"cancelled_by,omitempty"`
	WorkerID    string `json:"worker_id,omitempty"`
	// Lines are the first error lines (at most MaxLines of at most MaxLineChars), from
	// Source; Seq is the log line to open the job's log at (0 when none).
	Lines  []Line `json:"lines,omitempty"`
	Source string `json:"source,omitempty"`
	Seq    int64  `json:"seq,omitempty"`
	// Others are the keys of the run's other failed jobs, up to MaxLines.
	Others []string `json:"others,omitempty"`
}

// Line is one error line, with the log line it came from (0 for a pipeline error).
type Line struct {
	Seq  int64  `json:"seq,omitempty"`
	Text string `json:"text"`
}

// Source is what Explain reads: a store's steps, annotations and audit log, and the tail
// of a job attempt's log.
type Source interface {
	ListSteps(ctx context.Context, jobID uuid.UUID) ([]*store.Step, error)
	ListAnnotations(ctx context.Context, p store.ListAnnotationsParams) ([]*store.Annotation, error)
	ListAudit(ctx context.Context, p store.ListAuditParams) ([]*store.AuditEntry, error)
	// LogTail returns the last n lines of a job attempt's log.
	LogTail(ctx context.Context, jobID uuid.UUID, attempt, n int) ([]logs.Line, error)
}

// Audit actions of cancellations, whose target is the run's or the job's id.
const (
	ActionRunCancelled = "run.cancelled"
	ActionJobCancelled = "job.cancelled"
)

// blamed picks the job a failure is told of: the first failed job by the time it ended
// (the one that broke the run, not those that failed after it), then plan order; a
// cancelled run without one names its first cancelled job. It returns the job and how
// many jobs share its status.
func blamed(run *store.Run, jobs []*store.Job) (*store.Job, []*store.Job) {
	want := store.JobFailed
	if !slices.ContainsFunc(jobs, func(j *store.Job) bool { return j.Status == store.JobFailed }) {
		if run.Status != store.RunCancelled {
			return nil, nil
		}
		want = store.JobCancelled
	}
	var hit []*store.Job
	for _, j := range jobs {
		if j.Status == want {
			hit = append(hit, j)
		}
	}
	if len(hit) == 0 {
		return nil, nil
	}
	first := slices.MinFunc(hit, func(a, b *store.Job) int {
		// SortStable-like: equal times keep plan order (MinFunc returns the first minimum).
		return a.FinishedAt.Compare(b.FinishedAt)
	})
	return first, hit
}

// failedStep is the step to blame in a job's current attempt: its first failed step, or
// for a cancelled job its first cancelled one; nil when none.
func failedStep(j *store.Job, steps []*store.Step) *store.Step {
	for _, st := range steps {
		if st.Status == store.StepFailed || (j.Status == store.JobCancelled && st.Status == store.StepCancelled) {
			return st
		}
	}
	return nil
}

// Summarize is the one-line failure of a run from its digest; nil when the run did not
// fail and was not cancelled, or when it is not finished and no job failed yet.
func Summarize(run *store.Run, d *store.RunDigest) *Summary {
	if len(run.Errors) > 0 {
		return pipelineSummary(run)
	}
	if d == nil || d.Failed == nil {
		if run.Status == store.RunCancelled {
			return &Summary{Kind: KindCancelled, Reason: "cancelled"}
		}
		return nil
	}
	if d.Failed.Status == store.JobCancelled && run.Status != store.RunCancelled {
		return nil // a cancelled job in a run that did not fail for it
	}
	s := summary(d.Failed, d.FailedStep, "")
	s.FailedJobs = d.Jobs[d.Failed.Status]
	return &s
}

func pipelineSummary(run *store.Run) *Summary {
	msg := "the pipeline file is invalid: " + run.Errors[0].Message
	if n := len(run.Errors); n > 1 {
		msg = fmt.Sprintf("the pipeline file has %d errors; the first: %s", n, run.Errors[0].Message)
	}
	return &Summary{Kind: KindPipeline, Reason: cut(msg)}
}

// summary says how job j ended, blaming step st (nil when none), cancelled by who ("" when
// not known).
func summary(j *store.Job, st *store.Step, who string) Summary {
	s := Summary{JobID: j.ID, Job: j.Key, ExitCode: j.ExitCode}
	if st != nil {
		s.Step = st.Name
		if st.ExitCode != nil {
			s.ExitCode = st.ExitCode
		}
	}
	where := j.Key + ": "
	if st != nil {
		where += "step " + st.Name + " "
	} else {
		where += "the job "
	}
	switch {
	case j.Status == store.JobCancelled || j.FailureKind == store.FailureCancelled:
		s.Kind = KindCancelled
		s.Reason = where + "was cancelled"
		if who != "" {
			s.Reason += " by " + who
		}
		if j.Reason != "" {
			s.Reason += " (" + j.Reason + ")"
		}
	case j.FailureKind == store.FailureTimeout || (st != nil && st.FailureKind == store.FailureTimeout):
		s.Kind = KindTimeout
		s.Reason = where + "timed out"
	case j.FailureKind == store.FailureLost:
		s.Kind = KindLost
		s.Reason = j.Key + ": lost with its worker"
		if j.WorkerID != "" {
			s.Reason += " " + j.WorkerID
		}
		s.Reason += fmt.Sprintf(" (attempt %d of %d)", j.Attempt, j.MaxAttempts)
	case j.FailureKind == store.FailureMatrix:
		s.Kind = KindMatrix
		s.Reason = j.Key + ": its matrix could not be made: " + j.Reason
	case s.ExitCode != nil:
		s.Kind = KindExit
		s.Reason = fmt.Sprintf("%sfailed with exit code %d", where, *s.ExitCode)
	default:
		s.Kind = KindFailed
		s.Reason = j.Key + ": failed"
		if j.Reason != "" {
			s.Reason += ": " + j.Reason
		}
	}
	s.Reason = cut(s.Reason)
	return s
}

// Explain says why run failed, reading jobs (all the run's jobs, in plan order) and what
// src has of the job to blame; nil when the run did not fail, was not cancelled and has
// no failed job yet. When only its error lines could not be read, it returns the failure
// without them and the error.
func Explain(ctx context.Context, src Source, run *store.Run, jobs []*store.Job) (*Failure, error) {
	if len(run.Errors) > 0 {
		f := &Failure{Summary: *pipelineSummary(run), StepIndex: -1, Source: FromPipeline}
		for _, e := range run.Errors[:min(len(run.Errors), MaxLines)] {
			text := e.Message
			if e.Path != "" {
				text = e.Path + ": " + text
			}
			if e.Line > 0 {
				text = fmt.Sprintf("line %d: %s", e.Line, text)
			}
			f.Lines = append(f.Lines, Line{Text: cut(text)})
		}
		return f, nil
	}
	j, all := blamed(run, jobs)
	if j == nil {
		if run.Status != store.RunCancelled {
			return nil, nil
		}
		f := &Failure{Summary: Summary{Kind: KindCancelled, Reason: "cancelled"}, StepIndex: -1}
		if who, err := cancelledBy(ctx, src, run, nil); err != nil {
			return nil, err
		} else if who != "" {
			f.CancelledBy, f.Reason = who, "cancelled by "+who
		}
		return f, nil
	}
	if j.Status == store.JobCancelled && run.Status != store.RunCancelled {
		return nil, nil
	}
	steps, err := src.ListSteps(ctx, j.ID)
	if err != nil {
		return nil, fmt.Errorf("explain the failure of run %s: %w", run.ID, err)
	}
	st := failedStep(j, steps)
	who := ""
	if j.Status == store.JobCancelled {
		if who, err = cancelledBy(ctx, src, run, j); err != nil {
			return nil, err
		}
	}
	f := &Failure{Summary: summary(j, st, who), Attempt: j.Attempt, StepIndex: -1, CancelledBy: who, WorkerID: j.WorkerID}
	f.FailedJobs = len(all)
	for _, o := range all {
		if o != j && len(f.Others) < MaxLines {
			f.Others = append(f.Others, o.Key)
		}
	}
	if st != nil {
		f.StepIndex = st.Index
	}
	if j.Attempt == 0 {
		return f, nil // it never ran: no log, no annotations
	}
	if err := errorLines(ctx, src, f, j, st); err != nil {
		f.Lines, f.Source, f.Seq = nil, "", 0
		return f, fmt.Errorf("error lines of the failure of run %s: %w", run.ID, err)
	}
	return f, nil
}

// errorLines fills in f's lines: the job's error annotations (of the failed step first),
// else the failed step's last lines before it ended.
func errorLines(ctx context.Context, src Source, f *Failure, j *store.Job, st *store.Step) error {
	as, err := src.ListAnnotations(ctx, store.ListAnnotationsParams{JobID: j.ID, Attempt: j.Attempt})
	if err != nil {
		return err
	}
	var errs []*store.Annotation
	for _, a := range as {
		if a.Level == store.AnnotationError {
			errs = append(errs, a)
		}
	}
	if st != nil {
		// The failed step's own errors first, each group in log order.
		slices.SortStableFunc(errs, func(a, b *store.Annotation) int {
			return cmp.Compare(btoi(a.Step != st.Index), btoi(b.Step != st.Index))
		})
	}
	if len(errs) > 0 {
		f.Source, f.Seq = FromAnnotations, errs[0].Seq
		for _, a := range errs[:min(len(errs), MaxLines)] {
			text := a.Message
			if a.Title != "" {
				text = a.Title + ": " + text
			}
			if a.File != "" {
				loc := a.File
				if a.Line > 0 {
					loc += fmt.Sprintf(":%d", a.Line)
				}
				text = loc + ": " + text
			}
			f.Lines = append(f.Lines, Line{Seq: a.Seq, Text: cut(text)})
		}
		return nil
	}
	tail, err := src.LogTail(ctx, j.ID, j.Attempt, tailLines)
	if err != nil {
		return err
	}
	lines, end := lastLines(tail, st)
	f.Lines = lines
	if len(lines) > 0 {
		f.Source, f.Seq = FromLog, lines[0].Seq
	} else if end > 0 {
		f.Source, f.Seq = FromLog, end
	}
	return nil
}

// lastLines picks the last MaxLines output lines of step st (nil: of the job) before it
// ended, from the tail of the log, and the seq of the line that said it ended (0 when not
// found). Gantry's own lines frame a step: "step NAME" opens it, and "step NAME failed
// with exit code N" (or timed out, cancelled...) closes it.
func lastLines(tail []logs.Line, st *store.Step) ([]Line, int64) {
	end, begin := len(tail), 0
	var endSeq int64
	if st != nil {
		open := "step " + st.Name
		closed := -1
		for i := len(tail) - 1; i >= 0; i-- {
			l := tail[i]
			if l.Stream != logs.System {
				continue
			}
			if closed < 0 && strings.HasPrefix(l.Text, open+" ") || closed < 0 && strings.HasPrefix(l.Text, open+":") {
				closed = i
				continue
			}
			if closed >= 0 && l.Text == open {
				begin = i + 1
				break
			}
		}
		if closed >= 0 {
			end, endSeq = closed, tail[closed].Seq
		}
	} else {
		// No step to blame: the job's last lines, Gantry's own included (they say why).
		var out []Line
		for _, l := range tail[max(len(tail)-MaxLines, 0):] {
			out = append(out, Line{Seq: l.Seq, Text: cut(l.Text)})
		}
		return out, 0
	}
	var picked []logs.Line
	for i := end - 1; i >= begin && len(picked) < MaxLines; i-- {
		l := tail[i]
		if l.Stream == logs.System || l.Group != "" || strings.TrimSpace(l.Text) == "" {
			continue
		}
		picked = append(picked, l)
	}
	slices.Reverse(picked)
	out := make([]Line, len(picked))
	for i, l := range picked {
		out[i] = Line{Seq: l.Seq, Text: cut(l.Text)}
	}
	if len(out) == 0 && endSeq > 0 {
		// The step wrote nothing: Gantry's line saying how it ended is the error.
		out = []Line{{Seq: endSeq, Text: cut(tail[end].Text)}}
	}
	return out, endSeq
}

// cancelledBy names who cancelled job j (nil: the run) from the audit log: the entry of
// the job's cancel, else of its run's; "" when none says.
func cancelledBy(ctx context.Context, src Source, run *store.Run, j *store.Job) (string, error) {
	type ask struct{ action, target string }
	asks := []ask{{ActionRunCancelled, run.ID.String()}}
	if j != nil {
		asks = append([]ask{{ActionJobCancelled, j.ID.String()}}, asks...)
	}
	for _, a := range asks {
		es, err := src.ListAudit(ctx, store.ListAuditParams{Project: run.Project, Action: a.action, Target: a.target, Limit: 1})
		if err != nil {
			return "", fmt.Errorf("who cancelled run %s: %w", run.ID, err)
		}
		if len(es) > 0 {
			return es[0].Actor, nil
		}
	}
	return "", nil
}

// cut bounds a line at MaxLineChars characters, marking the cut with an ellipsis.
func cut(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if utf8.RuneCountInString(s) <= MaxLineChars {
		return s
	}
	r := []rune(s)
	return string(r[:MaxLineChars-1]) + "\u2026"
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
