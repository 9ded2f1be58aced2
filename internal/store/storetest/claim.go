package storetest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var claimTests = []test{
	{"EmptyQueue", testClaimEmpty},
	{"LeasesJob", testClaimLeasesJob},
	{"Max", testClaimMax},
	{"Race", testClaimRace},
	{"PriorityLanes", testClaimPriorityLanes},
	{"FIFOByQueuedTime", testClaimFIFO},
	{"FairShare", testClaimFairShare},
	{"Labels", testClaimLabels},
	{"SkipsJobsThatDoNotFit", testClaimSkipsUnfit},
	{"Resources", testClaimResources},
	{"ResourcesAcrossOneClaim", testClaimResourcesAcrossOneClaim},
	{"ResourcesWithinRegisteredCapacity", testClaimWithinCapacity},
	{"ResourcesWithinCapacityConcurrently", testClaimWithinCapacityConcurrently},
	{"StartsJobs", testClaimStarts},
	{"ConcurrentWaitersGetDistinctJobs", testClaimConcurrentWaiters},
}

var concurrencyGroupTests = []test{
	{"OneAtATimeOldestFirst", testGroupOneAtATime},
	{"Race", testGroupRace},
	{"MatrixInstances", testGroupMatrix},
}

// testClaimConcurrentWaiters checks what a driver that serves concurrent claims together
// (one search and one statement for many waiting workers) must keep: every worker gets
// jobs of its own, each under a lease of its own that fences the others out, no claim
// gets more than its max, and a project's limit holds across them all.
func testClaimConcurrentWaiters(t *testing.T, h Harness) {
	s, b := setup(t, h)
	free := b.queueJobs("free", 30)
	b.queueJobs("limited", 10)
	b.setQuota("limited", 4, 1)
	const workers, max = 16, 3
	type got struct {
		worker string
		claims []*store.Claim
	}
	results := make([]got, workers)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range workers {
		wg.Go(func() {
			<-start
			w := fmt.Sprintf("waiter-%d", i)
			cs, err := s.Claim(b.ctx, withClaimDefaults(store.ClaimParams{WorkerID: w, Max: max, Start: true}))
			if err != nil {
				t.Errorf("Claim for %s: %v", w, err)
			}
			results[i] = got{worker: w, claims: cs}
		})
	}
	close(start)
	wg.Wait()
	jobs, tokens := map[uuid.UUID]string{}, map[string]bool{}
	limited := 0
	for _, r := range results {
		if len(r.claims) > max {
			t.Errorf("%s got %d jobs, asked for at most %d", r.worker, len(r.claims), max)
		}
		for _, c := range r.claims {
			if prev, ok := jobs[c.Job.ID]; ok {
				t.Errorf("job %s claimed by both %s and %s", c.Job.Key, prev, r.worker)
			}
			jobs[c.Job.ID] = r.worker
			if tokens[c.Lease.Token] {
				t.Errorf("lease token %q handed out twice", c.Lease.Token)
			}
			tokens[c.Lease.Token] = true
			if c.Run == nil || c.Run.ID != c.Job.RunID {
				t.Errorf("claim of job %s came without its run", c.Job.Key)
			}
			if c.Job.ProjectID != free[0].ProjectID {
				limited++
			}
			stored := b.getJob(c.Job.ID)
			if stored.WorkerID != r.worker || stored.LeaseToken != c.Lease.Token || stored.Status != store.JobRunning {
				t.Errorf("job claimed by %s is stored as %s", r.worker, jobState(stored))
			}
		}
	}
	// 16 claims of 3 could take 48; there are 30 free jobs and room for 4 limited ones.
	// Where claimers run in parallel transactions a claim may skip the jobs another holds
	// locked and take fewer, never more: later claims take the rest, and the limit holds
	// across them all.
	if len(jobs) > 34 || limited > 4 {
		t.Errorf("concurrent claims took %d jobs, %d of the limited project; want at most 34, 4", len(jobs), limited)
	}
	for i := 0; ; i++ {
		w := fmt.Sprintf("later-%d", i)
		cs, err := s.Claim(b.ctx, withClaimDefaults(store.ClaimParams{WorkerID: w, Max: max, Start: true}))
		if err != nil {
			t.Fatalf("Claim for %s: %v", w, err)
		}
		if len(cs) == 0 || i == 48 {
			break
		}
		for _, c := range cs {
			if prev, ok := jobs[c.Job.ID]; ok {
				t.Errorf("job %s claimed by both %s and %s", c.Job.Key, prev, w)
			}
			jobs[c.Job.ID] = w
			if c.Job.ProjectID != free[0].ProjectID {
				limited++
			}
		}
		results = append(results, got{worker: w, claims: cs})
	}
	if len(jobs) != 34 || limited != 4 {
		t.Errorf("claims took %d jobs, %d of the limited project; want 34, 4", len(jobs), limited)
	}
	// A lease fences out every other worker, those served in the same claim included.
	var all []*store.Claim
	for _, r := range results {
		all = append(all, r.claims...)
	}
	for i, c := range all {
		other := all[(i+1)%len(all)]
		_, err := s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: store.LeaseRef{JobID: c.Job.ID, Token: other.Lease.Token}, TTL: leaseTTL})
		wantErr(t, "heartbeat with another worker's token", err, store.ErrLeaseLost)
		b.complete(c, store.JobSuccess)
	}
}

// testClaimStarts checks that a claim asked to start its jobs leaves them running, as
// StartJob would, with the same lease, and that the run starts too.
func testClaimStarts(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.createRun("name: start\njobs:\n  a: {steps: [{run: a}]}\n  b: {steps: [{run: b}]}\n  c: {steps: [{run: c}]}\n", store.CreateRunParams{Project: "p"})
	b.clk.Advance(3 * time.Second)
	now := b.clk.Now()
	cs := b.claim(store.ClaimParams{WorkerID: "w", Max: 2, Start: true})
	if len(cs) != 2 {
		t.Fatalf("claimed %d jobs, want 2", len(cs))
	}
	for _, c := range cs {
		for _, j := range []*store.Job{c.Job, b.getJob(c.Job.ID)} {
			if j.Status != store.JobRunning || j.Attempt != 1 || j.WorkerID != "w" || j.LeaseToken != c.Lease.Token {
				t.Errorf("job claimed to start: %s; want running, attempt 1, worker w, the lease's token", jobState(j))
			}
			wantTime(t, "StartedAt", j.StartedAt, now)
		}
		// A start report from a worker that sends one anyway changes nothing.
		if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
			t.Errorf("StartJob after a starting claim: %v", err)
		}
	}
	if r := b.getRun(run.ID); r.Status != store.RunRunning {
		t.Errorf("run after a starting claim: %s, want running", r.Status)
	}
	// Without Start the next one is only assigned.
	if c := b.claimOne(); c.Job.Status != store.JobAssigned || !c.Job.StartedAt.IsZero() {
		t.Errorf("job claimed without Start: %s, started %v", jobState(c.Job), c.Job.StartedAt)
	}
}

func testClaimEmpty(t *testing.T, h Harness) {
	s, b := setup(t, h)
	cs, err := s.Claim(b.ctx, withClaimDefaults(store.ClaimParams{Max: 4}))
	if err != nil {
		t.Fatalf("Claim on an empty store: %v", err)
	}
	if len(cs) != 0 {
		t.Fatalf("Claim on an empty store returned %d jobs", len(cs))
	}
	// Pending jobs are not claimable either.
	b.create(diamondYAML)
	for range 2 {
		b.complete(b.claimOne(), store.JobSuccess)
	}
	c := b.claimOne()
	if c.Job.Key != "c" {
		t.Fatalf("claimed %q, want c", c.Job.Key)
	}
	cs, err = s.Claim(b.ctx, withClaimDefaults(store.ClaimParams{Max: 4}))
	if err != nil || len(cs) != 0 {
		t.Fatalf("Claim with only a pending job left: %d jobs, err %v; want none, nil", len(cs), err)
	}
}

func testClaimLeasesJob(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const yaml = `
name: lease
jobs:
  build:
    timeout: 10m
    steps:
      - { name: compile, run: make }
      - { name: check, run: make check }
  ship:
    needs: [build]
    timeout: 20m
    steps:
      - run: ./ship
`
	trigger := store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: "f00d", Event: "push"}
	env := map[string]string{"STAGE": "ci"}
	run, jobs := b.createRun(yaml, store.CreateRunParams{Project: "p", Trigger: trigger, Env: env})
	b.clk.Advance(5 * time.Second)
	now := b.clk.Now()

	cs := b.claim(store.ClaimParams{WorkerID: "w-lease", Max: 4, LeaseTTL: 30 * time.Second, TimeoutGrace: 2 * time.Minute})
	if len(cs) != 1 {
		t.Fatalf("claimed %d jobs, want 1 (ship is pending)", len(cs))
	}
	c := cs[0]
	if c.Job.ID != jobs[0].ID {
		t.Fatalf("claimed %q, want build", c.Job.Key)
	}
	if c.Lease.Token == "" {
		t.Fatal("lease token is empty")
	}
	wantTime(t, "Lease.ExpiresAt", c.Lease.ExpiresAt, now.Add(30*time.Second))
	if c.Run == nil || c.Run.ID != run.ID || c.Run.Trigger != trigger || !maps.Equal(c.Run.Env, env) {
		t.Errorf("Claim.Run = %+v, want run %s with its trigger and env", c.Run, run.ID)
	}
	if len(c.OnceDone) != 0 {
		t.Errorf("OnceDone = %v on a first attempt, want empty", c.OnceDone)
	}
	for _, j := range []*store.Job{c.Job, b.getJob(c.Job.ID)} {
		if j.Status != store.JobAssigned || j.Attempt != 1 || j.WorkerID != "w-lease" || j.LeaseToken != c.Lease.Token {
			t.Errorf("claimed job: %s; want assigned, attempt 1, worker w-lease, the lease's token", jobState(j))
		}
		wantTime(t, "LeaseExpiresAt", j.LeaseExpiresAt, now.Add(30*time.Second))
		wantTime(t, "Deadline", j.Deadline, now.Add(10*time.Minute+2*time.Minute))
		if j.Spec == nil || len(j.Spec.Steps) != 2 {
			t.Errorf("claimed job has Spec %+v, want the planned job", j.Spec)
		}
	}
	for _, st := range b.listSteps(c.Job.ID) {
		if st.Attempt != 1 || st.Status != store.StepPending {
			t.Errorf("step %d after claim: attempt %d status %s, want 1, pending", st.Index, st.Attempt, st.Status)
		}
	}
	r := b.getRun(run.ID)
	if r.Status != store.RunRunning {
		t.Errorf("run status after the first claim = %s, want running", r.Status)
	}
	wantTime(t, "run StartedAt", r.StartedAt, now)

	// A later claim in the same run leaves the run's start alone.
	b.clk.Advance(time.Minute)
	b.complete(c, store.JobSuccess)
	b.clk.Advance(time.Minute)
	c2 := b.claimOne()
	if c2.Job.Key != "ship" {
		t.Fatalf("claimed %q, want ship", c2.Job.Key)
	}
	wantTime(t, "ship Deadline", c2.Job.Deadline, b.clk.Now().Add(20*time.Minute+timeoutGrace))
	r = b.getRun(run.ID)
	if r.Status != store.RunRunning {
		t.Errorf("run status = %s, want running", r.Status)
	}
	wantTime(t, "run StartedAt after a second claim", r.StartedAt, now)
}

func testClaimMax(t *testing.T, h Harness) {
	_, b := setup(t, h)
	for range 6 {
		b.create(singleJob)
	}
	for _, tc := range []struct{ max, want int }{{0, 1}, {-3, 1}, {1, 1}, {2, 2}, {10, 1}, {10, 0}} {
		if got := len(b.claim(store.ClaimParams{Max: tc.max})); got != tc.want {
			t.Errorf("Claim(Max %d) returned %d jobs, want %d", tc.max, got, tc.want)
		}
	}
}

// matrix100YAML plans one job as a 10x10 matrix: 100 queued jobs per run.
const matrix100YAML = `
name: wide
jobs:
  shard:
    matrix:
      x: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
      y: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    steps:
      - run: "true"
`

// testClaimRace creates 10,000 jobs from concurrent producers while 32 claimers take them
// in batches of 1 to 8: every job is claimed exactly once, under a token of its own.
func testClaimRace(t *testing.T, h Harness) {
	s, b := setup(t, h)
	const (
		runs       = 100
		jobsPerRun = 100
		producers  = 8
		claimers   = 32
	)
	plan := compile(t, matrix100YAML)
	ctx := b.ctx

	type claimed struct {
		job    *store.Job
		token  string
		worker string
	}
	var (
		mu      sync.Mutex
		errs    []error
		created = map[uuid.UUID]bool{}
		runIDs  []uuid.UUID
		got     []claimed
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		errs = append(errs, err)
	}

	var next atomic.Int64
	producersDone := make(chan struct{})
	var pwg sync.WaitGroup
	for p := range producers {
		pwg.Go(func() {
			for n := next.Add(1); n <= runs; n = next.Add(1) {
				run, jobs, isNew, err := s.CreateRun(ctx, store.CreateRunParams{
					Project: fmt.Sprintf("project-%d", n%4),
					Plan:    plan,
				})
				if err != nil {
					fail(fmt.Errorf("producer %d: CreateRun: %w", p, err))
					return
				}
				if !isNew || len(jobs) != jobsPerRun {
					fail(fmt.Errorf("producer %d: CreateRun created %v with %d jobs", p, isNew, len(jobs)))
				}
				mu.Lock()
				runIDs = append(runIDs, run.ID)
				for _, j := range jobs {
					created[j.ID] = true
				}
				mu.Unlock()
			}
		})
	}
	go func() {
		pwg.Wait()
		close(producersDone)
	}()

	var cwg sync.WaitGroup
	for i := range claimers {
		cwg.Go(func() {
			worker := fmt.Sprintf("racer-%d", i)
			wake, stop := s.WaitForJobs()
			defer stop()
			for ctx.Err() == nil {
				// Only a claim that began after the last run was created may end the loop:
				// an empty answer then means nothing is left.
				var done bool
				select {
				case <-producersDone:
					done = true
				default:
				}
				max := rand.IntN(8) + 1
				cs, err := s.Claim(ctx, store.ClaimParams{WorkerID: worker, Max: max, LeaseTTL: time.Hour, TimeoutGrace: time.Minute})
				if err != nil {
					fail(fmt.Errorf("claimer %d: Claim: %w", i, err))
					return
				}
				if len(cs) > max {
					fail(fmt.Errorf("claimer %d: Claim(Max %d) returned %d jobs", i, max, len(cs)))
				}
				mu.Lock()
				for _, c := range cs {
					got = append(got, claimed{job: c.Job, token: c.Lease.Token, worker: worker})
				}
				mu.Unlock()
				if len(cs) > 0 {
					continue
				}
				if done {
					return
				}
				select {
				case <-wake:
				case <-producersDone:
				case <-ctx.Done():
				}
			}
		})
	}
	cwg.Wait()
	<-producersDone
	for _, err := range errs {
		t.Error(err)
	}
	if len(created) != runs*jobsPerRun {
		t.Fatalf("created %d jobs, want %d", len(created), runs*jobsPerRun)
	}

	seenJob := map[uuid.UUID]int{}
	seenToken := map[string]uuid.UUID{}
	for _, c := range got {
		seenJob[c.job.ID]++
		if !created[c.job.ID] {
			t.Errorf("claimed job %s that no producer created", c.job.ID)
		}
		if c.token == "" {
			t.Errorf("job %s claimed with an empty token", c.job.ID)
		} else if other, dup := seenToken[c.token]; dup {
			t.Errorf("token %q handed out for jobs %s and %s", c.token, other, c.job.ID)
		}
		seenToken[c.token] = c.job.ID
		if c.job.Status != store.JobAssigned || c.job.Attempt != 1 || c.job.WorkerID != c.worker {
			t.Errorf("claimed job %s: %s; want assigned, attempt 1, worker %s", c.job.ID, jobState(c.job), c.worker)
		}
	}
	dups := 0
	for id, n := range seenJob {
		if n > 1 {
			dups++
			if dups <= 10 {
				t.Errorf("job %s claimed %d times", id, n)
			}
		}
	}
	if len(seenJob) != len(created) {
		t.Errorf("%d distinct jobs claimed (%d claims), want all %d", len(seenJob), len(got), len(created))
	}
	b.expectNoClaim(store.ClaimParams{Max: 8})
	// What the claims said is what the store holds; a sample of runs keeps this quick.
	for _, id := range runIDs[:min(10, len(runIDs))] {
		for _, j := range b.listJobs(id) {
			if j.Status != store.JobAssigned || j.Attempt != 1 {
				t.Errorf("job %s (%q) after the race: %s; want assigned at attempt 1", j.ID, j.Key, jobState(j))
			}
		}
	}
}

// laneYAML is a one-job pipeline in the given lane.
func laneYAML(lane pipeline.Priority) string {
	return fmt.Sprintf(`
name: lane
jobs:
  %s:
    priority: %s
    steps:
      - run: "true"
`, lane, lane)
}

func testClaimPriorityLanes(t *testing.T, h Harness) {
	_, b := setup(t, h)
	// Oldest first, lowest lane first, spread over two projects; the last one is a low
	// job whose run overrides every lane to critical.
	type queued struct {
		project string
		lane    pipeline.Priority
		params  pipeline.Priority
	}
	order := []queued{
		{"a", pipeline.PriorityLow, ""},
		{"b", pipeline.PriorityNormal, ""},
		{"a", pipeline.PriorityHigh, ""},
		{"b", pipeline.PriorityCritical, ""},
		{"a", pipeline.PriorityLow, pipeline.PriorityCritical},
	}
	var ids []uuid.UUID
	for _, q := range order {
		_, jobs := b.createRun(laneYAML(q.lane), store.CreateRunParams{Project: q.project, Priority: q.params})
		ids = append(ids, jobs[0].ID)
		b.clk.Advance(time.Second)
	}
	want := []uuid.UUID{ids[3], ids[4], ids[2], ids[1], ids[0]}
	var got []uuid.UUID
	for range want {
		got = append(got, b.claimOne().Job.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("claim order = %v, want %v (critical, critical by override, high, normal, low)", got, want)
	}
	b.expectNoClaim(store.ClaimParams{Max: 8})
}

func testClaimFIFO(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const chain = `
name: chain
jobs:
  first:
    steps: [ { run: "true" } ]
  second:
    needs: [first]
    steps: [ { run: "true" } ]
`
	// second is created first but queued third: order follows becoming queued.
	run, _ := b.create(chain)
	b.clk.Advance(time.Second)
	_, early := b.create(singleJob)
	b.clk.Advance(time.Second)
	first := b.claimOne()
	if first.Job.Key != "first" {
		t.Fatalf("claimed %q, want first (the oldest queued job)", first.Job.Key)
	}
	b.complete(first, store.JobSuccess)
	second := b.wantJobStatus(b.jobsByKey(run.ID)["second"].ID, store.JobQueued)
	wantTime(t, "QueuedAt of a job queued by its needs", second.QueuedAt, b.clk.Now())
	b.clk.Advance(time.Second)
	_, late := b.create(singleJob)

	want := []uuid.UUID{early[0].ID, second.ID, late[0].ID}
	var got []uuid.UUID
	for range want {
		got = append(got, b.claimOne().Job.ID)
	}
	if !slices.Equal(got, want) {
		t.Errorf("claim order = %v, want %v (by time queued, not time created)", got, want)
	}
}

func testClaimFairShare(t *testing.T, h Harness) {
	_, b := setup(t, h)
	var aJobs []uuid.UUID
	for range 100 {
		_, jobs := b.createRun(singleJob, store.CreateRunParams{Project: "a"})
		aJobs = append(aJobs, jobs[0].ID)
		b.clk.Advance(time.Second)
	}
	bJobs := map[uuid.UUID]bool{}
	for range 3 {
		_, jobs := b.createRun(singleJob, store.CreateRunParams{Project: "b"})
		bJobs[jobs[0].ID] = true
		b.clk.Advance(time.Second)
	}

	var aOrder []uuid.UUID
	bSeen := 0
	for i := range 103 {
		c := b.claimOne()
		if bJobs[c.Job.ID] {
			bSeen++
			if i >= 8 {
				t.Errorf("project b's job claimed %d-th, want within the first 8 claims", i+1)
			}
			continue
		}
		aOrder = append(aOrder, c.Job.ID)
	}
	if bSeen != 3 {
		t.Errorf("claimed %d of project b's 3 jobs", bSeen)
	}
	if !slices.Equal(aOrder, aJobs) {
		t.Errorf("project a's jobs came out of FIFO order")
	}
}

func testClaimLabels(t *testing.T, h Harness) {
	tests := []struct {
		name   string
		job    string // runs_on, YAML flow list
		worker []string
		want   bool
	}{
		{"all labels and more", "[linux, gpu]", []string{"amd64", "gpu", "linux"}, true},
		{"exact labels", "[linux, gpu]", []string{"gpu", "linux"}, true},
		{"one label missing", "[linux, gpu]", []string{"linux"}, false},
		{"other label missing", "[linux, gpu]", []string{"gpu", "arm64"}, false},
		{"worker without labels", "[linux, gpu]", nil, false},
		{"job without labels, worker without labels", "[]", nil, true},
		{"job without labels, worker with labels", "[]", []string{"linux"}, true},
		{"labels are case-sensitive", "[Linux]", []string{"linux"}, false},
	}
	// The rows share a database: each leaves the queue empty for the next.
	_, shared := setup(t, h)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := shared.with(t)
			_, jobs := b.create(fmt.Sprintf(`
name: labels
jobs:
  job:
    runs_on: %s
    steps: [ { run: "true" } ]
`, tc.job))
			cs := b.claim(store.ClaimParams{Labels: tc.worker, Max: 2})
			b.clearQueue(jobs[0].ID, cs)
			if got := len(cs) == 1; got != tc.want {
				t.Fatalf("job runs_on %s, worker labels %v: claimed %d jobs, want claimed=%v", tc.job, tc.worker, len(cs), tc.want)
			}
		})
	}
}

// testClaimSkipsUnfit checks that a job no worker here can run does not block the jobs
// queued behind it.
func testClaimSkipsUnfit(t *testing.T, h Harness) {
	_, b := setup(t, h)
	_, gpu := b.create(`
name: gpu
jobs:
  train:
    runs_on: [gpu]
    resources: { cpu: 8 }
    steps: [ { run: "true" } ]
`)
	b.clk.Advance(time.Second)
	_, plain := b.create(singleJob)
	c := b.claim(store.ClaimParams{Labels: []string{"linux"}, FreeMilliCPU: 16000, Max: 1})
	if len(c) != 1 || c[0].Job.ID != plain[0].ID {
		t.Fatalf("worker without gpu got %d jobs, want the plain job behind the gpu one", len(c))
	}
	c = b.claim(store.ClaimParams{Labels: []string{"gpu"}, FreeMilliCPU: 4000, Max: 1})
	if len(c) != 0 {
		t.Fatalf("gpu worker with 4 free CPUs got a job needing 8")
	}
	c = b.claim(store.ClaimParams{Labels: []string{"gpu"}, FreeMilliCPU: 8000, Max: 1})
	if len(c) != 1 || c[0].Job.ID != gpu[0].ID {
		t.Fatalf("gpu worker with 8 free CPUs got %d jobs, want the gpu job", len(c))
	}
}

func testClaimResources(t *testing.T, h Harness) {
	const gi = int64(1) << 30
	tests := []struct {
		name     string
		cpu, mem int64
		want     bool
	}{
		{"cpu short", 1000, 8 * gi, false},
		{"exact fit", 2000, 4 * gi, true},
		{"room to spare", 8000, 16 * gi, true},
		{"memory short", 4000, 2 * gi, false},
		{"cpu just short", 1999, 0, false},
		{"unlimited", 0, 0, true},
		{"negative is unlimited", -1, -1, true},
		{"cpu fits, memory unlimited", 2000, 0, true},
		{"cpu unlimited, memory short", 0, 4*gi - 1, false},
	}
	// The rows share a database: each leaves the queue empty for the next.
	_, shared := setup(t, h)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := shared.with(t)
			_, jobs := b.create(`
name: heavy
jobs:
  heavy:
    resources: { cpu: 2, memory: 4Gi }
    steps: [ { run: "true" } ]
`)
			cs := b.claim(store.ClaimParams{FreeMilliCPU: tc.cpu, FreeMemory: tc.mem, Max: 2})
			b.clearQueue(jobs[0].ID, cs)
			if got := len(cs) == 1; got != tc.want {
				t.Fatalf("job needs cpu 2, memory 4Gi; free cpu %d memory %d: claimed %d jobs, want claimed=%v", tc.cpu, tc.mem, len(cs), tc.want)
			}
		})
	}
}

// clearQueue finishes what a row of a shared-database table claimed, or cancels its job
// when nothing was claimed, so that the next row starts with an empty queue.
func (b *bundle) clearQueue(jobID uuid.UUID, cs []*store.Claim) {
	b.t.Helper()
	for _, c := range cs {
		b.complete(c, store.JobSuccess)
	}
	if len(cs) == 0 {
		if err := b.s.CancelJob(b.ctx, jobID); err != nil {
			b.t.Fatalf("CancelJob of the unclaimed job: %v", err)
		}
	}
}

// testClaimResourcesAcrossOneClaim checks that the free capacity a worker reports is
// shared by all the jobs one claim hands it, not offered to each of them in full.
func testClaimResourcesAcrossOneClaim(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`
name: pair
jobs:
  heavy:
    matrix: { n: [1, 2, 3] }
    resources: { cpu: 2, memory: 1Gi }
    steps: [ { run: "true" } ]
`)
	if n := len(b.claim(store.ClaimParams{FreeMilliCPU: 3000, Max: 3})); n != 1 {
		t.Errorf("3 free CPUs, jobs of 2 CPUs each: claimed %d, want 1", n)
	}
	if n := len(b.claim(store.ClaimParams{FreeMilliCPU: 4000, FreeMemory: 1 << 30, Max: 3})); n != 1 {
		t.Errorf("4 free CPUs but 1 GiB free, jobs of 2 CPUs and 1 GiB: claimed %d, want 1", n)
	}
	if n := len(b.claim(store.ClaimParams{FreeMilliCPU: 4000, Max: 3})); n != 1 {
		t.Errorf("4 free CPUs with one job left: claimed %d, want 1", n)
	}
}

// heavyYAML is a pipeline of n jobs of 1.5 CPUs and 3 GiB each that only workers with
// label may run.
func heavyYAML(label string, n int) string {
	return fmt.Sprintf(`
name: heavy
jobs:
  heavy:
    matrix: { n: %s }
    runs_on: [%s]
    resources: { cpu: 1500m, memory: 3Gi }
    steps: [ { run: "true" } ]
`, seqList(n), label)
}

// seqList is the YAML list [1, ..., n].
func seqList(n int) string {
	var items []string
	for i := range n {
		items = append(items, fmt.Sprint(i+1))
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// testClaimWithinCapacity checks that a claim never hands a worker jobs whose resources,
// with those of the jobs it holds, exceed the capacity it registered, whatever free
// capacity the claim says it has (a worker that counted wrong, or claims twice at once):
// the store knows both. A worker that registered none, or no limit, is held to what its
// claims say.
func testClaimWithinCapacity(t *testing.T, h Harness) {
	const gi = int64(1) << 30
	type capacity struct{ cpu, mem int64 }
	tests := []struct {
		name string
		// registered is what the worker registered; nil registers no worker.
		registered *capacity
		// hold is how many jobs the worker claims first; shrunk, when set, is what it
		// registers again after that.
		hold   int
		shrunk *capacity
		// free is what the claim says is free (zero: unlimited); want how many of the
		// jobs left it gets, asking for all of them.
		free capacity
		want int
	}{
		{name: "claim says unlimited", registered: &capacity{2000, 4 * gi}, want: 1},
		{name: "room for two", registered: &capacity{3000, 6 * gi}, want: 2},
		{name: "claim says all is free while one job is held", registered: &capacity{2000, 4 * gi}, hold: 1,
			free: capacity{2000, 4 * gi}, want: 0},
		{name: "memory left short", registered: &capacity{8000, 4 * gi}, hold: 1, want: 0},
		{name: "cpu left short, memory unlimited", registered: &capacity{2000, 0}, hold: 1, want: 0},
		{name: "memory left short, cpu unlimited", registered: &capacity{0, 4 * gi}, hold: 1, want: 0},
		{name: "room left for one more", registered: &capacity{3000, 6 * gi}, hold: 1, want: 1},
		{name: "registered again smaller than what it holds", registered: &capacity{4000, 8 * gi}, hold: 2,
			shrunk: &capacity{2000, 4 * gi}, want: 0},
		{name: "claim says less than is left", registered: &capacity{8000, 16 * gi}, free: capacity{1500, 3 * gi}, want: 1},
		{name: "registered no limit", registered: &capacity{0, 0}, hold: 1, want: 3},
		{name: "not registered", hold: 1, want: 3},
	}
	_, shared := setup(t, h)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := shared.with(t)
			// Each row's jobs and worker are its own: the label keeps the other rows'
			// workers away from them.
			label := fmt.Sprintf("row-%d", i)
			worker := "capacity-" + label
			register := func(c *capacity) {
				t.Helper()
				w := &store.Worker{ID: worker, Name: worker, Labels: []string{label}, MilliCPU: c.cpu, Memory: c.mem,
					MaxJobs: 8, State: store.WorkerIdle}
				if err := b.s.UpsertWorker(b.ctx, w); err != nil {
					t.Fatalf("UpsertWorker: %v", err)
				}
			}
			if tc.registered != nil {
				register(tc.registered)
			}
			b.create(heavyYAML(label, 4))
			if tc.hold > 0 {
				held := b.claim(store.ClaimParams{WorkerID: worker, Labels: []string{label}, Max: tc.hold})
				if len(held) != tc.hold {
					t.Fatalf("the worker took %d jobs to hold, want %d", len(held), tc.hold)
				}
			}
			if tc.shrunk != nil {
				register(tc.shrunk)
			}
			cs := b.claim(store.ClaimParams{WorkerID: worker, Labels: []string{label}, FreeMilliCPU: tc.free.cpu,
				FreeMemory: tc.free.mem, Max: 4})
			if len(cs) != tc.want {
				t.Errorf("jobs of 1.5 CPUs and 3 GiB; the worker holds %d, claims with free cpu %d memory %d: got %d jobs, want %d",
					tc.hold, tc.free.cpu, tc.free.mem, len(cs), tc.want)
			}
		})
	}
	// A job the worker held that ended makes room for the next.
	t.Run("room made by a job that ended", func(t *testing.T) {
		b := shared.with(t)
		const label, worker = "ended", "capacity-ended"
		if err := b.s.UpsertWorker(b.ctx, &store.Worker{ID: worker, Name: worker, Labels: []string{label}, MilliCPU: 2000,
			Memory: 4 * gi, MaxJobs: 8, State: store.WorkerIdle}); err != nil {
			t.Fatalf("UpsertWorker: %v", err)
		}
		b.create(heavyYAML(label, 2))
		p := store.ClaimParams{WorkerID: worker, Labels: []string{label}, Max: 2}
		first := b.claim(p)
		if len(first) != 1 {
			t.Fatalf("first claim got %d jobs, want 1", len(first))
		}
		b.expectNoClaim(p)
		b.complete(first[0], store.JobSuccess)
		if n := len(b.claim(p)); n != 1 {
			t.Errorf("claim after the held job ended got %d jobs, want 1", n)
		}
	})
}

// testClaimWithinCapacityConcurrently checks that claims of one worker made at once,
// whether a driver serves them together (the same search) or in transactions of their
// own (different searches), never hand it together more than its registered capacity.
func testClaimWithinCapacityConcurrently(t *testing.T, h Harness) {
	const gi = int64(1) << 30
	tests := []struct {
		name string
		// same makes every claim of a worker ask the same; otherwise each asks for a
		// different free capacity.
		same bool
	}{
		{"same claims", true},
		{"different claims", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, b := setup(t, h)
			const workers, claimsEach = 3, 6
			b.create(heavyYAML("linux", workers*claimsEach))
			for w := range workers {
				id := fmt.Sprintf("small-%d", w)
				if err := s.UpsertWorker(b.ctx, &store.Worker{ID: id, Name: id, Labels: []string{"linux"}, MilliCPU: 2000,
					Memory: 4 * gi, MaxJobs: claimsEach, State: store.WorkerIdle}); err != nil {
					t.Fatalf("UpsertWorker: %v", err)
				}
			}
			got := make([]int, workers)
			var mu sync.Mutex
			start := make(chan struct{})
			var wg sync.WaitGroup
			for w := range workers {
				for i := range claimsEach {
					wg.Go(func() {
						<-start
						p := store.ClaimParams{WorkerID: fmt.Sprintf("small-%d", w), Labels: []string{"linux"}, Max: 2}
						if !tc.same {
							p.FreeMilliCPU, p.FreeMemory = 2000+int64(i), 4*gi+int64(i)
						}
						cs, err := s.Claim(b.ctx, withClaimDefaults(p))
						if err != nil {
							t.Errorf("Claim: %v", err)
						}
						mu.Lock()
						got[w] += len(cs)
						mu.Unlock()
					})
				}
			}
			close(start)
			wg.Wait()
			for w, n := range got {
				if n > 1 {
					t.Errorf("worker small-%d of 2 CPUs and 4 GiB got %d jobs of 1.5 CPUs and 3 GiB from claims made at once", w, n)
				}
			}
		})
	}
}

// groupYAML is a one-job pipeline whose job holds concurrency group "production".
const groupYAML = `
name: deploy
jobs:
  deploy:
    concurrency: { group: production }
    steps: [ { run: "true" } ]
`

func testGroupOneAtATime(t *testing.T, h Harness) {
	_, b := setup(t, h)
	var p []uuid.UUID
	for range 3 {
		_, jobs := b.createRun(groupYAML, store.CreateRunParams{Project: "p"})
		p = append(p, jobs[0].ID)
		b.clk.Advance(time.Second)
	}
	_, q := b.createRun(groupYAML, store.CreateRunParams{Project: "q"})
	b.clk.Advance(time.Second)
	_, free := b.createRun(singleJob, store.CreateRunParams{Project: "p"})

	claimIDs := func() map[uuid.UUID]*store.Claim {
		m := map[uuid.UUID]*store.Claim{}
		for _, c := range b.claim(store.ClaimParams{Max: 8}) {
			m[c.Job.ID] = c
		}
		return m
	}
	keys := func(m map[uuid.UUID]*store.Claim) []uuid.UUID {
		return sortIDs(slices.Collect(maps.Keys(m)))
	}
	sorted := func(ids ...uuid.UUID) []uuid.UUID { return sortIDs(ids) }

	got := claimIDs()
	if want := sorted(p[0], q[0].ID, free[0].ID); !slices.Equal(keys(got), want) {
		t.Fatalf("first claim took %v, want %v: p's oldest group job, q's group job (another project) and the job without a group", keys(got), want)
	}
	b.expectNoClaim(store.ClaimParams{Max: 8})

	// Assigned and running both hold the group.
	if err := b.s.StartJob(b.ctx, ref(got[p[0]])); err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	b.expectNoClaim(store.ClaimParams{Max: 8})

	b.complete(got[p[0]], store.JobSuccess)
	next := claimIDs()
	if want := []uuid.UUID{p[1]}; !slices.Equal(keys(next), want) {
		t.Fatalf("after the holder succeeded, claimed %v, want only the oldest waiter %v", keys(next), want)
	}
	b.expectNoClaim(store.ClaimParams{Max: 8})

	b.complete(next[p[1]], store.JobFailed)
	last := claimIDs()
	if want := []uuid.UUID{p[2]}; !slices.Equal(keys(last), want) {
		t.Fatalf("after the holder failed, claimed %v, want the last waiter %v", keys(last), want)
	}
	b.complete(last[p[2]], store.JobSuccess)
	b.expectNoClaim(store.ClaimParams{Max: 8})
}

func testGroupRace(t *testing.T, h Harness) {
	s, b := setup(t, h)
	for range 6 {
		b.createRun(groupYAML, store.CreateRunParams{Project: "p"})
		b.clk.Advance(time.Second)
	}
	for round := range 3 {
		var (
			mu     sync.Mutex
			claims []*store.Claim
		)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				<-start
				cs, err := s.Claim(b.ctx, withClaimDefaults(store.ClaimParams{WorkerID: fmt.Sprintf("w%d", i), Max: 2}))
				if err != nil {
					t.Errorf("Claim: %v", err)
					return
				}
				mu.Lock()
				claims = append(claims, cs...)
				mu.Unlock()
			})
		}
		close(start)
		wg.Wait()
		if len(claims) > 1 {
			t.Fatalf("round %d: 8 concurrent claims took %d jobs of one concurrency group, want 1", round, len(claims))
		}
		if len(claims) == 0 {
			// A round of concurrent claims came back empty once in many CI runs on
			// PostgreSQL, where claimers skip rows others have locked (SKIP LOCKED).
			// That costs a worker one more poll, never a second holder; what must hold
			// is that the next claim takes the job. Why the round came back empty is
			// not yet understood.
			cs, err := s.Claim(b.ctx, withClaimDefaults(store.ClaimParams{WorkerID: "again", Max: 2}))
			if err != nil || len(cs) != 1 {
				t.Fatalf("round %d: no concurrent claim took the group's job, and a claim after them took %d (%v), want 1", round, len(cs), err)
			}
			claims = cs
		}
		b.complete(claims[0], store.JobSuccess)
	}
}

func testGroupMatrix(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
name: rollout
jobs:
  region:
    matrix: { name: [eu, us, ap] }
    concurrency: { group: rollout }
    steps: [ { run: "true" } ]
`)
	for range 3 {
		cs := b.claim(store.ClaimParams{Max: 8})
		if len(cs) != 1 {
			t.Fatalf("claimed %d instances of a matrix job in one concurrency group, want 1", len(cs))
		}
		b.complete(cs[0], store.JobSuccess)
	}
	b.wantRunDone(run.ID, store.RunSuccess)
}
