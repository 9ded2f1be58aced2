package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// fakeJobs is a JobExecutor that runs steps on the host, in the job's workspace, and
// records what the agent asked of it.
type fakeJobs struct {
	executor.Shell
	beginErr error

	mu      sync.Mutex
	jobs    []executor.Job
	steps   map[string][][]string // env of each step, by job id
	ended   map[string]int        // End calls, by job id
	endKill map[string]bool       // End asked for no grace
	hostRun int                   // steps run through Run, without a Job
	// deadlines are the fence deadlines each job's session was told, and when;
	// lateDeadlines counts those told after End.
	deadlines     map[string][]toldDeadline
	lateDeadlines int
}

// toldDeadline is a deadline a session was told (executor.Fenced), and when.
type toldDeadline struct{ deadline, at time.Time }

func newFakeJobs() *fakeJobs {
	return &fakeJobs{steps: map[string][][]string{}, ended: map[string]int{}, endKill: map[string]bool{},
		deadlines: map[string][]toldDeadline{}}
}

func (f *fakeJobs) Run(ctx context.Context, s executor.Step) (executor.Result, error) {
	f.mu.Lock()
	f.hostRun++
	f.mu.Unlock()
	return f.Shell.Run(ctx, s)
}

func (f *fakeJobs) Begin(ctx context.Context, j executor.Job) (executor.Session, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs = append(f.jobs, j)
	if f.beginErr != nil {
		return nil, f.beginErr
	}
	return &fakeSession{f: f, job: j}, nil
}

func (f *fakeJobs) job(id string) (executor.Job, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, j := range f.jobs {
		if j.ID == id {
			return j, true
		}
	}
	return executor.Job{}, false
}

type fakeSession struct {
	f   *fakeJobs
	job executor.Job
}

func (s *fakeSession) Run(ctx context.Context, st executor.Step) (executor.Result, error) {
	s.f.mu.Lock()
	s.f.steps[s.job.ID] = append(s.f.steps[s.job.ID], st.Env)
	s.f.mu.Unlock()
	if st.Dir != s.job.Workspace {
		return executor.Result{}, errors.New("step dir " + st.Dir + " is not the job's workspace " + s.job.Workspace)
	}
	return s.f.Shell.Run(ctx, st)
}

func (s *fakeSession) SetDeadline(t time.Time) {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if s.f.ended[s.job.ID] > 0 {
		s.f.lateDeadlines++
	}
	s.f.deadlines[s.job.ID] = append(s.f.deadlines[s.job.ID], toldDeadline{t, time.Now()})
}

func (s *fakeSession) End(ctx context.Context) error {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	s.f.ended[s.job.ID]++
	s.f.endKill[s.job.ID] = errors.Is(context.Cause(ctx), executor.ErrKillNow)
	return nil
}

func envValue(env []string, k string) (string, bool) {
	for _, kv := range env {
		if name, v, ok := strings.Cut(kv, "="); ok && name == k {
			return v, true
		}
	}
	return "", false
}

// TestContainerJob: a job with an image goes to the worker with a JobExecutor, which is
// given everything the definition says about the container, the secrets resolved; the
// steps run through the session, seeing the workspace at its fixed path and nothing of
// the worker's environment; the session ends once.
func TestContainerJob(t *testing.T) {
	t.Parallel()
	b := setupSecrets(t) // its worker runs steps on the host only
	b.setSecret(t, "default", "REGISTRY_TOKEN", "reg-s3cret")
	b.setSecret(t, "default", "DB_PASSWORD", "db-s3cret")
	fake := newFakeJobs()
	// The job asks for a privileged container: only a worker whose operator allows them
	// carries the label that takes such a job.
	b.startWith(t, Config{Name: "docker", Labels: []string{"linux", pipeline.PrivilegedLabel}, MaxJobs: 2, Executor: fake})
	id := b.submitIn(t, "default", store.Trigger{Branch: "main"}, nil, `
jobs:
  test:
    image: gantry-test/go:1.26
    resources: { cpu: 1500m, memory: 256Mi }
    cancel_grace: 3s
    container:
      user: "1000:1000"
      pull: never
      options: { privileged: true }
      credentials: { username: bot, password: "${{ secrets.REGISTRY_TOKEN }}" }
    services:
      db:
        image: gantry-test/db:1
        env: { PASSWORD: "${{ secrets.DB_PASSWORD }}" }
        ports: [5432]
        healthcheck: { command: "true", interval: 200ms, retries: 5 }
    steps:
      - run: test "$GANTRY_WORKSPACE" = /workspace && test -z "$HOME" && echo in-container
      - run: echo second
`)
	b.wantSuccess(t, id)
	jobs, err := b.st.ListJobs(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	jid := jobs[0].ID.String()
	j, ok := fake.job(jid)
	if !ok {
		t.Fatalf("Begin was never called for job %s; log:\n%s", jid, b.jobLog(t, id, "test"))
	}
	if j.Image != "gantry-test/go:1.26" || j.Pull != "never" || j.User != "1000:1000" || !j.Privileged ||
		j.MilliCPU != 1500 || j.Memory != 256<<20 || j.Grace != 3*time.Second || j.Attempt != 1 || j.WorkerID == "" || j.Workspace == "" {
		t.Errorf("Begin got %+v", j)
	}
	if got := j.RegistryAuth["docker.io"]; got != (executor.RegistryCredential{Username: "bot", Password: "reg-s3cret"}) {
		t.Errorf("RegistryAuth = %+v, want the secret resolved for docker.io", j.RegistryAuth)
	}
	if len(j.Services) != 1 {
		t.Fatalf("Services = %+v", j.Services)
	}
	svc := j.Services[0]
	if svc.Name != "db" || svc.Image != "gantry-test/db:1" || !slices.Equal(svc.Env, []string{"PASSWORD=db-s3cret"}) ||
		!slices.Equal(svc.Ports, []string{"5432"}) || svc.Healthcheck == nil ||
		!slices.Equal(svc.Healthcheck.Command, []string{"sh", "-c", "true"}) || svc.Healthcheck.Interval != 200*time.Millisecond || svc.Healthcheck.Retries != 5 {
		t.Errorf("service = %+v (healthcheck %+v)", svc, svc.Healthcheck)
	}
	fake.mu.Lock()
	steps, ended, hostRun := fake.steps[jid], fake.ended[jid], fake.hostRun
	fake.mu.Unlock()
	if len(steps) != 2 || ended != 1 || hostRun != 0 {
		t.Errorf("steps through the session %d, End called %d times, steps on the host %d; want 2, 1, 0", len(steps), ended, hostRun)
	}
	for _, env := range steps {
		if _, ok := envValue(env, "PATH"); ok {
			t.Errorf("a step in a container got the worker's PATH: %v", env)
		}
		if v, _ := envValue(env, "GANTRY_JOB_ID"); v != jid {
			t.Errorf("GANTRY_JOB_ID = %q, want %s", v, jid)
		}
	}
	log := b.jobLog(t, id, "test")
	if !strings.Contains(log, "container: image gantry-test/go:1.26, services db (gantry-test/db:1)") || !strings.Contains(log, "in-container") {
		t.Errorf("log does not tell the container or lacks the step's output:\n%s", log)
	}
}

// TestContainerJobFenced: a session that fences itself (executor.Fenced) is told the
// job's fence deadline when it begins and again after every renewal: the lease's end by
// the worker's clock less the margin, so never later than the lease.
func TestContainerJobFenced(t *testing.T) {
	t.Parallel()
	b := setup(t) // heartbeats every 200 ms, leases of 5 s
	fake := newFakeJobs()
	b.startWith(t, Config{Name: "docker", MaxJobs: 1, Executor: fake})
	id := b.submit(t, "jobs:\n  a:\n    image: gantry-test/go:1.26\n    steps: [{run: 'sleep 1'}]\n")
	b.wantSuccess(t, id)
	jobs, err := b.st.ListJobs(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	fake.mu.Lock()
	told, late := fake.deadlines[jobs[0].ID.String()], fake.lateDeadlines
	fake.mu.Unlock()
	if late > 0 {
		t.Errorf("the session was told %d deadlines after it ended", late)
	}
	// One when it began, and one for most of the renewals of a second.
	if len(told) < 3 {
		t.Fatalf("the session was told %d deadlines, want one at its start and one at each renewal", len(told))
	}
	const ttl, margin = 5 * time.Second, 5 * time.Second / 8
	for i, d := range told {
		if left := d.deadline.Sub(d.at); left > ttl-margin || left < ttl-margin-time.Second {
			t.Errorf("deadline %d is %s after it was told, want a little under the TTL less the margin (%s)", i, left, ttl-margin)
		}
		if i > 0 && !d.deadline.After(told[i-1].deadline) {
			t.Errorf("deadline %d (%s) is not later than the one before", i, d.deadline)
		}
	}
}

// fakeJobsWithDir is fakeJobs keeping a directory for its container jobs' workspaces, as
// the docker executor does.
type fakeJobsWithDir struct {
	*fakeJobs
	dir string
}

func (f fakeJobsWithDir) WorkspaceDir() string { return f.dir }

// TestContainerWorkspaceDir: a container job's workspace is made in the directory its
// executor keeps for them (the docker executor's: only the worker enters it, and it is
// mounted nosuid,nodev), not in the work dir, where a step of a --step-user worker could
// reach what the job's container left there; a job on the worker's host keeps its
// workspace in the work dir.
func TestContainerWorkspaceDir(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := fakeJobsWithDir{fakeJobs: newFakeJobs(), dir: t.TempDir()}
	b.startWith(t, Config{Name: "docker", MaxJobs: 1, Executor: fake})
	id := b.submit(t, `jobs:
  boxed:
    image: gantry-test/go:1.26
    steps: [{run: 'pwd > where'}]
  host:
    steps: [{run: 'echo "$GANTRY_WORKSPACE"'}]
`)
	b.wantSuccess(t, id)
	jobs, err := b.st.ListJobs(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Name != "boxed" {
			continue
		}
		got, ok := fake.job(j.ID.String())
		if !ok {
			t.Fatalf("Begin was never called for the container job")
		}
		if filepath.Dir(got.Workspace) != fake.dir {
			t.Errorf("the container job's workspace is %s, want it in the executor's directory %s", got.Workspace, fake.dir)
		}
	}
	hostWS := strings.TrimSpace(lastLine(b.jobLog(t, id, "host")))
	if !strings.HasPrefix(filepath.Base(hostWS), "gantry-job-") || filepath.Dir(hostWS) == fake.dir {
		t.Errorf("the host job's workspace is %q, want one in the work dir", hostWS)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// TestContainerBeginFails: a container that cannot start fails the job before its first
// step, with the executor's message in the job's log, and nothing to end.
func TestContainerBeginFails(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := newFakeJobs()
	fake.beginErr = errors.New("image gantry-test/none:1 not found and pull: never")
	b.startWith(t, Config{Name: "docker", MaxJobs: 1, Executor: fake})
	id := b.submit(t, "jobs:\n  a:\n    image: gantry-test/none:1\n    container: {pull: never}\n    steps: [{run: 'echo ran > ran'}, {run: 'true'}]\n")
	if r := b.waitRun(t, id); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	log := b.jobLog(t, id, "a")
	if !strings.Contains(log, "the job's container could not start: image gantry-test/none:1 not found and pull: never") {
		t.Errorf("log lacks the executor's message:\n%s", log)
	}
	jobs, _ := b.st.ListJobs(t.Context(), id)
	steps, err := b.st.ListSteps(t.Context(), jobs[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range steps {
		if st.Status != store.StepSkipped {
			t.Errorf("step %d is %s, want skipped", st.Index, st.Status)
		}
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if len(fake.ended) != 0 || fake.hostRun != 0 {
		t.Errorf("End called %v, host steps %d; want none", fake.ended, fake.hostRun)
	}
}

// TestImageJobsGoToDockerWorkers: a worker that runs steps on its host never takes a job
// with an image, which waits, saying why, until a worker with a JobExecutor comes; a job
// without an image on that worker runs in its default image, or on its host without one.
func TestImageJobsGoToDockerWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 2)
	image := b.submit(t, "jobs:\n  a: {image: 'gantry-test/go:1', steps: [{run: 'true'}]}\n")
	plain := b.submit(t, "jobs:\n  b: {steps: [{run: 'true'}]}\n")
	b.wantSuccess(t, plain)
	jobs, err := b.st.ListJobs(t.Context(), image)
	if err != nil {
		t.Fatal(err)
	}
	if jobs[0].Status != store.JobQueued {
		t.Fatalf("the image job is %s after the shell worker ran a later job; want queued", jobs[0].Status)
	}
	if got := b.waitingMessage(t, image); !strings.Contains(got, "needs a worker with the docker executor") {
		t.Errorf("waiting message %q does not name the docker executor", got)
	}

	withDefault, onHost := newFakeJobs(), newFakeJobs()
	b.startWith(t, Config{Name: "docker", MaxJobs: 1, Executor: withDefault, DefaultImage: "busybox:1.36"})
	b.wantSuccess(t, image)
	if j, ok := withDefault.job(jobs[0].ID.String()); !ok || j.Image != "gantry-test/go:1" {
		t.Errorf("the docker worker began %+v for the image job", j)
	}
	if got := b.runOnlyOn(t, withDefault, "c", "runs_on: [docker]"); got.Image != "busybox:1.36" {
		t.Errorf("a job without an image began in %q, want the worker's default image", got.Image)
	}
	b2 := setup(t)
	b2.startWith(t, Config{Name: "docker-host", MaxJobs: 1, Executor: onHost})
	id := b2.submit(t, "jobs:\n  d: {steps: [{run: 'true'}]}\n")
	b2.wantSuccess(t, id)
	onHost.mu.Lock()
	defer onHost.mu.Unlock()
	if len(onHost.jobs) != 0 || onHost.hostRun != 1 {
		t.Errorf("without a default image: %d containers, %d host steps; want 0 and 1", len(onHost.jobs), onHost.hostRun)
	}
}

// runOnlyOn runs a one-job pipeline that only the docker worker can take and returns
// what its executor began.
func (b *bundle) runOnlyOn(t *testing.T, f *fakeJobs, name, extra string) executor.Job {
	t.Helper()
	id := b.submit(t, "jobs:\n  "+name+": {"+extra+", steps: [{run: 'true'}]}\n")
	b.wantSuccess(t, id)
	jobs, _ := b.st.ListJobs(t.Context(), id)
	j, ok := f.job(jobs[0].ID.String())
	if !ok {
		t.Fatalf("job %s ran without a container", name)
	}
	return j
}

// waitingMessage reads why the run's first job waits, as the API tells it.
func (b *bundle) waitingMessage(t *testing.T, run interface{ String() string }) string {
	t.Helper()
	var ans struct {
		Jobs []struct {
			Waiting *struct {
				Message string `json:"message"`
			} `json:"waiting"`
		} `json:"jobs"`
	}
	getJSON(t, b.url+"/api/v1/runs/"+run.String(), &ans)
	if len(ans.Jobs) == 0 || ans.Jobs[0].Waiting == nil {
		t.Fatalf("the run's job does not say why it waits: %+v", ans)
	}
	return ans.Jobs[0].Waiting.Message
}

// TestContainerEndsOnCancel: a cancelled job's session is ended, with its grace.
func TestContainerEndsOnCancel(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := newFakeJobs()
	b.startWith(t, Config{Name: "docker", MaxJobs: 1, Executor: fake})
	id := b.submit(t, "jobs:\n  slow: {image: busybox, cancel_grace: 1s, steps: [{run: 'sleep 120'}]}\n")
	waitJob(t, b.st, id, "running", func(j *store.Job) bool { return j.Status == store.JobRunning })
	if err := b.st.CancelRun(t.Context(), id); err != nil {
		t.Fatal(err)
	}
	if r := b.waitRun(t, id); r.Status != store.RunCancelled {
		t.Fatalf("run %s, want cancelled", r.Status)
	}
	jobs, _ := b.st.ListJobs(t.Context(), id)
	fake.mu.Lock()
	defer fake.mu.Unlock()
	if n, kill := fake.ended[jobs[0].ID.String()], fake.endKill[jobs[0].ID.String()]; n != 1 || kill {
		t.Errorf("End called %d times (no grace: %v); want once, with the grace", n, kill)
	}
}

func getJSON(t *testing.T, url string, out any) {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, res.Status)
	}
	if err := json.NewDecoder(res.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}
