package source_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
)

// gitCmd runs git in dir and returns its trimmed stdout, failing the test on error.
func gitCmd(t testing.TB, env []string, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// remote is a bare repository on disk that a test pushes to from a work clone.
type remote struct {
	t    testing.TB
	name string
	bare string
	work string
	env  []string
}

// newRemote creates root/name.git (bare, default branch main) and a work clone.
func newRemote(t testing.TB, root, name string) *remote {
	t.Helper()
	home := t.TempDir()
	r := &remote{t: t, name: name, bare: filepath.Join(root, name+".git"), work: filepath.Join(home, "work"), env: sourcetest.Env(home)}
	gitCmd(t, r.env, "", "init", "--quiet", "--bare", "-b", "main", r.bare)
	gitCmd(t, r.env, "", "init", "--quiet", "-b", "main", r.work)
	return r
}

func (r *remote) fileURL() string { return "file://" + r.bare }

// commit writes files (an empty value deletes the file), commits on the work clone's
// current branch and returns the commit id. It does not push.
func (r *remote) commit(msg string, files map[string]string) string {
	r.t.Helper()
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := filepath.Join(r.work, filepath.FromSlash(n))
		if files[n] == "" {
			gitCmd(r.t, r.env, r.work, "rm", "--quiet", "--", n)
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(files[n]), 0o644); err != nil {
			r.t.Fatal(err)
		}
		gitCmd(r.t, r.env, r.work, "add", "--", n)
	}
	gitCmd(r.t, r.env, r.work, "commit", "--quiet", "--allow-empty", "-m", msg)
	return gitCmd(r.t, r.env, r.work, "rev-parse", "HEAD")
}

// push pushes the work clone's HEAD to ref on the bare repository.
func (r *remote) push(ref string, force bool) {
	r.t.Helper()
	args := []string{"push", "--quiet"}
	if force {
		args = append(args, "--force")
	}
	gitCmd(r.t, r.env, r.work, append(args, r.bare, "HEAD:"+ref)...)
}

// objectCount is how many objects the repository at dir holds, loose and packed.
func objectCount(t testing.TB, dir string) int {
	t.Helper()
	out := gitCmd(t, sourcetest.Env(t.TempDir()), dir, "count-objects", "-v")
	total := 0
	for _, line := range strings.Split(out, "\n") {
		var n int
		if _, err := fmt.Sscanf(line, "count: %d", &n); err == nil {
			total += n
		}
		if _, err := fmt.Sscanf(line, "in-pack: %d", &n); err == nil {
			total += n
		}
	}
	return total
}

// gitServer serves the bare repositories under root over smart HTTP with git http-backend,
// the way a forge does, optionally requiring a token as basic auth.
type gitServer struct {
	*httptest.Server
	// advertisements counts GET .../info/refs: one per fetch, ls-remote or clone.
	advertisements atomic.Int64
	mu             sync.Mutex
	authHeaders    []string
}

func newGitServer(t testing.TB, root, user, token string) *gitServer {
	t.Helper()
	execPath, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(execPath)), "git-http-backend")
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("git http-backend: %v", err)
	}
	s := &gitServer{}
	want := ""
	if token != "" {
		want = "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+token))
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.authHeaders = append(s.authHeaders, r.Header.Get("Authorization"))
		s.mu.Unlock()
		if want != "" && r.Header.Get("Authorization") != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="gantry-test"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/info/refs") {
			s.advertisements.Add(1)
		}
		h := &cgi.Handler{
			Path: backend,
			Root: "/git",
			Env: []string{
				"GIT_PROJECT_ROOT=" + root,
				"GIT_HTTP_EXPORT_ALL=1",
				"GIT_CONFIG_NOSYSTEM=1",
				"GIT_CONFIG_GLOBAL=/dev/null",
				// Protocol v2 travels in a header that the backend reads from here.
				"GIT_PROTOCOL=" + r.Header.Get("Git-Protocol"),
			},
			Stderr: io.Discard,
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// lastAuth is the Authorization header of the latest request.
func (s *gitServer) lastAuth() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.authHeaders) == 0 {
		return ""
	}
	return s.authHeaders[len(s.authHeaders)-1]
}

func (s *gitServer) url(name string) string { return s.URL + "/git/" + name + ".git" }

// openMirror opens a mirror in cacheDir and closes it when the test ends.
func openMirror(t testing.TB, cacheDir, url string, creds source.Credentials) *source.Mirror {
	t.Helper()
	m, err := source.Open(testContext(t), source.Config{Dir: cacheDir, URL: url, Credentials: creds, Logger: testLogger(t)})
	if err != nil {
		t.Fatalf("open mirror of %s: %v", url, err)
	}
	t.Cleanup(func() { _ = m.Close() })
	return m
}

func testContext(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
