package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestOutboxCommands: project webhook add, list and remove, and outbox list and
// redeliver, against a real server whose dispatcher sends a run's status to a forge.
func TestOutboxCommands(t *testing.T) {
	t.Parallel()
	var statuses atomic.Int32
	forgeSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		statuses.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(forgeSrv.Close)
	dir := t.TempDir()
	// The forge is an httptest server on loopback, which the coordinator reaches only
	// when allowed to.
	base, stop := startServer(t, "--db", "sqlite://"+filepath.Join(dir, "gantry.db"), "--public-url", "https://ci.example.com",
		"--outbound-allow", "127.0.0.1")
	defer stop()
	srv := []string{"--server", base}
	cli := func(args ...string) outcome {
		t.Helper()
		return runCLI(t, invocation{args: append(args, srv...)})
	}

	tokenFile := filepath.Join(dir, "forge.token")
	if err := os.WriteFile(tokenFile, []byte("ghp_x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := cli("project", "create", "web", "--repo", "https://github.com/acme/web.git", "--provider", "github",
		"--default-branch", "main", "--api-url", forgeSrv.URL, "--api-token-file", tokenFile,
		"--commit-statuses", "run"); r.code != exitOK { // one status per run: the commands are what is tested
		t.Fatalf("project create: exit %d: %s", r.code, r.stderr)
	}
	add := cli("project", "webhook", "add", "web", "--url", "https://hooks.example.com/ci", "--event", "run.finished", "--event", "job.finished")
	m := regexp.MustCompile(`webhook (\S+) added to project web: https://hooks.example.com/ci on run.finished, job.finished\nsecret \(shown once\): ([0-9a-f]{64})\n`).
		FindStringSubmatch(add.stdout)
	if add.code != exitOK || m == nil {
		t.Fatalf("webhook add: exit %d\n%s%s", add.code, add.stdout, add.stderr)
	}
	id, secret := m[1], m[2]
	list := cli("project", "webhook", "list", "web")
	if list.code != exitOK || !strings.Contains(list.stdout, id) || !strings.Contains(list.stdout, "run.finished,job.finished") ||
		strings.Contains(list.stdout, secret) {
		t.Errorf("webhook list: exit %d\n%s%s", list.code, list.stdout, list.stderr)
	}
	if r := cli("project", "webhook", "add", "web"); r.code != exitUsage {
		t.Errorf("webhook add without --url: exit %d, want %d", r.code, exitUsage)
	}

	// A run of the project at a commit: its pending status goes to the forge.
	file := filepath.Join(dir, "ci.yml")
	if err := os.WriteFile(file, []byte("name: ci\njobs:\n  a:\n    steps: [{run: 'true'}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := cli("submit", "--project", "web", "--ref", "refs/heads/main", "--sha", "0123456789abcdef0123456789abcdef01234567", file); r.code != exitOK {
		t.Fatalf("submit: exit %d: %s", r.code, r.stderr)
	}
	var delivered outcome
	waitFor(t, "a delivered status", 20*time.Second, func() bool {
		delivered = cli("outbox", "list", "--state", "delivered")
		return strings.Contains(delivered.stdout, "gantry/ci")
	})
	if statuses.Load() != 1 {
		t.Errorf("the forge got %d statuses, want 1", statuses.Load())
	}
	msg := regexp.MustCompile(`(?m)^(\S+)\s+status\s+delivered\s+1\s+gantry/\S+ pending run `).FindStringSubmatch(delivered.stdout)
	if msg == nil {
		t.Fatalf("outbox list:\n%s", delivered.stdout)
	}
	if r := cli("outbox", "redeliver", msg[1]); r.code != exitOK || r.stdout != "message "+msg[1]+" will be delivered again\n" {
		t.Errorf("outbox redeliver: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cli("outbox", "list", "--state", "lost"); r.code != exitUsage {
		t.Errorf("outbox list --state lost: exit %d, want %d", r.code, exitUsage)
	}
	if r := cli("outbox", "redeliver", "0190a3a2-0000-7000-8000-000000000000"); r.code != exitFailure || !strings.Contains(r.stderr, "not_found") {
		t.Errorf("redeliver of an unknown id: exit %d: %s", r.code, r.stderr)
	}
	if r := cli("project", "webhook", "remove", "web", id); r.code != exitOK || !strings.Contains(r.stdout, "removed") {
		t.Errorf("webhook remove: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if r := cli("project", "webhook", "remove", "web", id); r.code != exitFailure {
		t.Errorf("second webhook remove: exit %d, want %d", r.code, exitFailure)
	}
}
