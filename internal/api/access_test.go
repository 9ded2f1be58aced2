package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/postgres"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// TestProjectRoles: on two projects, a viewer reads but does not change, a developer
// submits, cancels and dispatches but manages no secrets or members, a maintainer does
// that but changes no setting that reaches the coordinator's files; listings show each
// token only its projects; workers and statistics are for tokens of every project.
// On SQLite and PostgreSQL.
func TestProjectRoles(t *testing.T) {
	t.Parallel()
	for _, o := range storeOpeners {
		t.Run(o.name, func(t *testing.T) {
			t.Parallel()
			clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
			b, _ := accessServer(t, o.open(t, clk), clk)
			admin := issueToken(t, b.store, store.RoleAdmin)
			as := func(tok, method, path, body string) response {
				t.Helper()
				return accessCall(t, b, method, path, body, tok)
			}
			want := func(r response, status int, what string) {
				t.Helper()
				if r.status != status {
					t.Errorf("%s: %d %s, want %d", what, r.status, r.body, status)
				}
			}
			runIn := func(tok, project string) response {
				return as(tok, http.MethodPost, "/api/v1/runs", mustJSON(t, map[string]any{"pipeline": isolationPipeline, "project": project}))
			}
			var webRun, apiRun runView
			runIn(admin, "web").decode(t, &webRun)
			runIn(admin, "api").decode(t, &apiRun)

			// The worked example of docs/security.md: Maya maintains web, Dev develops web
			// and views api, Vic views web.
			mk := func(body string) string { return b.createToken(t, admin, body).Token }
			maya := mk(`{"name": "maya-laptop", "user": "maya", "role": "maintainer"}`)
			dev := mk(`{"name": "dev-laptop", "user": "dev", "role": "maintainer"}`)
			vic := mk(`{"name": "vic", "role": "viewer", "projects": ["web"]}`)
			for _, m := range []struct{ project, user, role string }{
				{"web", "maya", "maintainer"}, {"web", "dev", "developer"}, {"api", "dev", "viewer"},
			} {
				want(as(admin, http.MethodPut, "/api/v1/projects/"+m.project+"/members/"+m.user, `{"role": "`+m.role+`"}`),
					http.StatusCreated, "add member "+m.user)
			}

			// Viewer: reads web, changes nothing; api does not exist for it.
			want(as(vic, http.MethodGet, "/api/v1/runs/"+webRun.ID, ""), http.StatusOK, "viewer reads web's run")
			want(as(vic, http.MethodPost, "/api/v1/runs/"+webRun.ID+"/cancel", ""), http.StatusForbidden, "viewer cancels")
			want(runIn(vic, "web"), http.StatusForbidden, "viewer submits to web")
			want(runIn(vic, "api"), http.StatusNotFound, "viewer submits to api")
			want(as(vic, http.MethodGet, "/api/v1/runs/"+apiRun.ID, ""), http.StatusNotFound, "viewer reads api's run")

			// Developer of web (a maintainer token capped by the membership), viewer of api.
			want(runIn(dev, "web"), http.StatusAccepted, "developer submits to web")
			want(runIn(dev, "api"), http.StatusForbidden, "a viewer of api submits to it")
			want(as(dev, http.MethodGet, "/api/v1/runs/"+apiRun.ID, ""), http.StatusOK, "a viewer of api reads its run")
			want(as(dev, http.MethodPut, "/api/v1/projects/web/secrets/KEY", `{"value": "v"}`), http.StatusForbidden, "developer sets a secret")
			want(as(dev, http.MethodPut, "/api/v1/projects/web/members/eve", `{"role": "viewer"}`), http.StatusForbidden, "developer adds a member")
			want(as(dev, http.MethodPost, "/api/v1/runs/"+webRun.ID+"/cancel", ""), http.StatusAccepted, "developer cancels web's run")

			// Maintainer of web: secrets, environments, members, settings, not api.
			want(as(maya, http.MethodPut, "/api/v1/projects/web/secrets/KEY", `{"value": "v"}`), http.StatusCreated, "maintainer sets a secret")
			want(as(maya, http.MethodPut, "/api/v1/projects/web/environments/prod", `{"required_approvals": 1, "approvers": ["role:maintainer"]}`),
				http.StatusOK, "maintainer sets an environment")
			want(as(maya, http.MethodPut, "/api/v1/projects/web/members/eve", `{"role": "viewer"}`), http.StatusCreated, "maintainer adds a member")
			want(as(maya, http.MethodPut, "/api/v1/projects/web/members/eve", `{"role": "owner"}`), http.StatusBadRequest, "a role that is none")
			want(as(maya, http.MethodPatch, "/api/v1/projects/web", `{"api_token_file": "/etc/shadow"}`), http.StatusForbidden, "maintainer points the token file")
			want(as(maya, http.MethodPatch, "/api/v1/projects/web", `{"repo_url": "file:///srv/other.git"}`), http.StatusForbidden, "maintainer moves the repository")
			want(as(maya, http.MethodPatch, "/api/v1/projects/web", `{"fair_weight": 100}`), http.StatusForbidden, "maintainer raises the project's weight")
			want(as(maya, http.MethodPatch, "/api/v1/projects/web", `{"max_concurrent_jobs": 5}`), http.StatusForbidden, "maintainer sets the project's limit")
			want(as(maya, http.MethodDelete, "/api/v1/projects/web", ""), http.StatusForbidden, "maintainer deletes the project")
			want(as(maya, http.MethodGet, "/api/v1/projects/api/secrets", ""), http.StatusNotFound, "maintainer of web lists api's secrets")

			// Listings show only what each may see.
			projects := func(tok string) []string {
				t.Helper()
				var v struct {
					Projects []struct {
						Name string `json:"name"`
					} `json:"projects"`
				}
				as(tok, http.MethodGet, "/api/v1/projects", "").decode(t, &v)
				var out []string
				for _, p := range v.Projects {
					out = append(out, p.Name)
				}
				return out
			}
			runProjects := func(tok string) []string {
				t.Helper()
				var v struct {
					Runs []runView `json:"runs"`
				}
				as(tok, http.MethodGet, "/api/v1/runs", "").decode(t, &v)
				var out []string
				for _, r := range v.Runs {
					if !slices.Contains(out, r.Project) {
						out = append(out, r.Project)
					}
				}
				slices.Sort(out)
				return out
			}
			for _, tc := range []struct {
				name, tok string
				want      []string
			}{{"admin", admin, []string{"api", "web"}}, {"maya", maya, []string{"web"}}, {"dev", dev, []string{"api", "web"}}, {"vic", vic, []string{"web"}}} {
				if got := projects(tc.tok); !slices.Equal(got, tc.want) {
					t.Errorf("projects %s sees = %q, want %q", tc.name, got, tc.want)
				}
				if got := runProjects(tc.tok); !slices.Equal(got, tc.want) {
					t.Errorf("runs %s sees are of %q, want %q", tc.name, got, tc.want)
				}
			}
			// Server-wide reads are for tokens of every project.
			reader := mk(`{"name": "dash", "role": "viewer", "projects": ["all"]}`)
			for _, path := range []string{"/api/v1/workers", "/api/v1/stats", "/metrics"} {
				want(as(vic, http.MethodGet, path, ""), http.StatusForbidden, "a token of web reads "+path)
				want(as(reader, http.MethodGet, path, ""), http.StatusOK, "a token of all projects reads "+path)
			}
			want(as(reader, http.MethodGet, "/api/v1/runs/"+apiRun.ID, ""), http.StatusOK, "a viewer of all reads api's run")
			want(as(maya, http.MethodGet, "/api/v1/tokens", ""), http.StatusOK, "maintainer lists the tokens of her projects")
			want(as(maya, http.MethodGet, "/api/v1/audit", ""), http.StatusForbidden, "maintainer reads the audit log")

			// Membership changes are audited, with the role.
			var audit struct {
				Entries []struct {
					Action  string          `json:"action"`
					Project string          `json:"project"`
					Target  string          `json:"target"`
					Details json.RawMessage `json:"details"`
				} `json:"entries"`
			}
			want(as(maya, http.MethodPut, "/api/v1/projects/web/members/eve", `{"role": "developer"}`), http.StatusOK, "maintainer changes a role")
			want(as(maya, http.MethodDelete, "/api/v1/projects/web/members/eve", ""), http.StatusNoContent, "maintainer removes a member")
			want(as(maya, http.MethodDelete, "/api/v1/projects/web/members/eve", ""), http.StatusNotFound, "removing a non-member")
			as(admin, http.MethodGet, "/api/v1/audit?action=member&project=web", "").decode(t, &audit)
			var got []string
			for _, e := range audit.Entries {
				got = append(got, e.Action+" "+e.Target+" "+string(e.Details))
			}
			wantAudit := []string{
				`member.removed eve {}`,
				`member.role_changed eve {"previous_role":"viewer","role":"developer"}`,
				`member.added eve {"role":"viewer"}`,
			}
			if len(got) < 3 || !slices.Equal(got[:3], wantAudit) {
				t.Errorf("audit of web's members =\n  %s\nwant it to start\n  %s", strings.Join(got, "\n  "), strings.Join(wantAudit, "\n  "))
			}
		})
	}
}

// TestTokenCreateScopes: the REST token create takes the project roles, a project scope
// (names, or all) and a user, and refuses what makes no sense.
func TestTokenCreateScopes(t *testing.T) {
	t.Parallel()
	b := withAuth(t)
	admin := issueToken(t, b.store, store.RoleAdmin)
	var v struct {
		Role     string   `json:"role"`
		Projects []string `json:"projects"`
		User     string   `json:"user"`
		Scope    string   `json:"scope"`
	}
	for _, tc := range []struct{ body, scope, user string }{
		{`{"name": "ci", "role": "developer", "projects": ["web", "api"]}`, "web, api", "ci"},
		{`{"name": "dash", "role": "viewer", "projects": ["all"]}`, "all projects", "dash"},
		{`{"name": "laptop", "user": "alice", "role": "maintainer"}`, "projects alice is a member of", "alice"},
		{`{"name": "old", "role": "write"}`, "all projects", "old"},
		{`{"name": "root", "role": "admin"}`, "server", "root"},
	} {
		r := b.do(t, http.MethodPost, "/api/v1/tokens", "application/json", tc.body, bearer(admin))
		if r.status != http.StatusCreated {
			t.Errorf("create %s: %d %s", tc.body, r.status, r.body)
			continue
		}
		r.decode(t, &v)
		if v.Scope != tc.scope || v.User != tc.user {
			t.Errorf("create %s: scope %q user %q, want %q %q", tc.body, v.Scope, v.User, tc.scope, tc.user)
		}
	}
	for _, bad := range []string{
		`{"name": "x", "role": "admin", "projects": ["web"]}`,
		`{"name": "x", "role": "viewer", "projects": ["all", "web"]}`,
		`{"name": "x", "role": "viewer", "labels": ["linux"]}`,
		`{"name": "x", "role": "owner"}`,
		`{"name": "x", "role": "viewer", "user": " alice"}`,
	} {
		expectError(t, b.do(t, http.MethodPost, "/api/v1/tokens", "application/json", bad, bearer(admin)), http.StatusBadRequest, "bad_request")
	}
}

// TestRevokedTokenRejectedAcrossReplicas: a token revoked on one coordinator replica is
// refused by the other from the next request on (nothing caches a token), and so is a
// member removed on one replica; on one PostgreSQL database. WebSocket subscriptions
// read the token anew too.
func TestRevokedTokenRejectedAcrossReplicas(t *testing.T) {
	t.Parallel()
	url := testdb.Postgres(t)
	replica := func() *bundle {
		st, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		srv := api.New(api.Config{Store: st, Logger: testLogger(t), Clock: clock.Real{}, Auth: true})
		t.Cleanup(srv.Close)
		hs := httptest.NewServer(srv.Handler())
		t.Cleanup(hs.Close)
		return &bundle{store: st, url: hs.URL}
	}
	a, b := replica(), replica()
	admin := issueToken(t, a.store, store.RoleAdmin)
	var run runView
	accessCall(t, a, http.MethodPost, "/api/v1/runs", mustJSON(t, map[string]any{"pipeline": isolationPipeline, "project": "web"}), admin).decode(t, &run)
	ci := a.createToken(t, admin, `{"name": "ci", "role": "developer", "projects": ["web"]}`)
	laptop := a.createToken(t, admin, `{"name": "laptop", "user": "alice", "role": "viewer"}`)
	if r := accessCall(t, a, http.MethodPut, "/api/v1/projects/web/members/alice", `{"role": "viewer"}`, admin); r.status != http.StatusCreated {
		t.Fatalf("add alice: %d %s", r.status, r.body)
	}
	for _, tok := range []string{ci.Token, laptop.Token} {
		for _, rep := range []*bundle{a, b} {
			if r := accessCall(t, rep, http.MethodGet, "/api/v1/runs/"+run.ID, "", tok); r.status != http.StatusOK {
				t.Fatalf("read before revoking: %d %s", r.status, r.body)
			}
		}
	}
	// A WebSocket opened before the revocation subscribes to nothing after it.
	ws := dialWS(t, b, "", http.Header{"Authorization": {"Bearer " + ci.Token}})
	ws.send(t, map[string]any{"type": "subscribe", "id": "before", "topic": "run", "run_id": run.ID})
	ws.expect(t, "subscribed", "before")

	if r := accessCall(t, a, http.MethodDelete, "/api/v1/tokens/"+ci.ID, "", admin); r.status != http.StatusNoContent {
		t.Fatalf("revoke on A: %d %s", r.status, r.body)
	}
	if r := accessCall(t, b, http.MethodGet, "/api/v1/runs/"+run.ID, "", ci.Token); r.status != http.StatusUnauthorized {
		t.Errorf("the request after revoking on A, on B: %d %s, want 401", r.status, r.body)
	}
	ws.send(t, map[string]any{"type": "subscribe", "id": "after", "topic": "run", "run_id": run.ID})
	for {
		m := ws.next(t)
		if m.ID != "after" {
			continue // the first subscription's updates
		}
		if m.Type != "error" || !strings.Contains(m.Message, "not found") {
			t.Errorf("subscribe after the revocation: %+v, want a not found error", m)
		}
		break
	}

	if r := accessCall(t, b, http.MethodDelete, "/api/v1/projects/web/members/alice", "", admin); r.status != http.StatusNoContent {
		t.Fatalf("remove alice on B: %d %s", r.status, r.body)
	}
	if r := accessCall(t, a, http.MethodGet, "/api/v1/runs/"+run.ID, "", laptop.Token); r.status != http.StatusNotFound {
		t.Errorf("the request after removing alice on B, on A: %d %s, want 404", r.status, r.body)
	}
}

// TestWebSocketIsolation: a WebSocket subscription to another project's job or run is
// refused as one to a missing job or run is.
func TestWebSocketIsolation(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	b, _ := accessServer(t, storeOpeners[0].open(t, clk), clk)
	admin := issueToken(t, b.store, store.RoleAdmin)
	var web, other runView
	accessCall(t, b, http.MethodPost, "/api/v1/runs", mustJSON(t, map[string]any{"pipeline": isolationPipeline, "project": "web"}), admin).decode(t, &web)
	accessCall(t, b, http.MethodPost, "/api/v1/runs", mustJSON(t, map[string]any{"pipeline": isolationPipeline, "project": "api"}), admin).decode(t, &other)
	tok := b.createToken(t, admin, `{"name": "web", "role": "viewer", "projects": ["web"]}`).Token
	ws := dialWS(t, b, "?access_token="+tok, nil)
	ws.send(t, map[string]any{"type": "subscribe", "id": "own", "topic": "run", "run_id": web.ID})
	ws.expect(t, "subscribed", "own")
	missing := store.NewID().String()
	for _, tc := range []struct{ id, msg, hidden, absent string }{
		{"run", `{"type": "subscribe", "id": "run", "topic": "run", "run_id": "%s"}`, other.ID, missing},
		{"logs", `{"type": "subscribe", "id": "logs", "topic": "logs", "job_id": "%s"}`, other.Jobs[0].ID, missing},
	} {
		var got [2]string
		for i, id := range []string{tc.hidden, tc.absent} {
			ws.send(t, strings.Replace(tc.msg, "%s", id, 1))
			for {
				m := ws.next(t)
				if m.ID != tc.id {
					continue
				}
				if m.Type != "error" {
					t.Fatalf("subscribe %s to %s: %+v, want an error", tc.id, id, m)
				}
				got[i] = strings.Replace(m.Message, id, "ID", 1)
				break
			}
		}
		if got[0] != got[1] || !strings.Contains(got[0], "not found") {
			t.Errorf("subscribe %s: another project's answers %q, a missing one %q", tc.id, got[0], got[1])
		}
	}
}
