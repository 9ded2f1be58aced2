package agent

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/metrics"
	"github.com/gantry-ci/gantry/internal/metrics/metricstest"
	"github.com/gantry-ci/gantry/internal/metrics/workermetrics"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
)

// TestWorkerMetrics runs a real worker with metrics against a real coordinator and
// scrapes both: the worker's counters say what it ran, and the lines it says it shipped
// are the lines the coordinator says it stored.
func TestWorkerMetrics(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	coord := metrics.NewCoordinator()
	srv := httptest.NewServer(api.New(api.Config{Store: st, HeartbeatEvery: 200 * time.Millisecond, LeaseTTL: 5 * time.Second,
		Blobs: newBlobs(t, t.TempDir()), Metrics: coord}).Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = st.Close()
	})
	b := &bundle{st: st, url: srv.URL}

	wm := workermetrics.New()
	wsrv := httptest.NewServer(wm.Handler())
	t.Cleanup(wsrv.Close)
	b.startWith(t, Config{Name: "metered", MaxJobs: 2, Metrics: wm})

	id := b.submit(t, `
name: metered
jobs:
  make:
    steps:
      - run: printf 'one\ntwo\n'
      - run: head -c 1000 /dev/zero > out.bin
    artifacts: {paths: [out.bin]}
  use:
    needs: [make]
    steps:
      - run: test -f out.bin && echo used
  broken:
    steps:
      - run: exit 3
`)
	if r := b.waitRun(t, id); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed (broken exits 3)", r.Status)
	}
	// The worker counts a job once its completion was answered, which may be just after
	// the run ended.
	var f metricstest.Families
	for deadline := time.Now().Add(10 * time.Second); ; {
		f = metricstest.Scrape(t, wsrv.URL, "")
		if f.Sum("gantry_worker_jobs_total") == 3 && f.Value("gantry_worker_jobs_running") == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("worker metrics never showed 3 jobs ended: %s", f.String("gantry_worker_jobs_total"))
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
	checks := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"gantry_worker_jobs_total", []string{"result", "success"}, 2},
		{"gantry_worker_jobs_total", []string{"result", "failed"}, 1},
		{"gantry_worker_jobs_total", []string{"result", "lost"}, 0},
		{"gantry_worker_step_duration_seconds", []string{"result", "success"}, 3},
		{"gantry_worker_step_duration_seconds", []string{"result", "failed"}, 1},
		{"gantry_worker_artifact_bytes_uploaded_total", nil, 1000},
		{"gantry_worker_artifact_bytes_downloaded_total", nil, 1000},
		{"gantry_worker_log_lines_dropped_total", nil, 0},
		{"gantry_worker_claim_errors_total", nil, 0},
		{"gantry_worker_report_errors_total", nil, 0},
	}
	for _, c := range checks {
		if got := f.Sum(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	cf := metricstest.Scrape(t, srv.URL+"/metrics", "")
	shipped, stored := f.Value("gantry_worker_log_lines_shipped_total"), cf.Value("gantry_log_lines_ingested_total")
	if shipped < 5 || shipped != stored {
		t.Errorf("worker shipped %v log lines, the coordinator stored %v; want the same, at least 5", shipped, stored)
	}
	if got := cf.Value("gantry_artifact_bytes_uploaded_total"); got != 1000 {
		t.Errorf("coordinator: artifact bytes uploaded = %v, want 1000", got)
	}
	if got := cf.Value("gantry_jobs_finished_total", "result", "failed", "failure_kind", string(store.FailureExit)); got != 1 {
		t.Errorf("coordinator: failed jobs = %v, want 1", got)
	}
}
