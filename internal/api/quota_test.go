package api_test

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestProjectQuota: an admin sets a project's limit of concurrent jobs and weight with a
// PATCH that names only them, even on a project a run made (no repository); bad values are
// refused field by field and change nothing; the change is audited with its values; and a
// queued job held back by the limit says so.
func TestProjectQuota(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	admin := bearer(issue(t, b.store, store.RoleAdmin))
	writer := bearer(issue(t, b.store, store.RoleWrite))

	body, _ := json.Marshal(map[string]any{"project": "noisy", "pipeline": "name: q\njobs:\n" +
		"  a: {steps: [{run: a}]}\n  b: {steps: [{run: b}]}\n  c: {steps: [{run: c}]}\n"})
	r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json", string(body), writer)
	if r.status != http.StatusAccepted {
		t.Fatalf("create run: %d %s", r.status, r.body)
	}
	var run struct {
		ID string `json:"id"`
	}
	r.decode(t, &run)

	// Only admins change settings.
	expectError(t, b.do(t, http.MethodPatch, "/api/v1/projects/noisy", "application/json", `{"max_concurrent_jobs": 1}`, writer),
		http.StatusForbidden, "forbidden")
	for _, tc := range []struct {
		body   string
		status int
		code   string
		fields []string
	}{
		{`{"max_concurrent_jobs": -1, "fair_weight": 0}`, http.StatusUnprocessableEntity, "invalid_project", []string{"max_concurrent_jobs", "fair_weight"}},
		{`{"fair_weight": 101}`, http.StatusUnprocessableEntity, "invalid_project", []string{"fair_weight"}},
		{`{"max_concurrent_jobs": 1000001}`, http.StatusUnprocessableEntity, "invalid_project", []string{"max_concurrent_jobs"}},
		{`{"fair_weight": "2"}`, http.StatusBadRequest, "bad_request", nil},
		{`{"max_concurrent_jobs": 1.5}`, http.StatusBadRequest, "bad_request", nil},
	} {
		e := expectError(t, b.do(t, http.MethodPatch, "/api/v1/projects/noisy", "application/json", tc.body, admin), tc.status, tc.code)
		var fields []string
		for _, d := range e.Error.Details {
			fields = append(fields, d.Path)
		}
		if tc.fields != nil && !slices.Equal(fields, tc.fields) {
			t.Errorf("PATCH %s: problems named %v, want %v", tc.body, fields, tc.fields)
		}
	}
	expectError(t, b.do(t, http.MethodPatch, "/api/v1/projects/nope", "application/json", `{"fair_weight": 2}`, admin),
		http.StatusNotFound, "not_found")
	var p struct {
		Name              string `json:"name"`
		MaxConcurrentJobs int    `json:"max_concurrent_jobs"`
		FairWeight        int    `json:"fair_weight"`
	}
	b.getAs(t, "/api/v1/projects/noisy", admin).decode(t, &p)
	if p.MaxConcurrentJobs != 0 || p.FairWeight != 1 {
		t.Errorf("after refused updates: %+v, want limit 0 and weight 1", p)
	}

	r = b.do(t, http.MethodPatch, "/api/v1/projects/noisy", "application/json", `{"max_concurrent_jobs": 1, "fair_weight": 3}`, admin)
	if r.status != http.StatusOK {
		t.Fatalf("patch quota: %d %s", r.status, r.body)
	}
	r.decode(t, &p)
	if p.Name != "noisy" || p.MaxConcurrentJobs != 1 || p.FairWeight != 3 {
		t.Errorf("patched = %+v, want limit 1 and weight 3", p)
	}
	page, _ := b.listAudit(t, "?project=noisy", admin)
	if len(page.Entries) != 1 || page.Entries[0].Action != "project.updated" {
		t.Fatalf("audit of project noisy = %q, want one project.updated", auditActions(page.Entries))
	}
	d := page.Entries[0].Details
	if changed, _ := d["changed"].([]any); !slices.Equal(changed, []any{"max_concurrent_jobs", "fair_weight"}) ||
		d["max_concurrent_jobs"] != float64(1) || d["fair_weight"] != float64(3) {
		t.Errorf("project.updated details = %v, want both fields changed with their values", d)
	}

	// A worker takes one job; the other two are held back by the limit, and say so.
	cs, err := b.store.Claim(t.Context(), store.ClaimParams{WorkerID: "w1", Max: 8, LeaseTTL: time.Minute})
	if err != nil || len(cs) != 1 {
		t.Fatalf("claim: %d jobs, %v; want 1 (the project's limit)", len(cs), err)
	}
	if err := b.store.UpsertWorker(t.Context(), &store.Worker{ID: "w1", Name: "w1", LastSeenAt: b.clock.Now(), State: store.WorkerBusy}); err != nil {
		t.Fatalf("upsert worker: %v", err)
	}
	if err := b.store.UpsertWorker(t.Context(), &store.Worker{ID: "w2", Name: "w2", LastSeenAt: b.clock.Now(), State: store.WorkerIdle}); err != nil {
		t.Fatalf("upsert worker: %v", err)
	}
	rr := b.getAs(t, "/api/v1/runs/"+run.ID, admin)
	var v waitingRun
	rr.decode(t, &v)
	held := 0
	for _, j := range v.Jobs {
		if j.Status != "queued" {
			continue
		}
		held++
		wantWaiting(t, j, "quota", "project noisy is at its limit of 1 concurrent job")
	}
	if held != 2 {
		t.Errorf("%d queued jobs, want 2: %s", held, rr.body)
	}
	if strings.Contains(string(rr.body), `"code":"backlog"`) {
		t.Errorf("a job held by the quota says backlog: %s", rr.body)
	}
}

func (b *bundle) getAs(t *testing.T, path string, header map[string]string) response {
	t.Helper()
	r := b.do(t, http.MethodGet, path, "", "", header)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.status, r.body)
	}
	return r
}
