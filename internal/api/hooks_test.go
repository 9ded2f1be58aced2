package api_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/postgres"
	"github.com/gantry-ci/gantry/internal/testdb"
)

func pipelineNamed(name string) string {
	return "name: " + name + "\njobs:\n  build:\n    steps:\n      - run: make\n"
}

const zeroSHA = "0000000000000000000000000000000000000000"

type projectView struct {
	Name             string `json:"name"`
	RepoURL          string `json:"repo_url"`
	Provider         string `json:"provider"`
	PipelinePath     string `json:"pipeline_path"`
	DefaultBranch    string `json:"default_branch"`
	APIBaseURL       string `json:"api_base_url"`
	APITokenFile     string `json:"api_token_file"`
	WebhookSecretSet bool   `json:"webhook_secret_set"`
	WebhookSecret    string `json:"webhook_secret"`
	HookPath         string `json:"hook_path"`
	CreatedAt        string `json:"created_at"`
	UpdatedAt        string `json:"updated_at"`
}

type hookView struct {
	Ran        bool     `json:"ran"`
	Runs       []string `json:"runs"`
	Reason     string   `json:"reason"`
	DeliveryID string   `json:"delivery_id"`
	Redelivery bool     `json:"redelivery"`
	ResendOf   string   `json:"resend_of"`
}

// failedRunView is a run with the errors of an invalid pipeline file.
type failedRunView struct {
	runView
	FinishedAt string           `json:"finished_at"`
	Errors     []store.RunError `json:"errors"`
}

func hookSetup(t *testing.T) *bundle {
	mirrors := t.TempDir()
	return setupWith(t, func(c *api.Config) { c.MirrorsDir = mirrors })
}

// createProject creates a project and returns it with its secret.
func (b *bundle) createProject(t *testing.T, req map[string]any) projectView {
	t.Helper()
	r := b.do(t, http.MethodPost, "/api/v1/projects", "application/json", mustJSON(t, req), nil)
	if r.status != http.StatusCreated {
		t.Fatalf("create project: status %d: %s", r.status, r.body)
	}
	var p projectView
	r.decode(t, &p)
	return p
}

func hmacHex(secret string, body []byte) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// githubPush is a push webhook as GitHub documents it, with the fields Gantry reads.
func githubPush(ref, before, after string) []byte {
	b, _ := json.Marshal(map[string]any{
		"ref": ref, "before": before, "after": after, "created": before == zeroSHA, "deleted": false, "forced": false,
		"repository": map[string]any{
			"full_name": "octo-org/app", "clone_url": "https://github.com/octo-org/app.git",
			"ssh_url": "git@github.com:octo-org/app.git", "html_url": "https://github.com/octo-org/app", "default_branch": "main",
		},
		"pusher": map[string]any{"name": "mona", "email": "mona@example.com"},
		"sender": map[string]any{"login": "mona", "type": "User"},
		"commits": []any{map[string]any{
			"id": after, "message": "change", "added": []string{".gantry.yml"}, "removed": []string{}, "modified": []string{},
		}},
		"head_commit": map[string]any{"id": after},
	})
	return b
}

// sendGitHub posts a GitHub webhook signed with secret.
func (b *bundle) sendGitHub(t *testing.T, project, event, delivery, secret string, body []byte) response {
	t.Helper()
	h := map[string]string{"X-GitHub-Event": event, "X-GitHub-Delivery": delivery, "User-Agent": "GitHub-Hookshot/abc"}
	if secret != "" {
		h["X-Hub-Signature-256"] = "sha256=" + hmacHex(secret, body)
	}
	return b.do(t, http.MethodPost, "/api/v1/hooks/github/"+url.PathEscape(project), "application/json", string(body), h)
}

func (b *bundle) runCount(t *testing.T, project string) int {
	t.Helper()
	runs, err := b.store.ListRuns(t.Context(), store.ListRunsParams{Project: project})
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

func wantHook(t *testing.T, r response, status int, ran bool) hookView {
	t.Helper()
	if r.status != status {
		t.Fatalf("hook: status %d, want %d: %s", r.status, status, r.body)
	}
	var h hookView
	r.decode(t, &h)
	if h.Ran != ran {
		t.Fatalf("hook: ran = %v, want %v: %s", h.Ran, ran, r.body)
	}
	if ran && len(h.Runs) != 1 {
		t.Fatalf("hook: runs = %v, want one", h.Runs)
	}
	if h.Runs == nil {
		t.Errorf("hook: runs is null, want a list: %s", r.body)
	}
	return h
}

func TestHookGitHubPush(t *testing.T) {
	t.Parallel()
	b := hookSetup(t)
	repo := sourcetest.NewRepo(t)
	first := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": pipelineNamed("first")})
	second := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": pipelineNamed("second")})
	p := b.createProject(t, map[string]any{"name": "app", "repo_url": repo.URL(), "provider": "github"})
	if p.DefaultBranch != "main" || p.PipelinePath != ".gantry.yml" || p.WebhookSecret == "" || !p.WebhookSecretSet {
		t.Fatalf("created project = %+v; want main discovered, the default path and a generated secret", p)
	}
	if p.HookPath != "/api/v1/hooks/github/app" {
		t.Errorf("hook_path = %q", p.HookPath)
	}

	// The older commit is sent after the branch moved on: its own file is what runs.
	body := githubPush("refs/heads/main", zeroSHA[:39]+"1", first)
	h := wantHook(t, b.sendGitHub(t, "app", "push", "d-1", p.WebhookSecret, body), http.StatusAccepted, true)
	var run runView
	b.get(t, "/api/v1/runs/"+h.Runs[0]).decode(t, &run)
	if run.Name != "first" || run.Project != "app" || run.JobsTotal != 1 {
		t.Errorf("run = %+v; want the pipeline of the older commit, named first", run)
	}
	want := store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: first, Before: zeroSHA[:39] + "1", Event: "push",
		Actor: "mona", Repository: "octo-org/app", CloneURL: repo.URL(), DeliveryID: "d-1", Verified: store.RefFromWebhook}
	if run.Trigger != want {
		t.Errorf("trigger = %+v\nwant %+v", run.Trigger, want)
	}
	if def, err := b.store.RunDefinition(t.Context(), mustUUID(t, h.Runs[0])); err != nil || string(def) != pipelineNamed("first") {
		t.Errorf("definition = %q, %v; want the older file", def, err)
	}
	stored, err := b.store.GetRun(t.Context(), mustUUID(t, h.Runs[0]))
	if err != nil {
		t.Fatal(err)
	}
	// The run keeps the delivery's payload for github.event (the API view leaves it out,
	// as compared above); a payload over store.MaxEventPayload is not kept (below).
	if stored.Trigger.Payload == nil || string(*stored.Trigger.Payload) != string(body) {
		t.Errorf("the run keeps payload %v, want the delivery's body", stored.Trigger.Payload)
	}

	// A redelivery answers the same run and creates nothing.
	again := wantHook(t, b.sendGitHub(t, "app", "push", "d-1", p.WebhookSecret, body), http.StatusOK, true)
	if again.Runs[0] != h.Runs[0] || !again.Redelivery {
		t.Errorf("redelivery = %+v, want run %s again", again, h.Runs[0])
	}
	if n := b.runCount(t, "app"); n != 1 {
		t.Fatalf("runs after a redelivery = %d, want 1", n)
	}

	// Bad, missing and other-secret signatures are 401 and create nothing.
	other := githubPush("refs/heads/main", first, second)
	expectError(t, b.sendGitHub(t, "app", "push", "d-2", "not-the-secret", other), http.StatusUnauthorized, "unauthorized")
	expectError(t, b.sendGitHub(t, "app", "push", "d-2", "", other), http.StatusUnauthorized, "unauthorized")
	tampered := b.do(t, http.MethodPost, "/api/v1/hooks/github/app", "application/json", string(other)+" ", map[string]string{
		"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-2", "X-Hub-Signature-256": "sha256=" + hmacHex(p.WebhookSecret, other)})
	expectError(t, tampered, http.StatusUnauthorized, "unauthorized")
	if n := b.runCount(t, "app"); n != 1 {
		t.Fatalf("runs after refused hooks = %d, want 1", n)
	}

	// Unknown projects and providers other than the project's are refused like a bad
	// signature (TestHookRefusalsAlike).
	expectError(t, b.sendGitHub(t, "nope", "push", "d-3", p.WebhookSecret, other), http.StatusUnauthorized, "unauthorized")
	wrong := b.do(t, http.MethodPost, "/api/v1/hooks/gitlab/app", "application/json", string(other),
		map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": p.WebhookSecret})
	expectError(t, wrong, http.StatusUnauthorized, "unauthorized")
	expectError(t, b.do(t, http.MethodPost, "/api/v1/hooks/bitbucket/app", "application/json", "{}", nil), http.StatusUnauthorized, "unauthorized")

	// Ping answers 200 and runs nothing; so does an event Gantry does not handle.
	ping, _ := json.Marshal(map[string]any{"zen": "Keep it logically awesome.", "hook_id": 1,
		"repository": map[string]any{"full_name": "octo-org/app"}, "sender": map[string]any{"login": "mona"}})
	if h := wantHook(t, b.sendGitHub(t, "app", "ping", "d-4", p.WebhookSecret, ping), http.StatusOK, false); !strings.Contains(h.Reason, "ping") {
		t.Errorf("ping reason = %q", h.Reason)
	}
	wantHook(t, b.sendGitHub(t, "app", "issues", "d-5", p.WebhookSecret, []byte(`{"action":"opened"}`)), http.StatusOK, false)

	// GitHub's form-encoded content type carries the JSON in payload=; the signature
	// covers the form body.
	form := []byte("payload=" + url.QueryEscape(string(other)))
	formRes := b.do(t, http.MethodPost, "/api/v1/hooks/github/app", "application/x-www-form-urlencoded", string(form), map[string]string{
		"X-GitHub-Event": "push", "X-GitHub-Delivery": "d-6", "X-Hub-Signature-256": "sha256=" + hmacHex(p.WebhookSecret, form)})
	h = wantHook(t, formRes, http.StatusAccepted, true)
	b.get(t, "/api/v1/runs/"+h.Runs[0]).decode(t, &run)
	if run.Name != "second" || run.Trigger.SHA != second || run.Trigger.Before != first {
		t.Errorf("form-encoded push made %+v; want the second file at %s", run, second)
	}
	// A push listing more than the 1 MiB other requests may carry is still read (of
	// another branch: the same push again would be a resend, TestHookResendUnderNewID).
	var files []string
	for i := range 40000 {
		files = append(files, fmt.Sprintf("src/generated/file-%05d.go", i))
	}
	var big map[string]any
	if err := json.Unmarshal(githubPush("refs/heads/big", first, second), &big); err != nil {
		t.Fatal(err)
	}
	big["commits"] = []any{map[string]any{"id": second, "added": files, "removed": []string{}, "modified": []string{}}}
	bigBody, _ := json.Marshal(big)
	if len(bigBody) < 1<<20+64<<10 {
		t.Fatalf("big payload is only %d bytes", len(bigBody))
	}
	h = wantHook(t, b.sendGitHub(t, "app", "push", "d-7", p.WebhookSecret, bigBody), http.StatusAccepted, true)
	if stored, err := b.store.GetRun(t.Context(), mustUUID(t, h.Runs[0])); err != nil || stored.Trigger.Payload != nil {
		t.Errorf("a payload of %d bytes was kept (%v), over the limit of %d", len(bigBody), err, store.MaxEventPayload)
	}

	// Anything else is refused before it is read.
	expectError(t, b.do(t, http.MethodPost, "/api/v1/hooks/github/app", "text/plain", string(other),
		map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + hmacHex(p.WebhookSecret, other)}),
		http.StatusUnsupportedMediaType, "unsupported_media_type")
}

func TestHookPipelineFileCases(t *testing.T) {
	t.Parallel()
	b := hookSetup(t)
	repo := sourcetest.NewRepo(t)
	base := repo.Commit("refs/heads/main", map[string]string{"README": "hi\n"})
	p := b.createProject(t, map[string]any{"name": "cases", "repo_url": repo.URL(), "provider": "github", "webhook_secret": "shh-its-a-secret"})
	if p.WebhookSecret != "shh-its-a-secret" {
		t.Errorf("create answered secret %q, want the one given, once", p.WebhookSecret)
	}
	send := func(delivery, ref, before, after string) response {
		return b.sendGitHub(t, "cases", "push", delivery, "shh-its-a-secret", githubPush(ref, before, after))
	}

	// No pipeline file at that commit: nothing runs, and the answer says so.
	h := wantHook(t, send("m-1", "refs/heads/main", zeroSHA, base), http.StatusOK, false)
	if h.Reason != "no .gantry.yml at "+base {
		t.Errorf("reason = %q", h.Reason)
	}

	// An invalid file makes a failed run that shows the errors.
	bad := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": badPipeline})
	h = wantHook(t, send("m-2", "refs/heads/main", base, bad), http.StatusAccepted, true)
	var failed failedRunView
	b.get(t, "/api/v1/runs/"+h.Runs[0]).decode(t, &failed)
	if failed.Status != "failed" || failed.JobsTotal != 0 || failed.FinishedAt == "" || len(failed.Errors) != 3 {
		t.Fatalf("run of an invalid file = %+v; want failed, no jobs, 3 errors", failed)
	}
	if e := failed.Errors[0]; e.Line == 0 || e.Message == "" || e.Path == "" {
		t.Errorf("first error = %+v; want its path, line and message", e)
	}
	if failed.Trigger.SHA != bad {
		t.Errorf("failed run sha = %s, want %s", failed.Trigger.SHA, bad)
	}
	again := wantHook(t, send("m-2", "refs/heads/main", base, bad), http.StatusOK, true)
	if again.Runs[0] != h.Runs[0] {
		t.Errorf("redelivery of the invalid push = %v, want %v", again.Runs, h.Runs)
	}

	// on: decides: a file that runs only for release branches skips main, and says why.
	onRelease := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": "name: rel\non:\n  push:\n    branches: [release/*]\njobs:\n  build:\n    steps:\n      - run: make\n"})
	h = wantHook(t, send("m-3", "refs/heads/main", bad, onRelease), http.StatusOK, false)
	if !strings.Contains(h.Reason, "release/*") {
		t.Errorf("reason = %q; want it to name the branch filter", h.Reason)
	}
	relSHA := repo.Commit("refs/heads/release/1.0", nil)
	wantHook(t, send("m-4", "refs/heads/release/1.0", onRelease, relSHA), http.StatusAccepted, true)

	// A tag push records the tag, not a branch.
	tagged := repo.Commit("refs/tags/v1.0.0", map[string]string{".gantry.yml": pipelineNamed("tagged")})
	h = wantHook(t, send("m-5", "refs/tags/v1.0.0", zeroSHA, tagged), http.StatusAccepted, true)
	var run runView
	b.get(t, "/api/v1/runs/"+h.Runs[0]).decode(t, &run)
	if run.Trigger.Tag != "v1.0.0" || run.Trigger.Branch != "" || run.Trigger.Event != "tag" || run.Trigger.Ref != "refs/tags/v1.0.0" || run.Trigger.SHA != tagged {
		t.Errorf("tag push trigger = %+v", run.Trigger)
	}

	// A deletion runs nothing and reads no file.
	del := githubPush("refs/heads/gone", tagged, zeroSHA)
	wantHook(t, b.sendGitHub(t, "cases", "push", "m-6", "shh-its-a-secret", del), http.StatusOK, false)

	// A commit the repository does not have is an error, and nothing is remembered.
	missing := strings.Repeat("ab", 20)
	expectError(t, send("m-7", "refs/heads/main", tagged, missing), http.StatusUnprocessableEntity, "commit_not_found")
}

func TestHookGitLabAndGitea(t *testing.T) {
	t.Parallel()
	b := hookSetup(t)
	repo := sourcetest.NewRepo(t)
	sha := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": pipelineNamed("multi")})

	gl := b.createProject(t, map[string]any{"name": "on-gitlab", "repo_url": repo.URL(), "provider": "gitlab", "default_branch": "main"})
	glBody, _ := json.Marshal(map[string]any{
		"object_kind": "push", "event_name": "push", "ref": "refs/heads/main", "before": zeroSHA, "after": sha,
		"checkout_sha": sha, "user_username": "ada", "total_commits_count": 1,
		"project": map[string]any{"id": 15, "path_with_namespace": "platform/app", "web_url": "https://gitlab.example.com/platform/app",
			"git_http_url": "https://gitlab.example.com/platform/app.git", "git_ssh_url": "git@gitlab.example.com:platform/app.git",
			"default_branch": "main"},
		"commits": []any{map[string]any{"id": sha, "message": "Add the pipeline\n", "author": map[string]any{"name": "Ada L."},
			"added": []string{".gantry.yml"}, "modified": []string{}, "removed": []string{}}},
	})
	r := b.do(t, http.MethodPost, "/api/v1/hooks/gitlab/on-gitlab", "application/json", string(glBody), map[string]string{
		"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": gl.WebhookSecret, "X-Gitlab-Event-UUID": "gl-1"})
	h := wantHook(t, r, http.StatusAccepted, true)
	var run runView
	b.get(t, "/api/v1/runs/"+h.Runs[0]).decode(t, &run)
	if run.Trigger.SHA != sha || run.Trigger.Actor != "ada" || run.Trigger.Repository != "platform/app" || run.Trigger.Branch != "main" {
		t.Errorf("gitlab run trigger = %+v", run.Trigger)
	}
	if run.Trigger.Message != "Add the pipeline" || run.Trigger.AuthorName != "Ada L." {
		t.Errorf("gitlab run's commit = %q by %q, want the push's head commit", run.Trigger.Message, run.Trigger.AuthorName)
	}
	expectError(t, b.do(t, http.MethodPost, "/api/v1/hooks/gitlab/on-gitlab", "application/json", string(glBody), map[string]string{
		"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "wrong", "X-Gitlab-Event-UUID": "gl-2"}), http.StatusUnauthorized, "unauthorized")

	// Forgejo speaks Gitea's dialect: a forgejo project takes hooks on either name.
	gt := b.createProject(t, map[string]any{"name": "on-forgejo", "repo_url": repo.URL(), "provider": "forgejo", "default_branch": "main"})
	gtBody, _ := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "before": zeroSHA, "after": sha, "total_commits": 1,
		"head_commit": map[string]any{"id": sha},
		"repository": map[string]any{"full_name": "infra/app", "clone_url": "https://git.example.org/infra/app.git",
			"html_url": "https://git.example.org/infra/app", "default_branch": "main"},
		"pusher":  map[string]any{"login": "grace"},
		"sender":  map[string]any{"login": "grace"},
		"commits": []any{map[string]any{"id": sha, "added": []string{".gantry.yml"}, "removed": []string{}, "modified": []string{}}},
	})
	r = b.do(t, http.MethodPost, "/api/v1/hooks/gitea/on-forgejo", "application/json", string(gtBody), map[string]string{
		"X-Gitea-Event": "push", "X-Gitea-Delivery": "gt-1", "X-Gitea-Signature": hmacHex(gt.WebhookSecret, gtBody)})
	h = wantHook(t, r, http.StatusAccepted, true)
	b.get(t, "/api/v1/runs/"+h.Runs[0]).decode(t, &run)
	if run.Trigger.SHA != sha || run.Trigger.Actor != "grace" || run.Trigger.Repository != "infra/app" {
		t.Errorf("gitea run trigger = %+v", run.Trigger)
	}
}

// TestHookRefusalsAlike: every delivery that does not prove itself gets one answer, so
// a stranger cannot tell a missing project from one that takes another forge's webhooks,
// has no secret, or was sent a wrong signature.
func TestHookRefusalsAlike(t *testing.T) {
	t.Parallel()
	b := hookSetup(t)
	repo := sourcetest.NewRepo(t)
	sha := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": pipelineNamed("alike")})
	p := b.createProject(t, map[string]any{"name": "app", "repo_url": repo.URL(), "provider": "github"})
	b.createProject(t, map[string]any{"name": "on-gitlab", "repo_url": repo.URL(), "provider": "gitlab"})
	if err := b.store.CreateProject(t.Context(), &store.Project{Name: "no-secret", RepoURL: repo.URL(), Provider: "github"}); err != nil {
		t.Fatal(err)
	}
	body := githubPush("refs/heads/main", zeroSHA, sha)
	signed := "sha256=" + hmacHex(p.WebhookSecret, body)
	send := func(path, contentType string, h map[string]string) response {
		return b.do(t, http.MethodPost, path, contentType, string(body), h)
	}
	github := func(sig string) map[string]string {
		return map[string]string{"X-GitHub-Event": "push", "X-GitHub-Delivery": "x-1", "X-Hub-Signature-256": sig}
	}
	cases := []struct {
		name string
		r    response
	}{
		{"missing project", send("/api/v1/hooks/github/nope", "application/json", github(signed))},
		{"missing project, form type", send("/api/v1/hooks/github/nope", "application/x-www-form-urlencoded", github(signed))},
		{"missing project, other type", send("/api/v1/hooks/github/nope", "text/plain", github(signed))},
		{"wrong provider", send("/api/v1/hooks/github/on-gitlab", "application/json", github(signed))},
		{"wrong provider, its own headers", send("/api/v1/hooks/gitlab/app", "application/json",
			map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": p.WebhookSecret})},
		{"unknown provider", send("/api/v1/hooks/bitbucket/app", "application/json", github(signed))},
		{"no webhook secret", send("/api/v1/hooks/github/no-secret", "application/json", github("sha256="+hmacHex("", body)))},
		{"bad signature", send("/api/v1/hooks/github/app", "application/json", github("sha256="+hmacHex("not-the-secret", body)))},
		{"bad signature, other type", send("/api/v1/hooks/github/app", "text/plain", github("sha256="+hmacHex("not-the-secret", body)))},
		{"no signature", send("/api/v1/hooks/github/app", "application/json", github(""))},
	}
	first := cases[0].r
	expectError(t, first, http.StatusUnauthorized, "unauthorized")
	if strings.Contains(string(first.body), "nope") || strings.Contains(string(first.body), "github") {
		t.Errorf("the refusal names the path's project or provider: %s", first.body)
	}
	for _, c := range cases[1:] {
		if c.r.status != first.status || !bytes.Equal(c.r.body, first.body) || c.r.header.Get("Content-Type") != first.header.Get("Content-Type") {
			t.Errorf("%s: answered %d %s; want what a missing project gets: %d %s", c.name, c.r.status, c.r.body, first.status, first.body)
		}
	}
	if n := b.runCount(t, "app") + b.runCount(t, "on-gitlab") + b.runCount(t, "no-secret"); n != 0 {
		t.Errorf("refused deliveries made %d runs", n)
	}
	// The signed delivery still runs.
	wantHook(t, send("/api/v1/hooks/github/app", "application/json", github(signed)), http.StatusAccepted, true)
}

// TestHookResendUnderNewID: a signed push sent again under a new delivery id (a forge's
// manual redelivery or its retry) answers with the run the first one started, for
// HookResendWindow; the same commit pushed to another branch runs, and so does the same
// push once the window has passed.
func TestHookResendUnderNewID(t *testing.T) {
	t.Parallel()
	b := hookSetup(t)
	repo := sourcetest.NewRepo(t)
	sha := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": pipelineNamed("resend")})
	p := b.createProject(t, map[string]any{"name": "app", "repo_url": repo.URL(), "provider": "github"})
	push := githubPush("refs/heads/main", zeroSHA, sha)

	first := wantHook(t, b.sendGitHub(t, "app", "push", "r-1", p.WebhookSecret, push), http.StatusAccepted, true)
	b.clock.Advance(api.HookResendWindow - time.Second)
	resend := wantHook(t, b.sendGitHub(t, "app", "push", "r-2", p.WebhookSecret, push), http.StatusOK, true)
	if resend.Runs[0] != first.Runs[0] || !resend.Redelivery || resend.ResendOf != "r-1" || resend.DeliveryID != "r-2" {
		t.Errorf("resend = %+v; want run %s of delivery r-1", resend, first.Runs[0])
	}
	if !strings.Contains(resend.Reason, "r-1") {
		t.Errorf("resend reason = %q, want it to name r-1", resend.Reason)
	}
	if n := b.runCount(t, "app"); n != 1 {
		t.Fatalf("runs after a resend = %d, want 1", n)
	}

	// The same commit pushed to another branch is another event.
	other := wantHook(t, b.sendGitHub(t, "app", "push", "r-3", p.WebhookSecret, githubPush("refs/heads/release", zeroSHA, sha)), http.StatusAccepted, true)
	if other.Runs[0] == first.Runs[0] || other.ResendOf != "" {
		t.Errorf("push to another branch = %+v, want a run of its own", other)
	}

	// Past the window the same push runs again.
	b.clock.Advance(time.Second)
	later := wantHook(t, b.sendGitHub(t, "app", "push", "r-4", p.WebhookSecret, push), http.StatusAccepted, true)
	if later.Runs[0] == first.Runs[0] || later.Redelivery {
		t.Errorf("push after the window = %+v, want a new run", later)
	}
	if n := b.runCount(t, "app"); n != 3 {
		t.Errorf("runs = %d, want 3", n)
	}
}

// TestHookAuth: with authentication on, the hook route takes the forge's signature and no
// bearer token, while project settings need an admin's.
func TestHookAuth(t *testing.T) {
	t.Parallel()
	mirrors := t.TempDir()
	b := setupWith(t, func(c *api.Config) { c.Auth, c.MirrorsDir = true, mirrors })
	admin, err := api.IssueToken(t.Context(), b.store, "ops", store.RoleAdmin, "")
	if err != nil {
		t.Fatal(err)
	}
	writer, err := api.IssueToken(t.Context(), b.store, "ci", store.RoleWrite, "")
	if err != nil {
		t.Fatal(err)
	}
	repo := sourcetest.NewRepo(t)
	sha := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": pipelineNamed("authed")})
	req := `{"name": "app", "repo_url": "` + repo.URL() + `", "provider": "github", "webhook_secret": "hook-secret"}`
	expectError(t, b.do(t, http.MethodPost, "/api/v1/projects", "application/json", req, nil), http.StatusUnauthorized, "unauthorized")
	expectError(t, b.do(t, http.MethodPost, "/api/v1/projects", "application/json", req,
		map[string]string{"Authorization": "Bearer " + writer}), http.StatusForbidden, "forbidden")
	if r := b.do(t, http.MethodPost, "/api/v1/projects", "application/json", req, map[string]string{"Authorization": "Bearer " + admin}); r.status != http.StatusCreated {
		t.Fatalf("create as admin: %d %s", r.status, r.body)
	}
	if r := b.do(t, http.MethodGet, "/api/v1/projects/app", "", "", map[string]string{"Authorization": "Bearer " + writer}); r.status != http.StatusOK {
		t.Errorf("get as writer: %d %s", r.status, r.body)
	}
	wantHook(t, b.sendGitHub(t, "app", "push", "a-1", "hook-secret", githubPush("refs/heads/main", zeroSHA, sha)), http.StatusAccepted, true)
	expectError(t, b.sendGitHub(t, "app", "push", "a-2", "", githubPush("refs/heads/main", zeroSHA, sha)), http.StatusUnauthorized, "unauthorized")
}

// TestHookPullRequest: a pull request runs the file at its head, records its number, and
// has no branch, so no `branch == "main"` condition takes it for a push to main.
func TestHookPullRequest(t *testing.T) {
	t.Parallel()
	b := hookSetup(t)
	repo := sourcetest.NewRepo(t)
	base := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": "name: pr\non: [pull_request]\njobs:\n  build:\n    steps:\n      - run: make\n"})
	head := repo.Commit("refs/pull/7/head", map[string]string{"feature.txt": "x\n"})
	p := b.createProject(t, map[string]any{"name": "prs", "repo_url": repo.URL(), "provider": "github"})
	pr := func(action string) []byte {
		body, _ := json.Marshal(map[string]any{
			"action": action, "number": 7,
			"repository": map[string]any{"full_name": "octo-org/app"},
			"sender":     map[string]any{"login": "hubot"},
			"pull_request": map[string]any{"number": 7, "title": "Add a feature",
				"head": map[string]any{"ref": "feature", "sha": head, "repo": map[string]any{"full_name": "hubot/app"}},
				"base": map[string]any{"ref": "main", "sha": base, "repo": map[string]any{"full_name": "octo-org/app"}}},
		})
		return body
	}
	h := wantHook(t, b.sendGitHub(t, "prs", "pull_request", "p-1", p.WebhookSecret, pr("opened")), http.StatusAccepted, true)
	var run runView
	b.get(t, "/api/v1/runs/"+h.Runs[0]).decode(t, &run)
	want := store.Trigger{Ref: "refs/pull/7/head", SHA: head, Event: "pull_request", Actor: "hubot", Repository: "octo-org/app", PRNumber: 7, CloneURL: repo.URL(), DeliveryID: "p-1",
		Fork: true, Verified: store.RefFromWebhook, // the head is hubot/app: a fork, so its jobs get no secrets by default
		BaseRef: "main", HeadRef: "feature", // github.base_ref and github.head_ref
		Message: "Add a feature"} // the pull request's title
	if run.Trigger != want {
		t.Errorf("pull request trigger = %+v\nwant %+v", run.Trigger, want)
	}
	// A push does not run a file whose on: lists only pull_request.
	h = wantHook(t, b.sendGitHub(t, "prs", "push", "p-2", p.WebhookSecret, githubPush("refs/heads/main", zeroSHA, base)), http.StatusOK, false)
	if !strings.Contains(h.Reason, "no push") {
		t.Errorf("push reason = %q", h.Reason)
	}
}

// TestHookConcurrentDuplicates: copies of one delivery arriving at once make one run, and
// every copy answers with it: on SQLite, and on PostgreSQL with the copies shared between
// two coordinator replicas that share one mirrors directory.
func TestHookConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		b := hookSetup(t)
		testConcurrentDuplicates(t, b, b, false)
	})
	t.Run("sqlite-new-ids", func(t *testing.T) {
		t.Parallel()
		b := hookSetup(t)
		testConcurrentDuplicates(t, b, b, true)
	})
	t.Run("postgres-replicas", func(t *testing.T) {
		t.Parallel()
		dsn, mirrors := testdb.Postgres(t), t.TempDir()
		replica := func() *bundle {
			st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			srv := httptest.NewServer(api.New(api.Config{Store: st, Logger: testLogger(t), Clock: clock.Real{}, MirrorsDir: mirrors}).Handler())
			t.Cleanup(srv.Close)
			return &bundle{store: st, url: srv.URL}
		}
		testConcurrentDuplicates(t, replica(), replica(), false)
	})
	t.Run("postgres-replicas-new-ids", func(t *testing.T) {
		t.Parallel()
		dsn, mirrors := testdb.Postgres(t), t.TempDir()
		replica := func() *bundle {
			st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			srv := httptest.NewServer(api.New(api.Config{Store: st, Logger: testLogger(t), Clock: clock.Real{}, MirrorsDir: mirrors}).Handler())
			t.Cleanup(srv.Close)
			return &bundle{store: st, url: srv.URL}
		}
		testConcurrentDuplicates(t, replica(), replica(), true)
	})
}

// testConcurrentDuplicates sends copies of one push at once, under one delivery id or,
// with newIDs, each under its own (a forge's retries).
func testConcurrentDuplicates(t *testing.T, a, b *bundle, newIDs bool) {
	repo := sourcetest.NewRepo(t)
	sha := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": pipelineNamed("dup")})
	p := a.createProject(t, map[string]any{"name": "dup", "repo_url": repo.URL(), "provider": "github"})
	body := githubPush("refs/heads/main", zeroSHA, sha)
	const copies = 6
	answers := make(chan response, copies)
	for i := range copies {
		to := a
		if i%2 == 1 {
			to = b
		}
		go func() {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, to.url+"/api/v1/hooks/github/dup", bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("X-GitHub-Event", "push")
			delivery := "same"
			if newIDs {
				delivery = fmt.Sprintf("copy-%d", i)
			}
			req.Header.Set("X-GitHub-Delivery", delivery)
			req.Header.Set("X-Hub-Signature-256", "sha256="+hmacHex(p.WebhookSecret, body))
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				answers <- response{status: -1, body: []byte(err.Error())}
				return
			}
			defer res.Body.Close()
			var buf bytes.Buffer
			_, _ = buf.ReadFrom(res.Body)
			answers <- response{status: res.StatusCode, header: res.Header, body: buf.Bytes()}
		}()
	}
	ids := map[string]bool{}
	created := 0
	for range copies {
		r := <-answers
		if r.status == http.StatusAccepted {
			created++
		}
		if r.status != http.StatusAccepted && r.status != http.StatusOK {
			t.Fatalf("copy answered %d: %s", r.status, r.body)
		}
		var h hookView
		r.decode(t, &h)
		if !h.Ran || len(h.Runs) != 1 {
			t.Fatalf("copy answered %s", r.body)
		}
		ids[h.Runs[0]] = true
	}
	if len(ids) != 1 || created != 1 {
		t.Errorf("copies answered runs %v, %d of them 202; want one run, created once", ids, created)
	}
	if n := a.runCount(t, "dup"); n != 1 {
		t.Errorf("runs = %d, want 1", n)
	}
}
