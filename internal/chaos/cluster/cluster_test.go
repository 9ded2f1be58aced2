package cluster

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	mrand "math/rand/v2"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/postgres"
)

var (
	flagDuration = flag.Duration("cluster.duration", 0, "how long the nemesis injects faults; 0 runs the short form (`make test`)")
	flagSeed     = flag.String("cluster.seed", "", "comma-separated seeds, one suite run each on a cluster of its own (default: the short form's fixed set)")
	flagFaults   = flag.String("cluster.faults", "", "comma-separated fault kinds the nemesis draws from (default: all)")
	flagKeep     = flag.Bool("cluster.keep", false, "leave the cluster's containers and network behind, to look at them")
)

// shortSeeds are the short form's fixed seeds.
const shortSeeds = "1"

// suiteConfig reads the flags into the suite's config and seeds, or says what is wrong
// with them.
func suiteConfig() (config, []uint64, error) {
	cfg := config{replicas: 3, workers: 3, dockerWorkers: 2, maxJobs: 3,
		leaseTTL: 8 * time.Second, heartbeat: 2 * time.Second, grace: time.Second,
		faults: 80 * time.Second, warmup: 8 * time.Second, settle: 3 * time.Minute, pace: 5 * time.Second,
		keep: *flagKeep}
	switch d := *flagDuration; {
	case d < 0:
		return cfg, nil, fmt.Errorf("-cluster.duration %s: want a positive duration (or 0 for the short form)", d)
	case d > 0 && d < 30*time.Second:
		return cfg, nil, fmt.Errorf("-cluster.duration %s: want at least 30s, room for a few faults", d)
	case d > 0:
		cfg.faults = d
	}
	seeds := *flagSeed
	switch {
	case seeds == "" && *flagDuration == 0:
		seeds = shortSeeds
	case seeds == "":
		// A long run draws its seed, which it prints: SEED= runs it again.
		seeds = strconv.FormatUint(mrand.Uint64(), 10)
	}
	ss, err := parseSeeds(seeds)
	if err != nil {
		return cfg, nil, fmt.Errorf("-cluster.seed: %w", err)
	}
	if cfg.kinds, err = parseFaultKinds(*flagFaults); err != nil {
		return cfg, nil, fmt.Errorf("-cluster.faults: %w", err)
	}
	return cfg, ss, nil
}

// TestCluster runs the multi-host fault suite: for each seed, a cluster of its own in
// containers on a private network, a generator submitting runs, a nemesis injecting the
// seed's faults, and the checks of every invariant once the faults stop.
func TestCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the cluster suite builds an image and runs containers for minutes (make test runs it)")
	}
	cfg, seeds, err := suiteConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { runSuite(t, cfg, seed) })
	}
}

// suiteRun is the state of one seed's run.
type suiteRun struct {
	t    *testing.T
	cfg  config
	seed uint64
	c    *cluster
	obs  *observer
	hc   *http.Client

	mu        sync.Mutex
	submitted []submission
	subErrs   []error
}

// submission is a run the generator submitted and what it must do.
type submission struct {
	spec runSpec
	run  apiRun
}

func runSuite(t *testing.T, cfg config, seed uint64) {
	began := time.Now()
	wallMinusBoot := time.Now().Add(-bootNow())
	c := newCluster(t, cfg)
	nodes := nodes{}
	for _, n := range c.nodes {
		k := n.kind
		if k == "blobs" {
			continue
		}
		nodes[k] = append(nodes[k], n.name)
	}
	faults, err := plan(seed, planParams{duration: cfg.faults, kinds: cfg.kinds, nodes: nodes, leaseTTL: cfg.leaseTTL, grace: cfg.grace})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("seed %d: %d replicas, %d shell workers, %d docker workers of %d slots; lease TTL %s, heartbeat %s, reap grace %s; cluster up in %s",
		seed, cfg.replicas, cfg.workers, cfg.dockerWorkers, cfg.maxJobs, cfg.leaseTTL, cfg.heartbeat, cfg.grace, time.Since(began).Round(time.Millisecond))
	var pl strings.Builder
	for _, f := range faults {
		pl.WriteString("\n  " + f.String())
	}
	t.Logf("nemesis plan (%d faults over %s, from seed %d):%s", len(faults), cfg.faults, seed, pl.String())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := postgres.Open(ctx, c.pgURL, postgres.Options{})
	if err != nil {
		t.Fatalf("open the database beside the cluster: %v", err)
	}
	defer st.Close()
	s := &suiteRun{t: t, cfg: cfg, seed: seed, c: c, hc: c.httpClient(20 * time.Second)}
	s.obs = newObserver(st, c.running)
	obsCtx, stopObs := context.WithCancel(ctx)
	obsDone := make(chan struct{})
	go func() { defer close(obsDone); s.obs.run(obsCtx, 500*time.Millisecond) }()
	defer func() { stopObs(); <-obsDone }()

	// The generator submits runs through the warm-up and the faults; the nemesis starts
	// after the warm-up.
	start := time.Now()
	genCtx, stopGen := context.WithCancel(ctx)
	genDone := make(chan struct{})
	go func() { defer close(genDone); s.generate(genCtx) }()
	nem := &nemesis{plan: faults, inj: c, logf: t.Logf}
	nem.run(ctx, start.Add(cfg.warmup))
	stopGen()
	<-genDone
	quietFrom := time.Now()
	t.Logf("faults over after %s; %d runs submitted", quietFrom.Sub(start).Round(time.Second), len(s.submitted))

	s.waitTerminal(quietFrom.Add(cfg.settle))
	settled := time.Since(quietFrom)
	stopObs()
	<-obsDone

	v, figs := s.check(ctx, nem.happened(), wallMinusBoot)
	s.report(v, figs, nem.happened(), settled, wallMinusBoot)
	if len(v) > 0 {
		s.diagnose(v)
	}
	t.Logf("seed %d: %s in all", seed, time.Since(began).Round(time.Second))
}

// generate submits run after run, one every pace, until ctx ends.
func (s *suiteRun) generate(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		spec := generate(s.seed, i, s.c.ledger.url())
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		run, err := s.c.submit(sctx, s.hc, i, spec.key, spec.yaml)
		cancel()
		s.mu.Lock()
		if err != nil {
			s.subErrs = append(s.subErrs, err)
		} else {
			s.submitted = append(s.submitted, submission{spec: spec, run: run})
		}
		s.mu.Unlock()
		if err == nil {
			s.obs.watch(run.ID)
		}
		select {
		case <-ctx.Done():
		case <-time.After(s.cfg.pace):
		}
	}
}

// waitTerminal waits until every job of every submitted run is terminal, by the
// database, or deadline passes.
func (s *suiteRun) waitTerminal(deadline time.Time) {
	_, _, polls := s.obs.progress()
	for {
		done, total, p := s.obs.progress()
		// A poll that began after the wait did sees every run submitted.
		if p > polls+1 && total > 0 && done == total {
			return
		}
		if time.Now().After(deadline) {
			return
		}
		time.Sleep(250 * time.Millisecond) // a poll under a deadline
	}
}

// figures are the numbers the suite prints besides its verdicts.
type figures struct {
	runs, jobs, attempts, marks, logLines, artifacts, sightings int
	handovers                                                   []handover
	fence                                                       []fenceFigure
}

// check reads what happened and returns every broken invariant.
func (s *suiteRun) check(ctx context.Context, faults []faultEvent, wallMinusBoot time.Time) ([]violation, figures) {
	t, c := s.t, s.c
	var out []violation
	var fig figures
	jobs, sightings := s.obs.snapshot()
	fig.sightings = len(sightings)

	// terminal: every job of every run ended within the bound.
	for id, j := range jobs {
		if !j.status.Terminal() {
			out = append(out, violation{invTerminal, id, fmt.Sprintf("%s of run %s is %s at attempt %d (worker %q) %s after the faults stopped",
				j.key, j.run, j.status, j.attempt, j.workerID, s.cfg.settle)})
		}
	}
	for _, err := range s.subErrs {
		t.Logf("a submission failed on every replica (not a violation: the client was told): %v", err)
	}

	// lost and agreement: every replica answers every run, the same way, all succeeded.
	views := map[string]map[uuid.UUID]map[uuid.UUID]jobView{}
	byID := map[uuid.UUID]submission{}
	for _, sub := range s.submitted {
		byID[sub.run.ID] = sub
	}
	for _, r := range c.of("replica") {
		views[r.name] = map[uuid.UUID]map[uuid.UUID]jobView{}
		for _, sub := range s.submitted {
			var run apiRun
			err := c.call(ctx, s.hc, r.name, http.MethodGet, "/api/v1/runs/"+sub.run.ID.String(), nil, nil, http.StatusOK, &run)
			if err != nil {
				out = append(out, violation{invLost, uuid.Nil, fmt.Sprintf("run %s (%s) on %s: %v", sub.run.ID, sub.spec.key, r.name, err)})
				continue
			}
			jv := map[uuid.UUID]jobView{}
			for _, j := range run.Jobs {
				jv[j.ID] = jobView{Key: j.Key, Status: j.Status, Attempt: j.Attempt}
			}
			views[r.name][run.ID] = jv
			if r != c.of("replica")[0] {
				continue
			}
			if run.Status != "success" {
				out = append(out, violation{invLost, uuid.Nil, fmt.Sprintf("run %s (%s) is %s, want success", run.ID, sub.spec.key, run.Status)})
			}
			if len(run.Jobs) != sub.spec.jobs {
				out = append(out, violation{invLost, uuid.Nil, fmt.Sprintf("run %s has %d jobs, want %d", run.ID, len(run.Jobs), sub.spec.jobs)})
			}
			for _, j := range run.Jobs {
				fig.jobs++
				fig.attempts += j.Attempt
				if j.Status != "success" {
					out = append(out, violation{invLost, j.ID, fmt.Sprintf("%s (run %s) is %s after attempt %d, want success", j.Key, run.ID, j.Status, j.Attempt)})
				}
			}
		}
	}
	fig.runs = len(s.submitted)
	out = append(out, checkAgreement(views)...)

	// The ledger: overlaps, once steps, containers of fenced attempts.
	marks, err := readLedgerFile(c.dir + "/ledger/marks")
	if err != nil {
		t.Fatal(err)
	}
	httpMarks, bad := c.ledger.taken()
	for _, b := range bad {
		out = append(out, violation{invOverlap, uuid.Nil, "the ledger server got a request that is not a mark: " + b})
	}
	marks = append(marks, httpMarks...)
	fig.marks = len(marks)
	overlaps, hs := checkOverlaps(marks, faults)
	out = append(out, overlaps...)
	fig.handovers = hs
	recs := map[uuid.UUID]*onceRecord{}
	var all []uuid.UUID
	for id, j := range jobs {
		recs[id] = j.once
		if j.status == store.JobSuccess {
			all = append(all, id)
		}
	}
	out = append(out, checkOnce(marks, recs, all)...)
	out = append(out, checkContainers(sightings, marks)...)
	fig.fence = fenceFigures(faults, hs, func(job uuid.UUID, attempt int) string {
		return c.workerName(jobs[job].holders[attempt])
	})

	// Logs and artifacts of every job's last attempt, each read from a replica in turn.
	replicas := c.of("replica")
	i := 0
	for id, j := range jobs {
		sub, ok := byID[j.run]
		if !ok || j.status != store.JobSuccess {
			continue
		}
		want := sub.spec.want[j.name]
		r := replicas[i%len(replicas)].name
		i++
		// Every attempt's log: an earlier one may end short (a fenced attempt drops what it
		// had not sent), never with a gap, a repeat or a line out of order.
		for a := 1; a <= j.attempt; a++ {
			lines, err := c.logOf(ctx, s.hc, r, id, a)
			if err != nil {
				out = append(out, violation{invLog, id, fmt.Sprintf("read the log of attempt %d from %s: %v", a, r, err)})
				continue
			}
			fig.logLines += len(lines)
			n := want.logLines
			if a < j.attempt {
				n = -1
			}
			out = append(out, checkLog(id, id.String(), lines, n)...)
		}
		if want.artifact == nil {
			continue
		}
		var arts []artifact
		if err := c.call(ctx, s.hc, r, http.MethodGet, "/api/v1/jobs/"+id.String()+"/artifacts", nil, nil, http.StatusOK, &arts); err != nil {
			out = append(out, violation{invArtifact, id, fmt.Sprintf("list artifacts on %s: %v", r, err)})
			continue
		}
		// Artifacts are kept per attempt: one cut off after it kept its files keeps them
		// beside the last attempt's. Each attempt keeps out/data.txt once, the last one
		// included, and every copy reads back as the job wrote it.
		perAttempt := map[int]int{}
		for _, a := range arts {
			perAttempt[a.Attempt]++
		}
		bad := perAttempt[j.attempt] != 1
		for a, n := range perAttempt {
			bad = bad || n != 1 || a < 1 || a > j.attempt
		}
		if bad {
			out = append(out, violation{invArtifact, id, fmt.Sprintf("%d artifacts, want out/data.txt once for each attempt that kept it, the last (%d) included: %+v",
				len(arts), j.attempt, arts)})
			continue
		}
		for _, a := range arts {
			data, err := c.download(ctx, s.hc, r, a.ID)
			switch {
			case a.Name != "out/data.txt":
				out = append(out, violation{invArtifact, id, fmt.Sprintf("attempt %d kept %q, want out/data.txt", a.Attempt, a.Name)})
			case err != nil:
				out = append(out, violation{invArtifact, id, fmt.Sprintf("download %s of attempt %d from %s: %v", a.Name, a.Attempt, r, err)})
			case !bytes.Equal(data, want.artifact):
				out = append(out, violation{invArtifact, id, fmt.Sprintf("%s of attempt %d reads back %d bytes that differ from the %d the job kept",
					a.Name, a.Attempt, len(data), len(want.artifact))})
			default:
				fig.artifacts++
			}
		}
	}

	// Leftovers: no container that ran a step still runs once every job has ended
	// (their removal runs off the job's path: give it a moment).
	ran := map[string]bool{}
	for _, m := range marks {
		ran[m.where] = true
	}
	var left []string
	for deadline := time.Now().Add(20 * time.Second); ; {
		hosts, err := c.running(ctx)
		if err != nil {
			t.Fatalf("list containers: %v", err)
		}
		left = slices.DeleteFunc(hosts, func(h string) bool { return !ran[h] })
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(500 * time.Millisecond) // a poll under a deadline
	}
	for _, h := range left {
		out = append(out, violation{invLeftover, uuid.Nil, "container " + h + " ran a job's steps and still runs 20s after every job ended"})
	}
	sortViolations(out)
	return out, fig
}

// report prints what was injected, what was checked and the figures, and fails the test
// on every violation.
func (s *suiteRun) report(vs []violation, fig figures, faults []faultEvent, settled time.Duration, wallMinusBoot time.Time) {
	t := s.t
	jobs, _ := s.obs.snapshot()
	var ends []time.Time
	for _, j := range jobs {
		if !j.ended.IsZero() {
			ends = append(ends, j.ended)
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
	var b strings.Builder
	fmt.Fprintf(&b, "injected %d faults:\n", len(faults))
	for _, f := range faults {
		at := wallMinusBoot.Add(f.start)
		stall := "no job ended after it"
		if i := sort.Search(len(ends), func(i int) bool { return ends[i].After(at) }); i < len(ends) {
			stall = ends[i].Sub(at).Round(10 * time.Millisecond).String()
		}
		fmt.Fprintf(&b, "  %s: in effect %.1fs; first job ended %s after it began%s\n", f.fault, (f.healed - f.start).Seconds(), stall, errSuffix(f.err))
	}
	ended := fmt.Sprintf("every job ended %s after the faults stopped", settled.Round(100*time.Millisecond))
	if done, total, _ := s.obs.progress(); done != total {
		ended = fmt.Sprintf("%d of %d jobs had not ended %s after the faults stopped", total-done, total, settled.Round(100*time.Millisecond))
	}
	fmt.Fprintf(&b, "checked %d runs, %d jobs, %d attempts (every job's last attempt: log and artifacts), %d ledger marks, %d log lines, %d artifacts read back, %d container sightings; %s\n",
		fig.runs, fig.jobs, fig.attempts, fig.marks, fig.logLines, fig.artifacts, fig.sightings, ended)
	minGap, excused := time.Duration(-1), 0
	for _, h := range fig.handovers {
		if h.excused != "" {
			excused++
			continue
		}
		if minGap < 0 || h.gap < minGap {
			minGap = h.gap
		}
	}
	fmt.Fprintf(&b, "handovers (a job's attempt that ran steps, then the next that did): %d, shortest gap %s; overlaps excused (a thawed shell worker's steps, within %s): %d\n",
		len(fig.handovers), minGap.Round(10*time.Millisecond), thawBound, excused)
	for _, h := range fig.handovers {
		if h.excused != "" {
			fmt.Fprintf(&b, "  excused: job %s attempt %d on %s: %s\n", h.job, h.from.attempt, h.from.where, h.excused)
		}
	}
	b.WriteString("fences (per worker fault: attempts it cut off that ran again, how long they went on after it began, the shortest gap to the next attempt):\n")
	for _, f := range fig.fence {
		if f.attempts == 0 {
			fmt.Fprintf(&b, "  %-24s %-4s: no attempt of it ran again\n", f.fault.Kind, f.fault.Target)
			continue
		}
		fmt.Fprintf(&b, "  %-24s %-4s (%4.1fs): %d attempts, ran on for at most %s, shortest gap %s\n", f.fault.Kind, f.fault.Target,
			f.fault.For.Seconds(), f.attempts, f.after.Round(10*time.Millisecond), f.gap.Round(10*time.Millisecond))
	}
	invs := []string{invTerminal, invLost, invOverlap, invOnce, invLog, invArtifact, invFence, invAgreement, invLeftover}
	count := map[string]int{}
	for _, v := range vs {
		count[v.invariant]++
	}
	b.WriteString("invariants:")
	for _, inv := range invs {
		if count[inv] == 0 {
			fmt.Fprintf(&b, " %s ok;", inv)
		} else {
			fmt.Fprintf(&b, " %s BROKEN (%d);", inv, count[inv])
		}
	}
	t.Log(b.String())
	for i, v := range vs {
		if i == 50 {
			t.Errorf("... and %d more violations", len(vs)-50)
			break
		}
		t.Error(v.String())
	}
}

// diagnose prints, for a failed run, the ledger of the jobs named and the replicas' and
// workers' last lines.
func (s *suiteRun) diagnose(vs []violation) {
	t, c := s.t, s.c
	marks, _ := readLedgerFile(c.dir + "/ledger/marks")
	httpMarks, _ := c.ledger.taken()
	by := byAttempt(append(marks, httpMarks...))
	jobs, _ := s.obs.snapshot()
	n := 0
	for _, v := range vs {
		if v.job == uuid.Nil {
			continue
		}
		if n++; n > 10 {
			break
		}
		j := jobs[v.job]
		var b strings.Builder
		fmt.Fprintf(&b, "job %s %s (run %s): %s, attempt %d; holders %v", v.job, j.key, j.run, j.status, j.attempt, j.holders)
		for a, ms := range by[v.job] {
			fmt.Fprintf(&b, "\n  attempt %d: %d marks on %s from %s to %s", a, len(ms), ms[0].where, fmtBoot(ms[0].at), fmtBoot(ms[len(ms)-1].at))
		}
		t.Log(b.String())
	}
	if nt := s.obs.notTerminal(); len(nt) > 0 {
		t.Logf("jobs not ended at the last poll:\n%s", strings.Join(nt, "\n"))
	}
	if err := s.obs.err(); err != nil {
		t.Logf("observer: last read error: %v", err)
	}
	for _, nd := range c.nodes {
		if nd.kind == "db" || nd.kind == "blobs" {
			continue
		}
		t.Logf("--- %s, last lines:\n%s", nd.name, c.logs(nd, 25))
	}
}
