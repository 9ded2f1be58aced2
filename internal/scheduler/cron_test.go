package scheduler

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/postgres"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/gantry-ci/gantry/internal/testdb"
	"github.com/gantry-ci/gantry/internal/trigger"
	"github.com/google/uuid"
)

func TestMain(m *testing.M) { testdb.Main(m) }

func testLog(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Every five minutes, and hourly with missed: run_once.
const scheduled = `name: nightly
on:
  schedule:
    - cron: "*/5 * * * *"
    - { cron: "0 * * * *", missed: run_once }
jobs:
  build: { steps: [ { run: make } ] }
`

func connect(t *testing.T, s store.Store, name, url string) *store.Project {
	t.Helper()
	p := &store.Project{Name: name, RepoURL: url, Provider: "generic", DefaultBranch: "main", PipelinePath: ".gantry.yml", WebhookSecret: "x"}
	if err := s.CreateProject(t.Context(), p); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	return p
}

func runsOf(t *testing.T, s store.Store, project string) []*store.Run {
	t.Helper()
	runs, err := s.ListRuns(t.Context(), store.ListRunsParams{Project: project, Limit: 500})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	return runs
}

// TestCronLoopFiresOncePerTick drives Run with a fake clock: each tick of the default
// branch's file fires one run, at the branch's tip, however many passes see it; a missed
// tick is given up or run once as its schedule says; a new commit's schedules are read.
func TestCronLoopFiresOncePerTick(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 3, 2, 12, 3, 0, 0, time.UTC)
	clk := clock.NewFake(start)
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	repo := sourcetest.NewRepo(t)
	sha := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": scheduled})
	connect(t, st, "app", repo.URL())
	// A registered workflow of another project fires on its own schedule too.
	wf := &store.Workflow{Project: "ops", Name: "hourly", Definition: []byte("on: { schedule: [ { cron: \"0 * * * *\" } ] }\njobs: { a: { steps: [ { run: \"true\" } ] } }\n")}
	if err := st.CreateWorkflow(t.Context(), wf); err != nil {
		t.Fatal(err)
	}

	passes := make(chan PassResult, 1)
	c := NewCron(CronConfig{Store: st, Clock: clk, Logger: testLog(t), Every: 15 * time.Second,
		MirrorsDir: t.TempDir(), Passed: func(r PassResult) { passes <- r }})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		c.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	// pass waits for the loop's next pass (the first comes at once) and checks what it
	// fired; advance moves the clock to the next pass first.
	pass := func(what string, fired, skipped int) PassResult {
		t.Helper()
		select {
		case r := <-passes:
			if r.Err != nil {
				t.Fatalf("%s: pass failed: %v", what, r.Err)
			}
			if len(r.Fired) != fired || r.Skipped != skipped {
				t.Fatalf("%s: pass fired %d runs and gave up %d ticks; want %d and %d", what, len(r.Fired), r.Skipped, fired, skipped)
			}
			return r
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: no pass within 30s", what)
		}
		return PassResult{}
	}
	advance := func(d time.Duration, what string, fired, skipped int) PassResult {
		t.Helper()
		clk.Advance(d)
		return pass(what, fired, skipped)
	}

	pass("12:03, no tick since the loop started", 0, 0)
	advance(15*time.Second, "12:03:15", 0, 0)
	r := advance(2*time.Minute, "12:05:15, the 12:05 tick", 1, 0)
	run, err := st.GetRun(t.Context(), r.Fired[0])
	if err != nil {
		t.Fatal(err)
	}
	// The file was read at main's tip in the mirror: its ref is the repository's.
	if tr := run.Trigger; tr.Event != "schedule" || tr.SHA != sha || tr.Ref != "refs/heads/main" || tr.Branch != "main" || tr.CloneURL != repo.URL() ||
		tr.Verified != store.RefFromRepository {
		t.Errorf("scheduled run trigger = %+v; want event schedule at %s on main, verified by the repository", tr, sha)
	}
	if tr := run.Trigger; tr.Message != "change" || tr.AuthorName == "" {
		t.Errorf("scheduled run's commit = %q by %q, want the tip's message and author", tr.Message, tr.AuthorName)
	}
	advance(15*time.Second, "12:05:30, the same tick again", 0, 0)
	advance(time.Minute, "12:06:30", 0, 0)
	// 13:00 is a tick of every schedule; */5 drops the ones it saw no pass for. The
	// file's two schedules both fall on it: one run of the file, and one of the workflow.
	advance(53*time.Minute+45*time.Second, "13:00:15, every schedule's tick", 2, 0)

	// A pass that comes late, past the on-time window: */5 and the workflow (missed: skip)
	// give their ticks up; the hourly run_once one fires its 14:00 tick.
	advance(time.Hour+7*time.Minute, "14:07:15, every tick late", 1, 2)
	advance(15*time.Second, "14:07:30", 0, 0)
	if n := len(runsOf(t, st, "app")); n != 3 {
		t.Errorf("runs of app = %d, want 3", n)
	}
	// A new commit's schedules are read: */10 is a new schedule, from the pass that first
	// reads it, so its first tick is 15:00.
	newSHA := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": strings.Replace(scheduled, `"*/5 * * * *"`, `"*/10 * * * *"`, 1)})
	advance(15*time.Second, "14:07:45, the new commit read", 0, 0)
	r = advance(52*time.Minute+30*time.Second, "15:00:15, every schedule's tick", 2, 0)
	var workflowRuns, fileRuns int
	for _, id := range r.Fired {
		run, err := st.GetRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case run.Project == "ops" && run.Trigger.WorkflowID == wf.ID.String() && run.Trigger.SHA == "" && run.Name == "hourly":
			workflowRuns++
		case run.Project == "app" && run.Trigger.SHA == newSHA:
			fileRuns++
		default:
			t.Errorf("unexpected run %+v", run)
		}
	}
	if workflowRuns != 1 || fileRuns != 1 {
		t.Errorf("fired %d workflow runs and %d runs of the new commit; want 1 and 1", workflowRuns, fileRuns)
	}
	// A disabled workflow does not fire.
	off := false
	if _, err := st.UpdateWorkflow(t.Context(), store.UpdateWorkflowParams{ID: wf.ID, Enabled: &off}); err != nil {
		t.Fatal(err)
	}
	advance(time.Hour, "16:00:15", 1, 0)
}

// TestCronOneRunPerTickOfADefinition: a definition with two hundred every-minute
// entries, spelt alike and not, and other schedules that fall on some of the same
// minutes, starts one run a minute, from a file and from a workflow alike.
func TestCronOneRunPerTickOfADefinition(t *testing.T) {
	t.Parallel()
	spellings := []string{"* * * * *", "*/1 * * * *", "0-59 * * * *", "* * 1-31 * *", "*  *  *  *  *"}
	var b strings.Builder
	b.WriteString("on:\n  schedule:\n")
	for i := range 200 {
		fmt.Fprintf(&b, "    - cron: %q\n", spellings[i%len(spellings)])
	}
	b.WriteString("    - cron: \"*/5 * * * *\"\n    - { cron: \"0 * * * *\", missed: run_once }\n")
	b.WriteString("jobs: { a: { steps: [ { run: \"true\" } ] } }\n")
	def := b.String()

	for _, file := range []bool{true, false} {
		t.Run(map[bool]string{true: "pipeline file", false: "workflow"}[file], func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Date(2026, 3, 2, 12, 57, 30, 0, time.UTC))
			st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			project := "ops"
			if file {
				project = "app"
				repo := sourcetest.NewRepo(t)
				repo.Commit("refs/heads/main", map[string]string{".gantry.yml": def})
				connect(t, st, project, repo.URL())
			} else if err := st.CreateWorkflow(t.Context(), &store.Workflow{Project: project, Name: "w", Definition: []byte(def)}); err != nil {
				t.Fatal(err)
			}
			c := NewCron(CronConfig{Store: st, Clock: clk, Logger: testLog(t), MirrorsDir: t.TempDir()})
			// A coordinator that has just started may take the 12:57 tick of a file
			// whose schedules it has not seen come (see sighted): once, if at all.
			r := c.Pass(t.Context())
			if r.Err != nil || len(r.Fired) > 1 {
				t.Fatalf("12:57:30: fired %d runs (err %v), want at most one", len(r.Fired), r.Err)
			}
			first := len(r.Fired)
			// 12:58, 12:59, 13:00 (every schedule's tick), 13:01: two passes each.
			for i := range 4 {
				now := clk.Now()
				clk.Advance(now.Truncate(time.Minute).Add(time.Minute + 5*time.Second).Sub(now))
				for again := range 2 {
					r := c.Pass(t.Context())
					at := clk.Now().Format(time.TimeOnly)
					if r.Err != nil {
						t.Fatalf("%s: %v", at, r.Err)
					}
					if want := 1 - again; len(r.Fired) != want {
						t.Fatalf("%s (tick %d, pass %d): fired %d runs, want %d", at, i+1, again+1, len(r.Fired), want)
					}
					clk.Advance(15 * time.Second)
				}
			}
			if n := len(runsOf(t, st, project)); n != first+4 {
				t.Errorf("runs of %s = %d, want %d: one a minute", project, n, first+4)
			}
		})
	}
}

// TestCronTwoReplicasOnPostgres runs two coordinators' schedule loops at once over one
// PostgreSQL database, each with its own store and mirrors, driven by one fake clock:
// every tick fires exactly once.
func TestCronTwoReplicasOnPostgres(t *testing.T) {
	t.Parallel()
	dsn := testdb.Postgres(t)
	start := time.Date(2026, 3, 2, 12, 4, 50, 0, time.UTC)
	clk := clock.NewFake(start)
	repo := sourcetest.NewRepo(t)
	repo.Commit("refs/heads/main", map[string]string{".gantry.yml": scheduled})
	const replicas = 2
	passes := make([]chan PassResult, replicas)
	var stores []store.Store
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	t.Cleanup(func() {
		cancel()
		wg.Wait()
	})
	for i := range replicas {
		st, err := postgres.Open(t.Context(), dsn, postgres.Options{Clock: clk})
		if err != nil {
			t.Fatalf("open replica %d: %v", i, err)
		}
		t.Cleanup(func() { _ = st.Close() })
		stores = append(stores, st)
		if i == 0 {
			connect(t, st, "app", repo.URL())
		}
		passes[i] = make(chan PassResult, 1)
		c := NewCron(CronConfig{Store: st, Clock: clk, Logger: testLog(t).With("replica", i), MirrorsDir: t.TempDir(),
			Every: 10 * time.Second, Passed: func(r PassResult) { passes[i] <- r }})
		wg.Go(func() { c.Run(ctx) })
	}
	// round waits for one pass of every replica and returns how many runs they fired.
	fired := map[uuid.UUID]bool{}
	round := func(what string) int {
		t.Helper()
		n := 0
		for i, ch := range passes {
			select {
			case r := <-ch:
				if r.Err != nil {
					t.Fatalf("%s: replica %d: %v", what, i, r.Err)
				}
				for _, id := range r.Fired {
					fired[id] = true
				}
				n += len(r.Fired)
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: replica %d made no pass within 30s", what, i)
			}
		}
		return n
	}
	if n := round("12:04:50"); n != 0 {
		t.Fatalf("12:04:50: %d runs fired before any tick", n)
	}
	// Both loops pass every 10 s: 12:05:00 is the first pass after a tick; then the
	// clock jumps five minutes at a time, each jump one pass of each loop at a tick of
	// the */5 schedule.
	clk.Advance(10 * time.Second)
	if n := round("12:05:00"); n != 1 {
		t.Fatalf("12:05:00: the replicas fired %d runs, want exactly 1", n)
	}
	for i := range 5 {
		clk.Advance(5 * time.Minute)
		what := clk.Now().Format(time.TimeOnly)
		if n := round(what); n != 1 {
			t.Fatalf("%s (round %d): the replicas fired %d runs, want exactly 1", what, i, n)
		}
	}
	if runs := runsOf(t, stores[1], "app"); len(runs) != 6 || len(fired) != 6 {
		t.Errorf("runs = %d (%d fired), want 6: one per tick", len(runs), len(fired))
	}
}

// TestCronFiresOnlyTicksAfterTheScheduleExists: a schedule that appears at 07:10:32 (a
// workflow created or given a new cron line, a pipeline file pushed with it or changed
// to it) fires first for the 07:11 tick, not for the 07:10 one that passed before it
// existed, although that tick is still within the on-time window.
func TestCronFiresOnlyTicksAfterTheScheduleExists(t *testing.T) {
	t.Parallel()
	const (
		minutely = "on: { schedule: [ { cron: \"* * * * *\" } ] }\njobs: { a: { steps: [ { run: \"true\" } ] } }\n"
		hourly   = "on: { schedule: [ { cron: \"0 * * * *\" } ] }\njobs: { a: { steps: [ { run: \"true\" } ] } }\n"
		none     = "jobs: { a: { steps: [ { run: \"true\" } ] } }\n"
	)
	tests := []struct {
		name string
		file bool   // declared in the project's pipeline file, else by a registered workflow
		was  string // the definition before 07:10:32; "" for no workflow yet
	}{
		{"workflow created", false, ""},
		{"workflow's cron line changed", false, hourly},
		{"pipeline file pushed with a schedule", true, none},
		{"pipeline file's cron line changed", true, hourly},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Date(2026, 3, 2, 7, 9, 50, 0, time.UTC))
			st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			var change func()
			if tt.file {
				repo := sourcetest.NewRepo(t)
				repo.Commit("refs/heads/main", map[string]string{".gantry.yml": tt.was})
				connect(t, st, "app", repo.URL())
				change = func() { repo.Commit("refs/heads/main", map[string]string{".gantry.yml": minutely}) }
			} else {
				wf := &store.Workflow{Project: "ops", Name: "w", Definition: []byte(tt.was)}
				if tt.was != "" {
					if err := st.CreateWorkflow(t.Context(), wf); err != nil {
						t.Fatal(err)
					}
				}
				change = func() {
					if tt.was == "" {
						wf.Definition = []byte(minutely)
						if err := st.CreateWorkflow(t.Context(), wf); err != nil {
							t.Fatal(err)
						}
						return
					}
					if _, err := st.UpdateWorkflow(t.Context(), store.UpdateWorkflowParams{ID: wf.ID, Definition: []byte(minutely)}); err != nil {
						t.Fatal(err)
					}
				}
			}
			c := NewCron(CronConfig{Store: st, Clock: clk, Logger: testLog(t), MirrorsDir: t.TempDir()})
			pass := func(fired int) {
				t.Helper()
				r := c.Pass(t.Context())
				if r.Err != nil {
					t.Fatalf("%s: pass failed: %v", clk.Now().Format(time.TimeOnly), r.Err)
				}
				if len(r.Fired) != fired {
					t.Fatalf("%s: the pass fired %d runs, want %d", clk.Now().Format(time.TimeOnly), len(r.Fired), fired)
				}
			}
			pass(0)                       // 07:09:50
			clk.Advance(30 * time.Second) // 07:10:20
			pass(0)
			clk.Advance(12 * time.Second) // 07:10:32
			change()
			clk.Advance(3 * time.Second) // 07:10:35: the 07:10 tick came before the schedule
			pass(0)
			clk.Advance(30 * time.Second) // 07:11:05
			pass(1)
		})
	}
}

// TestCronCapsScheduledWorkflowsPerProject: a project holding more scheduled workflows
// than a project may have (registered before the cap, or at the same moment) fires the
// first trigger.MaxScheduledWorkflows by name and says how many it left out.
func TestCronCapsScheduledWorkflowsPerProject(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 2, 12, 0, 30, 0, time.UTC))
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	const def = "on: { schedule: [ { cron: \"* * * * *\" } ] }\njobs: { a: { steps: [ { run: \"true\" } ] } }\n"
	for i := range trigger.MaxScheduledWorkflows + 2 {
		if err := st.CreateWorkflow(t.Context(), &store.Workflow{Project: "ops", Name: fmt.Sprintf("w%02d", i), Definition: []byte(def)}); err != nil {
			t.Fatal(err)
		}
	}
	// A workflow without schedules does not count.
	if err := st.CreateWorkflow(t.Context(), &store.Workflow{Project: "ops", Name: "a-manual", Definition: []byte("jobs: { a: { steps: [ { run: \"true\" } ] } }\n")}); err != nil {
		t.Fatal(err)
	}
	c := NewCron(CronConfig{Store: st, Clock: clk, Logger: testLog(t), MirrorsDir: t.TempDir()})
	clk.Advance(time.Minute)
	r := c.Pass(t.Context())
	if r.Err != nil {
		t.Fatal(r.Err)
	}
	if len(r.Fired) != trigger.MaxScheduledWorkflows || r.Capped != 2 {
		t.Fatalf("fired %d runs and left out %d workflows; want %d and 2", len(r.Fired), r.Capped, trigger.MaxScheduledWorkflows)
	}
	for _, id := range r.Fired {
		run, err := st.GetRun(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if run.Name == "w20" || run.Name == "w21" {
			t.Errorf("run of %s fired; the last by name are the ones left out", run.Name)
		}
	}
}
