package api_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/metrics"
	"github.com/gantry-ci/gantry/internal/metrics/metricstest"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestMetricsAfterScriptedRun drives a three-job run through the worker protocol on a
// fake clock and checks that every counter and histogram moved by exactly what the
// script did.
func TestMetricsAfterScriptedRun(t *testing.T) {
	t.Parallel()
	m := metrics.NewCoordinator()
	b := setupWith(t, func(c *api.Config) { c.Metrics = m })
	scrape := func() metricstest.Families { return metricstest.Scrape(t, b.url+"/metrics", "") }

	var reg struct {
		WorkerID string `json:"worker_id"`
	}
	b.post(t, "/api/v1/agent/register", `{"name": "w1", "labels": ["linux"], "max_jobs": 4}`).decode(t, &reg)
	var created runView
	if r := b.post(t, "/api/v1/runs", diamond); r.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.status, r.body)
	} else {
		r.decode(t, &created)
	}

	f := scrape()
	if got := f.Value("gantry_jobs_created_total"); got != 3 {
		t.Errorf("jobs created = %v, want 3", got)
	}
	if got := f.Value("gantry_queue_depth", "priority", "normal", "labels", ""); got != 2 {
		t.Errorf("queue depth = %v, want 2 (a and b; c waits on them): %s", got, f.String("gantry_queue_depth"))
	}
	if got := f.Value("gantry_workers", "state", "idle"); got != 1 {
		t.Errorf("idle workers = %v, want 1", got)
	}

	claimBody := fmt.Sprintf(`{"worker_id": %q, "labels": ["linux"], "max": 4, "wait": "0s"}`, reg.WorkerID)
	post := func(path, body string, want int) {
		t.Helper()
		if r := b.post(t, path, body); r.status != want {
			t.Fatalf("POST %s: %d %s, want %d", path, r.status, r.body, want)
		}
	}
	// Round one: a and b wait 2 s for the claim and 1 s more to start, then run 5 s.
	// Round two: c, queued when they end, waits 1 s for the claim, starts at once and
	// runs 4 s.
	var staleJob, staleToken string
	for _, round := range []struct {
		jobs                    int
		toClaim, toStart, toEnd time.Duration
	}{{2, 2 * time.Second, time.Second, 5 * time.Second}, {1, time.Second, 0, 4 * time.Second}} {
		b.clock.Advance(round.toClaim)
		got := b.claim(t, claimBody)
		if len(got.Jobs) != round.jobs {
			t.Fatalf("claimed %d jobs, want %d", len(got.Jobs), round.jobs)
		}
		b.clock.Advance(round.toStart)
		for _, j := range got.Jobs {
			path := "/api/v1/agent/jobs/" + j.ID
			token := fmt.Sprintf(`{"token": %q}`, j.Lease.Token)
			post(path+"/start", token, http.StatusOK)
			post(path+"/heartbeat", token, http.StatusOK)
			if j.Key == "a" {
				b.appendLogs(t, j.ID, batch(j.Lease.Token, 1, 3, "line"))
				b.appendLogs(t, j.ID, batch(j.Lease.Token, 1, 3, "line")) // a re-send stores nothing
				b.appendLogs(t, j.ID, batch(j.Lease.Token, 4, 5, "line"))
				staleJob, staleToken = j.ID, j.Lease.Token
			}
		}
		if round.jobs == 2 {
			f := scrape()
			if got := f.Value("gantry_jobs", "status", "running"); got != 2 {
				t.Errorf("running jobs = %v, want 2", got)
			}
		}
		b.clock.Advance(round.toEnd)
		for _, j := range got.Jobs {
			post("/api/v1/agent/jobs/"+j.ID+"/complete", fmt.Sprintf(`{"token": %q, "status": "success", "exit_code": 0}`, j.Lease.Token), http.StatusOK)
		}
	}
	// a is finished: its token is stale now.
	expectError(t, b.post(t, "/api/v1/agent/jobs/"+staleJob+"/heartbeat", fmt.Sprintf(`{"token": %q}`, staleToken)),
		http.StatusConflict, "lease_lost")
	var done runView
	b.get(t, "/api/v1/runs/"+created.ID).decode(t, &done)
	if done.Status != string(store.RunSuccess) {
		t.Fatalf("run is %s, want success", done.Status)
	}

	b.clock.Advance(time.Minute) // past the state cache
	f = scrape()
	counters := []struct {
		name   string
		labels []string
		want   float64
	}{
		{"gantry_jobs_created_total", nil, 3},
		{"gantry_jobs_finished_total", []string{"result", "success", "failure_kind", ""}, 3},
		{"gantry_jobs_finished_total", []string{"result", "failed", "failure_kind", "failure"}, 0},
		{"gantry_heartbeats_total", nil, 3},
		{"gantry_lease_lost_total", nil, 1},
		{"gantry_log_lines_ingested_total", nil, 5},
		{"gantry_log_bytes_ingested_total", nil, float64(5 * len("line 1"))},
		{"gantry_queue_depth", []string{"priority", "normal"}, 0},
		{"gantry_jobs", []string{"status", "running"}, 0},
		{"gantry_log_subscribers", []string{"transport", "sse"}, 0},
		{"gantry_store_operation_errors_total", []string{"op", "Heartbeat", "kind", "lease_lost"}, 1},
	}
	for _, c := range counters {
		if got := f.Value(c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	hists := []struct {
		name  string
		count uint64
		sum   float64
	}{
		{"gantry_dispatch_latency_seconds", 3, 2 + 2 + 1},
		{"gantry_job_wait_seconds", 3, 3 + 3 + 1},
		{"gantry_job_duration_seconds", 3, 5 + 5 + 4},
	}
	for _, h := range hists {
		if count, sum := f.Histogram(h.name); count != h.count || sum != h.sum {
			t.Errorf("%s: count %d sum %v, want %d and %v", h.name, count, sum, h.count, h.sum)
		}
	}
	requests := []struct {
		route, code string
		want        uint64
	}{
		{"POST /api/v1/runs", "202", 1},
		{"POST /api/v1/agent/claim", "200", 2},
		{"POST /api/v1/agent/jobs/{id}/heartbeat", "200", 3},
		{"POST /api/v1/agent/jobs/{id}/heartbeat", "409", 1},
		{"POST /api/v1/agent/jobs/{id}/logs", "200", 3},
		{"POST /api/v1/agent/jobs/{id}/complete", "200", 3},
		{"GET /metrics", "200", 2},
	}
	for _, r := range requests {
		if count, _ := f.Histogram("gantry_http_request_duration_seconds", "route", r.route, "code", r.code); count != r.want {
			t.Errorf("requests to %s answered %s: %d, want %d", r.route, r.code, count, r.want)
		}
	}
	ops := []struct {
		op   string
		want uint64
	}{{"CreateRun", 1}, {"Claim", 2}, {"StartJob", 3}, {"Heartbeat", 4}, {"CompleteJob", 3}, {"LeaseAttempt", 3}, {"UpsertWorker", 1}}
	for _, o := range ops {
		if count, _ := f.Histogram("gantry_store_operation_duration_seconds", "op", o.op); count != o.want {
			t.Errorf("store op %s: %d calls, want %d", o.op, count, o.want)
		}
	}
	if f.Has("gantry_http_request_duration_seconds", "route", "/api/v1/runs/"+created.ID) {
		t.Error("a raw path is a route label")
	}
}

// TestMetricsNeedAReadTokenWithAuth: with auth on, /metrics is for readers.
func TestMetricsNeedAReadTokenWithAuth(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	if r := b.get(t, "/metrics"); r.status != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token: %d, want 401", r.status)
	}
	for role, want := range map[store.Role]int{store.RoleRead: http.StatusOK, store.RoleRegister: http.StatusForbidden} {
		secret, err := api.IssueToken(t.Context(), b.store, "scraper", role, "")
		if err != nil {
			t.Fatal(err)
		}
		r := b.do(t, http.MethodGet, "/metrics", "", "", map[string]string{"Authorization": "Bearer " + secret})
		if r.status != want {
			t.Errorf("/metrics with a %s token: %d, want %d", role, r.status, want)
		}
	}
	f := metricstest.Scrape(t, b.url+"/metrics", mustToken(t, b))
	if !f.Has("gantry_jobs_created_total") {
		t.Error("the scrape has no gantry_jobs_created_total")
	}
}

func mustToken(t *testing.T, b *bundle) string {
	t.Helper()
	secret, err := api.IssueToken(t.Context(), b.store, "scraper", store.RoleRead, "")
	if err != nil {
		t.Fatal(err)
	}
	return secret
}
