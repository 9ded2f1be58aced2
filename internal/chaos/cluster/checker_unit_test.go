package cluster

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// The checker and the plan are pure: these tests feed them made-up histories, each
// broken in one way, and check that they name exactly that. A checker that could not
// fail would pass every cluster run.

var testParams = planParams{duration: 80 * time.Second, kinds: allFaultKinds(), leaseTTL: 8 * time.Second, grace: time.Second,
	nodes: nodes{"replica": {"r1", "r2", "r3"}, "worker": {"w1", "w2", "w3"}, "docker-worker": {"d1", "d2"}, "db": {"pg"}}}

func TestPlanIsTheSeeds(t *testing.T) {
	t.Parallel()
	a, err := plan(7, testParams)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := plan(7, testParams)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two plans of seed 7 differ:\n%v\n%v", a, b)
	}
	c, _ := plan(8, testParams)
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 planned the same faults")
	}
	seen := map[string]bool{}
	var end time.Duration
	for i, f := range a {
		if f.At < end {
			t.Errorf("fault %d (%s) starts at %s, before the one before it is healed at %s", i, f, f.At, end)
		}
		end = f.At + f.For
		if end > testParams.duration {
			t.Errorf("fault %s ends past the duration", f)
		}
		seen[f.Kind] = true
		_, target, _ := strings.Cut(f.Kind, "-")
		if !slices.Contains(testParams.nodes[target], f.Target) {
			t.Errorf("fault %s hits %s, which is not a %s", f.Kind, f.Target, target)
		}
		past := testParams.leaseTTL + testParams.grace
		if f.Long != (f.For > past) {
			t.Errorf("fault %s: long %v but it lasts %s against a lease of %s", f.Kind, f.Long, f.For, past)
		}
	}
}

// TestShortFormHitsEveryKind: the short form's seeds, in its 80 s, hit every kind of
// fault at least once, and some pause or partition long enough to fence a job.
func TestShortFormHitsEveryKind(t *testing.T) {
	t.Parallel()
	cfg, seeds, err := suiteConfig()
	if err != nil {
		t.Fatal(err)
	}
	if *flagDuration != 0 || *flagSeed != "" || *flagFaults != "" {
		t.Skip("the flags ask for another form than the short one") // never in make test
	}
	p := testParams
	p.duration, p.leaseTTL, p.grace = cfg.faults, cfg.leaseTTL, cfg.grace
	for _, seed := range seeds {
		fs, err := plan(seed, p)
		if err != nil {
			t.Fatal(err)
		}
		seen, long := map[string]bool{}, 0
		for _, f := range fs {
			seen[f.Kind] = true
			if f.Long {
				long++
			}
		}
		if len(seen) != len(allFaultKinds()) || long == 0 {
			t.Errorf("seed %d hits %d of the %d kinds in %s, %d of them long: %v", seed, len(seen), len(allFaultKinds()), p.duration, long, fs)
		}
	}
}

func TestPlanRefusesBadInput(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		p    func(planParams) planParams
		want string
	}{
		{"no duration", func(p planParams) planParams { p.duration = 0; return p }, "positive"},
		{"too short", func(p planParams) planParams { p.duration = time.Second; return p }, "too short"},
		{"no kinds", func(p planParams) planParams { p.kinds = nil; return p }, "no fault kinds"},
		{"no target", func(p planParams) planParams { p.nodes = nodes{"replica": {"r1"}}; return p }, "no worker node"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := plan(1, tc.p(testParams))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("plan: %v, want an error saying %q", err, tc.want)
			}
		})
	}
	if _, err := parseFaultKinds("kill-replica,explode-worker"); err == nil || !strings.Contains(err.Error(), `unknown fault "explode-worker"`) {
		t.Errorf("an unknown fault kind: %v", err)
	}
	if k, err := parseFaultKinds(" pause-db , pause-db,kill-worker"); err != nil || !reflect.DeepEqual(k, []string{"pause-db", "kill-worker"}) {
		t.Errorf("parseFaultKinds: %v %v", k, err)
	}
	for _, s := range []string{"", "x", "1,,2", "-3", "1.5"} {
		if _, err := parseSeeds(s); err == nil || !strings.Contains(err.Error(), "bad seed") {
			t.Errorf("parseSeeds(%q): %v, want a bad seed error", s, err)
		}
	}
	if ss, err := parseSeeds("1, 18446744073709551615"); err != nil || len(ss) != 2 || ss[1] != 1<<64-1 {
		t.Errorf("parseSeeds: %v %v", ss, err)
	}
}

func TestParseMark(t *testing.T) {
	t.Parallel()
	job := uuid.New()
	m, err := parseMark(fmt.Sprintf("tick %s 3 w2 12345.67", job))
	if err != nil || m.kind != markTick || m.job != job || m.attempt != 3 || m.where != "w2" || m.at != 12345*time.Second+670*time.Millisecond {
		t.Fatalf("parseMark: %+v %v", m, err)
	}
	for _, bad := range []string{
		"tick " + job.String() + " 3 w2",           // torn
		"dance " + job.String() + " 3 w2 1.0",      // unknown kind
		"tick nope 3 w2 1.0",                       // not a job id
		"tick " + job.String() + " 0 w2 1.0",       // no attempt 0 runs
		"tick " + job.String() + " 3 w2 12x.5",     // not an uptime
		"tick " + job.String() + " 3 w2 1.0 extra", // too long
	} {
		if _, err := parseMark(bad); err == nil {
			t.Errorf("parseMark(%q) took it", bad)
		}
	}
}

// attemptMarks writes an attempt's marks: start, a tick every 200ms, end.
func attemptMarks(job uuid.UUID, attempt int, where string, from, to time.Duration) []mark {
	out := []mark{{kind: markOnce, job: job, attempt: attempt, where: where, at: from}, {kind: markStart, job: job, attempt: attempt, where: where, at: from}}
	for at := from; at < to; at += 200 * time.Millisecond {
		out = append(out, mark{kind: markTick, job: job, attempt: attempt, where: where, at: at})
	}
	return append(out, mark{kind: markEnd, job: job, attempt: attempt, where: where, at: to})
}

func TestCheckOverlaps(t *testing.T) {
	t.Parallel()
	job := uuid.New()
	s := time.Second
	pause := faultEvent{fault: fault{Kind: "pause-worker", Target: "w1"}, start: 10 * s, healed: 25 * s}
	// The engine took 800 ms to answer the unpause: the container ran from 24.2s.
	slowUnpause := faultEvent{fault: fault{Kind: "pause-worker", Target: "w1"}, start: 10 * s, healing: 24200 * time.Millisecond, healed: 25 * s}
	for _, tc := range []struct {
		name     string
		marks    []mark
		faults   []faultEvent
		overlaps int
		excused  int
	}{
		{"handed over", append(attemptMarks(job, 1, "w1", 10*s, 12*s), attemptMarks(job, 2, "w2", 22*s, 24*s)...), nil, 0, 0},
		{"one attempt", attemptMarks(job, 1, "w1", 10*s, 12*s), nil, 0, 0},
		{"overlap", append(attemptMarks(job, 1, "w1", 10*s, 23*s), attemptMarks(job, 2, "w2", 22*s, 24*s)...), nil, 1, 0},
		{"overlap with a lost attempt between", append(attemptMarks(job, 1, "w1", 10*s, 23*s), attemptMarks(job, 3, "w2", 22*s, 24*s)...), nil, 1, 0},
		// The frozen worker's step writes once as it thaws at 25s: excused.
		{"thaw", append(append(attemptMarks(job, 1, "w1", 9*s, 10*s), mark{kind: markTick, job: job, attempt: 1, where: "w1", at: 25*s + 5*time.Millisecond}),
			attemptMarks(job, 2, "w2", 20*s, 24*s)...), []faultEvent{pause}, 0, 1},
		// ... but not 2s after the thaw, nor on another worker than the one paused.
		{"thaw too late", append(append(attemptMarks(job, 1, "w1", 9*s, 10*s), mark{kind: markTick, job: job, attempt: 1, where: "w1", at: 27 * s}),
			attemptMarks(job, 2, "w2", 20*s, 24*s)...), []faultEvent{pause}, 1, 0},
		// A mark written after the unpause was asked for, before the engine answered.
		{"thaw before the engine answered", append(append(attemptMarks(job, 1, "w1", 9*s, 10*s), mark{kind: markTick, job: job, attempt: 1, where: "w1", at: 24300 * time.Millisecond}),
			attemptMarks(job, 2, "w2", 20*s, 24*s)...), []faultEvent{slowUnpause}, 0, 1},
		// ... and none before the unpause was asked for: the container was frozen then.
		{"written while frozen", append(append(attemptMarks(job, 1, "w1", 9*s, 10*s), mark{kind: markTick, job: job, attempt: 1, where: "w1", at: 24100 * time.Millisecond}),
			attemptMarks(job, 2, "w2", 20*s, 24*s)...), []faultEvent{slowUnpause}, 1, 0},
		{"thaw of another worker", append(append(attemptMarks(job, 1, "w3", 9*s, 10*s), mark{kind: markTick, job: job, attempt: 1, where: "w3", at: 25 * s}),
			attemptMarks(job, 2, "w2", 20*s, 24*s)...), []faultEvent{pause}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs, hs := checkOverlaps(tc.marks, tc.faults)
			if len(vs) != tc.overlaps {
				t.Errorf("%d overlaps, want %d: %v", len(vs), tc.overlaps, vs)
			}
			excused := 0
			for _, h := range hs {
				if h.excused != "" {
					excused++
				}
			}
			if excused != tc.excused {
				t.Errorf("%d excused, want %d: %+v", excused, tc.excused, hs)
			}
		})
	}
}

func TestCheckOnce(t *testing.T) {
	t.Parallel()
	job := uuid.New()
	s := time.Second
	twice := append(attemptMarks(job, 1, "w1", 10*s, 12*s), attemptMarks(job, 2, "w2", 22*s, 24*s)...)
	for _, tc := range []struct {
		name  string
		marks []mark
		rec   *onceRecord
		want  int
	}{
		{"ran once, recorded", attemptMarks(job, 1, "w1", 10*s, 12*s), &onceRecord{attempt: 1, exact: true}, 0},
		// Attempt 1 ran it but its success was never recorded (its worker was cut off):
		// attempt 2 runs it again, as it must.
		{"ran again, first not recorded", twice, &onceRecord{attempt: 2, exact: true}, 0},
		{"ran again after recorded", twice, &onceRecord{attempt: 1, exact: true}, 1},
		// Seen first in attempt 2 as skipped: success was in attempt 1, so 2 must not run it.
		{"ran in the attempt that skipped it", twice, &onceRecord{attempt: 2, exact: false}, 1},
		{"never recorded", attemptMarks(job, 1, "w1", 10*s, 12*s), nil, 1},
		{"never ran", nil, &onceRecord{attempt: 1, exact: true}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := checkOnce(tc.marks, map[uuid.UUID]*onceRecord{job: tc.rec}, []uuid.UUID{job})
			if len(vs) != tc.want {
				t.Errorf("%d violations, want %d: %v", len(vs), tc.want, vs)
			}
		})
	}
}

func TestCheckLog(t *testing.T) {
	t.Parallel()
	job := uuid.New()
	key := job.String()
	lines := func(texts ...string) []logLine {
		var out []logLine
		for i, tx := range texts {
			out = append(out, logLine{Seq: int64(i + 1), Text: tx})
		}
		return out
	}
	good := lines("cache: miss", "L1 "+key, "L2 "+key, "noise", "L3 "+key)
	for _, tc := range []struct {
		name  string
		lines []logLine
		want  string
	}{
		{"whole", good, ""},
		{"seq gap", append(good[:2:2], logLine{Seq: 4, Text: "L2 " + key}), "gap or a duplicate"},
		{"seq repeated", append(good[:2:2], logLine{Seq: 2, Text: "L2 " + key}), "gap or a duplicate"},
		{"line lost", lines("L1 "+key, "L3 "+key), "want L2"},
		{"line twice", lines("L1 "+key, "L2 "+key, "L2 "+key, "L3 "+key), "want L3"},
		{"short", lines("L1 "+key, "L2 "+key), "2 of the 3"},
		{"another job's lines do not count", lines("L1 "+key, "L2 "+key, "L3 other"), "2 of the 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vs := checkLog(job, key, tc.lines, 3)
			if tc.want == "" && len(vs) != 0 || tc.want != "" && (len(vs) != 1 || !strings.Contains(vs[0].detail, tc.want)) {
				t.Errorf("violations %v, want one saying %q", vs, tc.want)
			}
			// An attempt cut short may hold fewer lines, never a gap or a repeat.
			short := strings.Contains(tc.want, "of the 3")
			if vs := checkLog(job, key, tc.lines, -1); (len(vs) == 0) != (tc.want == "" || short) {
				t.Errorf("cut short: violations %v, want some: %v", vs, !short && tc.want != "")
			}
		})
	}
}

func TestCheckContainers(t *testing.T) {
	t.Parallel()
	job := uuid.New()
	s := time.Second
	marks := append(attemptMarks(job, 1, "c0ffee000001", 10*s, 12*s), attemptMarks(job, 2, "c0ffee000002", 22*s, 24*s)...)
	for _, tc := range []struct {
		name string
		seen []sighting
		want int
	}{
		{"gone before the next attempt", []sighting{{"c0ffee000001", 11 * s}, {"c0ffee000001", 21 * s}, {"c0ffee000002", 23 * s}}, 0},
		{"alive after the next began", []sighting{{"c0ffee000001", 23 * s}, {"c0ffee000001", 24 * s}}, 1},
		{"unknown containers", []sighting{{"deadbeef0000", 30 * s}}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if vs := checkContainers(tc.seen, marks); len(vs) != tc.want {
				t.Errorf("%d violations, want %d: %v", len(vs), tc.want, vs)
			}
		})
	}
}

func TestCheckAgreement(t *testing.T) {
	t.Parallel()
	run, job := uuid.New(), uuid.New()
	view := func(status string, attempt int) map[uuid.UUID]map[uuid.UUID]jobView {
		return map[uuid.UUID]map[uuid.UUID]jobView{run: {job: {Key: "build", Status: status, Attempt: attempt}}}
	}
	if vs := checkAgreement(map[string]map[uuid.UUID]map[uuid.UUID]jobView{"r1": view("success", 2), "r2": view("success", 2)}); len(vs) != 0 {
		t.Errorf("agreeing replicas: %v", vs)
	}
	if vs := checkAgreement(map[string]map[uuid.UUID]map[uuid.UUID]jobView{"r1": view("success", 2), "r2": view("running", 2)}); len(vs) != 1 {
		t.Errorf("a replica with another status: %v", vs)
	}
	if vs := checkAgreement(map[string]map[uuid.UUID]map[uuid.UUID]jobView{"r1": view("success", 2), "r2": {}}); len(vs) != 2 {
		t.Errorf("a replica without the run: %v", vs)
	}
}

func TestGenerateIsTheSeeds(t *testing.T) {
	t.Parallel()
	a, b := generate(3, 4, "http://ledger/m"), generate(3, 4, "http://ledger/m")
	if !reflect.DeepEqual(a, b) {
		t.Fatal("two runs generated from one seed and index differ")
	}
	if c := generate(3, 5, "http://ledger/m"); reflect.DeepEqual(a.yaml, c.yaml) {
		t.Fatal("runs 4 and 5 of seed 3 are the same")
	}
	p, err := pipeline.Compile(a.yaml, pipeline.Options{})
	if err != nil {
		t.Fatalf("generated run:\n%s\n%v", a.yaml, err)
	}
	if len(p.Jobs) != a.jobs || a.want["prep"].artifact == nil {
		t.Fatalf("generated run:\n%s\nplans %d jobs, wants %+v, %d jobs", a.yaml, len(p.Jobs), a.want, a.jobs)
	}
	for _, j := range p.Jobs {
		want, ok := a.want[j.Name]
		if !ok || want.container != slices.Contains(j.RunsOn, "docker") || !want.container && !slices.Contains(j.RunsOn, "shell") {
			t.Errorf("job %s runs on %v, want %+v", j.Key, j.RunsOn, want)
		}
	}
}
