package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

func TestListRuns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var web, apiRuns []string // ids, oldest first
	for i := range 5 {
		web = append(web, b.createRun(t, "web", "refs/heads/main").ID)
		if i < 2 {
			apiRuns = append(apiRuns, b.createRun(t, "api", "refs/heads/dev").ID)
		}
	}
	if err := b.store.CancelRun(t.Context(), mustUUID(t, web[0])); err != nil {
		t.Fatal(err)
	}
	type page struct {
		Runs       []runView `json:"runs"`
		NextCursor string    `json:"next_cursor"`
	}
	list := func(t *testing.T, query string) page {
		t.Helper()
		r := b.get(t, "/api/v1/runs"+query)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", query, r.status, r.body)
		}
		var p page
		r.decode(t, &p)
		return p
	}
	ids := func(p page) []string {
		var out []string
		for _, r := range p.Runs {
			out = append(out, r.ID)
		}
		return out
	}
	reversed := func(s []string) []string {
		out := make([]string, len(s))
		for i, v := range s {
			out[len(s)-1-i] = v
		}
		return out
	}

	tests := []struct {
		name  string
		query string
		want  []string
	}{
		{"project", "?project=api", reversed(apiRuns)},
		{"ref", "?ref=refs/heads/main", reversed(web)},
		{"status", "?status=cancelled", web[:1]},
		{"project and status", "?project=web&status=pending", reversed(web[1:])},
		{"no match", "?project=nope", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := list(t, tt.query)
			if got := ids(p); strings.Join(got, ",") != strings.Join(tt.want, ",") {
				t.Errorf("ids %v, want %v", got, tt.want)
			}
			if p.Runs == nil {
				t.Error("runs is null, want []")
			}
			if p.NextCursor != "" {
				t.Errorf("next_cursor %q on a short page", p.NextCursor)
			}
		})
	}

	t.Run("cursor walk", func(t *testing.T) {
		var got []string
		pages := 0
		cursor := ""
		for {
			p := list(t, "?project=web&limit=2&cursor="+cursor)
			pages++
			got = append(got, ids(p)...)
			for _, r := range p.Runs {
				if r.Project != "web" || r.CreatedAt == "" || r.Jobs != nil || r.JobsTotal != 3 {
					t.Errorf("run summary %+v", r)
				}
			}
			if p.NextCursor == "" {
				break
			}
			if pages > 10 {
				t.Fatal("pagination does not end")
			}
			cursor = p.NextCursor
		}
		if strings.Join(got, ",") != strings.Join(reversed(web), ",") {
			t.Errorf("walk %v, want %v", got, reversed(web))
		}
		if pages != 3 {
			t.Errorf("%d pages, want 3", pages)
		}
	})

	bad := []string{"?status=done", "?limit=0", "?limit=501", "?limit=x", "?cursor=nope"}
	for _, q := range bad {
		t.Run("bad "+q, func(t *testing.T) {
			expectError(t, b.get(t, "/api/v1/runs"+q), http.StatusBadRequest, "bad_request")
		})
	}
}

func TestGetRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	created := b.createRun(t, "web", "refs/heads/main")
	r := b.get(t, "/api/v1/runs/"+created.ID)
	if r.status != http.StatusOK {
		t.Fatalf("status %d: %s", r.status, r.body)
	}
	var v runView
	r.decode(t, &v)
	if v.ID != created.ID || v.Project != "web" || v.Name != "simple" || v.Status != "pending" {
		t.Errorf("run %+v", v)
	}
	// With auth off every caller is the admin, whose ref counts.
	if v.Trigger != (store.Trigger{Ref: "refs/heads/main", Branch: "main", Event: "api", Verified: store.RefFromAdmin}) || !v.RefVerified {
		t.Errorf("trigger %+v", v.Trigger)
	}
	if v.CreatedAt != "2026-05-01T12:00:00.000Z" {
		t.Errorf("created_at %q", v.CreatedAt)
	}
	if v.StartedAt != nil {
		t.Errorf("started_at present before start: %q", *v.StartedAt)
	}
	if v.JobsTotal != 3 || v.JobsFinished != 0 || v.CancelRequested {
		t.Errorf("counters %+v", v)
	}
	if len(v.Jobs) != 3 {
		t.Fatalf("jobs %+v", v.Jobs)
	}
	build, test := v.Jobs[0], v.Jobs[2]
	if build.Name != "build" || build.Key != "build" || build.Status != "queued" || build.QueuedAt == "" ||
		build.MaxAttempts != 1 || build.Attempt != 0 || len(build.Matrix) != 0 || len(build.Needs) != 0 {
		t.Errorf("build job %+v", build)
	}
	if test.Name != "test" || test.Key != "test (go=1.26)" || test.Status != "pending" ||
		len(test.Matrix) != 1 || test.Matrix[0].Name != "go" || test.Matrix[0].Value != "1.26" ||
		strings.Join(test.Needs, ",") != "build" {
		t.Errorf("test job %+v", test)
	}

	expectError(t, b.get(t, "/api/v1/runs/0190b5a0-0000-7000-8000-000000000000"), http.StatusNotFound, "not_found")
	expectError(t, b.get(t, "/api/v1/runs/not-a-uuid"), http.StatusBadRequest, "bad_request")
}

func TestCancelRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.createRun(t, "web", "")
	path := "/api/v1/runs/" + run.ID + "/cancel"
	r := b.do(t, http.MethodPost, path, "", "", nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	var v runView
	r.decode(t, &v)
	if v.Status != "cancelled" || !v.CancelRequested || len(v.Jobs) != 3 {
		t.Errorf("cancelled run %+v", v)
	}
	for _, j := range v.Jobs {
		if j.Status != "cancelled" {
			t.Errorf("job %s %s", j.Key, j.Status)
		}
	}
	expectError(t, b.do(t, http.MethodPost, path, "", "", nil), http.StatusConflict, "conflict")
	expectError(t, b.do(t, http.MethodPost, "/api/v1/runs/0190b5a0-0000-7000-8000-000000000000/cancel", "", "", nil),
		http.StatusNotFound, "not_found")
	expectError(t, b.do(t, http.MethodPost, "/api/v1/runs/123/cancel", "", "", nil), http.StatusBadRequest, "bad_request")
}

func TestJobs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.createRun(t, "web", "")
	build := run.Jobs[0]

	r := b.get(t, "/api/v1/jobs/"+build.ID)
	if r.status != http.StatusOK {
		t.Fatalf("get job: %d %s", r.status, r.body)
	}
	var j jobView
	r.decode(t, &j)
	if j.ID != build.ID || j.RunID != run.ID || j.Key != "build" || j.Status != "queued" || j.Priority != "normal" {
		t.Errorf("job %+v", j)
	}
	if len(j.Steps) != 2 || j.Steps[0].Name != "compile" || j.Steps[1].Name != "check" ||
		j.Steps[1].Index != 1 || j.Steps[0].Status != "pending" {
		t.Errorf("steps %+v", j.Steps)
	}

	r = b.do(t, http.MethodPost, "/api/v1/jobs/"+build.ID+"/cancel", "", "", nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("cancel job: %d %s", r.status, r.body)
	}
	r.decode(t, &j)
	if j.Status != "cancelled" {
		t.Errorf("cancelled job status %q", j.Status)
	}
	// Its dependents are cancelled with it.
	dep := b.get(t, "/api/v1/jobs/"+run.Jobs[1].ID)
	dep.decode(t, &j)
	if j.Status != "cancelled" {
		t.Errorf("dependent status %q", j.Status)
	}
	expectError(t, b.do(t, http.MethodPost, "/api/v1/jobs/"+build.ID+"/cancel", "", "", nil), http.StatusConflict, "conflict")

	unknown := "0190b5a0-0000-7000-8000-000000000000"
	expectError(t, b.get(t, "/api/v1/jobs/"+unknown), http.StatusNotFound, "not_found")
	expectError(t, b.do(t, http.MethodPost, "/api/v1/jobs/"+unknown+"/cancel", "", "", nil), http.StatusNotFound, "not_found")
	expectError(t, b.get(t, "/api/v1/jobs/zzz"), http.StatusBadRequest, "bad_request")
	expectError(t, b.do(t, http.MethodPost, "/api/v1/jobs/zzz/cancel", "", "", nil), http.StatusBadRequest, "bad_request")
}

func TestWorkers(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r := b.get(t, "/api/v1/workers")
	if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"workers":[]}` {
		t.Errorf("no workers: %d %s", r.status, r.body)
	}
	w := &store.Worker{ID: "w1", Name: "box", Labels: []string{"linux"}, MilliCPU: 4000, Memory: 8 << 30, MaxJobs: 2, State: store.WorkerIdle, Version: "v0"}
	if err := b.store.UpsertWorker(t.Context(), w); err != nil {
		t.Fatal(err)
	}
	r = b.get(t, "/api/v1/workers")
	var v struct {
		Workers []struct {
			ID         string   `json:"id"`
			Name       string   `json:"name"`
			Labels     []string `json:"labels"`
			MilliCPU   int64    `json:"milli_cpu"`
			MaxJobs    int      `json:"max_jobs"`
			State      string   `json:"state"`
			LastSeenAt string   `json:"last_seen_at"`
		} `json:"workers"`
	}
	r.decode(t, &v)
	if len(v.Workers) != 1 {
		t.Fatalf("workers %s", r.body)
	}
	got := v.Workers[0]
	if got.ID != "w1" || got.Name != "box" || len(got.Labels) != 1 || got.MilliCPU != 4000 || got.MaxJobs != 2 ||
		got.State != "idle" || got.LastSeenAt != "2026-05-01T12:00:00.000Z" {
		t.Errorf("worker %+v", got)
	}
}

// TestWorkersOfflineFromHeartbeats: a worker's state in GET /api/v1/workers comes from its
// signs of life: what it last said while it keeps reporting, offline once it has been
// unseen past the bound /api/v1/stats counts offline by, whatever it last said (a killed
// busy worker, a local worker of an earlier `gantry up`). Both answers agree on every
// worker.
func TestWorkersOfflineFromHeartbeats(t *testing.T) {
	t.Parallel()
	bound := 3 * api.DefaultHeartbeatEvery // three missed heartbeats
	tests := []struct {
		name   string
		said   string // the state of its last control request
		unseen time.Duration
		want   string
	}{
		{"busy, just seen", "busy", 0, "busy"},
		{"busy, unseen for the whole bound", "busy", bound, "busy"},
		{"busy, unseen past the bound", "busy", bound + time.Millisecond, "offline"},
		{"idle, unseen for an hour", "idle", time.Hour, "offline"},
		{"draining, unseen past the bound", "draining", bound + time.Second, "offline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.post(t, "/api/v1/agent/register", `{"id": "w1", "name": "w1"}`)
			if r := b.post(t, "/api/v1/agent/control", `{"worker_id": "w1", "wait": "0s", "state": "`+tt.said+`"}`); r.status != http.StatusOK {
				t.Fatalf("control: %d %s", r.status, r.body)
			}
			b.clock.Advance(tt.unseen)
			var list struct {
				Workers []struct {
					ID    string `json:"id"`
					State string `json:"state"`
				} `json:"workers"`
			}
			b.get(t, "/api/v1/workers").decode(t, &list)
			if len(list.Workers) != 1 || list.Workers[0].State != tt.want {
				t.Errorf("GET /api/v1/workers = %+v, want w1 %s", list.Workers, tt.want)
			}
			var stats struct {
				Workers map[string]int `json:"workers"`
			}
			b.get(t, "/api/v1/stats").decode(t, &stats)
			if want := map[string]int{tt.want: 1}; !reflect.DeepEqual(stats.Workers, want) {
				t.Errorf("GET /api/v1/stats workers = %v, want %v", stats.Workers, want)
			}
		})
	}
}

func TestRouting(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tests := []struct {
		method, path string
		status       int
		code         string
		allow        string
	}{
		{http.MethodGet, "/api/v1/nothing", 404, "not_found", ""},
		{http.MethodGet, "/", 404, "not_found", ""},
		{http.MethodDelete, "/api/v1/runs", 405, "method_not_allowed", "GET, HEAD, POST"},
		{http.MethodGet, "/api/v1/runs/0190b5a0-0000-7000-8000-000000000000/cancel", 405, "method_not_allowed", "POST"},
		{http.MethodPost, "/healthz", 405, "method_not_allowed", "GET, HEAD"},
	}
	for _, tt := range tests {
		t.Run(tt.method+" "+tt.path, func(t *testing.T) {
			r := b.do(t, tt.method, tt.path, "", "", nil)
			expectError(t, r, tt.status, tt.code)
			if got := r.header.Get("Allow"); got != tt.allow {
				t.Errorf("Allow = %q, want %q", got, tt.allow)
			}
		})
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, p := range []string{"/healthz", "/readyz"} {
		r := b.get(t, p)
		if r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != `{"status":"ok"}` {
			t.Errorf("%s: %d %s", p, r.status, r.body)
		}
	}
	if err := b.store.Close(); err != nil {
		t.Fatal(err)
	}
	expectError(t, b.get(t, "/readyz"), http.StatusServiceUnavailable, "unavailable")
	if r := b.get(t, "/healthz"); r.status != http.StatusOK {
		t.Errorf("healthz with closed store: %d", r.status)
	}
}

// panickyStore panics on ListWorkers and fails ListRuns with a plain error.
type panickyStore struct{ store.Store }

func (panickyStore) ListWorkers(context.Context) ([]*store.Worker, error) { panic("boom") }

func (panickyStore) ListRuns(context.Context, store.ListRunsParams) ([]*store.Run, error) {
	return nil, fmt.Errorf("list runs: disk on fire")
}

func TestHandlerFailures(t *testing.T) {
	t.Parallel()
	st := panickyStore{Store: openStore(t, nil)}
	srv := httptest.NewServer(api.New(api.Config{Store: st, Logger: testLogger(t)}).Handler())
	t.Cleanup(srv.Close)
	b := &bundle{url: srv.URL}
	expectError(t, b.get(t, "/api/v1/workers"), http.StatusInternalServerError, "internal")
	// The server survived the panic.
	e := expectError(t, b.get(t, "/api/v1/runs"), http.StatusInternalServerError, "internal")
	if strings.Contains(e.Error.Message, "disk on fire") {
		t.Errorf("internal error text leaked: %q", e.Error.Message)
	}
	if r := b.get(t, "/healthz"); r.status != http.StatusOK {
		t.Errorf("healthz after panic: %d", r.status)
	}
}

// TestGetRunByNumber reads runs by their number in their project, as the list gives it.
func TestGetRunByNumber(t *testing.T) {
	t.Parallel()
	b := setup(t)
	web1 := b.createRun(t, "web", "refs/heads/main")
	api1 := b.createRun(t, "api", "refs/heads/main")
	web2 := b.createRun(t, "web", "refs/heads/main")
	if web1.Number != 1 || api1.Number != 1 || web2.Number != 2 {
		t.Fatalf("numbers web %d, api %d, web %d; want 1, 1, 2", web1.Number, api1.Number, web2.Number)
	}
	for _, c := range []struct {
		path string
		want runView
	}{{"/api/v1/projects/web/runs/2", web2}, {"/api/v1/projects/web/runs/1", web1}, {"/api/v1/projects/api/runs/1", api1}} {
		r := b.get(t, c.path)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", c.path, r.status, r.body)
		}
		var v runView
		r.decode(t, &v)
		if v.ID != c.want.ID || v.Number != c.want.Number || len(v.Jobs) != 3 {
			t.Errorf("GET %s = run %s #%d with %d jobs, want %s #%d", c.path, v.ID, v.Number, len(v.Jobs), c.want.ID, c.want.Number)
		}
	}
	r := b.get(t, "/api/v1/runs?project=web")
	var list struct {
		Runs []runView `json:"runs"`
	}
	r.decode(t, &list)
	if len(list.Runs) != 2 || list.Runs[0].Number != 2 || list.Runs[1].Number != 1 {
		t.Errorf("listed web runs %+v, want #2 then #1", list.Runs)
	}
	for path, want := range map[string]int{
		"/api/v1/projects/web/runs/3":         http.StatusNotFound,
		"/api/v1/projects/nope/runs/1":        http.StatusNotFound,
		"/api/v1/projects/web/runs/0":         http.StatusBadRequest,
		"/api/v1/projects/web/runs/-1":        http.StatusBadRequest,
		"/api/v1/projects/web/runs/two":       http.StatusBadRequest,
		"/api/v1/projects/web/runs/2?since=x": http.StatusBadRequest,
	} {
		if r := b.get(t, path); r.status != want {
			t.Errorf("GET %s: %d %s, want %d", path, r.status, r.body, want)
		}
	}
}
