package agent

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

// privateGitServer serves the bare repositories under root over smart HTTP with git
// http-backend, answering 401 to any request without the token as basic auth, as a forge
// does for a private repository (with token "", to anyone, as for a public one). It records every Authorization header it was sent.
type privateGitServer struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string
}

func newPrivateGitServer(t *testing.T, root, user, token string) *privateGitServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("git http-backend: %v", err)
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+token))
	s := &privateGitServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.mu.Unlock()
		if token != "" && r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="gantry-test"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		(&cgi.Handler{Path: backend, Root: "/git", Stderr: io.Discard, Env: []string{
			"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_PROTOCOL=" + r.Header.Get("Git-Protocol"),
		}}).ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *privateGitServer) authorized(want string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.auths {
		if a == want {
			return true
		}
	}
	return false
}

// repoBundle is a real coordinator with a secrets key and a mirror cache, a worker, and a
// private repository served over HTTP that wants a token.
type repoBundle struct {
	*secretBundle
	repo   *sourcetest.Repo
	git    *privateGitServer
	url    string
	secret string // the project's webhook secret
}

const repoToken = "ghs_private+repo/token=42"

// setupPrivateRepo serves the private repository over plain http on 127.0.0.1, a host
// the coordinator's admin allows plain HTTP for.
func setupPrivateRepo(t *testing.T) *repoBundle {
	t.Helper()
	return setupPrivateRepoAllowing(t, []string{"127.0.0.1"})
}

// setupPrivateRepoAllowing is setupPrivateRepo with a coordinator that allows plain HTTP
// for the hosts plainHTTP only. Without 127.0.0.1 among them the API refuses the project
// (tested here), which is then stored as one from before the rule would be.
func setupPrivateRepoAllowing(t *testing.T, plainHTTP []string) *repoBundle {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "gantry.db")
	sqlitetest.Create(t, db)
	st, err := sqlite.Open(t.Context(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bs := newBlobs(t, filepath.Join(dir, "blobs"))
	key := make([]byte, secret.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	kr, err := secret.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Store: st, HeartbeatEvery: 200 * time.Millisecond, LeaseTTL: 5 * time.Second,
		Blobs: bs, Secrets: kr, MirrorsDir: filepath.Join(dir, "mirrors"), AllowPlainHTTP: plainHTTP}).Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = st.Close()
	})
	b := &repoBundle{secretBundle: &secretBundle{bundle: &bundle{st: st, url: srv.URL, blobs: bs}, dir: dir}}
	b.start(t, 2)

	b.repo = sourcetest.NewRepo(t)
	b.git = newPrivateGitServer(t, filepath.Dir(b.repo.Bare), "x-access-token", repoToken)
	b.url = b.git.URL + "/git/" + filepath.Base(b.repo.Bare)
	// The secret cannot exist before its project, so the default branch is given.
	body, _ := json.Marshal(map[string]any{"name": "private", "repo_url": b.url, "provider": "github",
		"default_branch": "main", "repo_token_secret": "REPO_TOKEN"})
	status, ans := b.call(t, http.MethodPost, "/api/v1/projects", string(body))
	if !slices.Contains(plainHTTP, "127.0.0.1") {
		if status != http.StatusUnprocessableEntity || !strings.Contains(ans, "plain http") || !strings.Contains(ans, "--allow-plain-http 127.0.0.1") ||
			!strings.Contains(ans, "https://") {
			t.Fatalf("create a project with a token over plain http: %d %s; want it refused, naming https:// and --allow-plain-http", status, ans)
		}
		b.secret = "plain-http-hook-secret"
		if err := st.CreateProject(t.Context(), &store.Project{Name: "private", RepoURL: b.url, Provider: "github", DefaultBranch: "main",
			PipelinePath: ".gantry.yml", RepoTokenSecret: "REPO_TOKEN", WebhookSecret: b.secret}); err != nil {
			t.Fatal(err)
		}
		return b
	}
	if status != http.StatusCreated {
		t.Fatalf("create project: %d %s", status, ans)
	}
	var p struct {
		WebhookSecret   string `json:"webhook_secret"`
		RepoTokenSecret string `json:"repo_token_secret"`
	}
	if err := json.Unmarshal([]byte(ans), &p); err != nil {
		t.Fatal(err)
	}
	if p.RepoTokenSecret != "REPO_TOKEN" {
		t.Fatalf("created project names repo_token_secret %q: %s", p.RepoTokenSecret, ans)
	}
	b.secret = p.WebhookSecret
	return b
}

// push sends a signed GitHub push webhook for sha on main and returns the answer.
func (b *repoBundle) push(t *testing.T, delivery, sha string) (int, string) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "before": strings.Repeat("0", 40), "after": sha, "created": true,
		"repository":  map[string]any{"full_name": "octo-org/private", "clone_url": b.url, "default_branch": "main"},
		"sender":      map[string]any{"login": "mona", "type": "User"},
		"commits":     []any{map[string]any{"id": sha, "added": []string{".gantry.yml"}, "removed": []string{}, "modified": []string{}}},
		"head_commit": map[string]any{"id": sha},
	})
	m := hmac.New(sha256.New, []byte(b.secret))
	m.Write(body)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, b.bundle.url+"/api/v1/hooks/github/private", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(m.Sum(nil)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

// tokenForms are the token and its encodings that must never be shown.
func tokenForms(tok string) []string {
	return []string{tok, base64.StdEncoding.EncodeToString([]byte("x-access-token:" + tok))}
}

func wantNoToken(t *testing.T, where, text string) {
	t.Helper()
	for _, f := range tokenForms(repoToken) {
		if strings.Contains(text, f) {
			t.Errorf("%s holds the repository token (%q):\n%s", where, f, text)
		}
	}
}

const privatePipeline = `
on: [push, dispatch]
jobs:
  build:
    steps:
      - run: |
          cat private.txt
          echo "token in env: ${GIT_CONFIG_VALUE_0:-none}"
  nocheckout:
    checkout: false
    steps:
      - run: test ! -e private.txt && echo no checkout
`

// TestPrivateRepositoryHookToCheckout: a push to a private repository reaches the
// coordinator's mirror and the worker's checkout with the token from the project's
// secrets; the job sees the pushed file and no log or answer holds the token. A missing
// secret and a wrong token answer the hook with what is wrong, without the token, and a
// job whose credential is missing fails before its first step, unless it checks nothing
// out.
func TestPrivateRepositoryHookToCheckout(t *testing.T) {
	t.Parallel()
	b := setupPrivateRepo(t)
	sha := b.repo.Commit("refs/heads/main", map[string]string{".gantry.yml": privatePipeline, "private.txt": "top secret source\n"})

	// No secret yet: the hook says which secret to set, and nothing runs.
	status, ans := b.push(t, "d-missing", sha)
	if status != http.StatusUnprocessableEntity || !strings.Contains(ans, "secret REPO_TOKEN (repo_token_secret) is not set") {
		t.Fatalf("hook without the secret: %d %s; want 422 naming REPO_TOKEN", status, ans)
	}

	// A wrong token: the forge refuses it, and the answer does not repeat it.
	const wrong = "wrong-token-value-77"
	b.setSecret(t, "private", "REPO_TOKEN", wrong)
	status, ans = b.push(t, "d-wrong", sha)
	if status != http.StatusBadGateway || strings.Contains(ans, wrong) || !strings.Contains(ans, "with the token in secret REPO_TOKEN (repo_token_secret") {
		t.Fatalf("hook with a wrong token: %d %s; want 502 without the token", status, ans)
	}

	b.setSecret(t, "private", "REPO_TOKEN", repoToken)
	status, ans = b.push(t, "d-ok", sha)
	if status != http.StatusAccepted {
		t.Fatalf("hook: %d %s", status, ans)
	}
	wantNoToken(t, "the hook's answer", ans)
	var hook struct {
		Runs []uuid.UUID `json:"runs"`
	}
	if err := json.Unmarshal([]byte(ans), &hook); err != nil || len(hook.Runs) != 1 {
		t.Fatalf("hook answer %s: %v", ans, err)
	}
	run := hook.Runs[0]
	b.wantSuccess(t, run)
	log := b.jobLog(t, run, "build")
	if !strings.Contains(log, "top secret source") {
		t.Errorf("the job did not see the private file:\n%s", log)
	}
	if !strings.Contains(log, "token in env: none") {
		t.Errorf("a step saw git credential config:\n%s", log)
	}
	wantNoToken(t, "the job's log", log)
	if l := b.jobLog(t, run, "nocheckout"); !strings.Contains(l, "no checkout") {
		t.Errorf("checkout: false job log:\n%s", l)
	}
	if !b.git.authorized("Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+repoToken))) {
		t.Error("the git server never saw the token as basic auth")
	}
	_, runAns := b.call(t, http.MethodGet, "/api/v1/runs/"+run.String(), "")
	wantNoToken(t, "the run's answer", runAns)
	_, projAns := b.call(t, http.MethodGet, "/api/v1/projects/private", "")
	wantNoToken(t, "the project's answer", projAns)

	// A dispatch resolves the branch through the same credential, and so does asking
	// the repository for its default branch when a project update leaves it out.
	status, ans = b.call(t, http.MethodPost, "/api/v1/projects/private/dispatches", `{"ref": "main"}`)
	if status != http.StatusAccepted {
		t.Fatalf("dispatch: %d %s", status, ans)
	}
	var dispatched struct {
		ID uuid.UUID `json:"id"`
	}
	if err := json.Unmarshal([]byte(ans), &dispatched); err != nil {
		t.Fatal(err)
	}
	b.wantSuccess(t, dispatched.ID)
	if l := b.jobLog(t, dispatched.ID, "build"); !strings.Contains(l, "top secret source") {
		t.Errorf("dispatched job did not see the private file:\n%s", l)
	}
	status, ans = b.call(t, http.MethodPatch, "/api/v1/projects/private", `{"default_branch": ""}`)
	if status != http.StatusOK || !strings.Contains(ans, `"default_branch":"main"`) {
		t.Errorf("update that asks the private repository for its default branch: %d %s", status, ans)
	}
	wantNoToken(t, "the update's answer", ans)

	// A token the forge refuses fails a checkout that must fetch (a commit the worker's
	// mirror lacks), saying whose credential it was and never what it is.
	const stale = "stale-token-value-55"
	b.setSecret(t, "private", "REPO_TOKEN", stale)
	newer := b.repo.Commit("refs/heads/main", map[string]string{"private.txt": "newer source\n"})
	refused := b.submitIn(t, "private", store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: newer, Event: "push", CloneURL: b.url},
		nil, privatePipeline)
	if r := b.waitRun(t, refused); r.Status != store.RunFailed {
		t.Fatalf("run with a refused token is %s, want failed", r.Status)
	}
	log = b.jobLog(t, refused, "build")
	if !strings.Contains(log, "with the repository credential from the project's secrets failed") || strings.Contains(log, stale) ||
		strings.Contains(log, "newer source") {
		t.Errorf("job with a refused token:\n%s", log)
	}

	// The secret is gone: a job that checks the repository out fails before its first
	// step with what to set; one with checkout: false has no need of it and runs.
	if status, ans := b.call(t, http.MethodDelete, "/api/v1/projects/private/secrets/REPO_TOKEN", ""); status != http.StatusNoContent {
		t.Fatalf("delete secret: %d %s", status, ans)
	}
	again := b.submitIn(t, "private", store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: sha, Event: "push", CloneURL: b.url},
		nil, privatePipeline)
	if r := b.waitRun(t, again); r.Status != store.RunFailed {
		t.Fatalf("run without the repository secret is %s, want failed", r.Status)
	}
	log = b.jobLog(t, again, "build")
	if !strings.Contains(log, "repository credential of project private: secret REPO_TOKEN (repo_token_secret) is not set") ||
		strings.Contains(log, "top secret source") {
		t.Errorf("job without its repository credential:\n%s", log)
	}
	if l := b.jobLog(t, again, "nocheckout"); !strings.Contains(l, "no checkout") {
		t.Errorf("checkout: false job without the secret:\n%s", l)
	}
}

// TestRepoTokenNotSentOverPlainHTTP: without the admin's allowance for its host, a
// repository token is never sent to an http:// remote: the project is refused over the
// API, and one stored before the rule fails its webhook and its job's checkout saying
// what to do, while the git server never sees an Authorization header.
func TestRepoTokenNotSentOverPlainHTTP(t *testing.T) {
	t.Parallel()
	b := setupPrivateRepoAllowing(t, []string{"git.example.com"})
	b.setSecret(t, "private", "REPO_TOKEN", repoToken)
	sha := b.repo.Commit("refs/heads/main", map[string]string{".gantry.yml": privatePipeline, "private.txt": "top secret source\n"})

	status, ans := b.push(t, "d-plain", sha)
	if status != http.StatusUnprocessableEntity || !strings.Contains(ans, "--allow-plain-http 127.0.0.1") {
		t.Errorf("hook with a token over plain http: %d %s; want 422 naming --allow-plain-http", status, ans)
	}
	wantNoToken(t, "the hook's answer", ans)

	run := b.submitIn(t, "private", store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: sha, Event: "push", CloneURL: b.url},
		nil, privatePipeline)
	if r := b.waitRun(t, run); r.Status != store.RunFailed {
		t.Fatalf("run with a token over plain http is %s, want failed", r.Status)
	}
	log := b.jobLog(t, run, "build")
	if !strings.Contains(log, "not sent over plain http") || !strings.Contains(log, "--allow-plain-http 127.0.0.1") ||
		strings.Contains(log, "top secret source") {
		t.Errorf("job with a token over plain http:\n%s", log)
	}
	wantNoToken(t, "the job's log", log)
	b.git.mu.Lock()
	defer b.git.mu.Unlock()
	for _, a := range b.git.auths {
		if a != "" {
			t.Errorf("the git server was sent Authorization %q", a)
		}
	}
}

// TestForkPullRequestGetsNoRepoCredential: a job of a pull request from a fork is not
// given the repository credential (nor secrets), whatever the worker fetched before with
// it: the checkout of a private repository fails saying why and what would allow it, and
// the git server never sees the token from it; a public repository checks out without
// one; with secrets_for_forks on, the fork's job gets the credential and checks out.
func TestForkPullRequestGetsNoRepoCredential(t *testing.T) {
	t.Parallel()
	b := setupPrivateRepo(t)
	b.setSecret(t, "private", "REPO_TOKEN", repoToken)
	sha := b.repo.Commit("refs/heads/main", map[string]string{"private.txt": "top secret source\n"})
	// A push first, so the worker's mirror holds the commit fetched with the token.
	push := b.submitIn(t, "private", store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: sha, Event: "push", CloneURL: b.url},
		nil, privatePipeline)
	b.wantSuccess(t, push)

	forkTrigger := func(url string) store.Trigger {
		return store.Trigger{Ref: "refs/pull/7/head", SHA: sha, Event: "pull_request", PRNumber: 7, Fork: true, CloneURL: url}
	}
	b.git.mu.Lock()
	seen := len(b.git.auths)
	b.git.mu.Unlock()
	fork := b.submitIn(t, "private", forkTrigger(b.url), nil, privatePipeline)
	if r := b.waitRun(t, fork); r.Status != store.RunFailed {
		t.Fatalf("fork run on a private repository is %s, want failed", r.Status)
	}
	log := b.jobLog(t, fork, "build")
	if !strings.Contains(log, "without a credential failed") || !strings.Contains(log, "pull request from a fork") ||
		!strings.Contains(log, "a private repository cannot be checked out without one") || strings.Contains(log, "top secret source") {
		t.Errorf("fork job on a private repository:\n%s", log)
	}
	wantNoToken(t, "the fork job's log", log)
	b.git.mu.Lock()
	later := append([]string(nil), b.git.auths[seen:]...)
	b.git.mu.Unlock()
	if len(later) == 0 {
		t.Error("the fork job's checkout never asked the git server")
	}
	for _, a := range later {
		if a != "" {
			t.Errorf("the fork job's checkout sent Authorization %q", a)
		}
	}
	if l := b.jobLog(t, fork, "nocheckout"); !strings.Contains(l, "no checkout") {
		t.Errorf("fork job with checkout: false:\n%s", l)
	}

	// A public repository of a project that has a credential: the fork's job checks out
	// without it.
	pub := sourcetest.NewRepo(t)
	pubSHA := pub.Commit("refs/heads/main", map[string]string{"private.txt": "public source\n"})
	pubGit := newPrivateGitServer(t, filepath.Dir(pub.Bare), "", "")
	pubURL := pubGit.URL + "/git/" + filepath.Base(pub.Bare)
	body, _ := json.Marshal(map[string]any{"name": "public", "repo_url": pubURL, "provider": "github",
		"default_branch": "main", "repo_token_secret": "REPO_TOKEN"})
	if status, ans := b.call(t, http.MethodPost, "/api/v1/projects", string(body)); status != http.StatusCreated {
		t.Fatalf("create project: %d %s", status, ans)
	}
	b.setSecret(t, "public", "REPO_TOKEN", repoToken)
	tr := forkTrigger(pubURL)
	tr.SHA = pubSHA
	pubRun := b.submitIn(t, "public", tr, nil, privatePipeline)
	b.wantSuccess(t, pubRun)
	if l := b.jobLog(t, pubRun, "build"); !strings.Contains(l, "public source") {
		t.Errorf("fork job on a public repository:\n%s", l)
	}
	for _, a := range pubGit.auths {
		if a != "" {
			t.Errorf("the public fork checkout sent Authorization %q", a)
		}
	}

	// The project trusts forks: the fork's job gets the credential.
	if status, ans := b.call(t, http.MethodPut, "/api/v1/projects/private/secret-settings", `{"secrets_for_forks": true}`); status != http.StatusOK {
		t.Fatalf("allow forks: %d %s", status, ans)
	}
	trusted := b.submitIn(t, "private", forkTrigger(b.url), nil, privatePipeline)
	b.wantSuccess(t, trusted)
	if l := b.jobLog(t, trusted, "build"); !strings.Contains(l, "top secret source") {
		t.Errorf("trusted fork job:\n%s", l)
	}
}
