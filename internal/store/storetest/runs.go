package storetest

import (
	"bytes"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var createRunTests = []test{
	{"StoresRunJobsAndSteps", testCreateRunStores},
	{"JobAttributesFromPlan", testCreateRunJobAttributes},
	{"DefaultProject", testCreateRunDefaultProject},
	{"IdempotencyKey", testCreateRunIdempotencyKey},
	{"IdempotencyKeyRace", testCreateRunIdempotencyKeyRace},
	{"PriorityOverride", testCreateRunPriorityOverride},
	{"NilPlanInvalid", testCreateRunNilPlan},
	{"RunValuesPutIn", testCreateRunRunValues},
	{"UnknownIDsNotFound", testUnknownIDs},
}

var listRunsTests = []test{
	{"FiltersAndPages", testListRunsFiltersAndPages},
	{"DefaultLimit", testListRunsDefaultLimit},
	{"BranchEventActor", testListRunsBranchEventActor},
	{"Digest", testDigestRuns},
}

const diamondYAML = `
name: diamond
jobs:
  a:
    steps:
      - { name: first, run: echo a1 }
      - { name: second, run: echo a2 }
  b:
    steps:
      - run: echo b
  c:
    needs: [a, b]
    steps:
      - run: echo c
  d:
    needs: [c]
    steps:
      - run: echo d
`

func testCreateRunStores(t *testing.T, h Harness) {
	_, b := setup(t, h)
	plan := compile(t, diamondYAML)
	trigger := store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: "abc123", Event: "push", Actor: "ada"}
	env := map[string]string{"GREETING": "hello", "EMPTY": ""}
	run, jobs, created, err := b.s.CreateRun(b.ctx, store.CreateRunParams{
		Project:        "web",
		Trigger:        trigger,
		IdempotencyKey: "key-1",
		Definition:     []byte(diamondYAML),
		Env:            env,
		Plan:           plan,
	})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	if !created {
		t.Errorf("created = false, want true")
	}

	check := func(what string, r *store.Run) {
		t.Helper()
		if r.ID == uuid.Nil || r.ProjectID == uuid.Nil {
			t.Errorf("%s: ID %s, ProjectID %s: want both set", what, r.ID, r.ProjectID)
		}
		if r.Project != "web" || r.Name != "diamond" || r.IdempotencyKey != "key-1" {
			t.Errorf("%s: project %q name %q key %q, want web, diamond, key-1", what, r.Project, r.Name, r.IdempotencyKey)
		}
		if r.Status != store.RunPending {
			t.Errorf("%s: status %s, want pending", what, r.Status)
		}
		if r.Trigger != trigger {
			t.Errorf("%s: trigger %+v, want %+v", what, r.Trigger, trigger)
		}
		if !maps.Equal(r.Env, env) {
			t.Errorf("%s: env %v, want %v", what, r.Env, env)
		}
		if def, err := b.s.RunDefinition(b.ctx, r.ID); err != nil || !bytes.Equal(def, []byte(diamondYAML)) {
			t.Errorf("%s: RunDefinition = %q, %v; want the definition as submitted", what, def, err)
		}
		if r.JobsTotal != 4 || r.JobsFinished != 0 || r.CancelRequested {
			t.Errorf("%s: JobsTotal %d JobsFinished %d CancelRequested %v, want 4, 0, false", what, r.JobsTotal, r.JobsFinished, r.CancelRequested)
		}
		wantTime(t, what+" CreatedAt", r.CreatedAt, epoch)
		wantTime(t, what+" StartedAt", r.StartedAt, timeZero)
		wantTime(t, what+" FinishedAt", r.FinishedAt, timeZero)
	}
	check("CreateRun", run)
	check("GetRun", b.getRun(run.ID))

	wantKeys := []string{"a", "b", "c", "d"}
	wantStatus := map[string]store.JobStatus{"a": store.JobQueued, "b": store.JobQueued, "c": store.JobPending, "d": store.JobPending}
	checkJobs := func(what string, js []*store.Job) {
		t.Helper()
		if len(js) != len(wantKeys) {
			t.Fatalf("%s: %d jobs, want %d", what, len(js), len(wantKeys))
		}
		for i, j := range js {
			if j.Key != wantKeys[i] {
				t.Errorf("%s: job %d is %q, want %q (plan order)", what, i, j.Key, wantKeys[i])
			}
			if j.ID == uuid.Nil || j.RunID != run.ID || j.ProjectID != run.ProjectID {
				t.Errorf("%s %q: ID %s RunID %s ProjectID %s, want set, %s, %s", what, j.Key, j.ID, j.RunID, j.ProjectID, run.ID, run.ProjectID)
			}
			if j.Status != wantStatus[j.Key] {
				t.Errorf("%s %q: status %s, want %s", what, j.Key, j.Status, wantStatus[j.Key])
			}
			if j.Name != j.Key || j.Priority != pipeline.PriorityNormal {
				t.Errorf("%s %q: name %q priority %q, want %q, normal", what, j.Key, j.Name, j.Priority, j.Key)
			}
			if j.Attempt != 0 || j.Redeliveries != 0 || j.MaxAttempts != 1 {
				t.Errorf("%s %q: attempt %d redeliveries %d max attempts %d, want 0, 0, 1", what, j.Key, j.Attempt, j.Redeliveries, j.MaxAttempts)
			}
			if j.LeaseToken != "" || j.WorkerID != "" || j.CancelRequested || j.ExitCode != nil || j.FailureKind != store.FailureNone {
				t.Errorf("%s %q: a new job carries lease/worker/cancel/exit/failure state: %s", what, j.Key, jobState(j))
			}
			wantTime(t, what+" "+j.Key+" CreatedAt", j.CreatedAt, epoch)
			if j.Status == store.JobQueued {
				wantTime(t, what+" "+j.Key+" QueuedAt", j.QueuedAt, epoch)
			} else {
				wantTime(t, what+" "+j.Key+" QueuedAt", j.QueuedAt, timeZero)
			}
			if j.Spec == nil {
				t.Errorf("%s %q: Spec is nil", what, j.Key)
				continue
			}
			pj := plan.Job(j.Key)
			if j.Spec.Key != pj.Key || !slices.Equal(j.Spec.Needs, pj.Needs) || len(j.Spec.Steps) != len(pj.Steps) {
				t.Errorf("%s %q: Spec does not round-trip the planned job: %+v", what, j.Key, j.Spec)
			}
		}
	}
	checkJobs("CreateRun", jobs)
	checkJobs("ListJobs", b.listJobs(run.ID))
	for _, j := range jobs {
		got := b.getJob(j.ID)
		if got.Key != j.Key || got.Status != j.Status {
			t.Errorf("GetJob(%q) = %q %s, want %q %s", j.Key, got.Key, got.Status, j.Key, j.Status)
		}

		steps := b.listSteps(j.ID)
		planned := plan.Job(j.Key).Steps
		if len(steps) != len(planned) {
			t.Errorf("job %q: %d steps, want %d", j.Key, len(steps), len(planned))
			continue
		}
		for i, s := range steps {
			if s.JobID != j.ID || s.Index != i || s.Name != planned[i].Name || s.Status != store.StepPending {
				t.Errorf("job %q step %d: job %s index %d name %q status %s, want %s, %d, %q, pending",
					j.Key, i, s.JobID, s.Index, s.Name, s.Status, j.ID, i, planned[i].Name)
			}
			if s.ExitCode != nil || !s.StartedAt.IsZero() || !s.FinishedAt.IsZero() || s.OnceSucceeded {
				t.Errorf("job %q step %d: a new step carries progress: %s", j.Key, i, stepsState([]*store.Step{s}))
			}
		}
	}
}

func testCreateRunJobAttributes(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const yaml = `
name: attrs
jobs:
  deploy:
    runs_on: [linux, gpu]
    resources: { cpu: 2, memory: 4Gi }
    priority: high
    timeout: 10m
    concurrency: { group: production }
    retry: { max_attempts: 4, backoff: 5s, on: [failure, lost] }
    if: branch == "main"
    env: { TARGET: prod }
    steps:
      - { name: migrate, run: ./migrate, once: true }
      - { name: roll, run: ./roll }
`
	_, jobs := b.createRun(yaml, store.CreateRunParams{Trigger: store.Trigger{Branch: "main"}})
	for _, j := range []*store.Job{jobs[0], b.getJob(jobs[0].ID)} {
		if !slices.Equal(sortedCopy(j.Labels), []string{"gpu", "linux"}) {
			t.Errorf("Labels = %v, want [linux gpu]", j.Labels)
		}
		if j.MilliCPU != 2000 || j.Memory != 4<<30 {
			t.Errorf("MilliCPU %d Memory %d, want 2000, %d", j.MilliCPU, j.Memory, int64(4<<30))
		}
		if j.Priority != pipeline.PriorityHigh || j.MaxAttempts != 4 || j.ConcurrencyGroup != "production" {
			t.Errorf("priority %q max attempts %d group %q, want high, 4, production", j.Priority, j.MaxAttempts, j.ConcurrencyGroup)
		}
		s := j.Spec
		if s == nil {
			t.Fatal("Spec is nil")
		}
		if s.Timeout != pipeline.Duration(10*time.Minute) || s.Retry.MaxAttempts != 4 || !s.Retry.Retries(pipeline.FailureLost) ||
			s.Retry.Retries(pipeline.FailureTimeout) || s.Env["TARGET"] != "prod" || len(s.Steps) != 2 || !s.Steps[0].Once ||
			s.Steps[1].Run != "./roll" || s.If == nil || s.If.Source != `branch == "main"` {
			t.Errorf("Spec does not round-trip the planned job: %+v", s)
		}
	}
}

func testCreateRunDefaultProject(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(singleJob)
	if run.Project != "default" {
		t.Errorf("Project = %q, want default", run.Project)
	}
	other, _ := b.createRun(singleJob, store.CreateRunParams{Project: "default"})
	if other.ProjectID != run.ProjectID {
		t.Errorf("project \"\" and \"default\" have different ids %s and %s", run.ProjectID, other.ProjectID)
	}
	third, _ := b.createRun(singleJob, store.CreateRunParams{Project: "elsewhere"})
	if third.ProjectID == run.ProjectID {
		t.Errorf("projects default and elsewhere share id %s", run.ProjectID)
	}
	rs, err := b.s.ListRuns(b.ctx, store.ListRunsParams{Project: "default"})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if got, want := runIDs(rs), []uuid.UUID{other.ID, run.ID}; !slices.Equal(got, want) {
		t.Errorf("ListRuns(default) = %v, want %v", got, want)
	}
}

func testCreateRunIdempotencyKey(t *testing.T, h Harness) {
	_, b := setup(t, h)
	first, firstJobs := b.createRun(diamondYAML, store.CreateRunParams{Project: "p", IdempotencyKey: "k"})

	b.clk.Advance(time.Second)
	again, againJobs, created, err := b.s.CreateRun(b.ctx, store.CreateRunParams{
		Project: "p", IdempotencyKey: "k", Plan: compile(t, diamondYAML), Definition: []byte(diamondYAML),
	})
	if err != nil {
		t.Fatalf("CreateRun with a repeated key: %v", err)
	}
	if created {
		t.Errorf("created = true for a repeated idempotency key")
	}
	if again == nil || again.ID != first.ID {
		t.Fatalf("repeated key returned run %v, want the existing %s", again, first.ID)
	}
	wantTime(t, "existing run CreatedAt", again.CreatedAt, epoch)
	if !slices.Equal(jobIDs(againJobs), jobIDs(firstJobs)) {
		t.Errorf("repeated key returned jobs %v, want the existing %v", jobIDs(againJobs), jobIDs(firstJobs))
	}

	// A different plan under the same key still returns the existing run.
	other, _, created, err := b.s.CreateRun(b.ctx, store.CreateRunParams{
		Project: "p", IdempotencyKey: "k", Plan: compile(t, singleJob), Definition: []byte(singleJob),
	})
	if err != nil || created || other.ID != first.ID {
		t.Errorf("repeated key with another plan: run %v created %v err %v, want %s, false, nil", other, created, err, first.ID)
	}

	rs, err := b.s.ListRuns(b.ctx, store.ListRunsParams{Project: "p"})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if len(rs) != 1 {
		t.Errorf("project p has %d runs after repeated keys, want 1", len(rs))
	}
	if n := len(b.listJobs(first.ID)); n != 4 {
		t.Errorf("run has %d jobs after repeated keys, want 4", n)
	}

	// The same key in another project is another run.
	q, _ := b.createRun(diamondYAML, store.CreateRunParams{Project: "q", IdempotencyKey: "k"})
	if q.ID == first.ID {
		t.Errorf("key k in project q returned project p's run")
	}
	// No key: every call creates.
	n1, _ := b.createRun(singleJob, store.CreateRunParams{Project: "p"})
	n2, _ := b.createRun(singleJob, store.CreateRunParams{Project: "p"})
	if n1.ID == n2.ID {
		t.Errorf("two runs without a key share id %s", n1.ID)
	}
	// The repeats queued nothing: a and b of p and q, and the two keyless runs' jobs.
	if got := len(b.claimAll()); got != 6 {
		t.Errorf("%d jobs claimable, want 6", got)
	}
}

func testCreateRunIdempotencyKeyRace(t *testing.T, h Harness) {
	_, b := setup(t, h)
	plan := compile(t, diamondYAML)
	const callers = 8
	type result struct {
		run     *store.Run
		jobs    []*store.Job
		created bool
		err     error
	}
	results := make([]result, callers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() {
			<-start
			r, js, created, err := b.s.CreateRun(b.ctx, store.CreateRunParams{Project: "p", IdempotencyKey: "same", Plan: plan})
			results[i] = result{r, js, created, err}
		})
	}
	close(start)
	wg.Wait()

	createdN := 0
	var runID uuid.UUID
	var ids []uuid.UUID
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("caller %d: CreateRun: %v", i, r.err)
		}
		if r.created {
			createdN++
		}
		if runID == uuid.Nil {
			runID, ids = r.run.ID, jobIDs(r.jobs)
		}
		if r.run.ID != runID || !slices.Equal(jobIDs(r.jobs), ids) {
			t.Errorf("caller %d got run %s jobs %v, want %s %v", i, r.run.ID, jobIDs(r.jobs), runID, ids)
		}
	}
	if createdN != 1 {
		t.Errorf("%d of %d concurrent calls with one key report created, want exactly 1", createdN, callers)
	}
	rs, err := b.s.ListRuns(b.ctx, store.ListRunsParams{Project: "p"})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if len(rs) != 1 {
		t.Errorf("%d runs after concurrent calls with one key, want 1", len(rs))
	}
	if got := len(b.claimAll()); got != 2 {
		t.Errorf("%d jobs claimable, want 2 (a and b of the one run)", got)
	}
}

func testCreateRunPriorityOverride(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const yaml = `
name: lanes
jobs:
  low:
    priority: low
    steps: [ { run: "true" } ]
  plain:
    steps: [ { run: "true" } ]
  later:
    needs: [low]
    priority: high
    steps: [ { run: "true" } ]
`
	run, jobs := b.createRun(yaml, store.CreateRunParams{Priority: pipeline.PriorityCritical})
	for _, j := range append(jobs, b.listJobs(run.ID)...) {
		if j.Priority != pipeline.PriorityCritical {
			t.Errorf("job %q priority %q, want critical (overridden)", j.Key, j.Priority)
		}
	}
	_, jobs = b.create(yaml)
	want := map[string]pipeline.Priority{"low": pipeline.PriorityLow, "plain": pipeline.PriorityNormal, "later": pipeline.PriorityHigh}
	for _, j := range jobs {
		if j.Priority != want[j.Key] {
			t.Errorf("without override: job %q priority %q, want %q", j.Key, j.Priority, want[j.Key])
		}
	}
}

func testCreateRunNilPlan(t *testing.T, h Harness) {
	_, b := setup(t, h)
	_, _, _, err := b.s.CreateRun(b.ctx, store.CreateRunParams{Project: "p"})
	wantErr(t, "CreateRun without a plan", err, store.ErrInvalid)
	rs, err := b.s.ListRuns(b.ctx, store.ListRunsParams{})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if len(rs) != 0 {
		t.Errorf("%d runs after an invalid CreateRun, want 0", len(rs))
	}
}

func testUnknownIDs(t *testing.T, h Harness) {
	s, b := setup(t, h)
	id := store.NewID()
	_, err := s.GetRun(b.ctx, id)
	wantErr(t, "GetRun", err, store.ErrNotFound)
	_, err = s.GetJob(b.ctx, id)
	wantErr(t, "GetJob", err, store.ErrNotFound)
	_, err = s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: store.LeaseRef{JobID: id, Token: "t"}, Status: store.JobSuccess})
	wantErr(t, "CompleteJob", err, store.ErrNotFound)
	err = s.CancelRun(b.ctx, id)
	wantErr(t, "CancelRun", err, store.ErrNotFound)
	err = s.CancelJob(b.ctx, id)
	wantErr(t, "CancelJob", err, store.ErrNotFound)
	_, err = s.GetArtifact(b.ctx, id)
	wantErr(t, "GetArtifact", err, store.ErrNotFound)
	err = s.MarkArtifactStored(b.ctx, id)
	wantErr(t, "MarkArtifactStored", err, store.ErrNotFound)
	err = s.TouchWorker(b.ctx, "no-such-worker", store.WorkerIdle)
	wantErr(t, "TouchWorker", err, store.ErrNotFound)
	// A lease call on an unknown job has no current token to match.
	_, err = s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: store.LeaseRef{JobID: id, Token: "t"}, TTL: leaseTTL})
	wantErr(t, "Heartbeat", err, store.ErrNotFound, store.ErrLeaseLost)
}

func testListRunsFiltersAndPages(t *testing.T, h Harness) {
	_, b := setup(t, h)
	// Six runs, one second apart: even ones in p1 on main, odd ones in p2 on dev. Each
	// job carries its own label so that a test worker can pick it.
	var runs []*store.Run
	for i := range 6 {
		project, ref := "p1", "refs/heads/main"
		if i%2 == 1 {
			project, ref = "p2", "refs/heads/dev"
		}
		r, _ := b.createRun(labelledJob(fmt.Sprintf("run-%d", i)), store.CreateRunParams{Project: project, Trigger: store.Trigger{Ref: ref}})
		runs = append(runs, r)
		b.clk.Advance(time.Second)
	}
	// Runs 0 and 3 stay pending; 1 succeeds, 2 fails, 4 and 5 are running.
	for i, outcome := range map[int]store.JobStatus{1: store.JobSuccess, 2: store.JobFailed, 4: "", 5: ""} {
		cs := b.claim(store.ClaimParams{Labels: []string{fmt.Sprintf("run-%d", i)}})
		if len(cs) != 1 || cs[0].Job.RunID != runs[i].ID {
			t.Fatalf("claim for run %d: got %d jobs, want its one job", i, len(cs))
		}
		if outcome != "" {
			b.complete(cs[0], outcome)
		}
	}

	list := func(p store.ListRunsParams) []uuid.UUID {
		t.Helper()
		rs, err := b.s.ListRuns(b.ctx, p)
		if err != nil {
			t.Fatalf("ListRuns(%+v): %v", p, err)
		}
		return runIDs(rs)
	}
	pick := func(idx ...int) []uuid.UUID {
		out := []uuid.UUID{}
		for _, i := range idx {
			out = append(out, runs[i].ID)
		}
		return out
	}
	tests := []struct {
		name string
		p    store.ListRunsParams
		want []uuid.UUID
	}{
		{"all newest first", store.ListRunsParams{}, pick(5, 4, 3, 2, 1, 0)},
		{"project", store.ListRunsParams{Project: "p1"}, pick(4, 2, 0)},
		{"unknown project", store.ListRunsParams{Project: "nope"}, pick()},
		{"ref", store.ListRunsParams{Ref: "refs/heads/dev"}, pick(5, 3, 1)},
		{"status pending", store.ListRunsParams{Status: store.RunPending}, pick(3, 0)},
		{"status running", store.ListRunsParams{Status: store.RunRunning}, pick(5, 4)},
		{"status success", store.ListRunsParams{Status: store.RunSuccess}, pick(1)},
		{"status failed", store.ListRunsParams{Status: store.RunFailed}, pick(2)},
		{"project and status", store.ListRunsParams{Project: "p1", Status: store.RunRunning}, pick(4)},
		{"project and ref", store.ListRunsParams{Project: "p1", Ref: "refs/heads/dev"}, pick()},
		{"limit", store.ListRunsParams{Limit: 4}, pick(5, 4, 3, 2)},
		{"second page", store.ListRunsParams{Limit: 4, Before: runs[2].ID}, pick(1, 0)},
		{"before the oldest", store.ListRunsParams{Before: runs[0].ID}, pick()},
		{"page within a filter", store.ListRunsParams{Project: "p2", Limit: 1, Before: runs[5].ID}, pick(3)},
	}
	for _, tc := range tests {
		if got := list(tc.p); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ListRuns = %v, want %v", tc.name, got, tc.want)
		}
	}

	// Paging through everything two at a time visits every run once, newest first.
	var all []uuid.UUID
	var before uuid.UUID
	for range 10 {
		page := list(store.ListRunsParams{Limit: 2, Before: before})
		if len(page) == 0 {
			break
		}
		all = append(all, page...)
		before = page[len(page)-1]
	}
	if want := pick(5, 4, 3, 2, 1, 0); !slices.Equal(all, want) {
		t.Errorf("paging by 2 = %v, want %v", all, want)
	}

	// Listed runs carry their fields, not just ids.
	rs, err := b.s.ListRuns(b.ctx, store.ListRunsParams{Status: store.RunFailed})
	if err != nil || len(rs) != 1 {
		t.Fatalf("ListRuns(failed) = %d runs, %v", len(rs), err)
	}
	if r := rs[0]; r.Project != "p1" || r.Trigger.Ref != "refs/heads/main" || r.JobsTotal != 1 || r.JobsFinished != 1 {
		t.Errorf("listed run: project %q ref %q jobs %d/%d, want p1, refs/heads/main, 1/1", r.Project, r.Trigger.Ref, r.JobsFinished, r.JobsTotal)
	}
}

func testListRunsDefaultLimit(t *testing.T, h Harness) {
	_, b := setup(t, h)
	var last *store.Run
	for range 51 {
		last, _ = b.create(singleJob)
	}
	rs, err := b.s.ListRuns(b.ctx, store.ListRunsParams{})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	if len(rs) != 50 {
		t.Errorf("ListRuns without a limit returned %d runs, want the default 50", len(rs))
	}
	if len(rs) > 0 && rs[0].ID != last.ID {
		t.Errorf("first listed run is %s, want the newest %s", rs[0].ID, last.ID)
	}
}

// labelledJob is a one-job pipeline whose job runs only on workers with label.
func labelledJob(label string) string {
	return fmt.Sprintf(`
name: labelled
jobs:
  only:
    runs_on: [%q]
    steps:
      - run: "true"
`, label)
}

var timeZero time.Time

// testListRunsBranchEventActor: the trigger's branch, event and actor filter the list,
// alone and together, and CountRuns counts what the list would hold without its page.
func testListRunsBranchEventActor(t *testing.T, h Harness) {
	_, b := setup(t, h)
	triggers := []store.Trigger{
		{Branch: "main", Event: "push", Actor: "ada", Verified: store.RefFromWebhook},
		{Branch: "dev", Event: "push", Actor: "bob", Verified: store.RefFromWebhook},
		{Branch: "main", Event: "pull_request", Actor: "bob", Verified: store.RefFromWebhook},
		{Branch: "main", Event: "api", User: "carol", Actor: "ignored"},
	}
	var runs []*store.Run
	for i, tr := range triggers {
		r, _ := b.createRun(labelledJob(fmt.Sprintf("bea-%d", i)), store.CreateRunParams{Project: "bea", Trigger: tr})
		runs = append(runs, r)
		b.clk.Advance(time.Second)
	}
	// A run that failed before it had jobs is listed by the same rules.
	failed, _, err := b.s.CreateFailedRun(b.ctx, store.CreateFailedRunParams{Project: "bea", Name: "broken",
		Trigger: store.Trigger{Branch: "dev", Event: "push", Actor: "ada"}, Errors: []store.RunError{{Message: "bad"}}})
	if err != nil {
		t.Fatalf("CreateFailedRun: %v", err)
	}
	pick := func(idx ...int) []uuid.UUID {
		out := []uuid.UUID{}
		for _, i := range idx {
			if i == 4 {
				out = append(out, failed.ID)
				continue
			}
			out = append(out, runs[i].ID)
		}
		return out
	}
	tests := []struct {
		name string
		p    store.ListRunsParams
		want []uuid.UUID
	}{
		{"branch", store.ListRunsParams{Branch: "main"}, pick(3, 2, 0)},
		{"event", store.ListRunsParams{Event: "push"}, pick(4, 1, 0)},
		{"webhook actor", store.ListRunsParams{Actor: "bob"}, pick(2, 1)},
		{"user over actor", store.ListRunsParams{Actor: "carol"}, pick(3)},
		{"actor not the user's", store.ListRunsParams{Actor: "ignored"}, pick()},
		{"failed run's actor", store.ListRunsParams{Actor: "ada"}, pick(4, 0)},
		{"all three", store.ListRunsParams{Branch: "main", Event: "push", Actor: "ada"}, pick(0)},
		{"with a status", store.ListRunsParams{Branch: "dev", Status: store.RunFailed}, pick(4)},
		{"no match", store.ListRunsParams{Branch: "gone"}, pick()},
	}
	for _, tc := range tests {
		tc.p.Project = "bea"
		rs, err := b.s.ListRuns(b.ctx, tc.p)
		if err != nil {
			t.Fatalf("%s: ListRuns: %v", tc.name, err)
		}
		if got := runIDs(rs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: ListRuns = %v, want %v", tc.name, got, tc.want)
		}
		// The count ignores the page: a limit of 1 and a cursor change nothing.
		tc.p.Limit, tc.p.Before = 1, runs[3].ID
		n, err := b.s.CountRuns(b.ctx, tc.p, 0)
		if err != nil || n != len(tc.want) {
			t.Errorf("%s: CountRuns = %d, %v; want %d", tc.name, n, err, len(tc.want))
		}
		// A bound stops the count there, and does not change a count below it.
		n, err = b.s.CountRuns(b.ctx, tc.p, 2)
		if want := min(len(tc.want), 2); err != nil || n != want {
			t.Errorf("%s: CountRuns up to 2 = %d, %v; want %d", tc.name, n, err, want)
		}
	}
	if n, err := b.s.CountRuns(b.ctx, store.ListRunsParams{ProjectIDs: []uuid.UUID{}}, 0); err != nil || n != 0 {
		t.Errorf("CountRuns of no visible project = %d, %v; want 0", n, err)
	}
}

// testDigestRuns: a run's digest counts its jobs by status and names its first failed
// job with the step it failed in; a run without failures has none, an unknown id no
// digest.
func testDigestRuns(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const yaml = `
name: digest
jobs:
  build:
    runs_on: [digest]
    steps:
      - { name: compile, run: "true" }
      - { name: test, run: "false" }
  deploy:
    needs: [build]
    steps: [ { run: "true" } ]
  lint:
    runs_on: [digest-other]
    steps: [ { run: "true" } ]
`
	failing, _ := b.createRun(yaml, store.CreateRunParams{Project: "digest"})
	c := b.claim(store.ClaimParams{Labels: []string{"digest"}})
	if len(c) != 1 {
		t.Fatalf("claim = %d jobs, want build", len(c))
	}
	for _, u := range []store.StepUpdate{
		{Index: 0, Status: store.StepSuccess, ExitCode: intPtr(0)},
		{Index: 1, Status: store.StepFailed, ExitCode: intPtr(2)},
	} {
		if err := b.s.UpdateStep(b.ctx, store.UpdateStepParams{LeaseRef: ref(c[0]), StepUpdate: u}); err != nil {
			t.Fatalf("UpdateStep: %v", err)
		}
	}
	b.complete(c[0], store.JobFailed)
	quiet, _ := b.createRun(labelledJob("digest-quiet"), store.CreateRunParams{Project: "digest"})

	d, err := b.s.DigestRuns(b.ctx, []uuid.UUID{failing.ID, quiet.ID, store.NewID()})
	if err != nil {
		t.Fatalf("DigestRuns: %v", err)
	}
	if len(d) != 2 {
		t.Fatalf("DigestRuns = %d digests, want 2 (the unknown id has none)", len(d))
	}
	fd := d[failing.ID]
	if fd == nil {
		t.Fatal("no digest of the failing run")
	}
	if fd.Jobs[store.JobFailed] != 1 || fd.Jobs[store.JobSkipped] != 1 || fd.Jobs[store.JobQueued] != 1 {
		t.Errorf("jobs of the failing run = %v, want 1 failed, 1 skipped, 1 queued", fd.Jobs)
	}
	if fd.Failed == nil || fd.Failed.Key != "build" || fd.Failed.ExitCode == nil || *fd.Failed.ExitCode != 1 {
		t.Fatalf("failed job = %+v, want build with exit code 1", fd.Failed)
	}
	if fd.FailedStep == nil || fd.FailedStep.Name != "test" || fd.FailedStep.ExitCode == nil || *fd.FailedStep.ExitCode != 2 {
		t.Errorf("failed step = %+v, want test with exit code 2", fd.FailedStep)
	}
	qd := d[quiet.ID]
	if qd == nil || qd.Failed != nil || qd.FailedStep != nil || qd.Jobs[store.JobQueued] != 1 {
		t.Errorf("digest of the quiet run = %+v, want one queued job and no failure", qd)
	}
	if d, err := b.s.DigestRuns(b.ctx, nil); err != nil || len(d) != 0 {
		t.Errorf("DigestRuns(nil) = %v, %v; want none", d, err)
	}
}
