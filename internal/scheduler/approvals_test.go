package scheduler

import (
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestReapRejectsUnapprovedJobs: the reaping pass rejects a job that waited for approval
// past its environment's timeout, and only then.
func TestReapRejectsUnapprovedJobs(t *testing.T) {
	t.Parallel()
	l, b := setup(t)
	if err := b.s.CreateProject(b.ctx, &store.Project{Name: "shop"}); err != nil {
		t.Fatal(err)
	}
	p, err := b.s.GetProjectByName(b.ctx, "shop")
	if err != nil {
		t.Fatal(err)
	}
	if err := b.s.PutEnvironment(b.ctx, &store.Environment{ProjectID: p.ID, Name: "production", RequiredApprovals: 1,
		Approvers: []string{"alice"}, ApprovalTimeout: time.Hour}); err != nil {
		t.Fatal(err)
	}
	plan, err := pipeline.Compile([]byte("jobs: {deploy: {environment: production, steps: [{run: x}]}}"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, jobs, _, err := b.s.CreateRun(b.ctx, store.CreateRunParams{Project: "shop", Plan: plan, Trigger: store.Trigger{Branch: "main"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		advance time.Duration
		want    store.JobStatus
	}{{59 * time.Minute, store.JobWaitingApproval}, {2 * time.Minute, store.JobFailed}} {
		b.clk.Advance(step.advance)
		if _, err := l.Reap(b.ctx); err != nil {
			t.Fatal(err)
		}
		j, err := b.s.GetJob(b.ctx, jobs[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != step.want {
			t.Fatalf("after %s more: %s, want %s", step.advance, j.Status, step.want)
		}
		if j.Status == store.JobFailed && j.FailureKind != store.FailureRejected {
			t.Errorf("failure kind %q, want rejected", j.FailureKind)
		}
	}
}

func TestWhyApproval(t *testing.T) {
	t.Parallel()
	j := &store.Job{Status: store.JobWaitingApproval}
	tests := []struct {
		in   WaitInput
		want string
	}{
		{WaitInput{RequiredApprovals: 2}, "waiting for approval (0 of 2)"},
		{WaitInput{RequiredApprovals: 2, Approvals: []*store.Approval{{Approver: "alice", Decision: store.Approved}}},
			"waiting for approval (1 of 2: alice approved)"},
		{WaitInput{RequiredApprovals: 3, Approvals: []*store.Approval{{Approver: "alice", Decision: store.Approved}, {Approver: "bob", Decision: store.Approved}}},
			"waiting for approval (2 of 3: alice, bob approved)"},
		{WaitInput{}, "waiting for approval (0 of 1)"},
	}
	for _, tt := range tests {
		w, ok := Why(j, tt.in)
		if !ok || w.Code != WaitApproval || w.Message != tt.want {
			t.Errorf("Why(%+v) = %+v, %v; want %q", tt.in, w, ok, tt.want)
		}
	}
}
