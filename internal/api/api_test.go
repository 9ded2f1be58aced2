package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
)

const simplePipeline = `name: simple
jobs:
  build:
    steps:
      - { name: compile, run: make }
      - { name: check, run: make check }
  test:
    needs: [build]
    matrix: { go: ["1.25", "1.26"] }
    steps:
      - run: go test ./...
`

// badPipeline has three mistakes, on lines 6, 8 and 9.
const badPipeline = "name: bad\njobs:\n  build:\n    steps:\n      - run: make\n    colour: red\n  deploy:\n    needs: [biuld]\n    steps: []\n"

type bundle struct {
	store store.Store
	clock *clock.Fake
	url   string
}

func openStore(t testing.TB, clk clock.Clock) store.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func testLogger(t *testing.T) *slog.Logger {
	w := &testOutput{w: t.Output()}
	// Hijacked connections (WebSockets) outlive the server's Close and may still log:
	// after the test, those records are dropped rather than written to a finished test.
	t.Cleanup(w.close)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// testOutput writes to a test's output until the test ends.
type testOutput struct {
	mu     sync.Mutex
	w      io.Writer
	closed bool
}

func (o *testOutput) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return len(p), nil
	}
	return o.w.Write(p)
}

func (o *testOutput) close() {
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
}

func setupWith(t *testing.T, mod func(*api.Config)) *bundle {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	cfg := api.Config{Store: st, Logger: testLogger(t), Clock: clk}
	if mod != nil {
		mod(&cfg)
	}
	srv := httptest.NewServer(api.New(cfg).Handler())
	t.Cleanup(srv.Close)
	return &bundle{store: st, clock: clk, url: srv.URL}
}

func setup(t *testing.T) *bundle { return setupWith(t, nil) }

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t *testing.T, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decode %s: %v", r.body, err)
	}
}

func (b *bundle) do(t *testing.T, method, path, contentType, body string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: data}
}

func (b *bundle) get(t *testing.T, path string) response {
	t.Helper()
	return b.do(t, http.MethodGet, path, "", "", nil)
}

type jobView struct {
	ID          string `json:"id"`
	RunID       string `json:"run_id"`
	Name        string `json:"name"`
	Key         string `json:"key"`
	Status      string `json:"status"`
	Attempt     int    `json:"attempt"`
	MaxAttempts int    `json:"max_attempts"`
	Priority    string `json:"priority"`
	QueuedAt    string `json:"queued_at"`
	Matrix      []struct {
		Name  string `json:"name"`
		Value string `json:"value"`
	} `json:"matrix"`
	Needs []string `json:"needs"`
	Steps []struct {
		Index  int    `json:"index"`
		Name   string `json:"name"`
		Status string `json:"status"`
	} `json:"steps"`
}

type runView struct {
	ID              string        `json:"id"`
	Status          string        `json:"status"`
	Number          int           `json:"number"`
	Project         string        `json:"project"`
	Name            string        `json:"name"`
	Trigger         store.Trigger `json:"trigger"`
	CreatedAt       string        `json:"created_at"`
	StartedAt       *string       `json:"started_at"`
	JobsTotal       int           `json:"jobs_total"`
	JobsFinished    int           `json:"jobs_finished"`
	CancelRequested bool          `json:"cancel_requested"`
	Jobs            []jobView     `json:"jobs"`
	RefVerified     bool          `json:"ref_verified"`
}

type errorView struct {
	Error struct {
		Code    string `json:"code"`
		Message string `json:"message"`
		Details []struct {
			Path    string `json:"path"`
			Line    int    `json:"line"`
			Column  int    `json:"column"`
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"details"`
	} `json:"error"`
}

func expectError(t *testing.T, r response, status int, code string) errorView {
	t.Helper()
	if r.status != status {
		t.Fatalf("status = %d, want %d; body %s", r.status, status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q, want application/json", ct)
	}
	var e errorView
	r.decode(t, &e)
	if e.Error.Code != code {
		t.Errorf("error code = %q, want %q; body %s", e.Error.Code, code, r.body)
	}
	if e.Error.Message == "" {
		t.Errorf("error without message: %s", r.body)
	}
	if e.Error.Details == nil {
		t.Errorf("details missing (want [] at least): %s", r.body)
	}
	return e
}

// createRun submits the simple pipeline and returns the answer.
func (b *bundle) createRun(t *testing.T, project, ref string) runView {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"pipeline": simplePipeline, "project": project, "ref": ref})
	r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json", string(body), nil)
	if r.status != http.StatusAccepted {
		t.Fatalf("create run: status %d: %s", r.status, r.body)
	}
	var v runView
	r.decode(t, &v)
	return v
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func jsonPipeline(t *testing.T) string {
	return mustJSON(t, map[string]any{
		"name": "json-pipe",
		"jobs": map[string]any{"only": map[string]any{"steps": []any{map[string]any{"run": "true"}}}},
	})
}

func TestCreateRun(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		contentType string
		body        func(t *testing.T) string
		wantName    string
		wantJobs    []string // keys
		wantProject string
		wantTrigger store.Trigger
		wantPrio    string
	}{
		{
			name: "yaml body", contentType: "application/yaml",
			body:     func(*testing.T) string { return simplePipeline },
			wantName: "simple", wantJobs: []string{"build", "test (go=1.25)", "test (go=1.26)"},
			wantProject: "default", wantTrigger: store.Trigger{Event: "api"}, wantPrio: "normal",
		},
		{
			name: "text/yaml with charset", contentType: "text/yaml; charset=utf-8",
			body:     func(*testing.T) string { return simplePipeline },
			wantName: "simple", wantJobs: []string{"build", "test (go=1.25)", "test (go=1.26)"},
			wantProject: "default", wantTrigger: store.Trigger{Event: "api"}, wantPrio: "normal",
		},
		{
			// A GitHub Actions workflow, posted as it is, is read by the workflow front end.
			name: "github actions workflow", contentType: "application/yaml",
			body: func(*testing.T) string {
				return "name: gha\non: push\njobs:\n  test:\n    runs-on: ubuntu-latest\n    strategy: {matrix: {go: ['1.25', '1.26']}}\n" +
					"    steps:\n      - uses: actions/checkout@v4\n      - run: go test ./...\n"
			},
			wantName: "gha", wantJobs: []string{"test (go=1.25)", "test (go=1.26)"},
			wantProject: "default", wantTrigger: store.Trigger{Event: "api"}, wantPrio: "normal",
		},
		{
			name: "json pipeline", contentType: "application/json",
			body:     jsonPipeline,
			wantName: "json-pipe", wantJobs: []string{"only"},
			wantProject: "default", wantTrigger: store.Trigger{Event: "api"}, wantPrio: "normal",
		},
		{
			name: "envelope", contentType: "application/json",
			body: func(t *testing.T) string {
				return mustJSON(t, map[string]any{
					"pipeline": simplePipeline, "project": "web", "ref": "refs/heads/main",
					"sha": "abc123", "env": map[string]string{"A": "1"}, "priority": "high",
				})
			},
			wantName: "simple", wantJobs: []string{"build", "test (go=1.25)", "test (go=1.26)"},
			wantProject: "web", wantTrigger: store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: "abc123", Event: "api"},
			wantPrio: "high",
		},
		{
			name: "envelope with json pipeline text and event", contentType: "application/json",
			body: func(t *testing.T) string {
				return mustJSON(t, map[string]any{"pipeline": jsonPipeline(t), "event": "push", "branch": "dev", "ref": "refs/heads/main"})
			},
			wantName: "json-pipe", wantJobs: []string{"only"},
			wantProject: "default", wantTrigger: store.Trigger{Ref: "refs/heads/main", Branch: "dev", Event: "push"},
			wantPrio: "normal",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			r := b.do(t, http.MethodPost, "/api/v1/runs", tt.contentType, tt.body(t), nil)
			if r.status != http.StatusAccepted {
				t.Fatalf("status = %d, want 202: %s", r.status, r.body)
			}
			var v runView
			r.decode(t, &v)
			if v.ID == "" || v.Status != "pending" && v.Status != "running" {
				t.Errorf("id %q status %q", v.ID, v.Status)
			}
			if got := r.header.Get("Location"); got != "/api/v1/runs/"+v.ID {
				t.Errorf("Location = %q", got)
			}
			if v.Project != tt.wantProject || v.Name != tt.wantName {
				t.Errorf("project %q name %q, want %q %q", v.Project, v.Name, tt.wantProject, tt.wantName)
			}
			var keys []string
			for _, j := range v.Jobs {
				keys = append(keys, j.Key)
				if j.ID == "" || j.Status == "" || j.Priority != tt.wantPrio {
					t.Errorf("job %+v", j)
				}
			}
			if strings.Join(keys, "|") != strings.Join(tt.wantJobs, "|") {
				t.Errorf("job keys %q, want %q", keys, tt.wantJobs)
			}
			run, err := b.store.GetRun(t.Context(), mustUUID(t, v.ID))
			if err != nil {
				t.Fatal(err)
			}
			// With auth off every caller is the admin, whose ref counts.
			tt.wantTrigger.Verified = store.RefFromAdmin
			if run.Trigger != tt.wantTrigger {
				t.Errorf("trigger %+v, want %+v", run.Trigger, tt.wantTrigger)
			}
		})
	}
}

func TestCreateRunIdempotency(t *testing.T) {
	t.Parallel()
	b := setup(t)
	hdr := map[string]string{"Idempotency-Key": "deploy-42"}
	first := b.do(t, http.MethodPost, "/api/v1/runs", "application/yaml", simplePipeline, hdr)
	if first.status != http.StatusAccepted || first.header.Get("Idempotent-Replay") != "" {
		t.Fatalf("first: %d %v %s", first.status, first.header, first.body)
	}
	second := b.do(t, http.MethodPost, "/api/v1/runs", "application/yaml", simplePipeline, hdr)
	if second.status != http.StatusOK || second.header.Get("Idempotent-Replay") != "true" {
		t.Fatalf("replay: %d %v %s", second.status, second.header, second.body)
	}
	var a, c runView
	first.decode(t, &a)
	second.decode(t, &c)
	if a.ID != c.ID || len(c.Jobs) != len(a.Jobs) {
		t.Errorf("replay answered run %s with %d jobs, want %s with %d", c.ID, len(c.Jobs), a.ID, len(a.Jobs))
	}
	third := b.do(t, http.MethodPost, "/api/v1/runs", "application/yaml", simplePipeline, map[string]string{"Idempotency-Key": "other"})
	var d runView
	third.decode(t, &d)
	if third.status != http.StatusAccepted || d.ID == a.ID {
		t.Errorf("other key: %d, id %s", third.status, d.ID)
	}
}

func TestCreateRunInvalidPipeline(t *testing.T) {
	t.Parallel()
	type detail struct {
		path string
		line int
		code string
	}
	want := []detail{
		{"jobs.build.colour", 6, "unknown_key"},
		{"jobs.deploy.needs[0]", 8, "unknown_need"},
		{"jobs.deploy.steps", 9, "required"},
	}
	tests := []struct {
		name        string
		contentType string
		body        string
	}{
		{"yaml", "application/yaml", badPipeline},
		{"envelope", "application/json", `{"pipeline": ` + strings.ReplaceAll(mustJSONString(badPipeline), "\n", "") + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			e := expectError(t, b.do(t, http.MethodPost, "/api/v1/runs", tt.contentType, tt.body, nil),
				http.StatusUnprocessableEntity, "invalid_pipeline")
			if len(e.Error.Details) != len(want) {
				t.Fatalf("details %+v, want %d", e.Error.Details, len(want))
			}
			for i, w := range want {
				d := e.Error.Details[i]
				if d.Path != w.path || d.Line != w.line || d.Code != w.code || d.Column == 0 || d.Message == "" {
					t.Errorf("detail %d = %+v, want %+v", i, d, w)
				}
			}
			runs, err := b.store.ListRuns(t.Context(), store.ListRunsParams{})
			if err != nil || len(runs) != 0 {
				t.Errorf("invalid pipeline stored a run: %d, %v", len(runs), err)
			}
		})
	}
}

// TestCreateRunInvalidWorkflow: a GitHub Actions workflow that names an action wrongly
// is refused with the step's path in the workflow, and no run is made.
func TestCreateRunInvalidWorkflow(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := "on: push\njobs:\n  lint:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n      - uses: golangci/golangci-lint-action\n"
	e := expectError(t, b.do(t, http.MethodPost, "/api/v1/runs", "application/yaml", body, nil), http.StatusUnprocessableEntity, "invalid_pipeline")
	if len(e.Error.Details) != 1 {
		t.Fatalf("details %+v, want 1", e.Error.Details)
	}
	d := e.Error.Details[0]
	if d.Path != "jobs.lint.steps[1].uses" || d.Line != 7 || d.Column != 15 || !strings.Contains(d.Message, "needs a version after @") {
		t.Errorf("detail %+v", d)
	}
	if runs, err := b.store.ListRuns(t.Context(), store.ListRunsParams{}); err != nil || len(runs) != 0 {
		t.Errorf("invalid workflow stored a run: %d, %v", len(runs), err)
	}
}

func mustJSONString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestCreateRunBadRequests(t *testing.T) {
	t.Parallel()
	big := "name: big\njobs:\n  a:\n    steps:\n      - run: \"" + strings.Repeat("x", 600) + "\"\n"
	tests := []struct {
		name        string
		contentType string
		body        string
		status      int
		code        string
	}{
		{"unknown envelope field", "application/json", `{"pipeline": "x", "colour": "red"}`, 400, "bad_request"},
		{"trailing data", "application/json", `{"pipeline": "x"} {}`, 400, "bad_request"},
		{"unknown priority", "application/json", `{"pipeline": ` + mustJSONString(simplePipeline) + `, "priority": "urgent"}`, 400, "bad_request"},
		{"wrong env type", "application/json", `{"pipeline": "x", "env": {"A": 1}}`, 400, "bad_request"},
		{"body too large", "application/yaml", big, 413, "payload_too_large"},
		{"bad content type", "application/x-www-form-urlencoded", "a=b", 415, "unsupported_media_type"},
		{"malformed content type", "application/;;", "a", 400, "bad_request"},
		{"json syntax error", "application/json", `{"name": `, 422, "invalid_pipeline"},
		{"pipeline key not a string", "application/json", `{"pipeline": 1, "jobs": {}}`, 422, "invalid_pipeline"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setupWith(t, func(c *api.Config) { c.MaxBodyBytes = 512 })
			expectError(t, b.do(t, http.MethodPost, "/api/v1/runs", tt.contentType, tt.body, nil), tt.status, tt.code)
		})
	}
}

// TestUIMount: the dashboard gets the GET paths the API does not own, without a token;
// unknown API paths stay JSON errors.
func TestUIMount(t *testing.T) {
	t.Parallel()
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "page "+r.URL.Path) })
	b := setupWith(t, func(c *api.Config) { c.UI = ui; c.Auth = true })
	for _, p := range []string{"/", "/runs/123", "/app.js"} {
		if r := b.get(t, p); r.status != http.StatusOK || string(r.body) != "page "+p {
			t.Errorf("GET %s: %d %q, want the UI's page", p, r.status, r.body)
		}
	}
	expectError(t, b.get(t, "/api/v1/nope"), http.StatusNotFound, "not_found")
	expectError(t, b.get(t, "/api/v1/runs"), http.StatusUnauthorized, "unauthorized")
	if r := b.get(t, "/healthz"); r.status != http.StatusOK {
		t.Errorf("healthz with a UI: %d", r.status)
	}
}
