package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// fakeServices is a host executor with a ServiceStarter: it records the jobs whose
// services it was asked to start and answers as if it published each container port
// at 40000 + that port (a fixed HOST at HOST).
type fakeServices struct {
	executor.Shell
	beginErr error

	mu    sync.Mutex
	jobs  []executor.Job
	ended map[string]int
}

func (f *fakeServices) BeginServices(_ context.Context, j executor.Job) (executor.Services, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs = append(f.jobs, j)
	if f.beginErr != nil {
		return nil, f.beginErr
	}
	var running []executor.RunningService
	for _, s := range j.Services {
		ports := map[string]string{}
		for _, p := range s.Ports {
			host, c, fixed := strings.Cut(p, ":")
			if !fixed {
				c = p
			}
			c, _, _ = strings.Cut(c, "/")
			if !fixed {
				host = "4" + strings.Repeat("0", 4-len(c)) + c
			}
			ports[c] = host
		}
		running = append(running, executor.RunningService{Name: s.Name, ID: "id-" + s.Name, Network: "net-" + j.ID, Ports: ports, Host: "127.0.0.1"})
	}
	return &fakeRunning{f: f, id: j.ID, running: running}, nil
}

type fakeRunning struct {
	f       *fakeServices
	id      string
	running []executor.RunningService
}

func (r *fakeRunning) Running() []executor.RunningService { return r.running }

func (r *fakeRunning) End(context.Context) error {
	r.f.mu.Lock()
	defer r.f.mu.Unlock()
	r.f.ended[r.id]++
	return nil
}

// TestHostJobServices: a job without an image with services, in Gantry's language and
// in a workflow, has them started by the worker's ServiceStarter, with their ports as
// written; its steps on the host read where they are in GANTRY_SERVICE_* and in
// GitHub's job.services (ports, id, network) and job.container.network; they end once
// the steps have, whether the job succeeded or failed.
func TestHostJobServices(t *testing.T) {
	t.Parallel()
	b := setup(t)
	fake := &fakeServices{ended: map[string]int{}}
	b.startWith(t, Config{Name: "docker", Labels: []string{pipeline.DockerLabel}, MaxJobs: 2, Executor: fake})
	for _, tt := range []struct {
		name, def string
		ok        bool
	}{
		{"gantry", `jobs:
  test:
    services:
      db:
        image: gantry-test/db:1
        ports: ["15432:5432", 6379/tcp]
        healthcheck: {command: "true"}
    steps:
      - run: |
          test "$GANTRY_SERVICE_DB_HOST:$GANTRY_SERVICE_DB_PORT_5432:$GANTRY_SERVICE_DB_PORT_6379" = 127.0.0.1:15432:46379
          echo reached
`, true},
		{"workflow", `on: push
jobs:
  test:
    runs-on: ubuntu-latest
    services:
      db:
        image: gantry-test/db:1
        ports: ['15432:5432', '6379']
        options: --health-cmd "true"
    steps:
      - run: |
          test "${{ job.services.db.ports['5432'] }}" = 15432
          test "${{ job.services.db.ports[6379] }}" = 46379
          test "${{ job.services.db.id }}/${{ job.services.db.network }}" = "id-db/${{ job.container.network }}"
          test -n "${{ job.container.network }}" && test -z "${{ job.container.id }}"
          echo reached
`, true},
		{"failing step", `jobs:
  test:
    services: {db: {image: gantry-test/db:1, ports: [5432]}}
    steps: [{run: 'exit 3'}]
`, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			id := b.submit(t, tt.def)
			r := b.waitRun(t, id)
			log := b.jobLog(t, id, "test")
			if (r.Status == store.RunSuccess) != tt.ok {
				t.Fatalf("run %s, want success %t; log:\n%s", r.Status, tt.ok, log)
			}
			jobs, err := b.st.ListJobs(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			jid := jobs[0].ID.String()
			fake.mu.Lock()
			var j executor.Job
			for _, x := range fake.jobs {
				if x.ID == jid {
					j = x
				}
			}
			ended := fake.ended[jid]
			fake.mu.Unlock()
			if len(j.Services) != 1 || j.Image != "" || j.Workspace == "" || j.WorkerID == "" {
				t.Fatalf("BeginServices got %+v", j)
			}
			if ended != 1 {
				t.Errorf("the services ended %d times, want once", ended)
			}
			if tt.ok {
				if want := []string{"15432:5432", "6379"}; tt.name == "gantry" && !slices.Equal(j.Services[0].Ports, []string{"15432:5432", "6379/tcp"}) ||
					tt.name == "workflow" && !slices.Equal(j.Services[0].Ports, want) {
					t.Errorf("ports %v", j.Services[0].Ports)
				}
				if !strings.Contains(log, "reached") || !strings.Contains(log, "service db: port 5432 at 127.0.0.1:15432") {
					t.Errorf("log:\n%s", log)
				}
			}
		})
	}
}

// TestHostJobServicesCannotStart: a job on the host whose services cannot start fails
// before its first step, saying why: the worker's ServiceStarter's error, or, for a
// worker without one (a shell worker that was given the docker label), that it has no
// Docker Engine.
func TestHostJobServicesCannotStart(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		exec Executor
		want string
	}{
		{"no engine", executor.Shell{}, "has no Docker Engine to start services with"},
		{"start fails", &fakeServices{ended: map[string]int{}, beginErr: errors.New("service db is not healthy")}, "service db is not healthy"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.startWith(t, Config{Name: "w", Labels: []string{pipeline.DockerLabel}, MaxJobs: 1, Executor: tt.exec})
			id := b.submit(t, "jobs:\n  test:\n    services: {db: {image: gantry-test/db:1}}\n    steps: [{run: 'echo ran'}]\n")
			if r := b.waitRun(t, id); r.Status != store.RunFailed {
				t.Fatalf("run %s, want failed", r.Status)
			}
			log := b.jobLog(t, id, "test")
			if !strings.Contains(log, "the job's services could not start: ") || !strings.Contains(log, tt.want) || strings.Contains(log, "\nran") {
				t.Errorf("log:\n%s", log)
			}
		})
	}
}
