package scheduler

import (
	"slices"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

func TestWhy(t *testing.T) {
	t.Parallel()
	now := epoch
	linux := &store.Worker{ID: "w1", Labels: []string{"linux", "amd64"}, MilliCPU: 8000, Memory: 16 << 30, State: store.WorkerIdle}
	gpu := &store.Worker{ID: "w2", Labels: []string{"linux", "gpu"}, State: store.WorkerIdle}
	busy := &store.Worker{ID: "w3", Labels: []string{"linux"}, State: store.WorkerBusy}
	holder := &store.Job{ID: uuid.MustParse("00000000-0000-0000-0000-0000000000aa"),
		RunID: uuid.MustParse("0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b"), Key: "deploy", Name: "deploy"}
	queue := &store.QueueStats{Queued: []store.QueueDepth{
		{Priority: pipeline.PriorityCritical, Jobs: 2},
		{Priority: pipeline.PriorityNormal, Jobs: 10},
		{Priority: pipeline.PriorityLow, Jobs: 100},
	}}
	queued := func(mod func(j *store.Job)) *store.Job {
		j := &store.Job{ID: store.NewID(), Key: "job", Name: "job", Status: store.JobQueued, Priority: pipeline.PriorityNormal}
		if mod != nil {
			mod(j)
		}
		return j
	}
	tests := []struct {
		name     string
		job      *store.Job
		in       WaitInput
		wantCode WaitCode
		wantMsg  string
		// wantLabels are the labels no live worker offers (no_worker only).
		wantLabels []string
		notWait    bool
	}{
		{name: "running jobs do not wait", job: &store.Job{Status: store.JobRunning}, notWait: true},
		{name: "finished jobs do not wait", job: &store.Job{Status: store.JobSuccess}, notWait: true},
		{name: "two needs left", job: &store.Job{Status: store.JobPending}, in: WaitInput{NeedsLeft: []string{"build", "test"}},
			wantCode: WaitNeeds, wantMsg: "waiting for build, test"},
		{name: "four needs left", job: &store.Job{Status: store.JobPending}, in: WaitInput{NeedsLeft: []string{"build", "test", "lint", "vet"}},
			wantCode: WaitNeeds, wantMsg: "waiting for build, test (2 more)"},
		{name: "needs just finished", job: &store.Job{Status: store.JobPending},
			wantCode: WaitNeeds, wantMsg: "waiting: its needs finished, deciding whether it runs"},
		{name: "retry later", job: &store.Job{Status: store.JobRetrying, Attempt: 1, MaxAttempts: 3, RetryAfter: now.Add(11600 * time.Millisecond)},
			in: WaitInput{Now: now}, wantCode: WaitRetry, wantMsg: "retry in 12s (attempt 2 of 3)"},
		{name: "retry due", job: &store.Job{Status: store.JobRetrying, Attempt: 2, MaxAttempts: 3, RetryAfter: now.Add(-time.Second)},
			in: WaitInput{Now: now}, wantCode: WaitRetry, wantMsg: "retry due now (attempt 3 of 3)"},
		{name: "retry of a redelivered attempt", job: &store.Job{Status: store.JobRetrying, Attempt: 3, MaxAttempts: 3, RetryAfter: now.Add(90 * time.Second)},
			in: WaitInput{Now: now}, wantCode: WaitRetry, wantMsg: "retry in 1m30s (attempt 4 of 4)"},
		{name: "label no worker has", job: queued(func(j *store.Job) { j.Labels = []string{"windows-latest"} }),
			in: WaitInput{Workers: []*store.Worker{linux, gpu}}, wantCode: WaitNoWorker, wantMsg: "waiting: no worker has labels [windows-latest]",
			wantLabels: []string{"windows-latest"}},
		{name: "a workflow's windows job on a pool of linux workers", job: queued(func(j *store.Job) { j.Labels = []string{"windows"} }),
			in: WaitInput{Workers: []*store.Worker{linux, gpu, busy}}, wantCode: WaitNoWorker, wantMsg: "waiting: no worker has labels [windows]",
			wantLabels: []string{"windows"}},
		{name: "a macos job with a gpu no mac has", job: queued(func(j *store.Job) { j.Labels = []string{"macos", "gpu"} }),
			in:       WaitInput{Workers: []*store.Worker{gpu, {ID: "m", Labels: []string{"darwin", "arm64", "macos"}, State: store.WorkerIdle}}},
			wantCode: WaitNoWorker, wantMsg: "waiting: no worker has all of the labels [macos, gpu]", wantLabels: []string{"macos", "gpu"}},
		{name: "only the missing labels are named", job: queued(func(j *store.Job) { j.Labels = []string{"linux", "arm64", "tpu"} }),
			in: WaitInput{Workers: []*store.Worker{linux, gpu}}, wantCode: WaitNoWorker, wantMsg: "waiting: no worker has labels [arm64, tpu]",
			wantLabels: []string{"arm64", "tpu"}},
		{name: "labels no one worker has together", job: queued(func(j *store.Job) { j.Labels = []string{"amd64", "gpu"} }),
			in: WaitInput{Workers: []*store.Worker{linux, gpu}}, wantCode: WaitNoWorker, wantMsg: "waiting: no worker has all of the labels [amd64, gpu]",
			wantLabels: []string{"amd64", "gpu"}},
		{name: "an image on a pool without the docker executor", job: queued(func(j *store.Job) { j.Labels = []string{"docker"} }),
			in: WaitInput{Workers: []*store.Worker{linux, gpu}}, wantCode: WaitNoWorker,
			wantMsg: "waiting: needs a worker with the docker executor (gantry worker --executor docker)", wantLabels: []string{"docker"}},
		{name: "an image and a label no worker has", job: queued(func(j *store.Job) { j.Labels = []string{"docker", "linux", "tpu"} }),
			in: WaitInput{Workers: []*store.Worker{linux, gpu}}, wantCode: WaitNoWorker,
			wantMsg: "waiting: needs a worker with the docker executor (gantry worker --executor docker) and labels [tpu]", wantLabels: []string{"docker", "tpu"}},
		{name: "an image and no worker online", job: queued(func(j *store.Job) { j.Labels = []string{"docker"} }), wantCode: WaitNoWorker,
			wantMsg: "waiting: no worker is online (it needs a worker with the docker executor, labels [docker])", wantLabels: []string{"docker"}},
		{name: "a privileged image on a pool without a docker worker", job: queued(func(j *store.Job) { j.Labels = []string{"docker", "docker-privileged"} }),
			in: WaitInput{Workers: []*store.Worker{linux, gpu}}, wantCode: WaitNoWorker,
			wantMsg:    "waiting: needs a docker worker that allows privileged containers (gantry worker --executor docker --docker-allow-privileged)",
			wantLabels: []string{"docker", "docker-privileged"}},
		{name: "a privileged image on a docker worker that does not allow it", job: queued(func(j *store.Job) { j.Labels = []string{"docker", "docker-privileged", "tpu"} }),
			in: WaitInput{Workers: []*store.Worker{{ID: "d", Labels: []string{"linux", "docker"}, State: store.WorkerIdle}}}, wantCode: WaitNoWorker,
			wantMsg:    "waiting: needs a docker worker that allows privileged containers (gantry worker --executor docker --docker-allow-privileged) and labels [tpu]",
			wantLabels: []string{"docker-privileged", "tpu"}},
		{name: "a privileged image on a docker worker that allows it", job: queued(func(j *store.Job) { j.Labels = []string{"docker", "docker-privileged"} }),
			in:       WaitInput{Workers: []*store.Worker{{ID: "d", Labels: []string{"linux", "docker", "docker-privileged"}, State: store.WorkerIdle}}},
			wantCode: WaitBacklog, wantMsg: "queued: a free worker can take it"},
		{name: "an image on a docker worker", job: queued(func(j *store.Job) { j.Labels = []string{"docker"} }),
			in:       WaitInput{Workers: []*store.Worker{{ID: "d", Labels: []string{"linux", "docker"}, State: store.WorkerIdle}}},
			wantCode: WaitBacklog, wantMsg: "queued: a free worker can take it"},
		{name: "no worker online", job: queued(nil), wantCode: WaitNoWorker, wantMsg: "waiting: no worker is online"},
		{name: "no worker online for labels", job: queued(func(j *store.Job) { j.Labels = []string{"linux"} }),
			wantCode: WaitNoWorker, wantMsg: "waiting: no worker is online (it needs labels [linux])",
			wantLabels: []string{"linux"}},
		{name: "too many CPUs and too much memory", job: queued(func(j *store.Job) { j.Labels, j.MilliCPU, j.Memory = []string{"amd64"}, 64000, 512<<30 }),
			in: WaitInput{Workers: []*store.Worker{linux, gpu}}, wantCode: WaitNoWorker,
			wantMsg: "waiting: no worker has 64 CPUs and 512Gi memory among those with labels [amd64]"},
		{name: "too much memory", job: queued(func(j *store.Job) { j.Labels, j.MilliCPU, j.Memory = []string{"amd64"}, 500, 24<<30 }),
			in: WaitInput{Workers: []*store.Worker{linux}}, wantCode: WaitNoWorker,
			wantMsg: "waiting: no worker has 24Gi memory among those with labels [amd64]"},
		{name: "resources fit separately, not together",
			job: queued(func(j *store.Job) { j.MilliCPU, j.Memory = 4000, 1536<<20 }),
			in: WaitInput{Workers: []*store.Worker{
				{Labels: []string{"a"}, MilliCPU: 8000, Memory: 1 << 30, State: store.WorkerIdle},
				{Labels: []string{"b"}, MilliCPU: 2000, Memory: 8 << 30, State: store.WorkerIdle},
			}}, wantCode: WaitNoWorker, wantMsg: "waiting: no worker has both 4 CPUs and 1.5Gi memory"},
		{name: "a worker of unlimited capacity fits", job: queued(func(j *store.Job) { j.Labels, j.MilliCPU = []string{"gpu"}, 64000 }),
			in: WaitInput{Workers: []*store.Worker{gpu}}, wantCode: WaitBacklog, wantMsg: "queued: a free worker can take it"},
		{name: "concurrency group held", job: queued(func(j *store.Job) { j.ConcurrencyGroup = "production" }),
			in: WaitInput{Workers: []*store.Worker{linux}, Holder: holder}, wantCode: WaitConcurrency,
			wantMsg: "waiting: concurrency group production is held by run 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b (job deploy)"},
		{name: "no worker comes before the group", job: queued(func(j *store.Job) { j.ConcurrencyGroup, j.Labels = "production", []string{"mac"} }),
			in: WaitInput{Workers: []*store.Worker{linux}, Holder: holder}, wantCode: WaitNoWorker, wantMsg: "waiting: no worker has labels [mac]",
			wantLabels: []string{"mac"}},
		{name: "backlog behind busy workers", job: queued(func(j *store.Job) { j.Labels = []string{"linux"} }),
			in: WaitInput{Workers: []*store.Worker{busy}, Queue: queue}, wantCode: WaitBacklog,
			wantMsg: "queued with 11 other jobs in lane normal or higher; the one worker that can run it is busy"},
		{name: "backlog, a worker idle", job: queued(func(j *store.Job) { j.Priority = pipeline.PriorityCritical }),
			in: WaitInput{Workers: []*store.Worker{busy, linux}, Queue: queue}, wantCode: WaitBacklog,
			wantMsg: "queued with 1 other job in lane critical or higher"},
		{name: "project at its limit", job: queued(nil),
			in:       WaitInput{Workers: []*store.Worker{linux}, Project: &store.ProjectLoad{Name: "web", MaxConcurrentJobs: 4, Leased: 4}},
			wantCode: WaitQuota, wantMsg: "waiting: project web is at its limit of 4 concurrent jobs"},
		{name: "project at its limit of one", job: queued(nil),
			in:       WaitInput{Workers: []*store.Worker{linux}, Project: &store.ProjectLoad{Name: "web", MaxConcurrentJobs: 1, Leased: 1}},
			wantCode: WaitQuota, wantMsg: "waiting: project web is at its limit of 1 concurrent job"},
		{name: "project under its limit waits its turn", job: queued(nil),
			in:       WaitInput{Workers: []*store.Worker{linux}, Project: &store.ProjectLoad{Name: "web", MaxConcurrentJobs: 4, Leased: 3}},
			wantCode: WaitBacklog, wantMsg: "queued: a free worker can take it"},
		{name: "a held group comes before the project's limit", job: queued(func(j *store.Job) { j.ConcurrencyGroup = "production" }),
			in:       WaitInput{Workers: []*store.Worker{linux}, Holder: holder, Project: &store.ProjectLoad{Name: "web", MaxConcurrentJobs: 1, Leased: 1}},
			wantCode: WaitConcurrency,
			wantMsg:  "waiting: concurrency group production is held by run 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b (job deploy)"},
		{name: "all workers busy, no queue known", job: queued(nil),
			in: WaitInput{Workers: []*store.Worker{busy, {Labels: nil, State: store.WorkerBusy}}}, wantCode: WaitBacklog,
			wantMsg: "all 2 workers that can run it are busy"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := Why(tt.job, tt.in)
			if tt.notWait {
				if ok {
					t.Fatalf("Why(%s job) = %+v, want no wait", tt.job.Status, got)
				}
				return
			}
			if !ok || got.Code != tt.wantCode || got.Message != tt.wantMsg || !slices.Equal(got.Labels, tt.wantLabels) {
				t.Errorf("Why = %+v, %v\nwant {%s %s %v}", got, ok, tt.wantCode, tt.wantMsg, tt.wantLabels)
			}
		})
	}
}

func TestLiveWorkers(t *testing.T) {
	t.Parallel()
	ws := []*store.Worker{
		{ID: "fresh", State: store.WorkerIdle, LastSeenAt: epoch.Add(-time.Second)},
		{ID: "busy", State: store.WorkerBusy, LastSeenAt: epoch.Add(-29 * time.Second)},
		{ID: "gone", State: store.WorkerIdle, LastSeenAt: epoch.Add(-31 * time.Second)},
		{ID: "draining", State: store.WorkerDraining, LastSeenAt: epoch},
		{ID: "offline", State: store.WorkerOffline, LastSeenAt: epoch},
	}
	var got []string
	for _, w := range LiveWorkers(ws, epoch, 30*time.Second) {
		got = append(got, w.ID)
	}
	if len(got) != 2 || got[0] != "fresh" || got[1] != "busy" {
		t.Errorf("live workers %v, want [fresh busy]", got)
	}
}

func TestRunNeeds(t *testing.T) {
	t.Parallel()
	job := func(key, name string, status store.JobStatus, needs ...string) *store.Job {
		return &store.Job{Key: key, Name: name, Status: status, Spec: &pipeline.Job{Key: key, Name: name, Needs: needs}}
	}
	jobs := []*store.Job{
		job("lint", "lint", store.JobSuccess),
		job("test (shard=1)", "test", store.JobRunning),
		job("test (shard=2)", "test", store.JobQueued),
		job("build", "build", store.JobRetrying),
		job("deploy", "deploy", store.JobPending, "lint", "test (shard=1)", "test (shard=2)", "build"),
	}
	got := RunNeeds(jobs)(jobs[4])
	if len(got) != 2 || got[0] != "test" || got[1] != "build" {
		t.Errorf("needs left %q, want [test build]: finished needs dropped, matrix instances named once", got)
	}
	if got := RunNeeds(jobs)(jobs[0]); len(got) != 0 {
		t.Errorf("needs left of a root job: %q", got)
	}
}

func TestFormatResources(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ got, want string }{
		{FormatCPU(64000), "64 CPUs"}, {FormatCPU(1000), "1 CPU"}, {FormatCPU(500), "0.5 CPUs"}, {FormatCPU(2250), "2.25 CPUs"},
		{FormatMemory(512 << 30), "512Gi"}, {FormatMemory(1536 << 20), "1.5Gi"}, {FormatMemory(300 << 20), "300Mi"},
		{FormatMemory(2 << 40), "2Ti"}, {FormatMemory(100), "100B"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
