package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/testdb"
)

// failingForge is a GitHub status API that answers 500 until it is told to accept.
type failingForge struct {
	accept   atomic.Bool
	mu       sync.Mutex
	failed   int
	accepted []map[string]string
	paths    []string
}

func (f *failingForge) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.accept.Load() {
		f.failed++
		http.Error(w, `{"message":"Server Error"}`, http.StatusInternalServerError)
		return
	}
	var m map[string]string
	_ = json.Unmarshal(body, &m)
	m["authorization"] = r.Header.Get("Authorization")
	f.accepted = append(f.accepted, m)
	f.paths = append(f.paths, r.Method+" "+r.URL.Path)
	w.WriteHeader(http.StatusCreated)
	_, _ = io.WriteString(w, `{"id":1}`)
}

func (f *failingForge) counts() (failed, accepted int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed, len(f.accepted)
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", within, what)
		}
		select {
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// TestOutboxSurvivesCoordinatorCrash: a run's commit status is enqueued with the run; the
// forge fails every attempt until the coordinator is SIGKILLed; a new coordinator on the
// same store delivers it once the forge is back, exactly once.
func TestOutboxSurvivesCoordinatorCrash(t *testing.T) {
	t.Parallel()
	onBothStores(t, testOutboxCrash)
}

// onBothStores runs test in parallel subtests, on a fresh SQLite file and on a fresh
// PostgreSQL database, each given as the --db URL of a coordinator process.
func onBothStores(t *testing.T, test func(t *testing.T, db string)) {
	for _, tc := range []struct {
		name string
		db   func(t *testing.T) string
	}{
		{"sqlite", func(t *testing.T) string { return "sqlite://" + testdb.SQLitePath(t) }},
		{"postgres", func(t *testing.T) string { return testdb.Postgres(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			test(t, tc.db(t))
		})
	}
}

func testOutboxCrash(t *testing.T, db string) {
	forge := &failingForge{}
	forgeSrv := httptest.NewServer(forge)
	t.Cleanup(forgeSrv.Close)
	tokenFile := filepath.Join(t.TempDir(), "forge.token")
	if err := os.WriteFile(tokenFile, []byte("ghp_crash\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	flags := []string{"--outbox-backoff", "100ms", "--outbox-hold", "2s", "--outbound-allow", "127.0.0.0/8"}
	client := &http.Client{Timeout: 10 * time.Second}

	first := startServerProcess(t, db, flags...)
	post := func(base, path string, body any) map[string]any {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := client.Post(base+path, "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatalf("POST %s: %v", path, err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		if resp.StatusCode/100 != 2 {
			t.Fatalf("POST %s: %d %v", path, resp.StatusCode, out)
		}
		return out
	}
	post(first.base, "/api/v1/projects", map[string]any{"name": "web", "repo_url": "https://github.com/acme/web.git",
		"provider": "github", "default_branch": "main", "api_base_url": forgeSrv.URL, "api_token_file": tokenFile,
		"commit_statuses": "run"}) // the run's status alone, so that exactly one message is followed
	const sha = "89abcdef0123456789abcdef0123456789abcdef"
	run := post(first.base, "/api/v1/runs", map[string]any{"pipeline": "name: ci\njobs:\n  a: {steps: [{run: 'true'}]}\n",
		"project": "web", "ref": "refs/heads/main", "sha": sha})
	runID, _ := run["id"].(string)
	if runID == "" {
		t.Fatalf("run answer without an id: %v", run)
	}

	// No worker takes the run: it stays pending, the status the forge keeps refusing.
	waitFor(t, "two failed attempts", 20*time.Second, func() bool { failed, _ := forge.counts(); return failed >= 2 })
	first.kill(t)
	forge.accept.Store(true)
	failedBefore, _ := forge.counts()

	second := startServerProcess(t, db, flags...)
	waitFor(t, "the status to be delivered after the restart", 30*time.Second, func() bool { _, ok := forge.counts(); return ok >= 1 })
	var outbox struct {
		Messages []struct {
			ID       string `json:"id"`
			State    string `json:"state"`
			Attempts int    `json:"attempts"`
		} `json:"messages"`
	}
	waitFor(t, "the message to be marked delivered", 10*time.Second, func() bool {
		getJSON(t, client, second.base+"/api/v1/outbox?state=delivered", &outbox)
		return len(outbox.Messages) == 1
	})
	if m := outbox.Messages[0]; m.Attempts < failedBefore+1 {
		t.Errorf("delivered message took %d attempts; the forge refused %d before the crash", m.Attempts, failedBefore)
	}
	getJSON(t, client, second.base+"/api/v1/outbox?state=pending", &outbox)
	if len(outbox.Messages) != 0 {
		t.Errorf("%d messages still pending after the delivery", len(outbox.Messages))
	}
	forge.mu.Lock()
	defer forge.mu.Unlock()
	if len(forge.accepted) != 1 {
		t.Fatalf("forge accepted %d statuses, want exactly 1", len(forge.accepted))
	}
	got := forge.accepted[0]
	if forge.paths[0] != "POST /repos/acme/web/statuses/"+sha || got["state"] != "pending" || got["context"] != "gantry/ci" ||
		got["authorization"] != "Bearer ghp_crash" || !strings.HasSuffix(got["target_url"], "/runs/"+runID) ||
		!strings.HasPrefix(got["target_url"], second.base) {
		t.Errorf("delivered status %s %v", forge.paths[0], got)
	}
}
