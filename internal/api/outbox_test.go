package api_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/outbound"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

const badgeSHA = "0123456789abcdef0123456789abcdef01234567"

// runOn creates a one-job run of project on branch in the store and ends it with
// status (success, failed, cancelled), or leaves it queued when status is "".
func runOn(t *testing.T, b *bundle, project, branch string, status store.JobStatus) *store.Run {
	t.Helper()
	const yaml = "name: ci\njobs:\n  a:\n    steps: [{run: 'true'}]\n"
	plan, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, _, _, err := b.store.CreateRun(t.Context(), store.CreateRunParams{Project: project, Plan: plan, Definition: []byte(yaml),
		Trigger: store.Trigger{Ref: "refs/heads/" + branch, Branch: branch, SHA: badgeSHA, Event: "push", Repository: "acme/web",
			Verified: store.RefFromWebhook}})
	if err != nil {
		t.Fatalf("CreateRun: %v", err)
	}
	switch status {
	case "":
	case store.JobCancelled:
		if err := b.store.CancelRun(t.Context(), run.ID); err != nil {
			t.Fatalf("CancelRun: %v", err)
		}
	default:
		cs, err := b.store.Claim(t.Context(), store.ClaimParams{WorkerID: "w", Max: 100, LeaseTTL: time.Minute, TimeoutGrace: time.Minute})
		if err != nil {
			t.Fatalf("Claim: %v", err)
		}
		// Jobs of runs left under way go back to the queue untouched.
		var others []store.LeaseRef
		ended := false
		for _, c := range cs {
			l := store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token}
			if c.Job.RunID != run.ID {
				others = append(others, l)
				continue
			}
			if _, err := b.store.CompleteJob(t.Context(), store.CompleteParams{LeaseRef: l, Status: status}); err != nil {
				t.Fatalf("CompleteJob: %v", err)
			}
			ended = true
		}
		if !ended {
			t.Fatal("the run's job was not claimed")
		}
		if _, err := b.store.ReleaseClaims(t.Context(), others); err != nil {
			t.Fatalf("ReleaseClaims: %v", err)
		}
	}
	return run
}

func badgeState(t *testing.T, r response) string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("badge: status %d: %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "image/svg+xml") {
		t.Errorf("badge Content-Type = %q", ct)
	}
	if cc := r.header.Get("Cache-Control"); !strings.Contains(cc, "no-cache") {
		t.Errorf("badge Cache-Control = %q, want no-cache", cc)
	}
	body := string(r.body)
	if !strings.HasPrefix(body, "<svg ") || !strings.HasSuffix(body, "</svg>") {
		t.Errorf("badge is not an SVG: %s", body)
	}
	state := r.header.Get("X-Gantry-Badge")
	if !strings.Contains(body, `aria-label="gantry: `+state+`"`) || !strings.Contains(body, ">"+state+"</text>") {
		t.Errorf("badge %q does not say %q", body, state)
	}
	return state
}

// TestBadge: the badge shows the latest finished run of the branch asked for (the
// project's default branch when none is), running while none has finished, and unknown
// when the branch has no run.
func TestBadge(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.store.CreateProject(t.Context(), &store.Project{Name: "web", RepoURL: "https://github.com/acme/web.git",
		Provider: "github", DefaultBranch: "main"}); err != nil {
		t.Fatal(err)
	}
	get := func(query string) string { return badgeState(t, b.get(t, "/api/v1/projects/web/badge.svg"+query)) }
	if got := get("?branch=main"); got != "unknown" {
		t.Errorf("no runs: badge %q, want unknown", got)
	}
	runOn(t, b, "web", "main", "")
	if got := get("?branch=main"); got != "running" {
		t.Errorf("one run under way: badge %q, want running", got)
	}
	runOn(t, b, "web", "main", store.JobSuccess)
	if got := get("?branch=main"); got != "passing" {
		t.Errorf("badge %q, want passing", got)
	}
	runOn(t, b, "web", "feature", store.JobFailed)
	if got := get("?branch=feature"); got != "failing" {
		t.Errorf("feature badge %q, want failing", got)
	}
	if got := get(""); got != "passing" {
		t.Errorf("default-branch badge %q, want passing (the feature branch failed)", got)
	}
	// A run under way after a finished one leaves the finished result showing.
	runOn(t, b, "web", "main", "")
	if got := get("?branch=main"); got != "passing" {
		t.Errorf("badge with a newer run under way %q, want passing", got)
	}
	runOn(t, b, "web", "release", store.JobCancelled)
	if got := get("?branch=release"); got != "cancelled" {
		t.Errorf("release badge %q, want cancelled", got)
	}
	expectError(t, b.get(t, "/api/v1/projects/nope/badge.svg"), http.StatusNotFound, "not_found")
}

// TestBadgeAuth: with auth on, a badge needs a read token unless badges are public.
func TestBadgeAuth(t *testing.T) {
	t.Parallel()
	for _, public := range []bool{false, true} {
		b := setupWith(t, func(c *api.Config) { c.Auth = true; c.PublicBadges = public })
		runOn(t, b, "web", "main", store.JobFailed)
		r := b.get(t, "/api/v1/projects/web/badge.svg?branch=main")
		if !public {
			expectError(t, r, http.StatusUnauthorized, "unauthorized")
			r = b.do(t, http.MethodGet, "/api/v1/projects/web/badge.svg?branch=main", "", "", bearer(issue(t, b.store, store.RoleRead)))
		}
		if got := badgeState(t, r); got != "failing" {
			t.Errorf("public=%v: badge %q, want failing", public, got)
		}
		// Only the badge is public.
		expectError(t, b.get(t, "/api/v1/projects/web"), http.StatusUnauthorized, "unauthorized")
	}
}

type outboxView struct {
	ID        string `json:"id"`
	Topic     string `json:"topic"`
	State     string `json:"state"`
	Attempts  int    `json:"attempts"`
	LastError string `json:"last_error"`
	Payload   struct {
		Event string `json:"event"`
		State string `json:"state"`
	} `json:"payload"`
}

// TestOutboxAPI: subscriptions are made, listed without their secret and removed by
// admins; the outbox lists messages by state and redelivers a dead one.
func TestOutboxAPI(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	admin := bearer(issue(t, b.store, store.RoleAdmin))
	writer := bearer(issue(t, b.store, store.RoleWrite))
	if err := b.store.CreateProject(t.Context(), &store.Project{Name: "web", RepoURL: "https://github.com/acme/web.git", Provider: "github"}); err != nil {
		t.Fatal(err)
	}
	post := func(path, body string, h map[string]string) response {
		return b.do(t, http.MethodPost, path, "application/json", body, h)
	}
	expectError(t, post("/api/v1/projects/web/webhooks", `{"url": "https://hooks.example.com/x"}`, writer), http.StatusForbidden, "forbidden")
	expectError(t, post("/api/v1/projects/web/webhooks", `{"url": "ftp://x", "events": ["run.started"]}`, admin), http.StatusUnprocessableEntity, "invalid_project")
	expectError(t, post("/api/v1/projects/nope/webhooks", `{"url": "https://hooks.example.com/x"}`, admin), http.StatusNotFound, "not_found")
	r := post("/api/v1/projects/web/webhooks", `{"url": "https://hooks.example.com/x", "events": ["job.finished", "run.finished"]}`, admin)
	if r.status != http.StatusCreated {
		t.Fatalf("create webhook: %d %s", r.status, r.body)
	}
	var hook struct {
		ID, URL, Secret string
		Events          []string
	}
	r.decode(t, &hook)
	if len(hook.Secret) != 64 || hook.URL != "https://hooks.example.com/x" || len(hook.Events) != 2 {
		t.Errorf("created webhook %s: want a made secret and both events", r.body)
	}
	r = b.do(t, http.MethodGet, "/api/v1/projects/web/webhooks", "", "", admin)
	if r.status != http.StatusOK || strings.Contains(string(r.body), hook.Secret) || !strings.Contains(string(r.body), hook.ID) {
		t.Errorf("list webhooks: %d %s (want it listed, without its secret)", r.status, r.body)
	}

	runOn(t, b, "web", "main", store.JobSuccess)
	list := func(query string) []outboxView {
		t.Helper()
		r := b.do(t, http.MethodGet, "/api/v1/outbox"+query, "", "", admin)
		if r.status != http.StatusOK {
			t.Fatalf("list outbox%s: %d %s", query, r.status, r.body)
		}
		var v struct{ Messages []outboxView }
		r.decode(t, &v)
		return v.Messages
	}
	all := list("?state=pending")
	var statuses, hooks int
	for _, m := range all {
		switch {
		case m.Topic == store.TopicStatus && m.State == "pending":
			statuses++
		case m.Topic == store.TopicWebhook && m.State == "pending":
			hooks++
		default:
			t.Errorf("message %+v", m)
		}
	}
	if statuses != 5 || hooks != 2 {
		t.Errorf("outbox holds %d statuses and %d webhooks, want 5 (the run's pending, running, success; its job's pending, success) and 2", statuses, hooks)
	}
	expectError(t, b.do(t, http.MethodGet, "/api/v1/outbox", "", "", writer), http.StatusForbidden, "forbidden")
	expectError(t, b.do(t, http.MethodGet, "/api/v1/outbox?state=lost", "", "", admin), http.StatusBadRequest, "bad_request")
	// A status the dispatcher did not send, its job having moved on, reads superseded.
	claimed, err := b.store.ClaimOutbox(t.Context(), 1, time.Minute)
	if err != nil || len(claimed) != 1 {
		t.Fatalf("ClaimOutbox: %v, %d", err, len(claimed))
	}
	if err := b.store.SupersedeOutbox(t.Context(), claimed[0].ID); err != nil {
		t.Fatal(err)
	}
	if sup := list("?state=superseded"); len(sup) != 1 || sup[0].State != "superseded" || sup[0].ID != claimed[0].ID.String() {
		t.Errorf("superseded messages: %+v", sup)
	}
	for _, m := range list("") {
		if m.ID == claimed[0].ID.String() && m.State != "superseded" {
			t.Errorf("the superseded message is listed as %s", m.State)
		}
	}

	// Dead-letter one, as the dispatcher would, and redeliver it.
	ms, err := b.store.ClaimOutbox(t.Context(), 1, time.Minute)
	if err != nil || len(ms) != 1 {
		t.Fatalf("ClaimOutbox = %v, %v", ms, err)
	}
	if err := b.store.FailOutbox(t.Context(), store.FailOutboxParams{ID: ms[0].ID, Error: "HTTP 404: Not Found", Dead: true}); err != nil {
		t.Fatal(err)
	}
	dead := list("?state=dead")
	if len(dead) != 1 || dead[0].ID != ms[0].ID.String() || dead[0].LastError != "HTTP 404: Not Found" || dead[0].Attempts != 1 {
		t.Fatalf("dead messages %+v", dead)
	}
	expectError(t, post("/api/v1/outbox/"+dead[0].ID+"/redeliver", "", writer), http.StatusForbidden, "forbidden")
	r = post("/api/v1/outbox/"+dead[0].ID+"/redeliver", "", admin)
	var again outboxView
	r.decode(t, &again)
	if r.status != http.StatusOK || again.State != "pending" || again.Attempts != 0 || again.LastError != "" {
		t.Errorf("redeliver: %d %s", r.status, r.body)
	}
	if len(list("?state=dead")) != 0 {
		t.Error("a redelivered message is still dead")
	}
	expectError(t, post("/api/v1/outbox/"+store.NewID().String()+"/redeliver", "", admin), http.StatusNotFound, "not_found")

	expectError(t, b.do(t, http.MethodDelete, "/api/v1/projects/web/webhooks/"+hook.ID, "", "", writer), http.StatusForbidden, "forbidden")
	if r := b.do(t, http.MethodDelete, "/api/v1/projects/web/webhooks/"+hook.ID, "", "", admin); r.status != http.StatusNoContent {
		t.Errorf("delete webhook: %d %s", r.status, r.body)
	}
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/projects/web/webhooks/"+hook.ID, "", "", admin), http.StatusNotFound, "not_found")
}

// TestWebhookURLRefused: a maintainer cannot aim a subscription at the coordinator's own
// network by address, nor store credentials in its URL; the admin's allow-list lets an
// address through, and a name is left to the check made when it is dialed.
func TestWebhookURLRefused(t *testing.T) {
	t.Parallel()
	allow, err := outbound.Parse("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	b := setupWith(t, func(c *api.Config) { c.Auth = true; c.Outbound = allow })
	if err := b.store.CreateProject(t.Context(), &store.Project{Name: "web", RepoURL: "https://github.com/acme/web.git", Provider: "github"}); err != nil {
		t.Fatal(err)
	}
	admin := issue(t, b.store, store.RoleAdmin)
	maintainer := bearer(b.createToken(t, admin, `{"name": "maya", "role": "maintainer", "projects": ["web"]}`).Token)
	for _, tc := range []struct {
		url  string
		says string // "" when the subscription is made
	}{
		{"https://bot:hunter2@hooks.example.com/x", "holds credentials"},
		{"https://token@hooks.example.com/x", "holds credentials"},
		{"http://127.0.0.1:8080/api/v1/runs", "127.0.0.1 is a loopback address"},
		{"http://[::1]/", "::1 is a loopback address"},
		{"http://169.254.169.254/latest/meta-data/", "169.254.169.254 is a link-local address"},
		{"http://[::ffff:192.168.0.1]/", "::ffff:192.168.0.1 stands for 192.168.0.1, a private address"},
		{"http://0.0.0.0:8080/", "unspecified"},
		{"http://100.100.100.200/", "carrier-grade NAT"},
		{"http://2130706433/", "2130706433 stands for 127.0.0.1, a loopback address"},
		{"http://10.1.2.3/hook", ""},
		{"http://localhost:9/hook", ""}, // refused when dialed
		{"https://hooks.example.com/x", ""},
	} {
		r := b.do(t, http.MethodPost, "/api/v1/projects/web/webhooks", "application/json", `{"url": "`+tc.url+`"}`, maintainer)
		if tc.says == "" {
			if r.status != http.StatusCreated {
				t.Errorf("POST webhook %s: %d %s, want 201", tc.url, r.status, r.body)
			}
			continue
		}
		e := expectError(t, r, http.StatusUnprocessableEntity, "invalid_project")
		if !strings.Contains(e.Error.Message, "url: ") || !strings.Contains(e.Error.Message, tc.says) || strings.Contains(string(r.body), "hunter2") {
			t.Errorf("POST webhook %s: %s, want a refusal of url saying %q", tc.url, r.body, tc.says)
		}
	}
}

// TestAPIBaseURLRefused: an admin setting a forge API base the outbox would refuse to
// call (a private address not allowed) is told so at once.
func TestAPIBaseURLRefused(t *testing.T) {
	t.Parallel()
	allow, err := outbound.Parse("10.0.0.0/8")
	if err != nil {
		t.Fatal(err)
	}
	mirrors := t.TempDir()
	b := setupWith(t, func(c *api.Config) { c.MirrorsDir = mirrors; c.Outbound = allow })
	create := func(base string) response {
		return b.do(t, http.MethodPost, "/api/v1/projects", "application/json",
			`{"name": "web", "repo_url": "https://github.com/acme/web.git", "default_branch": "main", "provider": "github", "api_base_url": "`+base+`"}`, nil)
	}
	e := expectError(t, create("http://169.254.169.254/api/v3"), http.StatusUnprocessableEntity, "invalid_project")
	if e.Error.Message != "api_base_url: 169.254.169.254 is a link-local address (cloud metadata services answer there); not allowed unless the server's --outbound-allow lists it" {
		t.Errorf("create with a link-local API base: %q", e.Error.Message)
	}
	if r := create("https://10.1.2.3/api/v3"); r.status != http.StatusCreated {
		t.Fatalf("create with an allowed API base: %d %s", r.status, r.body)
	}
	patch := func(body string) response {
		return b.do(t, http.MethodPatch, "/api/v1/projects/web", "application/json", body, nil)
	}
	e = expectError(t, patch(`{"api_base_url": "http://[::1]:3000"}`), http.StatusUnprocessableEntity, "invalid_project")
	if !strings.Contains(e.Error.Message, "api_base_url: ::1 is a loopback address") {
		t.Errorf("patch to a loopback API base: %q", e.Error.Message)
	}
	if r := patch(`{"api_base_url": "https://ghe.example.com/api/v3"}`); r.status != http.StatusOK {
		t.Errorf("patch to a public API base: %d %s", r.status, r.body)
	}
}
