package store

import "testing"

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
