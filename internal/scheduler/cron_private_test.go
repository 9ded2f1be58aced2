package scheduler

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
)

// TestCronPrivateRepository: the schedules of a private repository are read from a mirror
// fetched with the credential Credentials opens for the project, and a credential that
// cannot be had fails the pass with what is wrong.
func TestCronPrivateRepository(t *testing.T) {
	t.Parallel()
	const token = "cron-repo-token-99"
	clk := clock.NewFake(time.Date(2026, 3, 2, 12, 3, 0, 0, time.UTC))
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	repo := sourcetest.NewRepo(t)
	sha := repo.Commit("refs/heads/main", map[string]string{".gantry.yml": scheduled})

	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	want := "Basic " + base64.StdEncoding.EncodeToString([]byte("x-access-token:"+token))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="gantry-test"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		(&cgi.Handler{Path: filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend"), Root: "/git", Stderr: io.Discard,
			Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(repo.Bare), "GIT_HTTP_EXPORT_ALL=1", "GIT_CONFIG_NOSYSTEM=1",
				"GIT_CONFIG_GLOBAL=/dev/null", "GIT_PROTOCOL=" + r.Header.Get("Git-Protocol")}}).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	url := srv.URL + "/git/" + filepath.Base(repo.Bare)
	p := &store.Project{Name: "private", RepoURL: url, Provider: "github", DefaultBranch: "main", PipelinePath: ".gantry.yml",
		WebhookSecret: "x", RepoTokenSecret: "REPO_TOKEN"}
	if err := st.CreateProject(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	missing := errors.New("repository credential of project private: secret REPO_TOKEN (repo_token_secret) is not set")
	have := false
	c := NewCron(CronConfig{Store: st, Clock: clk, Logger: testLog(t), MirrorsDir: t.TempDir(),
		Credentials: func(_ context.Context, got *store.Project) (source.Credentials, error) {
			if got.Name != "private" || got.RepoTokenSecret != "REPO_TOKEN" {
				t.Errorf("Credentials asked for %+v", got)
			}
			if !have {
				return source.Credentials{}, missing
			}
			// The test's git server is plain HTTP on loopback, as the admin allowed
			// (gantry server --allow-plain-http 127.0.0.1).
			return source.Credentials{Token: token, Username: "x-access-token", AllowPlainHTTP: true}, nil
		}})

	if r := c.Pass(t.Context()); !errors.Is(r.Err, missing) || strings.Contains(r.Err.Error(), token) {
		t.Fatalf("pass without the credential: %v; want the missing secret named", r.Err)
	}
	have = true
	if r := c.Pass(t.Context()); r.Err != nil || len(r.Fired) != 0 {
		t.Fatalf("first pass with the credential: fired %d, %v", len(r.Fired), r.Err)
	}
	clk.Advance(2*time.Minute + 15*time.Second)
	r := c.Pass(t.Context())
	if r.Err != nil || len(r.Fired) != 1 {
		t.Fatalf("12:05:15 pass: fired %d, %v; want the 12:05 tick", len(r.Fired), r.Err)
	}
	run, err := st.GetRun(t.Context(), r.Fired[0])
	if err != nil {
		t.Fatal(err)
	}
	if run.Trigger.SHA != sha || run.Trigger.CloneURL != url {
		t.Errorf("scheduled run trigger = %+v; want %s of %s", run.Trigger, sha, url)
	}
}
