package storetest

import (
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var quotaTests = []test{
	{"SettingsRoundTrip", testQuotaSettings},
	{"LimitHoldsBackJobs", testQuotaLimit},
	{"LimitUnderConcurrentClaims", testQuotaConcurrentClaims},
	{"FreedRoomWakesClaimers", testQuotaWakes},
	{"WeightsShapeOrder", testQuotaWeights},
	{"NoisyNeighbour", testQuotaNoisyNeighbour},
	{"NoisyNeighbourAtItsLimit", testQuotaNoisyNeighbourAtLimit},
	{"HeldInQueueStats", testQuotaHeldStats},
}

// testQuotaHeldStats: QueueStats counts apart the queued jobs a project's limit holds
// back (no worker can take them): those past the room the limit leaves, and none of a
// project with room or without a limit.
func testQuotaHeldStats(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.queueJobs("nightly", 5)
	b.queueJobs("roomy", 3)
	b.queueJobs("free", 2)
	b.setQuota("nightly", 2, 1)
	b.setQuota("roomy", 10, 1)
	held := func() []store.QueueDepth {
		t.Helper()
		q, err := b.s.QueueStats(b.ctx)
		if err != nil {
			t.Fatalf("QueueStats: %v", err)
		}
		return q.Held
	}
	// Nothing leased: nightly may take 2 of its 5.
	if got, want := held(), []store.QueueDepth{{Priority: pipeline.PriorityNormal, Jobs: 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Held with nothing leased = %+v, want %+v", got, want)
	}
	// Every job that may run is claimed: nightly's 2, roomy's 3, free's 2.
	if cs := b.claim(store.ClaimParams{Max: 16}); len(cs) != 7 {
		t.Fatalf("claimed %d jobs, want 7", len(cs))
	}
	if got, want := held(), []store.QueueDepth{{Priority: pipeline.PriorityNormal, Jobs: 3}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Held with nightly at its limit = %+v, want %+v", got, want)
	}
	b.setQuota("nightly", 3, 1)
	if got, want := held(), []store.QueueDepth{{Priority: pipeline.PriorityNormal, Jobs: 2}}; !reflect.DeepEqual(got, want) {
		t.Errorf("Held with room for one more = %+v, want %+v", got, want)
	}
	b.setQuota("nightly", 0, 1)
	if got := held(); len(got) != 0 {
		t.Errorf("Held without limits = %+v, want none", got)
	}
}

// setQuota sets a project's limit of concurrent jobs and its fair-share weight; the
// project is made on first use by a run when it does not exist yet.
func (b *bundle) setQuota(name string, maxJobs, weight int) {
	b.t.Helper()
	p, err := b.s.GetProjectByName(b.ctx, name)
	if err != nil {
		b.t.Fatalf("GetProjectByName(%s): %v", name, err)
	}
	p.MaxConcurrentJobs, p.FairWeight = maxJobs, weight
	if err := b.s.UpdateProject(b.ctx, p); err != nil {
		b.t.Fatalf("UpdateProject(%s) with limit %d and weight %d: %v", name, maxJobs, weight, err)
	}
}

// queueJobs creates one run of n independent jobs in project.
func (b *bundle) queueJobs(project string, n int) []*store.Job {
	b.t.Helper()
	var y strings.Builder
	fmt.Fprintf(&y, "name: many\njobs:\n  job:\n    matrix: { i: [")
	for i := range n {
		if i > 0 {
			y.WriteString(", ")
		}
		fmt.Fprint(&y, i)
	}
	y.WriteString("] }\n    steps: [ { run: \"true\" } ]\n")
	_, jobs := b.createRun(y.String(), store.CreateRunParams{Project: project})
	return jobs
}

// load reads a project's limit and leased jobs.
func (b *bundle) load(projectID uuid.UUID) *store.ProjectLoad {
	b.t.Helper()
	l, err := b.s.ProjectLoad(b.ctx, projectID)
	if err != nil {
		b.t.Fatalf("ProjectLoad: %v", err)
	}
	return l
}

func testQuotaSettings(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := connected("web")
	if err := b.s.CreateProject(b.ctx, p); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	if p.FairWeight != store.DefaultFairWeight || p.MaxConcurrentJobs != 0 {
		t.Errorf("new project: weight %d, limit %d; want %d, 0 (none)", p.FairWeight, p.MaxConcurrentJobs, store.DefaultFairWeight)
	}
	b.setQuota("web", 7, 3)
	got, err := b.s.GetProjectByName(b.ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if got.MaxConcurrentJobs != 7 || got.FairWeight != 3 {
		t.Errorf("after update: limit %d, weight %d; want 7, 3", got.MaxConcurrentJobs, got.FairWeight)
	}
	if l := b.load(got.ID); l.Name != "web" || l.MaxConcurrentJobs != 7 || l.Leased != 0 {
		t.Errorf("ProjectLoad = %+v, want web, 7, 0", l)
	}
	_, err = b.s.ProjectLoad(b.ctx, store.NewID())
	wantErr(t, "ProjectLoad of an unknown project", err, store.ErrNotFound)
	for _, bad := range []struct{ limit, weight int }{{-1, 1}, {0, -1}, {0, store.MaxFairWeight + 1}, {store.MaxConcurrentJobsLimit + 1, 1}} {
		upd := *got
		upd.MaxConcurrentJobs, upd.FairWeight = bad.limit, bad.weight
		wantErr(t, fmt.Sprintf("UpdateProject with limit %d, weight %d", bad.limit, bad.weight), b.s.UpdateProject(b.ctx, &upd), store.ErrInvalid)
	}
	// Refused updates changed nothing.
	if again, _ := b.s.GetProjectByName(b.ctx, "web"); again.MaxConcurrentJobs != 7 || again.FairWeight != 3 {
		t.Errorf("after refused updates: limit %d, weight %d; want 7, 3", again.MaxConcurrentJobs, again.FairWeight)
	}
	// A project made on first use by a run has the defaults, and takes settings without
	// being connected to a repository.
	run, _ := b.create(singleJob)
	made := b.load(run.ProjectID)
	if made.MaxConcurrentJobs != 0 {
		t.Errorf("project made by a run has limit %d, want 0", made.MaxConcurrentJobs)
	}
	b.setQuota(made.Name, 2, 5)
	if l := b.load(run.ProjectID); l.MaxConcurrentJobs != 2 {
		t.Errorf("limit of a project made by a run = %d, want 2", l.MaxConcurrentJobs)
	}
}

// testQuotaLimit checks that claims never lease more of a project's jobs than its limit,
// while other projects' jobs keep flowing, and that each way a leased job ends gives its
// place back.
func testQuotaLimit(t *testing.T, h Harness) {
	_, b := setup(t, h)
	a := b.queueJobs("a", 6)
	b.clk.Advance(time.Second)
	b.queueJobs("b", 3)
	b.setQuota("a", 2, 1)
	projectA := a[0].ProjectID

	perProject := func(cs []*store.Claim) (na, nb int) {
		for _, c := range cs {
			if c.Job.ProjectID == projectA {
				na++
			} else {
				nb++
			}
		}
		return na, nb
	}
	cs := b.claim(store.ClaimParams{Max: 8})
	if na, nb := perProject(cs); na != 2 || nb != 3 {
		t.Fatalf("claim of 8: %d jobs of a (limit 2) and %d of b, want 2 and 3", na, nb)
	}
	if l := b.load(projectA); !l.AtLimit() || l.Leased != 2 {
		t.Errorf("ProjectLoad(a) = %+v, want 2 leased, at its limit", l)
	}
	b.expectNoClaim(store.ClaimParams{Max: 8})

	var held []*store.Claim
	for _, c := range cs {
		if c.Job.ProjectID == projectA {
			held = append(held, c)
		}
	}
	// A success frees one place.
	b.complete(held[0], store.JobSuccess)
	next := b.claim(store.ClaimParams{Max: 8})
	if len(next) != 1 || next[0].Job.ProjectID != projectA {
		t.Fatalf("after one of a's jobs ended, claimed %d, want 1 of a", len(next))
	}
	b.expectNoClaim(store.ClaimParams{Max: 8})
	// So does a lost lease: the reaper puts both of a's leased jobs back in the queue.
	b.clk.Advance(leaseTTL + time.Second)
	if n := b.reap(); n != 5 {
		t.Fatalf("reaped %d leases, want 5 (2 of a, 3 of b)", n)
	}
	again := b.claim(store.ClaimParams{Max: 8})
	if na, nb := perProject(again); na != 2 || nb != 3 {
		t.Fatalf("after the reaper: claimed %d of a and %d of b, want 2 and 3", na, nb)
	}
	// And a failure or a cancel.
	var ends []store.JobStatus
	for _, c := range again {
		if c.Job.ProjectID != projectA {
			b.complete(c, store.JobSuccess)
			continue
		}
		st := []store.JobStatus{store.JobFailed, store.JobCancelled}[len(ends)]
		ends = append(ends, st)
		b.complete(c, st)
	}
	rest := b.claim(store.ClaimParams{Max: 8})
	if na, nb := perProject(rest); na != 2 || nb != 0 {
		t.Fatalf("after a failure and a cancel: claimed %d of a and %d of b, want 2 and 0", na, nb)
	}
	// Lifting the limit lets the rest go.
	b.setQuota("a", 0, 1)
	if more := b.claim(store.ClaimParams{Max: 8}); len(more) != 1 {
		t.Fatalf("after the limit was lifted, claimed %d, want the last 1 of a's 6", len(more))
	}
}

// testQuotaConcurrentClaims checks the limit against many claimers at once: together they
// never lease more than it, and a claim after them fills what is left.
func testQuotaConcurrentClaims(t *testing.T, h Harness) {
	s, b := setup(t, h)
	jobs := b.queueJobs("a", 40)
	const limit = 3
	b.setQuota("a", limit, 1)
	projectA := jobs[0].ProjectID
	for round := range 3 {
		var (
			mu     sync.Mutex
			claims []*store.Claim
		)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range 12 {
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
		if len(claims) > limit {
			t.Fatalf("round %d: 12 concurrent claims leased %d jobs of a project limited to %d", round, len(claims), limit)
		}
		// Claimers that met another's quota lock (PostgreSQL) leave its jobs to that claim:
		// a claim after them must take what room is left.
		for len(claims) < limit {
			cs := b.claim(store.ClaimParams{WorkerID: "again", Max: 8})
			if len(cs) == 0 {
				t.Fatalf("round %d: %d jobs leased, limit %d, and a claim after them took none", round, len(claims), limit)
			}
			claims = append(claims, cs...)
		}
		if len(claims) != limit {
			t.Fatalf("round %d: %d jobs leased, want the limit %d", round, len(claims), limit)
		}
		if l := b.load(projectA); l.Leased != limit {
			t.Fatalf("round %d: ProjectLoad says %d leased, want %d", round, l.Leased, limit)
		}
		b.expectNoClaim(store.ClaimParams{WorkerID: "late", Max: 8})
		for _, c := range claims {
			b.complete(c, store.JobSuccess)
		}
	}
}

// testQuotaWakes checks that a waiting claimer hears of room freed at a limited project,
// though no job became queued.
func testQuotaWakes(t *testing.T, h Harness) {
	s, b := setup(t, h)
	b.queueJobs("a", 3)
	b.setQuota("a", 1, 1)
	c := b.claimOne()
	b.expectNoClaim(store.ClaimParams{Max: 1})
	wake, stop := s.WaitForJobs()
	defer stop()
	b.complete(c, store.JobSuccess)
	select {
	case <-wake:
	case <-time.After(signalWait):
		t.Fatal("no wake-up after a job of a project at its limit ended")
	}
	b.claimOne()
}

// testQuotaWeights checks that while two projects are both backlogged, one of weight 2 is
// dispatched about twice as many jobs as one of weight 1.
func testQuotaWeights(t *testing.T, h Harness) {
	_, b := setup(t, h)
	// The projects exist (with their weights) before their jobs are queued: a job's place
	// is decided when it is queued.
	b.queueJobs("heavy", 1)
	b.queueJobs("light", 1)
	b.setQuota("heavy", 0, 2)
	b.setQuota("light", 0, 1)
	b.claimAll()
	for range 30 {
		b.createRun(singleJob, store.CreateRunParams{Project: "heavy"})
		b.createRun(singleJob, store.CreateRunParams{Project: "light"})
		b.clk.Advance(time.Second)
	}
	heavy, light := 0, 0
	for range 30 {
		c := b.claimOne()
		if b.load(c.Job.ProjectID).Name == "heavy" {
			heavy++
		} else {
			light++
		}
	}
	if heavy < 19 || heavy > 21 {
		t.Errorf("of the first 30 claims, %d went to the project of weight 2 and %d to the one of weight 1; want about 20 and 10", heavy, light)
	}
}

// testQuotaNoisyNeighbour floods one project with thousands of queued jobs and checks that
// another project's job, submitted after them, is dispatched within a few claims.
func testQuotaNoisyNeighbour(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.queueJobs("noisy", 2000)
	// Some of the flood is already running.
	for range 4 {
		b.claim(store.ClaimParams{Max: 8})
	}
	b.clk.Advance(time.Second)
	_, quiet := b.createRun(singleJob, store.CreateRunParams{Project: "quiet"})
	for i := range 3 {
		c := b.claimOne()
		if c.Job.ID == quiet[0].ID {
			t.Logf("the quiet project's job was claimed %d-th after 2,000 of the noisy project's", i+1)
			return
		}
	}
	t.Fatal("the quiet project's job was not among the 3 claims after it was submitted behind 2,000 jobs of another project")
}

// testQuotaNoisyNeighbourAtLimit floods a project that is at its limit: another project's
// job is claimed at once, whatever the flood's places in the queue.
func testQuotaNoisyNeighbourAtLimit(t *testing.T, h Harness) {
	_, b := setup(t, h)
	flood := b.queueJobs("noisy", 1000)
	b.setQuota("noisy", 5, 1)
	if cs := b.claim(store.ClaimParams{Max: 8}); len(cs) != 5 {
		t.Fatalf("claimed %d of the noisy project's jobs, want its limit 5", len(cs))
	}
	b.clk.Advance(time.Second)
	_, quiet := b.createRun(singleJob, store.CreateRunParams{Project: "quiet"})
	cs := b.claim(store.ClaimParams{Max: 1})
	if len(cs) != 1 || cs[0].Job.ID != quiet[0].ID {
		t.Fatalf("the next claim took %d jobs, want the quiet project's job", len(cs))
	}
	if l := b.load(flood[0].ProjectID); !l.AtLimit() {
		t.Errorf("ProjectLoad(noisy) = %+v, want at its limit", l)
	}
}
