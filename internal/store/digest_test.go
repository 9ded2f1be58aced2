package store

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestRunDigestState(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status RunStatus
		jobs   map[JobStatus]int
		want   string
	}{
		{"finished is its status", RunFailed, map[JobStatus]int{JobRunning: 1}, "failed"},
		{"a job runs", RunRunning, map[JobStatus]int{JobRunning: 1, JobQueued: 3, JobWaitingApproval: 1}, "running"},
		{"a job is assigned", RunRunning, map[JobStatus]int{JobAssigned: 1, JobQueued: 1}, "running"},
		{"waits for an approval", RunRunning, map[JobStatus]int{JobSuccess: 2, JobWaitingApproval: 1, JobQueued: 1}, "waiting_approval"},
		{"waits for a worker", RunPending, map[JobStatus]int{JobQueued: 2, JobPending: 1}, "queued"},
		{"waits to retry", RunRunning, map[JobStatus]int{JobRetrying: 1, JobPending: 1}, "retrying"},
		{"waits on needs", RunPending, map[JobStatus]int{JobPending: 2}, "pending"},
	}
	for _, tc := range tests {
		if got := (&RunDigest{Jobs: tc.jobs}).State(tc.status); got != tc.want {
			t.Errorf("%s: State = %q, want %q", tc.name, got, tc.want)
		}
	}
	if got := (*RunDigest)(nil).State(RunPending); got != "pending" {
		t.Errorf("nil digest: State = %q, want pending", got)
	}
}

func TestTriggerSetCommit(t *testing.T) {
	t.Parallel()
	var tr Trigger
	tr.SetCommit("  Fix the build\n\nLonger text\n", " Ada ")
	if tr.Message != "Fix the build\n\nLonger text" || tr.AuthorName != "Ada" {
		t.Errorf("SetCommit = %q by %q", tr.Message, tr.AuthorName)
	}
	long := strings.Repeat("é", MaxCommitMessage) // two bytes each
	tr.SetCommit(long, "")
	if len(tr.Message) > MaxCommitMessage || !utf8.ValidString(tr.Message) || len(tr.Message) < MaxCommitMessage-1 {
		t.Errorf("a long message is kept as %d bytes (valid %v), want at most %d, cut on a character",
			len(tr.Message), utf8.ValidString(tr.Message), MaxCommitMessage)
	}
}
