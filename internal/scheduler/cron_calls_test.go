package scheduler

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
)

// flakyWorkflows reads a project's own workflows with read and answers another
// repository's workflow with an error until up is set.
type flakyWorkflows struct {
	read func(string) ([]byte, error)
	up   *bool
}

func (f flakyWorkflows) LocalWorkflow(file string) ([]byte, error) { return f.read(file) }

func (f flakyWorkflows) RemoteWorkflow(owner, repo, file, ref string) ([]byte, string, error) {
	if !*f.up {
		return nil, "", errors.New("the source cannot be reached")
	}
	return []byte("on: workflow_call\njobs:\n  lint: {runs-on: x, steps: [{run: lint}]}\n"), strings.Repeat("c", 40), nil
}

// TestCronReusableWorkflows: a scheduled run of a workflow that calls reusable workflows
// has their jobs, read at the commit the schedule fires at; a called workflow that could
// not be fetched is fetched again on the next pass, rather than hold the schedule back
// until the next commit.
func TestCronReusableWorkflows(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 3, 2, 12, 4, 50, 0, time.UTC))
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	repo := sourcetest.NewRepo(t)
	repo.Commit("refs/heads/main", map[string]string{
		".github/workflows/ci.yml": "on:\n  schedule: [{cron: '*/5 * * * *'}]\njobs:\n" +
			"  build:\n    uses: ./.github/workflows/build.yml\n  lint:\n    uses: acme/flows/.github/workflows/lint.yml@v1\n",
		".github/workflows/build.yml": "on: workflow_call\njobs:\n  make: {runs-on: x, steps: [{run: make}]}\n",
	})
	p := &store.Project{Name: "app", RepoURL: repo.URL(), Provider: "generic", DefaultBranch: "main", PipelinePath: ".github/workflows/ci.yml", WebhookSecret: "x"}
	if err := st.CreateProject(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	up := false
	c := NewCron(CronConfig{Store: st, Clock: clk, Logger: testLog(t), MirrorsDir: t.TempDir(),
		Workflows: func(_ context.Context, read func(string) ([]byte, error)) pipeline.WorkflowLoader {
			return flakyWorkflows{read: read, up: &up}
		}})
	if r := c.Pass(t.Context()); len(r.Fired) != 0 {
		t.Fatalf("12:04:50: fired %d", len(r.Fired))
	}
	clk.Advance(15 * time.Second)
	if r := c.Pass(t.Context()); len(r.Fired) != 0 {
		t.Fatalf("12:05:05 with the source down: fired %d runs", len(r.Fired))
	}
	// Read again on the next pass: its schedule is seen from then on (a schedule fires
	// the ticks after it is first seen), so the next tick fires.
	up = true
	clk.Advance(15 * time.Second)
	if r := c.Pass(t.Context()); len(r.Fired) != 0 {
		t.Fatalf("12:05:20: fired %d runs", len(r.Fired))
	}
	clk.Advance(5 * time.Minute)
	r := c.Pass(t.Context())
	if len(r.Fired) != 1 {
		t.Fatalf("12:10:20 with the source up again: fired %d runs (%v), want the 12:10 tick's", len(r.Fired), r.Err)
	}
	jobs, err := st.ListJobs(t.Context(), r.Fired[0])
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, j := range jobs {
		keys = append(keys, j.Key)
	}
	if strings.Join(keys, " ") != "build-make lint-lint" {
		t.Errorf("the scheduled run's jobs = %v", keys)
	}
}
