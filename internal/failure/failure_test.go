package failure

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// fakeSource holds what Explain reads, by job id.
type fakeSource struct {
	steps       map[uuid.UUID][]*store.Step
	annotations map[uuid.UUID][]*store.Annotation
	audit       []*store.AuditEntry
	log         map[uuid.UUID][]logs.Line
	logErr      error
	tailAsked   int
}

func (f *fakeSource) ListSteps(_ context.Context, id uuid.UUID) ([]*store.Step, error) {
	return f.steps[id], nil
}

func (f *fakeSource) ListAnnotations(_ context.Context, p store.ListAnnotationsParams) ([]*store.Annotation, error) {
	return f.annotations[p.JobID], nil
}

func (f *fakeSource) ListAudit(_ context.Context, p store.ListAuditParams) ([]*store.AuditEntry, error) {
	for _, e := range f.audit {
		if e.Action == p.Action && e.Target == p.Target && e.Project == p.Project {
			return []*store.AuditEntry{e}, nil
		}
	}
	return nil, nil
}

func (f *fakeSource) LogTail(_ context.Context, id uuid.UUID, _, n int) ([]logs.Line, error) {
	f.tailAsked = n
	if f.logErr != nil {
		return nil, f.logErr
	}
	l := f.log[id]
	return l[max(len(l)-n, 0):], nil
}

func intp(v int) *int { return &v }

// logOf numbers lines from 1: "!text" is a system line.
func logOf(texts ...string) []logs.Line {
	out := make([]logs.Line, len(texts))
	for i, t := range texts {
		out[i] = logs.Line{Seq: int64(i + 1), Stream: logs.Stdout, Text: t}
		if s, ok := strings.CutPrefix(t, "!"); ok {
			out[i].Stream, out[i].Text = logs.System, s
		}
	}
	return out
}

func TestExplain(t *testing.T) {
	t.Parallel()
	epoch := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	build := &store.Job{ID: uuid.New(), Key: "build", Status: store.JobFailed, Attempt: 1, MaxAttempts: 1,
		FailureKind: store.FailureExit, ExitCode: intp(1), FinishedAt: epoch.Add(2 * time.Second)}
	lint := &store.Job{ID: uuid.New(), Key: "lint", Status: store.JobFailed, Attempt: 1, MaxAttempts: 1,
		FailureKind: store.FailureExit, ExitCode: intp(1), FinishedAt: epoch.Add(time.Second)}
	ok := &store.Job{ID: uuid.New(), Key: "ok", Status: store.JobSuccess, Attempt: 1}
	steps := []*store.Step{
		{Index: 0, Name: "compile", Status: store.StepSuccess, ExitCode: intp(0)},
		{Index: 1, Name: "test", Status: store.StepFailed, ExitCode: intp(2), FailureKind: store.FailureExit},
		{Index: 2, Name: "after", Status: store.StepSuccess, ExitCode: intp(0)},
	}
	testLog := logOf("!step compile", "compiling", "!step test", "=== RUN TestA", "", "--- FAIL: TestA", "    a_test.go:9: want 1, got 2",
		"FAIL", "!step test failed with exit code 2", "!step after", "cleaning up")
	run := &store.Run{ID: uuid.New(), Project: "web", Status: store.RunFailed}

	tests := []struct {
		name  string
		run   *store.Run
		jobs  []*store.Job
		src   *fakeSource
		check func(t *testing.T, f *Failure)
	}{
		{
			name: "success says nothing",
			run:  &store.Run{ID: uuid.New(), Status: store.RunSuccess},
			jobs: []*store.Job{ok},
			src:  &fakeSource{},
			check: func(t *testing.T, f *Failure) {
				if f != nil {
					t.Errorf("Explain = %+v, want nil", f)
				}
			},
		},
		{
			name: "the first job to fail, its failed step and the lines before its end",
			run:  run,
			jobs: []*store.Job{build, lint, ok},
			src: &fakeSource{steps: map[uuid.UUID][]*store.Step{lint.ID: steps},
				log: map[uuid.UUID][]logs.Line{lint.ID: testLog}},
			check: func(t *testing.T, f *Failure) {
				if f.Job != "lint" || f.Step != "test" || f.StepIndex != 1 || f.Kind != KindExit || *f.ExitCode != 2 {
					t.Errorf("failure = %+v, want lint, step test (1), exit 2", f)
				}
				if f.Reason != "lint: step test failed with exit code 2" {
					t.Errorf("reason = %q", f.Reason)
				}
				if f.FailedJobs != 2 || len(f.Others) != 1 || f.Others[0] != "build" {
					t.Errorf("failed jobs = %d, others %v; want 2, [build]", f.FailedJobs, f.Others)
				}
				want := []string{"=== RUN TestA", "--- FAIL: TestA", "    a_test.go:9: want 1, got 2", "FAIL"}
				if got := texts(f.Lines); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("lines = %q, want %q (the step's output, without blank or Gantry's lines)", got, want)
				}
				if f.Source != FromLog || f.Seq != 4 || f.Lines[0].Seq != 4 {
					t.Errorf("source %q seq %d, want log from line 4", f.Source, f.Seq)
				}
			},
		},
		{
			name: "error annotations come before the log, the failed step's first",
			run:  run,
			jobs: []*store.Job{lint},
			src: &fakeSource{steps: map[uuid.UUID][]*store.Step{lint.ID: steps},
				log: map[uuid.UUID][]logs.Line{lint.ID: testLog},
				annotations: map[uuid.UUID][]*store.Annotation{lint.ID: {
					{Seq: 2, Step: 0, Level: store.AnnotationError, Message: "vet says so"},
					{Seq: 3, Step: 1, Level: store.AnnotationWarning, Message: "only a warning"},
					{Seq: 7, Step: 1, Level: store.AnnotationError, Message: "want 1, got 2", File: "a_test.go", Line: 9, Title: "TestA"},
				}}},
			check: func(t *testing.T, f *Failure) {
				want := []string{"a_test.go:9: TestA: want 1, got 2", "vet says so"}
				if got := texts(f.Lines); strings.Join(got, "|") != strings.Join(want, "|") {
					t.Errorf("lines = %q, want %q", got, want)
				}
				if f.Source != FromAnnotations || f.Seq != 7 {
					t.Errorf("source %q seq %d, want annotations at line 7", f.Source, f.Seq)
				}
			},
		},
		{
			name: "lines are bounded in number and length",
			run:  run,
			jobs: []*store.Job{lint},
			src: &fakeSource{steps: map[uuid.UUID][]*store.Step{lint.ID: steps[1:2]},
				log: map[uuid.UUID][]logs.Line{lint.ID: logOf(append(append([]string{"!step test"},
					manyLines(30)...), strings.Repeat("é", 400), "!step test failed with exit code 2")...)}},
			check: func(t *testing.T, f *Failure) {
				if len(f.Lines) != MaxLines {
					t.Fatalf("%d lines, want %d", len(f.Lines), MaxLines)
				}
				if f.Lines[0].Text != "line 22" {
					t.Errorf("first line %q, want line 22 (the last ten before the end)", f.Lines[0].Text)
				}
				last := f.Lines[MaxLines-1].Text
				if n := len([]rune(last)); n != MaxLineChars || !strings.HasSuffix(last, "\u2026") {
					t.Errorf("last line is %d characters, want %d ending in an ellipsis", n, MaxLineChars)
				}
				if f.Reason == "" || len([]rune(f.Reason)) > MaxLineChars {
					t.Errorf("reason %q", f.Reason)
				}
			},
		},
		{
			name: "a step that wrote nothing: Gantry's line is the error",
			run:  run,
			jobs: []*store.Job{lint},
			src: &fakeSource{steps: map[uuid.UUID][]*store.Step{lint.ID: steps[1:2]},
				log: map[uuid.UUID][]logs.Line{lint.ID: logOf("!step test", "!step test failed with exit code 2")}},
			check: func(t *testing.T, f *Failure) {
				if got := texts(f.Lines); len(got) != 1 || got[0] != "step test failed with exit code 2" || f.Seq != 2 {
					t.Errorf("lines = %q seq %d", got, f.Seq)
				}
			},
		},
		{
			name: "timeout",
			run:  run,
			jobs: []*store.Job{{ID: uuid.New(), Key: "slow", Status: store.JobFailed, Attempt: 1, FailureKind: store.FailureTimeout}},
			src:  &fakeSource{},
			check: func(t *testing.T, f *Failure) {
				if f.Kind != KindTimeout || f.Reason != "slow: the job timed out" {
					t.Errorf("failure = %q %q", f.Kind, f.Reason)
				}
			},
		},
		{
			name: "lost with its worker",
			run:  run,
			jobs: []*store.Job{{ID: uuid.New(), Key: "gone", Status: store.JobFailed, Attempt: 3, MaxAttempts: 3,
				FailureKind: store.FailureLost, WorkerID: "w-7"}},
			src: &fakeSource{},
			check: func(t *testing.T, f *Failure) {
				if f.Kind != KindLost || f.Reason != "gone: lost with its worker w-7 (attempt 3 of 3)" {
					t.Errorf("failure = %q %q", f.Kind, f.Reason)
				}
			},
		},
		{
			name: "cancelled, by whom the audit log says",
			run:  &store.Run{ID: run.ID, Project: "web", Status: store.RunCancelled},
			jobs: []*store.Job{{ID: build.ID, Key: "build", Status: store.JobCancelled, Attempt: 1, FailureKind: store.FailureCancelled}},
			src: &fakeSource{
				steps: map[uuid.UUID][]*store.Step{build.ID: {{Index: 0, Name: "sleep", Status: store.StepCancelled}}},
				audit: []*store.AuditEntry{{Actor: "alice", Action: ActionRunCancelled, Project: "web", Target: run.ID.String()}}},
			check: func(t *testing.T, f *Failure) {
				if f.Kind != KindCancelled || f.CancelledBy != "alice" || f.Step != "sleep" ||
					f.Reason != "build: step sleep was cancelled by alice" {
					t.Errorf("failure = %+v", f)
				}
			},
		},
		{
			name: "a cancelled job in a run that failed for another is not the reason",
			run:  run,
			jobs: []*store.Job{{ID: uuid.New(), Key: "c", Status: store.JobCancelled}, lint},
			src:  &fakeSource{steps: map[uuid.UUID][]*store.Step{lint.ID: steps}},
			check: func(t *testing.T, f *Failure) {
				if f.Job != "lint" {
					t.Errorf("job = %q, want lint", f.Job)
				}
			},
		},
		{
			name: "a job that never ran: its reason",
			run:  run,
			jobs: []*store.Job{{ID: uuid.New(), Key: "deploy", Status: store.JobFailed, Reason: "the environment production does not allow ref dev"}},
			src:  &fakeSource{},
			check: func(t *testing.T, f *Failure) {
				if f.Kind != KindFailed || f.Reason != "deploy: failed: the environment production does not allow ref dev" || len(f.Lines) != 0 {
					t.Errorf("failure = %+v", f)
				}
			},
		},
		{
			name: "an invalid pipeline file",
			run: &store.Run{ID: uuid.New(), Status: store.RunFailed, Errors: []store.RunError{
				{Path: "jobs.a.needs[0]", Line: 4, Message: "unknown job b"}, {Message: "second"}}},
			src: &fakeSource{},
			check: func(t *testing.T, f *Failure) {
				if f.Kind != KindPipeline || f.Reason != "the pipeline file has 2 errors; the first: unknown job b" {
					t.Errorf("failure = %q %q", f.Kind, f.Reason)
				}
				if got := texts(f.Lines); len(got) != 2 || got[0] != "line 4: jobs.a.needs[0]: unknown job b" {
					t.Errorf("lines = %q", got)
				}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f, err := Explain(context.Background(), tc.src, tc.run, tc.jobs)
			if err != nil {
				t.Fatalf("Explain: %v", err)
			}
			if f == nil && tc.name != "success says nothing" {
				t.Fatal("Explain = nil")
			}
			tc.check(t, f)
			if tc.src.tailAsked > tailLines {
				t.Errorf("read %d lines of the log, want at most %d", tc.src.tailAsked, tailLines)
			}
		})
	}
}

// TestExplainWithoutItsLog: a log that cannot be read leaves the failure without its
// lines, and says why; the job, step and exit code are still told.
func TestExplainWithoutItsLog(t *testing.T) {
	t.Parallel()
	j := &store.Job{ID: uuid.New(), Key: "unit", Status: store.JobFailed, Attempt: 1, ExitCode: intp(1)}
	src := &fakeSource{logErr: errors.New("blob store down"),
		steps: map[uuid.UUID][]*store.Step{j.ID: {{Index: 0, Name: "test", Status: store.StepFailed, ExitCode: intp(1)}}}}
	f, err := Explain(context.Background(), src, &store.Run{ID: uuid.New(), Status: store.RunFailed}, []*store.Job{j})
	if err == nil || f == nil {
		t.Fatalf("Explain = %+v, %v; want the failure and the log's error", f, err)
	}
	if f.Reason != "unit: step test failed with exit code 1" || f.Lines != nil || f.Seq != 0 {
		t.Errorf("failure = %+v", f)
	}
}

func TestSummarize(t *testing.T) {
	t.Parallel()
	job := &store.Job{ID: uuid.New(), Key: "unit", Status: store.JobFailed, ExitCode: intp(1), FailureKind: store.FailureExit}
	step := &store.Step{Name: "go test", Status: store.StepFailed, ExitCode: intp(1)}
	tests := []struct {
		name string
		run  *store.Run
		d    *store.RunDigest
		want string // the reason; "" for no summary
	}{
		{"failed step", &store.Run{Status: store.RunFailed},
			&store.RunDigest{Jobs: map[store.JobStatus]int{store.JobFailed: 3}, Failed: job, FailedStep: step},
			"unit: step go test failed with exit code 1"},
		{"running with a failed job", &store.Run{Status: store.RunRunning},
			&store.RunDigest{Failed: job}, "unit: the job failed with exit code 1"},
		{"success", &store.Run{Status: store.RunSuccess}, &store.RunDigest{}, ""},
		{"no digest", &store.Run{Status: store.RunPending}, nil, ""},
		{"cancelled without jobs to blame", &store.Run{Status: store.RunCancelled}, &store.RunDigest{}, "cancelled"},
		{"cancelled job in a running run", &store.Run{Status: store.RunRunning},
			&store.RunDigest{Failed: &store.Job{Key: "x", Status: store.JobCancelled}}, ""},
		{"invalid file", &store.Run{Status: store.RunFailed, Errors: []store.RunError{{Message: "no jobs"}}}, nil,
			"the pipeline file is invalid: no jobs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := Summarize(tc.run, tc.d)
			got := ""
			if s != nil {
				got = s.Reason
			}
			if got != tc.want {
				t.Errorf("reason = %q, want %q", got, tc.want)
			}
			if tc.name == "failed step" && (s.FailedJobs != 3 || s.Step != "go test" || s.Kind != KindExit) {
				t.Errorf("summary = %+v, want 3 failed jobs, step go test, kind exit", s)
			}
		})
	}
}

func texts(ls []Line) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Text
	}
	return out
}

func manyLines(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("line %d", i+1)
	}
	return out
}
