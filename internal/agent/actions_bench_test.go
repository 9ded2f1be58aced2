package agent

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/actions/actionstest"
	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

// benchSteps is how many steps a job of BenchmarkActionStep has: one iteration is a
// whole run, reported per step.
const benchSteps = 10

// noopAction is the least a JavaScript action can be: its main is an empty file.
var noopAction = map[string]string{
	"action.yml": "name: noop\ndescription: does nothing\nruns:\n  using: node20\n  main: index.js\n",
	"index.js":   "",
}

// BenchmarkActionStep measures what a step that uses a JavaScript action costs over a
// run step, on the real path: a coordinator API on SQLite, a worker, the shell executor,
// the action exported from a bare repository's mirror. Each iteration runs, in an order
// that turns, a job of benchSteps `run: "true"` steps, a job of as many steps that use
// the no-op action, node started benchSteps times on an empty script (-e, with the
// environment a step has), and one export of the action's tree (what the worker does
// once per job and action). Interleaved, noise on the machine hits all alike. Reported
// per step, in wall time and in CPU time (this process, which is the coordinator and
// the worker, and its children: shells, node and git), which noise barely moves:
//
//	run-ms/step, action-ms/step, node-ms/step   wall time
//	overhead-ms/step                            action - run - node
//	*-cpu-ms/step, overhead-cpu-ms/step         the same in CPU time
//	overhead-self-cpu-ms/step                   its part in this process
//	overhead-child-cpu-ms/step                  its part in the processes started
//	export-ms/job, export-cpu-ms/job            one export of the action's tree
//
// The run steps use shell: sh, as an action's node is started by sh: the overhead is
// then Gantry's own, not bash's start against dash's. The action's plan is pinned once:
// pinning is the coordinator's, when a run is made, not the step's.
func BenchmarkActionStep(b *testing.B) {
	node, err := exec.LookPath("node")
	if err != nil {
		b.Fatal("node is needed for JavaScript actions: install nodejs (scripts/deps.sh does)")
	}
	dir := b.TempDir()
	commit := actionstest.Repo(b, dir, "acme", "noop", noopAction, "v1")
	bb, res, completed := benchActionsBundle(b, dir)

	job := func(step string) string {
		return "on: push\ndefaults:\n  run:\n    shell: sh\njobs:\n  t:\n    runs-on: ubuntu-latest\n    steps:\n" +
			strings.Repeat("      - "+step+"\n", benchSteps)
	}
	runPlan := benchPlan(b, nil, job(`run: "true"`))
	actPlan := benchPlan(b, res, job("uses: acme/noop@v1"))
	pin := actPlan.Jobs[0].Steps[0].Actions["acme/noop@v1"]
	if pin.Commit != commit {
		b.Fatalf("pinned %+v, want commit %s", pin, commit)
	}
	exportMirrors, exportDir := b.TempDir(), b.TempDir()
	// node starts with what a step takes of the worker's environment, no more: a
	// NODE_EXTRA_CA_CERTS of the worker's (this machine's names a bundle of 144
	// certificates) costs every start some 50 ms of CPU the action's node never pays.
	var nodeEnv []string
	for _, k := range stepInherits {
		if v, ok := os.LookupEnv(k); ok {
			nodeEnv = append(nodeEnv, k+"="+v)
		}
	}

	kinds := []struct {
		name string
		do   func(i int)
	}{
		{"run", func(int) { bb.runPlan(b, runPlan, completed) }},
		{"action", func(int) { bb.runPlan(b, actPlan, completed) }},
		{"node", func(int) {
			for range benchSteps {
				cmd := exec.Command(node, "-e", "")
				cmd.Env = nodeEnv
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("node -e '': %v\n%s", err, out)
				}
			}
		}},
		{"export", func(i int) { benchExport(b, exportMirrors, filepath.Join(exportDir, fmt.Sprint(i)), pin) }},
	}
	// Once each before timing: the worker's mirror is made and fetched, node's files
	// are in the page cache.
	for _, k := range kinds {
		k.do(-1)
	}
	wall := make([]time.Duration, len(kinds))
	self := make([]time.Duration, len(kinds))
	children := make([]time.Duration, len(kinds))
	n := 0
	for i := 0; b.Loop(); i++ {
		for k := range kinds {
			k = (k + i) % len(kinds)
			s0, c0 := cpuTime(b)
			t0 := time.Now()
			kinds[k].do(i)
			wall[k] += time.Since(t0)
			s1, c1 := cpuTime(b)
			self[k] += s1 - s0
			children[k] += c1 - c0
		}
		n++
	}
	cpu := make([]time.Duration, len(kinds))
	for k := range kinds {
		cpu[k] = self[k] + children[k]
	}
	ms := func(d time.Duration, per int) float64 { return float64(d) / float64(time.Millisecond) / float64(n*per) }
	for k, kind := range kinds[:3] {
		b.ReportMetric(ms(wall[k], benchSteps), kind.name+"-ms/step")
		b.ReportMetric(ms(cpu[k], benchSteps), kind.name+"-cpu-ms/step")
	}
	b.ReportMetric(ms(wall[1]-wall[0]-wall[2], benchSteps), "overhead-ms/step")
	b.ReportMetric(ms(cpu[1]-cpu[0]-cpu[2], benchSteps), "overhead-cpu-ms/step")
	// Which side the overhead's CPU is on: this process (the coordinator's and the
	// worker's Go) or the processes it started.
	b.ReportMetric(ms(self[1]-self[0]-self[2], benchSteps), "overhead-self-cpu-ms/step")
	b.ReportMetric(ms(children[1]-children[0]-children[2], benchSteps), "overhead-child-cpu-ms/step")
	b.ReportMetric(ms(wall[3], 1), "export-ms/job")
	b.ReportMetric(ms(cpu[3], 1), "export-cpu-ms/job")
}

// benchActionsBundle is actionsBundle for a benchmark: a coordinator on SQLite whose
// actions come from source, and one worker, whose logs go nowhere; the channel has a
// value when a job has completed.
func benchActionsBundle(b *testing.B, src string) (*bundle, *actions.Resolver, <-chan struct{}) {
	b.Helper()
	db, err := sqlite.Open(b.Context(), sqlitetest.Path(b), sqlite.Options{})
	if err != nil {
		b.Fatal(err)
	}
	st := &completions{Store: db, done: make(chan struct{}, 1)}
	s, err := actions.ParseSource(src)
	if err != nil {
		b.Fatal(err)
	}
	res := &actions.Resolver{Source: s, MirrorsDir: b.TempDir()}
	// The lease's timings are the server's defaults: the tests' heartbeat every 200 ms
	// would charge a job CPU in proportion to its length, node's start's included.
	srv := httptest.NewServer(api.New(api.Config{Store: st, Blobs: newBlobs(b, b.TempDir()), Actions: res}).Handler())
	b.Cleanup(func() {
		srv.Close()
		_ = st.Close()
	})
	bb := &bundle{st: st, url: srv.URL}
	drain, stop := context.WithCancel(context.Background())
	a := New(Config{Name: "bench", Labels: []string{"linux"}, MaxJobs: 1, Server: srv.URL, WorkDir: b.TempDir(),
		Logger: slog.New(slog.DiscardHandler)})
	done := make(chan error, 1)
	go func() { done <- a.Run(drain, drain) }()
	b.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			b.Errorf("agent: %v", err)
		}
	})
	return bb, res, st.done
}

// benchPlan compiles a workflow and, given a resolver, pins its actions.
func benchPlan(b *testing.B, r *actions.Resolver, wf string) *pipeline.Plan {
	b.Helper()
	p, err := pipeline.Compile([]byte(wf), pipeline.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if r != nil {
		if p, err = r.Pin(b.Context(), p); err != nil {
			b.Fatal(err)
		}
	}
	return p
}

// runPlan makes a run of p and waits for it to succeed. It looks at the run only when
// a job has completed: polling the store would cost this process CPU for as long as the
// run takes, more for a slower job, and be counted as the step's.
func (bb *bundle) runPlan(b *testing.B, p *pipeline.Plan, completed <-chan struct{}) {
	b.Helper()
	run, _, _, err := bb.st.CreateRun(b.Context(), store.CreateRunParams{Plan: p,
		Trigger: store.Trigger{Branch: "main", Repository: "acme/app", Event: "push"}})
	if err != nil {
		b.Fatal(err)
	}
	timeout := time.After(30 * time.Second)
	for {
		select {
		case <-completed:
		case <-timeout:
			b.Fatalf("run %s did not end in 30s:\n%s", run.ID, bb.benchLog(b, run.ID))
		case <-b.Context().Done():
			b.Fatal(b.Context().Err())
		}
		r, err := bb.st.GetRun(b.Context(), run.ID)
		if err != nil {
			b.Fatal(err)
		}
		if r.Status.Terminal() {
			if r.Status != store.RunSuccess {
				b.Fatalf("run %s, want success:\n%s", r.Status, bb.benchLog(b, run.ID))
			}
			return
		}
	}
}

// completions is a store that signals each job's completion.
type completions struct {
	store.Store
	done chan struct{}
}

func (c *completions) CompleteJob(ctx context.Context, p store.CompleteParams) (*store.Job, error) {
	j, err := c.Store.CompleteJob(ctx, p)
	select {
	case c.done <- struct{}{}:
	default:
	}
	return j, err
}

// benchLog is the log of the run's jobs, for a failure's message.
func (bb *bundle) benchLog(b *testing.B, run uuid.UUID) string {
	jobs, err := bb.st.ListJobs(b.Context(), run)
	if err != nil {
		return err.Error()
	}
	var out strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&out, "%s: %s %s\n", j.Key, j.Status, j.FailureKind)
	}
	return out.String()
}

// benchExport does what the worker's actionRunner.fetch does for a job's first step of
// an action: open the mirror, make sure it has the commit, export its tree.
func benchExport(b *testing.B, mirrors, target string, pin pipeline.ActionPin) {
	b.Helper()
	m, err := source.Open(b.Context(), source.Config{Dir: mirrors, URL: pin.URL, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	if err := m.Export(b.Context(), pin.Commit, "", target); err != nil {
		b.Fatal(err)
	}
	if err := os.RemoveAll(target); err != nil {
		b.Fatal(err)
	}
}

// cpuTime is the CPU time, user and system, of this process and of its children waited
// for so far.
func cpuTime(b *testing.B) (self, children time.Duration) {
	get := func(who int) time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(who, &ru); err != nil {
			b.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return get(syscall.RUSAGE_SELF), get(syscall.RUSAGE_CHILDREN)
}
