package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/postgres"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// storeOpeners open an empty store of each driver, for the access tests that run on both.
var storeOpeners = []struct {
	name string
	open func(t *testing.T, clk clock.Clock) store.Store
}{
	{"sqlite", func(t *testing.T, clk clock.Clock) store.Store {
		st, err := sqlite.Open(context.Background(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
		if err != nil {
			t.Fatalf("open sqlite: %v", err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}},
	{"postgres", func(t *testing.T, clk clock.Clock) store.Store {
		st, err := postgres.Open(context.Background(), testdb.Postgres(t), postgres.Options{Clock: clk})
		if err != nil {
			t.Fatalf("open postgres: %v", err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}},
}

// accessServer is a server with auth on, blobs and secrets, on st, and the Server itself
// for its route table.
func accessServer(t *testing.T, st store.Store, clk clock.Clock) (*bundle, *api.Server) {
	t.Helper()
	bs, err := blob.OpenDir(t.TempDir(), blob.Options{Secret: []byte(strings.Repeat("s", 32))})
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Config{Store: st, Logger: testLogger(t), Clock: clk, Auth: true, Blobs: bs, Secrets: testKeyring(t)})
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	return &bundle{store: st, url: hs.URL}, srv
}

// isolationFixture is one project's things, by the placeholder the paths below use.
type isolationFixture map[string]string

const isolationPipeline = "name: one\njobs:\n  build:\n    steps: [{run: make}]\n"

// makeIsolationFixture creates a project with a run, a job (claimed, with an artifact),
// a workflow, a secret, an environment, an outbound webhook and a member, as admin.
func makeIsolationFixture(t *testing.T, b *bundle, admin, project string) isolationFixture {
	t.Helper()
	f := isolationFixture{"$project": project}
	must := func(method, path, body string, want int) response {
		t.Helper()
		r := b.do(t, method, path, "application/json", body, bearer(admin))
		if r.status != want {
			t.Fatalf("fixture %s %s: %d %s", method, path, r.status, r.body)
		}
		return r
	}
	// The run makes the project, as a run does on first use.
	var run runView
	must(http.MethodPost, "/api/v1/runs", mustJSON(t, map[string]any{"pipeline": isolationPipeline, "project": project}),
		http.StatusAccepted).decode(t, &run)
	f["$run"], f["$job"] = run.ID, run.Jobs[0].ID

	reg := b.mustRegister(t, admin, `{"name": "w-`+project+`", "max_jobs": 1}`)
	r, claimed := b.claimWith(t, reg.Credential, `{"worker_id": "`+reg.WorkerID+`", "max": 1, "wait": "0s"}`)
	if r.status != http.StatusOK || len(claimed.Jobs) != 1 || claimed.Jobs[0].ID != f["$job"] {
		t.Fatalf("fixture claim of %s's job: %d %s", project, r.status, r.body)
	}
	var arts registerView
	r = b.do(t, http.MethodPost, "/api/v1/agent/jobs/"+f["$job"]+"/artifacts", "application/json", fmt.Sprintf(
		`{"token": %q, "artifacts": [{"name": "bin/app", "sha256": %q, "size": 3}]}`, claimed.Jobs[0].Lease.Token, digest("app")),
		bearer(reg.Credential))
	if r.status != http.StatusOK {
		t.Fatalf("fixture artifact: %d %s", r.status, r.body)
	}
	r.decode(t, &arts)
	f["$artifact"] = arts.Artifacts[0].ID

	var wf workflowView
	must(http.MethodPost, "/api/v1/workflows", mustJSON(t, map[string]any{"project": project, "name": "deploy", "definition": dispatchPipeline}),
		http.StatusCreated).decode(t, &wf)
	f["$workflow"] = wf.ID
	must(http.MethodPut, "/api/v1/projects/"+project+"/secrets/TOKEN", `{"value": "s3cret-`+project+`"}`, http.StatusCreated)
	must(http.MethodPut, "/api/v1/projects/"+project+"/variables/REGION", `{"value": "eu-`+project+`"}`, http.StatusCreated)
	must(http.MethodPut, "/api/v1/projects/"+project+"/environments/production", `{"branches": ["main"]}`, http.StatusOK)
	var hook struct {
		ID string `json:"id"`
	}
	must(http.MethodPost, "/api/v1/projects/"+project+"/webhooks", `{"url": "https://hooks.example.com/`+project+`"}`,
		http.StatusCreated).decode(t, &hook)
	f["$webhook"] = hook.ID
	must(http.MethodPut, "/api/v1/projects/"+project+"/members/bob", `{"role": "viewer"}`, http.StatusCreated)
	p, err := b.store.GetProjectByName(t.Context(), project)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.store.AddBlobOwner(t.Context(), p.ID, digest("deps")); err != nil {
		t.Fatalf("fixture blob owner: %v", err)
	}
	cache, _, err := b.store.PutCache(t.Context(), &store.CacheEntry{ProjectID: p.ID, Scope: "main", Key: "deps", SHA256: digest("deps"), Size: 4})
	if err != nil {
		t.Fatalf("fixture cache: %v", err)
	}
	f["$cache"] = cache.ID.String()
	return f
}

// missingFixture names things that do not exist, in the shape of a fixture's.
func missingFixture() isolationFixture {
	f := isolationFixture{"$project": "nowhere"}
	for _, k := range []string{"$run", "$job", "$artifact", "$workflow", "$webhook", "$cache"} {
		f[k] = store.NewID().String()
	}
	return f
}

func (f isolationFixture) fill(s string) string {
	for k, v := range f {
		s = strings.ReplaceAll(s, k, v)
	}
	return s
}

// isolationCalls is how the test calls every route whose path names something of a
// project: the path with placeholders, and a body that the project's own maintainer
// may send. A route with a path parameter that is neither here nor in notPerProject fails
// the test: a new route cannot skip the isolation check.
var isolationCalls = map[string]struct{ path, body string }{
	"GET /api/v1/runs/{id}":                                {"/api/v1/runs/$run", ""},
	"GET /api/v1/projects/{name}/runs/{number}":            {"/api/v1/projects/$project/runs/1", ""},
	"POST /api/v1/runs/{id}/cancel":                        {"/api/v1/runs/$run/cancel", ""},
	"POST /api/v1/runs/{id}/retry":                         {"/api/v1/runs/$run/retry", ""},
	"POST /api/v1/runs/{id}/rerun":                         {"/api/v1/runs/$run/rerun", `{"jobs": "all"}`},
	"GET /api/v1/runs/{id}/artifacts":                      {"/api/v1/runs/$run/artifacts", ""},
	"GET /api/v1/runs/{id}/annotations":                    {"/api/v1/runs/$run/annotations", ""},
	"GET /api/v1/runs/{id}/summaries":                      {"/api/v1/runs/$run/summaries", ""},
	"GET /api/v1/runs/{id}/tests":                          {"/api/v1/runs/$run/tests", ""},
	"GET /api/v1/jobs/{id}/tests":                          {"/api/v1/jobs/$job/tests", ""},
	"GET /api/v1/projects/{name}/tests/history":            {"/api/v1/projects/$project/tests/history?test=pkg.TestX", ""},
	"GET /api/v1/projects/{name}/tests/flaky":              {"/api/v1/projects/$project/tests/flaky", ""},
	"GET /api/v1/projects/{name}/tests/summary":            {"/api/v1/projects/$project/tests/summary", ""},
	"GET /api/v1/projects/{name}/tests/quarantine":         {"/api/v1/projects/$project/tests/quarantine", ""},
	"PUT /api/v1/projects/{name}/tests/quarantine":         {"/api/v1/projects/$project/tests/quarantine", `{"suite": "pkg", "name": "TestX", "owner": "alice", "for": "7d"}`},
	"DELETE /api/v1/projects/{name}/tests/quarantine":      {"/api/v1/projects/$project/tests/quarantine?suite=pkg&name=TestX", ""},
	"GET /api/v1/projects/{name}/tests/quarantine-rule":    {"/api/v1/projects/$project/tests/quarantine-rule", ""},
	"PUT /api/v1/projects/{name}/tests/quarantine-rule":    {"/api/v1/projects/$project/tests/quarantine-rule", `{"flaky_commits": 3, "within": "7d"}`},
	"DELETE /api/v1/projects/{name}/tests/quarantine-rule": {"/api/v1/projects/$project/tests/quarantine-rule", ""},
	"GET /api/v1/runs/{id}/logs":                           {"/api/v1/runs/$run/logs", ""},
	"GET /api/v1/jobs/{id}":                                {"/api/v1/jobs/$job", ""},
	"POST /api/v1/jobs/{id}/cancel":                        {"/api/v1/jobs/$job/cancel", ""},
	"POST /api/v1/jobs/{id}/retry":                         {"/api/v1/jobs/$job/retry", ""},
	"POST /api/v1/jobs/{id}/rerun":                         {"/api/v1/jobs/$job/rerun", ""},
	"POST /api/v1/jobs/{id}/approve":                       {"/api/v1/jobs/$job/approve", ""},
	"POST /api/v1/jobs/{id}/reject":                        {"/api/v1/jobs/$job/reject", ""},
	"GET /api/v1/jobs/{id}/artifacts":                      {"/api/v1/jobs/$job/artifacts", ""},
	"GET /api/v1/jobs/{id}/annotations":                    {"/api/v1/jobs/$job/annotations", ""},
	"GET /api/v1/jobs/{id}/summary":                        {"/api/v1/jobs/$job/summary", ""},
	"GET /api/v1/jobs/{id}/logs":                           {"/api/v1/jobs/$job/logs", ""},
	"GET /api/v1/jobs/{id}/logs/stream":                    {"/api/v1/jobs/$job/logs/stream", ""},
	"GET /api/v1/artifacts/{id}":                           {"/api/v1/artifacts/$artifact", ""},
	"GET /api/v1/workflows/{id}":                           {"/api/v1/workflows/$workflow", ""},
	"PATCH /api/v1/workflows/{id}":                         {"/api/v1/workflows/$workflow", `{"enabled": true}`},
	"DELETE /api/v1/workflows/{id}":                        {"/api/v1/workflows/$workflow", ""},
	"POST /api/v1/workflows/{id}/dispatches":               {"/api/v1/workflows/$workflow/dispatches", `{"inputs": {"environment": "staging"}}`},
	"GET /api/v1/projects/{name}":                          {"/api/v1/projects/$project", ""},
	"PATCH /api/v1/projects/{name}":                        {"/api/v1/projects/$project", `{"pipeline_path": "ci.yml"}`},
	"DELETE /api/v1/projects/{name}":                       {"/api/v1/projects/$project", ""},
	"GET /api/v1/projects/{name}/badge.svg":                {"/api/v1/projects/$project/badge.svg", ""},
	"POST /api/v1/projects/{name}/dispatches":              {"/api/v1/projects/$project/dispatches", `{}`},
	"GET /api/v1/projects/{name}/environments":             {"/api/v1/projects/$project/environments", ""},
	"GET /api/v1/projects/{name}/environments/{env}":       {"/api/v1/projects/$project/environments/production", ""},
	"PUT /api/v1/projects/{name}/environments/{env}":       {"/api/v1/projects/$project/environments/production", `{"branches": ["main", "release/*"]}`},
	"DELETE /api/v1/projects/{name}/environments/{env}":    {"/api/v1/projects/$project/environments/production", ""},
	"GET /api/v1/projects/{name}/secrets":                  {"/api/v1/projects/$project/secrets", ""},
	"GET /api/v1/projects/{name}/secrets/{secret}":         {"/api/v1/projects/$project/secrets/TOKEN", ""},
	"PUT /api/v1/projects/{name}/secrets/{secret}":         {"/api/v1/projects/$project/secrets/TOKEN", `{"value": "changed"}`},
	"DELETE /api/v1/projects/{name}/secrets/{secret}":      {"/api/v1/projects/$project/secrets/TOKEN", ""},
	"GET /api/v1/projects/{name}/variables":                {"/api/v1/projects/$project/variables", ""},
	"GET /api/v1/projects/{name}/variables/{variable}":     {"/api/v1/projects/$project/variables/REGION", ""},
	"PUT /api/v1/projects/{name}/variables/{variable}":     {"/api/v1/projects/$project/variables/REGION", `{"value": "changed"}`},
	"DELETE /api/v1/projects/{name}/variables/{variable}":  {"/api/v1/projects/$project/variables/REGION", ""},
	"GET /api/v1/projects/{name}/secret-settings":          {"/api/v1/projects/$project/secret-settings", ""},
	"PUT /api/v1/projects/{name}/secret-settings":          {"/api/v1/projects/$project/secret-settings", `{"secrets_for_forks": false}`},
	"GET /api/v1/projects/{name}/webhooks":                 {"/api/v1/projects/$project/webhooks", ""},
	"POST /api/v1/projects/{name}/webhooks":                {"/api/v1/projects/$project/webhooks", `{"url": "https://hooks.example.com/2"}`},
	"DELETE /api/v1/projects/{name}/webhooks/{id}":         {"/api/v1/projects/$project/webhooks/$webhook", ""},
	"GET /api/v1/projects/{name}/members":                  {"/api/v1/projects/$project/members", ""},
	"PUT /api/v1/projects/{name}/members/{user}":           {"/api/v1/projects/$project/members/bob", `{"role": "developer"}`},
	"DELETE /api/v1/projects/{name}/members/{user}":        {"/api/v1/projects/$project/members/bob", ""},
	"GET /api/v1/projects/{name}/caches":                   {"/api/v1/projects/$project/caches", ""},
	"DELETE /api/v1/projects/{name}/caches/{id}":           {"/api/v1/projects/$project/caches/$cache", ""},
	"DELETE /api/v1/projects/{name}/caches":                {"/api/v1/projects/$project/caches", ""},
}

// notPerProject lists the routes with a path parameter that names nothing of a project,
// and why. Each is called with the project token and must be refused (403) before
// anything is looked up, unless it is public.
var notPerProject = map[string]string{
	"POST /api/v1/agent/jobs/{id}/start":          "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/heartbeat":      "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/steps/{index}":  "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/complete":       "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/artifacts":      "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/artifact-sets":  "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/inputs":         "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/logs":           "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/summary":        "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/tests":          "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/known-tests":    "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/artifacts/{id}/stored":    "worker protocol: agent credentials only, fenced by the artifact's job's lease",
	"POST /api/v1/agent/jobs/{id}/caches/restore": "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/caches/save":    "worker protocol: agent credentials only, fenced by the job's lease",
	"POST /api/v1/agent/jobs/{id}/caches/commit":  "worker protocol: agent credentials only, fenced by the job's lease",
	"DELETE /api/v1/tokens/{id}":                  "404: an admin revokes any token, a maintainer those of its projects; another's token is answered as missing",
	"POST /api/v1/outbox/{id}/redeliver":          "the outbox is the server's delivery queue: server admin only",
	"POST /api/v1/hooks/{provider}/{project}":     "public: a forge authenticates with the project's webhook secret, not a token",
}

// TestIsolationEveryRoute: for every route whose path names a project's thing, a token
// of project alpha (scoped to it, or its user a member of it) gets from beta's thing the
// very 404 a missing thing gets, and beta's own token does not get 404. Routes are taken
// from the server's route table.
func TestIsolationEveryRoute(t *testing.T) {
	t.Parallel()
	for _, o := range storeOpeners {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
			b, srv := accessServer(t, o.open(t, clk), clk)
			admin := issueToken(t, b.store, store.RoleAdmin)
			alpha := makeIsolationFixture(t, b, admin, "alpha")
			beta := makeIsolationFixture(t, b, admin, "beta")
			_ = alpha
			scopedA := b.createToken(t, admin, `{"name": "alpha-ci", "role": "maintainer", "projects": ["alpha"]}`).Token
			memberA := b.createToken(t, admin, `{"name": "amy-laptop", "user": "amy", "role": "maintainer"}`).Token
			if r := b.do(t, http.MethodPut, "/api/v1/projects/alpha/members/amy", "application/json", `{"role": "maintainer"}`, bearer(admin)); r.status != http.StatusCreated {
				t.Fatalf("add amy to alpha: %d %s", r.status, r.body)
			}
			tokenB := b.createToken(t, admin, `{"name": "beta-ci", "role": "maintainer", "projects": ["beta"]}`).Token
			missing := missingFixture()

			var perProject []api.Route
			for _, rt := range srv.Routes() {
				if !strings.Contains(rt.Pattern, "{") {
					continue
				}
				_, called := isolationCalls[rt.Pattern]
				why, exempt := notPerProject[rt.Pattern]
				switch {
				case called:
					if rt.Thing == "" {
						t.Errorf("route %s (access %s) names a project's thing but its access does not check the project", rt.Pattern, rt.Access)
					}
					perProject = append(perProject, rt)
				case exempt:
					if strings.HasPrefix(why, "public") {
						continue
					}
					method, path, _ := strings.Cut(rt.Pattern, " ")
					path = strings.NewReplacer("{id}", beta["$job"], "{index}", "0").Replace(path)
					want := http.StatusForbidden
					if strings.HasPrefix(why, "404") {
						want = http.StatusNotFound
					}
					if r := b.do(t, method, path, "application/json", `{}`, bearer(scopedA)); r.status != want {
						t.Errorf("%s with a project token: %d %s, want %d (%s)", rt.Pattern, r.status, r.body, want, why)
					}
				default:
					t.Errorf("add an isolation fixture for %s (access %s): a path to call it on another project's thing in isolationCalls, or a reason in notPerProject", rt.Pattern, rt.Access)
				}
			}
			if len(perProject) < len(isolationCalls) {
				t.Errorf("the route table has %d of the %d routes isolationCalls names", len(perProject), len(isolationCalls))
			}
			// Deletes go last, and deletes of a whole collection after those of one thing,
			// so that beta's token finds every other thing still there.
			slices.SortStableFunc(perProject, func(x, y api.Route) int { return deleteRank(x.Pattern) - deleteRank(y.Pattern) })
			for _, rt := range perProject {
				call := isolationCalls[rt.Pattern]
				method, _, _ := strings.Cut(rt.Pattern, " ")
				for _, tok := range []struct{ name, secret string }{{"scoped to alpha", scopedA}, {"of a member of alpha", memberA}} {
					got := accessCall(t, b, method, beta.fill(call.path), call.body, tok.secret)
					if got.status != http.StatusNotFound {
						t.Errorf("%s on beta's thing with a token %s: %d %s, want 404", rt.Pattern, tok.name, got.status, got.body)
						continue
					}
					want := accessCall(t, b, method, missing.fill(call.path), call.body, tok.secret)
					leaked := string(got.body)
					for k, v := range beta {
						leaked = strings.ReplaceAll(leaked, v, missing[k])
					}
					if leaked != string(want.body) || want.status != http.StatusNotFound {
						t.Errorf("%s: beta's thing answers a token %s\n  %s\nbut a missing one\n  %d %s", rt.Pattern, tok.name, got.body, want.status, want.body)
					}
				}
			}
			for _, rt := range perProject {
				call := isolationCalls[rt.Pattern]
				method, _, _ := strings.Cut(rt.Pattern, " ")
				if got := accessCall(t, b, method, beta.fill(call.path), call.body, tokenB); got.status == http.StatusNotFound {
					t.Errorf("%s on beta's thing with beta's token: 404 %s, want it found", rt.Pattern, got.body)
				}
			}
		})
	}
}

func deleteRank(pattern string) int {
	switch {
	case !strings.HasPrefix(pattern, "DELETE "):
		return 0
	case strings.HasSuffix(pattern, "}"):
		return 1
	}
	return 2
}

// issueToken makes a token of role straight in the store.
func issueToken(t *testing.T, st store.Store, role store.Role) string {
	t.Helper()
	secret, err := api.IssueToken(t.Context(), st, "root-"+string(role), role, "")
	if err != nil {
		t.Fatal(err)
	}
	return secret
}

// accessCall calls a route as tok, without following redirects, and reads the body only
// of an answer that is not a stream (a log stream of a running job never ends).
func accessCall(t *testing.T, b *bundle, method, path, body, tok string) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, b.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	out := response{status: res.StatusCode, header: res.Header}
	if !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		if out.body, err = io.ReadAll(res.Body); err != nil {
			t.Fatalf("%s %s: read: %v", method, path, err)
		}
	}
	return out
}
