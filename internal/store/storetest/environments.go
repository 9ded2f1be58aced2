package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var environmentTests = []test{
	{"CRUD", testEnvironmentCRUD},
	{"ApproveN", testApproveN},
	{"RejectAfterNeeds", testRejectAfterNeeds},
	{"Timeout", testApprovalTimeout},
	{"Cancel", testCancelWaitingApproval},
	{"ConcurrencyGroup", testApprovalAndGroup},
	{"RefNotAllowed", testRefNotAllowed},
	{"Undefined", testUndefinedEnvironment},
	{"RetryWaitsAgain", testRetryWaitsAgain},
	{"Roles", testApproverRoles},
	{"PreventSelfReview", testPreventSelfReview},
}

const envProject = "shop"

// deployYAML is one job deploying to production.
const deployYAML = "name: deploy\njobs:\n  deploy:\n    environment: production\n    steps: [{run: \"true\"}]\n"

// putEnv creates the project (first call) and stores its environment.
func (b *bundle) putEnv(env store.Environment) uuid.UUID {
	b.t.Helper()
	if _, err := b.s.GetProjectByName(b.ctx, envProject); errors.Is(err, store.ErrNotFound) {
		b.project(envProject)
	}
	env.ProjectID = b.projectID(envProject)
	if err := b.s.PutEnvironment(b.ctx, &env); err != nil {
		b.t.Fatalf("PutEnvironment(%s): %v", env.Name, err)
	}
	return env.ProjectID
}

func (b *bundle) createIn(yaml string, tr store.Trigger) (*store.Run, []*store.Job) {
	b.t.Helper()
	return b.createRun(yaml, store.CreateRunParams{Project: envProject, Trigger: tr})
}

func (b *bundle) decide(id uuid.UUID, who string, d store.Decision) (*store.Job, error) {
	b.t.Helper()
	return b.s.DecideJob(b.ctx, store.DecideJobParams{JobID: id, Approver: who, Role: store.RoleWrite, Decision: d, Comment: "by " + who})
}

func testEnvironmentCRUD(t *testing.T, h Harness) {
	_, b := setup(t, h)
	pid := b.putEnv(store.Environment{Name: "production", Branches: []string{"main", "release/*"}, Tags: []string{"v*"},
		RequiredApprovals: 2, Approvers: []string{"alice", "role:admin"}, ApprovalTimeout: time.Hour})
	b.putEnv(store.Environment{Name: "staging"})
	got, err := b.s.GetEnvironment(b.ctx, pid, "production")
	if err != nil {
		t.Fatalf("GetEnvironment: %v", err)
	}
	if got.RequiredApprovals != 2 || len(got.Branches) != 2 || got.Tags[0] != "v*" || got.Approvers[1] != "role:admin" ||
		got.ApprovalTimeout != time.Hour || !got.CreatedAt.Equal(epoch) {
		t.Errorf("GetEnvironment = %+v", got)
	}
	b.clk.Advance(time.Minute)
	b.putEnv(store.Environment{Name: "production", RequiredApprovals: 1, Approvers: []string{"bob"}})
	got, _ = b.s.GetEnvironment(b.ctx, pid, "production")
	if got.RequiredApprovals != 1 || len(got.Branches) != 0 || got.Branches == nil || !got.CreatedAt.Equal(epoch) || !got.UpdatedAt.Equal(epoch.Add(time.Minute)) {
		t.Errorf("after replace: %+v; want the new rules, empty lists, the first CreatedAt", got)
	}
	list, err := b.s.ListEnvironments(b.ctx, pid)
	if err != nil || len(list) != 2 || list[0].Name != "production" || list[1].Name != "staging" {
		t.Errorf("ListEnvironments = %v, %v", list, err)
	}
	for _, bad := range []store.Environment{
		{Name: "x", Branches: []string{"[a"}},
		{Name: "x", RequiredApprovals: -1},
		{Name: "x", RequiredApprovals: 1},
		{Name: "x", Approvers: []string{"role:owner"}},
		{Name: "x", ApprovalTimeout: -time.Second},
		{Name: "no spaces"},
	} {
		bad.ProjectID = pid
		if err := b.s.PutEnvironment(b.ctx, &bad); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutEnvironment(%+v) = %v; want ErrInvalid", bad, err)
		}
	}
	if err := b.s.PutEnvironment(b.ctx, &store.Environment{ProjectID: uuid.New(), Name: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PutEnvironment of an unknown project = %v; want ErrNotFound", err)
	}
	if err := b.s.DeleteEnvironment(b.ctx, pid, "staging"); err != nil {
		t.Fatalf("DeleteEnvironment: %v", err)
	}
	if err := b.s.DeleteEnvironment(b.ctx, pid, "staging"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second DeleteEnvironment = %v; want ErrNotFound", err)
	}
	if _, err := b.s.GetEnvironment(b.ctx, pid, "staging"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetEnvironment after delete = %v; want ErrNotFound", err)
	}
}

// testApproveN: a root job waits until two distinct approvers approved; the same
// approver twice counts once, and someone not named may not decide.
func testApproveN(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.putEnv(store.Environment{Name: "production", RequiredApprovals: 2, Approvers: []string{"alice", "bob"}})
	_, jobs := b.createIn(deployYAML, store.Trigger{Branch: "main"})
	id := jobs[0].ID
	if jobs[0].Status != store.JobWaitingApproval {
		t.Fatalf("CreateRun returned the job %s; want waiting_approval", jobs[0].Status)
	}
	b.expectNoClaim(store.ClaimParams{})
	for _, who := range []string{"alice", "alice"} {
		if j, err := b.decide(id, who, store.Approved); err != nil || j.Status != store.JobWaitingApproval {
			t.Fatalf("approval by %s: %v, %v; want still waiting", who, j, err)
		}
	}
	if _, err := b.decide(id, "mallory", store.Approved); !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("approval by someone not named = %v; want ErrForbidden", err)
	}
	if _, err := b.decide(id, "mallory", store.Rejected); !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("rejection by someone not named = %v; want ErrForbidden", err)
	}
	b.expectNoClaim(store.ClaimParams{})
	j, err := b.decide(id, "bob", store.Approved)
	if err != nil || j.Status != store.JobQueued {
		t.Fatalf("second approver: %v, %v; want queued", j, err)
	}
	as, err := b.s.ListApprovals(b.ctx, id)
	if err != nil || len(as) != 2 || as[0].Approver != "alice" || as[1].Approver != "bob" || as[1].Decision != store.Approved || as[1].Comment != "by bob" {
		t.Fatalf("ListApprovals = %v, %v; want alice and bob", as, err)
	}
	if _, err := b.decide(id, "bob", store.Rejected); !errors.Is(err, store.ErrConflict) {
		t.Errorf("deciding a queued job = %v; want ErrConflict", err)
	}
	if _, err := b.decide(uuid.New(), "bob", store.Approved); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deciding an unknown job = %v; want ErrNotFound", err)
	}
	c := b.claimOne()
	if c.Job.ID != id || c.Job.Spec.Environment == nil || c.Job.Spec.Environment.Name != "production" {
		t.Fatalf("claimed %+v; want the approved job naming its environment", c.Job)
	}
}

// testRejectAfterNeeds: a job becomes waiting when its needs are done; one rejection
// fails it with the approver named, and the run fails.
func testRejectAfterNeeds(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.putEnv(store.Environment{Name: "production", RequiredApprovals: 1, Approvers: []string{"alice", "bob"}})
	run, _ := b.createIn(`
name: ship
jobs:
  build: {steps: [{run: "true"}]}
  deploy: {needs: [build], environment: production, steps: [{run: "true"}]}
  notify: {needs: [deploy], steps: [{run: "true"}]}
`, store.Trigger{Branch: "main"})
	c := b.claimOne()
	if c.Job.Key != "build" {
		t.Fatalf("claimed %s first; want build", c.Job.Key)
	}
	b.complete(c, store.JobSuccess)
	byKey := b.jobsByKey(run.ID)
	if byKey["deploy"].Status != store.JobWaitingApproval {
		t.Fatalf("deploy after build = %s; want waiting_approval", byKey["deploy"].Status)
	}
	b.expectNoClaim(store.ClaimParams{})
	j, err := b.decide(byKey["deploy"].ID, "bob", store.Rejected)
	if err != nil || j.Status != store.JobFailed || j.FailureKind != store.FailureRejected || j.Reason != "rejected by bob" {
		t.Fatalf("rejected deploy = %+v, %v; want failed, rejected, \"rejected by bob\"", j, err)
	}
	byKey = b.jobsByKey(run.ID)
	if byKey["notify"].Status != store.JobSkipped {
		t.Errorf("notify after a rejected deploy = %s; want skipped", byKey["notify"].Status)
	}
	b.wantRunDone(run.ID, store.RunFailed)
}

func testApprovalTimeout(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.putEnv(store.Environment{Name: "production", RequiredApprovals: 1, Approvers: []string{"alice"}, ApprovalTimeout: time.Hour})
	run, jobs := b.createIn(deployYAML, store.Trigger{Branch: "main"})
	b.clk.Advance(59 * time.Minute)
	if n, err := b.s.ExpireApprovals(b.ctx); err != nil || n != 0 {
		t.Fatalf("ExpireApprovals before the timeout = %d, %v; want 0", n, err)
	}
	b.clk.Advance(2 * time.Minute)
	if n, err := b.s.ExpireApprovals(b.ctx); err != nil || n != 1 {
		t.Fatalf("ExpireApprovals after the timeout = %d, %v; want 1", n, err)
	}
	j := b.wantJobStatus(jobs[0].ID, store.JobFailed)
	if j.FailureKind != store.FailureRejected || j.Reason == "" {
		t.Errorf("timed-out job: kind %q reason %q; want rejected with a reason", j.FailureKind, j.Reason)
	}
	if _, err := b.decide(j.ID, "alice", store.Approved); !errors.Is(err, store.ErrConflict) {
		t.Errorf("approving after the timeout = %v; want ErrConflict", err)
	}
	if n, _ := b.s.ExpireApprovals(b.ctx); n != 0 {
		t.Errorf("ExpireApprovals again = %d; want 0", n)
	}
	b.wantRunDone(run.ID, store.RunFailed)

	// The default timeout is a day.
	_, b2 := setup(t, h)
	b2.putEnv(store.Environment{Name: "production", RequiredApprovals: 1, Approvers: []string{"alice"}})
	_, jobs = b2.createIn(deployYAML, store.Trigger{Branch: "main"})
	b2.clk.Advance(23 * time.Hour)
	if n, _ := b2.s.ExpireApprovals(b2.ctx); n != 0 {
		t.Errorf("ExpireApprovals after 23h with the default timeout = %d; want 0", n)
	}
	b2.clk.Advance(2 * time.Hour)
	if n, _ := b2.s.ExpireApprovals(b2.ctx); n != 1 {
		t.Errorf("ExpireApprovals after 25h with the default timeout = %d; want 1", n)
	}
	b2.wantJobStatus(jobs[0].ID, store.JobFailed)
}

func testCancelWaitingApproval(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.putEnv(store.Environment{Name: "production", RequiredApprovals: 1, Approvers: []string{"alice"}})
	run, jobs := b.createIn(deployYAML, store.Trigger{Branch: "main"})
	if err := b.s.CancelJob(b.ctx, jobs[0].ID); err != nil {
		t.Fatalf("CancelJob of a waiting job: %v", err)
	}
	b.wantJobStatus(jobs[0].ID, store.JobCancelled)
	b.wantRunDone(run.ID, store.RunCancelled)

	run, jobs = b.createIn(deployYAML, store.Trigger{Branch: "main"})
	if err := b.s.CancelRun(b.ctx, run.ID); err != nil {
		t.Fatalf("CancelRun with a waiting job: %v", err)
	}
	b.wantJobStatus(jobs[0].ID, store.JobCancelled)
	b.wantRunDone(run.ID, store.RunCancelled)
	if n, _ := b.s.ExpireApprovals(b.ctx); n != 0 {
		t.Errorf("ExpireApprovals found %d cancelled jobs", n)
	}
}

// testApprovalAndGroup: approval and a concurrency group compose: an approved deploy
// still waits for the group's holder to end.
func testApprovalAndGroup(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.putEnv(store.Environment{Name: "production", RequiredApprovals: 1, Approvers: []string{"alice"}})
	const grouped = "name: d\njobs:\n  deploy:\n    environment: production\n    concurrency: {group: prod}\n    steps: [{run: \"true\"}]\n"
	b.createIn("name: h\njobs:\n  hold:\n    concurrency: {group: prod}\n    steps: [{run: \"true\"}]\n", store.Trigger{Branch: "main"})
	holder := b.claimOne()
	_, jobs := b.createIn(grouped, store.Trigger{Branch: "main"})
	b.expectNoClaim(store.ClaimParams{})
	if j, err := b.decide(jobs[0].ID, "alice", store.Approved); err != nil || j.Status != store.JobQueued {
		t.Fatalf("approve: %v, %v", j, err)
	}
	b.expectNoClaim(store.ClaimParams{})
	b.complete(holder, store.JobSuccess)
	if c := b.claimOne(); c.Job.ID != jobs[0].ID {
		t.Fatalf("after the holder ended claimed %s; want the approved deploy", c.Job.Key)
	}
}

func testRefNotAllowed(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.putEnv(store.Environment{Name: "production", Branches: []string{"main", "release/*"}, Tags: []string{"v*"}})
	tests := []struct {
		tr     store.Trigger
		want   store.JobStatus
		reason string
	}{
		{store.Trigger{Branch: "dev", Verified: store.RefFromWebhook}, store.JobFailed, "branch dev may not deploy to production"},
		{store.Trigger{Tag: "nightly", Verified: store.RefFromWebhook}, store.JobFailed, "tag nightly may not deploy to production"},
		{store.Trigger{Verified: store.RefFromAdmin}, store.JobFailed, "a run with no branch or tag may not deploy to production"},
		{store.Trigger{Branch: "main", Verified: store.RefFromWebhook}, store.JobQueued, ""},
		{store.Trigger{Branch: "release/2.0", Verified: store.RefFromRepository}, store.JobQueued, ""},
		{store.Trigger{Tag: "v1.2.0", Verified: store.RefFromAdmin}, store.JobQueued, ""},
		// A ref nobody verified satisfies no rule, however well it matches.
		{store.Trigger{Ref: "refs/heads/main", Branch: "main", Event: "api"}, store.JobFailed, unverifiedMain},
		{store.Trigger{Tag: "v1.2.0"}, store.JobFailed,
			"tag v1.2.0 is not verified (it came from no signed webhook, no read of the repository and no admin) and may not deploy to production"},
		{store.Trigger{Branch: "main", Verified: "forged"}, store.JobFailed, unverifiedMain},
		{store.Trigger{Branch: "dev"}, store.JobFailed, "branch dev may not deploy to production"},
	}
	for _, tt := range tests {
		run, jobs := b.createIn(deployYAML, tt.tr)
		j := b.getJob(jobs[0].ID)
		if j.Status != tt.want || j.Reason != tt.reason {
			t.Errorf("trigger %+v: job %s (%q); want %s (%q)", tt.tr, j.Status, j.Reason, tt.want, tt.reason)
		}
		if tt.want == store.JobFailed {
			if j.FailureKind != store.FailureNotAllowed {
				t.Errorf("trigger %+v: failure kind %q; want not_allowed", tt.tr, j.FailureKind)
			}
			b.wantRunDone(run.ID, store.RunFailed)
		}
	}
	// A job that needs another is stopped when its needs are done.
	const needs = "name: n\njobs:\n  a: {steps: [{run: \"true\"}]}\n  deploy: {needs: [a], environment: production, steps: [{run: \"true\"}]}\n"
	run, _ := b.createIn(needs, store.Trigger{Branch: "dev", Verified: store.RefFromWebhook})
	b.drive(run.ID, nil)
	if j := b.jobsByKey(run.ID)["deploy"]; j.Status != store.JobFailed || j.Reason != "branch dev may not deploy to production" {
		t.Errorf("deploy after its need on dev = %s (%q)", j.Status, j.Reason)
	}
	run, _ = b.createIn(needs, store.Trigger{Branch: "main"})
	b.drive(run.ID, nil)
	if j := b.jobsByKey(run.ID)["deploy"]; j.Status != store.JobFailed || j.FailureKind != store.FailureNotAllowed || j.Reason != unverifiedMain {
		t.Errorf("deploy after its need on an unverified main = %s %s (%q)", j.Status, j.FailureKind, j.Reason)
	}
	// The run keeps what it was told, marked as not verified, for everyone to see.
	if got := b.getRun(run.ID).Trigger; got.Branch != "main" || got.RefVerified() {
		t.Errorf("the run's trigger = %+v; want branch main, not verified", got)
	}
}

const unverifiedMain = "branch main is not verified (it came from no signed webhook, no read of the repository and no admin) and may not deploy to production"

// testUndefinedEnvironment: an environment the project does not define imposes nothing.
func testUndefinedEnvironment(t *testing.T, h Harness) {
	_, b := setup(t, h)
	_, jobs := b.createRun(deployYAML, store.CreateRunParams{Trigger: store.Trigger{Branch: "dev"}})
	if jobs[0].Status != store.JobQueued {
		t.Fatalf("job of an undefined environment = %s; want queued", jobs[0].Status)
	}
}

// testRetryWaitsAgain: a rejected deploy retried waits for a fresh approval; the
// decisions on its earlier wait do not count.
func testRetryWaitsAgain(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.putEnv(store.Environment{Name: "production", RequiredApprovals: 2, Approvers: []string{"alice", "bob"}})
	_, jobs := b.createIn(deployYAML, store.Trigger{Branch: "main"})
	id := jobs[0].ID
	if _, err := b.decide(id, "alice", store.Approved); err != nil {
		t.Fatal(err)
	}
	if _, err := b.decide(id, "bob", store.Rejected); err != nil {
		t.Fatal(err)
	}
	if err := b.s.RetryJob(b.ctx, id); err != nil {
		t.Fatalf("RetryJob: %v", err)
	}
	b.wantJobStatus(id, store.JobWaitingApproval)
	if as, _ := b.s.ListApprovals(b.ctx, id); len(as) != 0 {
		t.Errorf("ListApprovals of the new wait = %v; want none", as)
	}
	if j, _ := b.decide(id, "bob", store.Approved); j == nil || j.Status != store.JobWaitingApproval {
		t.Fatalf("one approval of the new wait: %v; want still waiting (alice's earlier one does not count)", j)
	}
	if j, _ := b.decide(id, "alice", store.Approved); j == nil || j.Status != store.JobQueued {
		t.Fatalf("two approvals of the new wait: %v; want queued", j)
	}
}

func testApproverRoles(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.putEnv(store.Environment{Name: "production", RequiredApprovals: 1, Approvers: []string{"role:admin"}})
	_, jobs := b.createIn(deployYAML, store.Trigger{Branch: "main"})
	id := jobs[0].ID
	p := store.DecideJobParams{JobID: id, Approver: "ci", Role: store.RoleWrite, Decision: store.Approved}
	if _, err := b.s.DecideJob(b.ctx, p); !errors.Is(err, store.ErrForbidden) {
		t.Fatalf("a write token approving for role:admin = %v; want ErrForbidden", err)
	}
	p.Role = store.RoleAdmin
	if j, err := b.s.DecideJob(b.ctx, p); err != nil || j.Status != store.JobQueued {
		t.Fatalf("an admin approving for role:admin = %v, %v; want queued", j, err)
	}
	// With auth off anyone decides.
	_, jobs = b.createIn(deployYAML, store.Trigger{Branch: "main"})
	p = store.DecideJobParams{JobID: jobs[0].ID, Approver: "anonymous", Anyone: true, Decision: store.Approved}
	if j, err := b.s.DecideJob(b.ctx, p); err != nil || j.Status != store.JobQueued {
		t.Fatalf("an anonymous approval with auth off = %v, %v; want queued", j, err)
	}
	if _, err := b.s.DecideJob(b.ctx, store.DecideJobParams{JobID: id, Approver: "x", Decision: "maybe"}); !errors.Is(err, store.ErrInvalid) {
		t.Errorf("decision maybe = %v; want ErrInvalid", err)
	}
}

// testPreventSelfReview: an environment that prevents self-review refuses the approval of
// the run's author (its submitter, or for a webhook's run the forge account that pushed),
// but not their rejection, nor anyone else's approval; without it, as by default, the
// author approves their own run.
func testPreventSelfReview(t *testing.T, h Harness) {
	_, b := setup(t, h)
	pid := b.putEnv(store.Environment{Name: "production", RequiredApprovals: 1, Approvers: []string{"alice", "bob", "mona"},
		PreventSelfReview: true})
	if got, err := b.s.GetEnvironment(b.ctx, pid, "production"); err != nil || !got.PreventSelfReview {
		t.Fatalf("GetEnvironment = %+v, %v; want PreventSelfReview", got, err)
	}
	tests := []struct {
		name     string
		tr       store.Trigger
		approver string
		decision store.Decision
		refused  bool
	}{
		{"the submitter approves", store.Trigger{Branch: "main", User: "alice"}, "alice", store.Approved, true},
		{"another approves", store.Trigger{Branch: "main", User: "alice"}, "bob", store.Approved, false},
		{"the submitter rejects", store.Trigger{Branch: "main", User: "alice"}, "alice", store.Rejected, false},
		{"the pusher approves a webhook's run", store.Trigger{Branch: "main", Actor: "mona", Verified: store.RefFromWebhook}, "mona", store.Approved, true},
		{"a dispatcher's token name is not who they are", store.Trigger{Branch: "main", Actor: "mona", User: "alice"}, "mona", store.Approved, false},
		{"a run of nobody known", store.Trigger{Branch: "main"}, "alice", store.Approved, false},
	}
	for _, tt := range tests {
		_, jobs := b.createIn(deployYAML, tt.tr)
		j, err := b.decide(jobs[0].ID, tt.approver, tt.decision)
		if tt.refused {
			if !errors.Is(err, store.ErrForbidden) {
				t.Errorf("%s: %v, %v; want ErrForbidden", tt.name, j, err)
			}
			b.wantJobStatus(jobs[0].ID, store.JobWaitingApproval)
			continue
		}
		if want := map[store.Decision]store.JobStatus{store.Approved: store.JobQueued, store.Rejected: store.JobFailed}[tt.decision]; err != nil || j.Status != want {
			t.Errorf("%s: %v, %v; want %s", tt.name, j, err, want)
		}
	}

	b.putEnv(store.Environment{Name: "production", RequiredApprovals: 1, Approvers: []string{"alice"}})
	if got, _ := b.s.GetEnvironment(b.ctx, pid, "production"); got.PreventSelfReview {
		t.Fatalf("replaced without PreventSelfReview: %+v", got)
	}
	_, jobs := b.createIn(deployYAML, store.Trigger{Branch: "main", User: "alice"})
	if j, err := b.decide(jobs[0].ID, "alice", store.Approved); err != nil || j.Status != store.JobQueued {
		t.Errorf("self-approval where it is allowed: %v, %v; want queued", j, err)
	}
}
