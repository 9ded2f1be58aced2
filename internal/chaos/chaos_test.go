package chaos

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/postgres"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/testdb"
)

var full = flag.Bool("chaos.full", false, "run the full chaos suite (500 jobs per store; `make chaos`) instead of the short one")

// mode sizes one chaos run.
type mode struct {
	runs, jobsPerRun int
	width            int // a job needs the one width places before it, so runs are width wide
	workers, maxJobs int
	stepSleep        string        // how long each job's work step sleeps, so kills land mid-job
	killEvery        time.Duration // the pause between two kills
	workerKills      int           // at most
	coordinatorKills []time.Duration
	leaseTTL         time.Duration
	deadline         time.Duration // for every run to end, from the first submission
}

var (
	shortMode = mode{runs: 2, jobsPerRun: 40, width: 8, workers: 4, maxJobs: 4, stepSleep: "1",
		killEvery: 2 * time.Second, workerKills: 4, coordinatorKills: []time.Duration{5 * time.Second},
		leaseTTL: 3 * time.Second, deadline: 70 * time.Second}
	fullMode = mode{runs: 5, jobsPerRun: 100, width: 20, workers: 4, maxJobs: 6, stepSleep: "1",
		killEvery: 2500 * time.Millisecond, workerKills: 40, coordinatorKills: []time.Duration{10 * time.Second, 22 * time.Second},
		leaseTTL: 3 * time.Second, deadline: 100 * time.Second}
)

// TestChaos runs jobs on a coordinator and workers that are SIGKILLed and restarted while
// the jobs run, and checks that every job ran to success, that no once step ran again after
// the store recorded its success, that only killed workers' jobs ran twice, and that
// nothing is left leased.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the chaos suite kills and restarts processes for tens of seconds (make test runs it)")
	}
	m := shortMode
	if *full {
		m = fullMode
	}
	t.Run("sqlite", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "gantry.db")
		runChaos(t, m, "sqlite://"+path, func(ctx context.Context) (storeReader, error) {
			return sqlite.Open(ctx, path, sqlite.Options{})
		})
	})
	t.Run("postgres", func(t *testing.T) {
		t.Cleanup(func() {
			if t.Skipped() && os.Getenv("CI") != "" {
				t.Error("the PostgreSQL case must run on CI: set " + testdb.EnvURL + " or install PostgreSQL")
			}
		})
		url := testdb.Postgres(t)
		runChaos(t, m, url, func(ctx context.Context) (storeReader, error) {
			return postgres.Open(ctx, url, postgres.Options{})
		})
	})
}

// storeReader is the store opened by the test beside the coordinator.
type storeReader interface {
	reader
	Close() error
}

// chaos is the state of one chaos run.
type chaos struct {
	t       *testing.T
	m       mode
	client  *http.Client
	base    string
	ledger  string
	coord   *coordinator
	workers *fleet
	obs     *observer
	suspect map[uuid.UUID]bool // jobs a failure names, whose ledger lines are printed
	unseen  int                // jobs whose last attempt the observer never saw leased
}

// killEvent is one kill the suite made, for the summary.
type killEvent struct {
	at       time.Time
	what     string
	down     time.Duration // coordinator: kill to listening again
	recovery *recovery     // worker: the jobs it held
}

func runChaos(t *testing.T, m mode, db string, open func(context.Context) (storeReader, error)) {
	began := time.Now()
	dir := t.TempDir()
	marker := "CHAOS_MARKER=" + randomHex(8)
	t.Cleanup(func() { sweepOrphans(t, marker) }) // runs last: after the workers are killed
	seed := uint64(time.Now().UnixNano())
	rng := mrand.New(mrand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	t.Logf("seed %d; %d jobs in %d runs, %d workers of %d slots, kills every %s, coordinator kills at %v",
		seed, m.runs*m.jobsPerRun, m.runs, m.workers, m.maxJobs, m.killEvery, m.coordinatorKills)

	c := &chaos{t: t, m: m, client: &http.Client{Timeout: 10 * time.Second}, ledger: filepath.Join(dir, "ledger"),
		suspect: map[uuid.UUID]bool{}}
	c.coord = &coordinator{t: t, addr: freeAddr(t), db: db, leases: m.leaseTTL,
		extra: []string{"--blobs", "file://" + filepath.Join(dir, "blobs"), "--logs-dir", filepath.Join(dir, "logs")}}
	c.base = "http://" + c.coord.addr
	c.coord.start()
	c.workers = newFleet(t, c.base, filepath.Join(dir, "tmp"), m.workers, m.maxJobs)
	t.Cleanup(c.diagnose) // runs before the processes are killed, while their output is whole

	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, err := open(ctx)
	if err != nil {
		t.Fatalf("open the store beside the coordinator: %v", err)
	}
	t.Cleanup(func() {
		if err := st.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})

	submitted := time.Now()
	var runs []uuid.UUID
	for i := range m.runs {
		runs = append(runs, c.submit(i, marker))
	}
	c.obs = newObserver(st, runs)
	obsCtx, stopObs := context.WithCancel(ctx)
	obsDone := make(chan struct{})
	go func() {
		defer close(obsDone)
		c.obs.run(obsCtx, 200*time.Millisecond)
	}()
	t.Cleanup(func() { stopObs(); <-obsDone })

	events := c.unleash(ctx, rng, submitted)
	c.waitTerminal(submitted)
	elapsed := time.Since(submitted)
	stopObs()
	<-obsDone

	c.checkAPI(runs)
	// The coordinator and workers stop before the store's final record is read, so
	// nothing changes it under the checks.
	for _, inc := range c.workers.incarnations() {
		if err := inc.kill(); err != nil {
			t.Error(err)
		}
	}
	if err := c.coord.cur.kill(); err != nil {
		t.Error(err)
	}
	jobs := c.checkStore(ctx, st, runs, events)
	c.summarize(events, jobs, elapsed)
	t.Logf("total %s (jobs submitted to all runs ended: %s)", time.Since(began).Round(time.Millisecond), elapsed.Round(time.Millisecond))
}

// submit posts run i: jobsPerRun jobs, each needing the job width places before it (and
// every seventh also the one before that), so the DAG orders the work.
func (c *chaos) submit(i int, marker string) uuid.UUID {
	c.t.Helper()
	key, val, _ := strings.Cut(marker, "=")
	var b strings.Builder
	fmt.Fprintf(&b, "name: chaos-%d\ndefaults:\n  retry: {max_attempts: 20, on: [lost]}\n  env: {LEDGER: %q, %s: %q}\njobs:\n", i, c.ledger, key, val)
	rec := func(kind string) string {
		return `echo "` + kind + ` $GANTRY_JOB_ID $GANTRY_ATTEMPT $TMPDIR $(date +%s%N)" >> "$LEDGER"`
	}
	for j := range c.m.jobsPerRun {
		fmt.Fprintf(&b, "  j%03d:\n", j)
		if j >= c.m.width {
			needs := []string{fmt.Sprintf("j%03d", j-c.m.width)}
			if j%7 == 0 && j > c.m.width {
				needs = append(needs, fmt.Sprintf("j%03d", j-c.m.width-1))
			}
			fmt.Fprintf(&b, "    needs: [%s]\n", strings.Join(needs, ", "))
		}
		fmt.Fprintf(&b, "    steps:\n      - {name: once, once: true, run: '%s'}\n      - {name: work, run: '%s; sleep %s; %s'}\n",
			rec("once"), rec("start"), c.m.stepSleep, rec("done"))
	}
	req, err := http.NewRequest(http.MethodPost, c.base+"/api/v1/runs", strings.NewReader(b.String()))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/yaml")
	req.Header.Set("Idempotency-Key", fmt.Sprintf("chaos-%d", i))
	resp, err := c.client.Do(req)
	if err != nil {
		c.t.Fatalf("submit run %d: %v", i, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("submit run %d: %s: %s", i, resp.Status, body)
	}
	var run apiRun
	if err := json.Unmarshal(body, &run); err != nil {
		c.t.Fatalf("submit run %d: decode %s: %v", i, body, err)
	}
	if len(run.Jobs) != c.m.jobsPerRun {
		c.t.Fatalf("submit run %d: %d jobs, want %d", i, len(run.Jobs), c.m.jobsPerRun)
	}
	return run.ID
}

// unleash kills a random worker every killEvery, and the coordinator at its planned
// times, restarting each at once, until the kills are spent or every job has ended.
func (c *chaos) unleash(ctx context.Context, rng *mrand.Rand, start time.Time) []killEvent {
	t := c.t
	var events []killEvent
	coordKills, workerKills := c.m.coordinatorKills, 0
	for len(coordKills) > 0 || workerKills < c.m.workerKills {
		// The pause between kills is the load pattern, not a wait for anything.
		time.Sleep(c.m.killEvery)
		if done, total := c.obs.progress(); total > 0 && done == total {
			break
		}
		if len(coordKills) > 0 && time.Since(start) >= coordKills[0] {
			coordKills = coordKills[1:]
			old := c.coord.cur
			if err := old.kill(); err != nil {
				t.Fatal(err)
			}
			old.killedAt = time.Now()
			c.coord.start()
			events = append(events, killEvent{at: old.killedAt, what: old.name, down: time.Since(old.killedAt)})
			continue
		}
		if workerKills == c.m.workerKills {
			continue
		}
		workerKills++
		s := c.workers.slots[rng.IntN(len(c.workers.slots))]
		inc := s.all[len(s.all)-1]
		if inc.workerID == "" {
			c.workers.registered(inc)
		}
		if err := inc.kill(); err != nil {
			t.Fatal(err)
		}
		inc.killedAt = time.Now()
		r, err := c.obs.watchKill(ctx, inc.workerID, inc.killedAt)
		if err != nil {
			t.Fatalf("read the jobs %s held: %v", inc.name, err)
		}
		c.workers.start(s)
		events = append(events, killEvent{at: inc.killedAt, what: inc.name + " (" + inc.workerID + ")", recovery: r})
	}
	if len(coordKills) > 0 {
		t.Errorf("every job ended before the coordinator kills planned at %v: the workload is too small for the chaos", coordKills)
	}
	for _, inc := range c.workers.incarnations() {
		if inc.workerID == "" && inc.killedAt.IsZero() {
			c.workers.registered(inc)
		}
	}
	return events
}

// waitTerminal polls the store until every job has ended.
func (c *chaos) waitTerminal(start time.Time) {
	deadline := start.Add(c.m.deadline)
	for {
		done, total := c.obs.progress()
		if total > 0 && done == total {
			return
		}
		if time.Now().After(deadline) {
			c.obs.check(c.t)
			c.t.Fatalf("%d of %d jobs ended within %s; not ended:\n%s", done, total, c.m.deadline, strings.Join(c.obs.notTerminal(), "\n"))
		}
		<-time.After(100 * time.Millisecond)
	}
}

// apiRun is the part of GET /api/v1/runs/{id} the suite checks.
type apiRun struct {
	ID           uuid.UUID `json:"id"`
	Status       string    `json:"status"`
	JobsTotal    int       `json:"jobs_total"`
	JobsFinished int       `json:"jobs_finished"`
	Jobs         []struct {
		ID       uuid.UUID `json:"id"`
		Key      string    `json:"key"`
		Status   string    `json:"status"`
		Attempt  int       `json:"attempt"`
		WorkerID string    `json:"worker_id"`
	} `json:"jobs"`
}

func (c *chaos) get(path string, out any) {
	c.t.Helper()
	resp, err := c.client.Get(c.base + path)
	if err != nil {
		c.t.Fatalf("GET %s: %v", path, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		c.t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	if err := json.Unmarshal(body, out); err != nil {
		c.t.Fatalf("GET %s: decode %s: %v", path, body, err)
	}
}

// checkAPI asserts, through the coordinator's API, that every run and job succeeded and
// that nothing is left leased or queued.
func (c *chaos) checkAPI(runs []uuid.UUID) {
	t := c.t
	for _, id := range runs {
		var r apiRun
		c.get("/api/v1/runs/"+id.String(), &r)
		if r.Status != "success" || r.JobsFinished != r.JobsTotal || r.JobsTotal != c.m.jobsPerRun {
			t.Errorf("run %s: status %s, %d of %d jobs finished (want success, %d of %d)", id, r.Status, r.JobsFinished, r.JobsTotal, c.m.jobsPerRun, c.m.jobsPerRun)
		}
		for _, j := range r.Jobs {
			if j.Status != "success" {
				c.suspect[j.ID] = true
				t.Errorf("job %s %s (run %s): status %s after attempt %d on worker %q, want success", j.ID, j.Key, id, j.Status, j.Attempt, j.WorkerID)
			}
		}
	}
	var stats struct {
		QueuedTotal int `json:"queued_total"`
		Assigned    int `json:"assigned"`
		Running     int `json:"running"`
		Retrying    int `json:"retrying"`
	}
	c.get("/api/v1/stats", &stats)
	if stats.QueuedTotal+stats.Assigned+stats.Running+stats.Retrying != 0 {
		t.Errorf("after every run ended: stats %+v, want nothing queued, assigned, running or retrying", stats)
	}
}

// jobResult is the store's final record of a job with its ledger lines.
type jobResult struct {
	job    *store.Job
	ledger []entry
	// attempts that left lines in the ledger, in order.
	ran []int
}

// checkStore asserts, from the store's final record and the ledger, that every job's last
// attempt ran to its end on the worker the store names, that its once step succeeded and
// did not run again after the store recorded that, and that only the attempts of killed
// workers ran and were then run again.
func (c *chaos) checkStore(ctx context.Context, st reader, runs []uuid.UUID, events []killEvent) map[uuid.UUID]*jobResult {
	t := c.t
	entries, err := readLedger(c.ledger)
	if err != nil {
		t.Fatal(err)
	}
	byJob := ledgerOf(entries)
	out := map[uuid.UUID]*jobResult{}
	for _, run := range runs {
		jobs, err := st.ListJobs(ctx, run)
		if err != nil {
			t.Fatalf("list jobs of run %s: %v", run, err)
		}
		for _, j := range jobs {
			res := &jobResult{job: j, ledger: byJob[j.ID]}
			out[j.ID] = res
			for _, e := range res.ledger {
				if !slices.Contains(res.ran, e.attempt) {
					res.ran = append(res.ran, e.attempt)
				}
			}
			sort.Ints(res.ran)
			c.checkJob(ctx, st, res)
		}
	}
	if len(out) != c.m.runs*c.m.jobsPerRun {
		t.Errorf("the store has %d jobs, want %d", len(out), c.m.runs*c.m.jobsPerRun)
	}
	for id := range byJob {
		if out[id] == nil {
			t.Errorf("the ledger names job %s, which is in none of the runs:%s", id, logLines(byJob[id]))
		}
	}
	return out
}

func (c *chaos) checkJob(ctx context.Context, st reader, res *jobResult) {
	t, j := c.t, res.job
	fail := func(format string, args ...any) {
		c.suspect[j.ID] = true
		t.Errorf("job %s %s (attempt %d): %s", j.ID, j.Key, j.Attempt, fmt.Sprintf(format, args...))
	}
	if j.Status != store.JobSuccess {
		fail("status %s, want success", j.Status)
	}
	if j.LeaseToken != "" {
		fail("still holds a lease")
	}
	// The last attempt ran its work to the end, on the worker the store names.
	var last *entry
	for i, e := range res.ledger {
		if e.kind == "done" && e.attempt == j.Attempt {
			last = &res.ledger[i]
		}
	}
	holder := c.obs.holder(j.ID, j.Attempt)
	switch inc := c.workers.byID[holder]; {
	case last == nil:
		fail("no done line for the last attempt in the ledger")
	case holder == "":
		c.unseen++ // it ran between two polls: nothing to compare
	case inc == nil:
		fail("held by worker %q, which the suite did not start", holder)
	case inc.tag != last.tag:
		fail("the store says worker %s (%s) held the last attempt, the ledger says %s ran it", holder, inc.tag, last.tag)
	}
	// Every attempt but the last that ran anything was cut short by a worker's death, or
	// by its worker fencing it while a killed coordinator was away longer than the lease
	// allows (docs/reliability.md).
	if len(res.ran) > 0 && res.ran[len(res.ran)-1] != j.Attempt {
		fail("the last attempt that ran steps is %d", res.ran[len(res.ran)-1])
	}
	for _, e := range res.ledger {
		if e.attempt == j.Attempt {
			continue
		}
		inc := c.workers.byTag[e.tag]
		if inc == nil || inc.killedAt.IsZero() && !inc.fenced(j.ID.String()) {
			fail("attempt %d ran in %s, which was not killed, and the job ran again", e.attempt, e.tag)
			break
		}
	}

	// The once step: succeeded per the store, reported by the last attempt, and run by no
	// attempt after the store had recorded its success.
	steps, err := st.ListSteps(ctx, j.ID)
	if err != nil {
		t.Fatalf("list steps of job %s: %v", j.ID, err)
	}
	if len(steps) != 2 {
		fail("%d steps, want 2", len(steps))
		return
	}
	s0 := steps[0]
	if !s0.OnceSucceeded || (s0.Status != store.StepSuccess && s0.Status != store.StepSkipped) || s0.Attempt != j.Attempt {
		fail("once step: status %s in attempt %d, once_succeeded %v; want success or skipped in the last attempt, succeeded", s0.Status, s0.Attempt, s0.OnceSucceeded)
	}
	onceRan := map[int]bool{}
	for _, e := range res.ledger {
		if e.kind == "once" {
			onceRan[e.attempt] = true
		}
	}
	if len(onceRan) == 0 {
		fail("the once step never ran")
	}
	if s0.Status == store.StepSkipped && onceRan[j.Attempt] {
		fail("the last attempt ran the once step but reported it skipped")
	}
	if s0.Status == store.StepSuccess && !onceRan[j.Attempt] {
		fail("the last attempt reported the once step succeeded but did not run it")
	}
	rec := c.obs.onceOf(j.ID)
	if rec == nil {
		fail("the observer never saw the once step succeeded")
		return
	}
	for a := range onceRan {
		if a > rec.attempt || (!rec.exact && a == rec.attempt) {
			fail("the once step ran in attempt %d after the store recorded its success (seen at %s in attempt %d, exact %v)",
				a, rec.at.Format("15:04:05.000"), rec.attempt, rec.exact)
		}
	}
}

// fencedLog is what a worker logs when it stops a job whose lease it could not renew.
const fencedLog = "lease not renewed in time: killing the job's steps and reporting nothing more of this attempt"

// fenced says whether the worker logged that it fenced the job.
func (inc *incarnation) fenced(job string) bool { return loggedFence(inc.out.String(), job) }

// loggedFence says whether a worker's JSON log says it fenced the job.
func loggedFence(out, job string) bool {
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, fencedLog) && strings.Contains(line, `"job":"`+job+`"`) {
			return true
		}
	}
	return false
}

// summarize logs the kills, their recovery times, and the jobs that ran more than once.
func (c *chaos) summarize(events []killEvent, jobs map[uuid.UUID]*jobResult, elapsed time.Duration) {
	t := c.t
	var finished []time.Time
	for _, r := range jobs {
		finished = append(finished, r.job.FinishedAt)
	}
	sort.Slice(finished, func(i, k int) bool { return finished[i].Before(finished[k]) })
	t.Logf("worker kill: held = jobs the store had assigned or running on the worker at the SIGKILL; released = until none of them is leased to the dead worker (the reaper took them back: lease TTL %s, reap every 1s, and a restarted coordinator waits a TTL before its first reap); recovery = until every one of them is claimed by another worker or has ended (queued behind the waiting jobs). Polled every 200ms.", c.m.leaseTTL)
	t.Logf("coordinator kill: listening again = from SIGKILL until the new process listens on the same address; recovery = from SIGKILL until the first job finished (finished_at) by the restarted coordinator")
	for i, e := range events {
		switch {
		case e.recovery != nil:
			released, done, pending := c.obs.recovered(e.recovery)
			since := func(at time.Time) string {
				if at.IsZero() {
					return "never"
				}
				return at.Sub(e.at).Round(10 * time.Millisecond).String()
			}
			t.Logf("kill %2d at +%5.1fs: worker %s held %d jobs; released after %s; recovery %s",
				i+1, e.at.Sub(c.coord.all[0].started).Seconds(), e.what, len(e.recovery.held), since(released), since(done))
			if pending != 0 {
				t.Errorf("worker kill %d (%s): %d held jobs never claimed again nor ended", i+1, e.what, pending)
			}
		default:
			idx := sort.Search(len(finished), func(k int) bool { return finished[k].After(e.at) })
			rec := "no job finished after it"
			if idx < len(finished) {
				rec = finished[idx].Sub(e.at).Round(10 * time.Millisecond).String()
			}
			t.Logf("kill %2d at +%5.1fs: %s; listening again after %s; recovery %s", i+1, e.at.Sub(c.coord.all[0].started).Seconds(), e.what, e.down.Round(10*time.Millisecond), rec)
		}
	}
	twice, redelivered, attempts := 0, 0, 0
	for _, r := range jobs {
		attempts += r.job.Attempt
		if len(r.ran) > 1 {
			twice++
		}
		if r.job.Attempt > len(r.ran) {
			redelivered++
		}
	}
	if c.unseen > 0 {
		t.Logf("%d jobs ran their last attempt between two polls of the observer: their worker was not compared with the ledger", c.unseen)
	}
	t.Logf("%d jobs in %s: %d attempts; %d jobs ran in more than one attempt, each after a killed worker's attempt; %d attempts claimed but never started a step (a claim cut off by a kill)",
		len(jobs), elapsed.Round(time.Millisecond), attempts, twice, redelivered)
}

// diagnose prints, when the test failed, the tail of every process's output, the jobs not
// ended and the ledger lines of the jobs a failure named.
func (c *chaos) diagnose() {
	t := c.t
	if !t.Failed() {
		return
	}
	for _, p := range c.coord.all {
		t.Logf("--- %s (pid %d), last lines:\n%s", p.name, p.cmd.Process.Pid, p.out.Tail(30))
	}
	for _, inc := range c.workers.incarnations() {
		t.Logf("--- %s (pid %d, %s, worker %s, killed %v), last lines:\n%s", inc.name, inc.cmd.Process.Pid, inc.tag, inc.workerID, !inc.killedAt.IsZero(), inc.out.Tail(30))
	}
	if c.obs != nil {
		if nt := c.obs.notTerminal(); len(nt) > 0 {
			t.Logf("jobs not ended at the last poll:\n%s", strings.Join(nt, "\n"))
		}
	}
	entries, err := readLedger(c.ledger)
	if err != nil {
		t.Logf("ledger: %v", err)
		return
	}
	byJob := ledgerOf(entries)
	n := 0
	for id := range c.suspect {
		if n++; n > 20 {
			t.Logf("(ledger lines of %d more failing jobs left out)", len(c.suspect)-20)
			break
		}
		t.Logf("ledger of job %s:%s", id, logLines(byJob[id]))
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
