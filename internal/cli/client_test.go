package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// startCluster runs `gantry server` on a fresh SQLite store and one in-process worker
// that runs up to four jobs at once, and returns the server's URL.
func startCluster(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	base, stop := startServer(t, "--db", "sqlite://"+filepath.Join(dir, "data", "gantry.db"))
	t.Cleanup(func() { stop() })
	ctx, stopWorker := context.WithCancel(t.Context())
	done := make(chan int, 1)
	go func() {
		var out syncBuffer
		done <- Run(ctx, []string{"worker", "--server", base, "--max-jobs", "4", "--work-dir", t.TempDir()}, strings.NewReader(""), &out, &out)
	}()
	// Cleanups run last-in first-out: the worker stops before the server.
	t.Cleanup(func() { stopWorker(); <-done })
	return base
}

// writePipeline writes a pipeline definition to a file of its own and returns the path.
func writePipeline(t *testing.T, name, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// submitRun submits a pipeline over the API and returns the run.
func submitRun(t testing.TB, base, yaml string) runDetails {
	t.Helper()
	var run runDetails
	if code, err := postYAML(t, base+"/api/v1/runs", yaml, &run); err != nil || code != http.StatusAccepted {
		t.Fatalf("submit: %d %v", code, err)
	}
	return run
}

// postYAML posts a YAML body and decodes the answer into out.
func postYAML(t testing.TB, url, body string, out any) (int, error) {
	t.Helper()
	res, err := http.Post(url, "application/yaml", strings.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	return res.StatusCode, json.NewDecoder(res.Body).Decode(out)
}

// waitRun polls run id until done says it is what the test waits for.
func waitRun(t testing.TB, base, id string, done func(runDetails) bool) runDetails {
	t.Helper()
	return waitRunWithin(t, base, id, 30*time.Second, done)
}

// waitRunWithin is waitRun with a deadline of its own.
func waitRunWithin(t testing.TB, base, id string, within time.Duration, done func(runDetails) bool) runDetails {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var r runDetails
		getJSON(t, http.DefaultClient, base+"/api/v1/runs/"+id, &r)
		if done(r) {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s is still %s", id, r.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func statusIs(want string) func(runDetails) bool {
	return func(r runDetails) bool { return r.Status == want }
}

// countLines counts the lines of out that are exactly line.
func countLines(out, line string) int {
	n := 0
	for l := range strings.SplitSeq(out, "\n") {
		if l == line {
			n++
		}
	}
	return n
}

// TestClientConfigPrecedence: the server and the token come from the flag, else the
// environment, else the config file, else the default.
func TestClientConfigPrecedence(t *testing.T) {
	t.Parallel()
	// Each fake coordinator names itself in its only worker, and shows the token it got.
	fake := func(name string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"workers":[{"id":"w","name":%q,"labels":[],"state":"idle","version":%q}]}`,
				name, r.Header.Get("Authorization"))
		}))
		t.Cleanup(srv.Close)
		return srv.URL
	}
	flagURL, envURL, fileURL := fake("flag"), fake("env"), fake("file")
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "explicit.yaml")
	if err := os.WriteFile(cfgFile, []byte("server: "+fileURL+"\ntoken: file-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	xdg := filepath.Join(dir, "xdg")
	if err := os.MkdirAll(filepath.Join(xdg, "gantry"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(xdg, "gantry", "config.yaml"), []byte("server: "+fileURL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "home")
	if err := os.MkdirAll(filepath.Join(home, ".config", "gantry"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".config", "gantry", "config.yaml"), []byte("token: home-token\nserver: "+fileURL+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantServer string // the worker name the answering coordinator gave
		wantToken  string
	}{
		{"flag beats env and file", []string{"--server", flagURL, "--token", "flag-token"},
			map[string]string{"GANTRY_SERVER": envURL, "GANTRY_TOKEN": "env-token", "GANTRY_CONFIG": cfgFile}, "flag", "Bearer flag-token"},
		{"env beats file", nil,
			map[string]string{"GANTRY_SERVER": envURL, "GANTRY_TOKEN": "env-token", "GANTRY_CONFIG": cfgFile}, "env", "Bearer env-token"},
		{"file named by GANTRY_CONFIG", nil, map[string]string{"GANTRY_CONFIG": cfgFile}, "file", "Bearer file-token"},
		{"file named by --config, token from env", []string{"--config", cfgFile},
			map[string]string{"GANTRY_TOKEN": "env-token"}, "file", "Bearer env-token"},
		{"XDG_CONFIG_HOME", nil, map[string]string{"XDG_CONFIG_HOME": xdg, "HOME": home}, "file", ""},
		{"HOME/.config", nil, map[string]string{"HOME": home}, "file", "Bearer home-token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: append([]string{"workers", "--json"}, tt.args...), env: tt.env})
			if got.code != exitOK {
				t.Fatalf("exit %d: %s", got.code, got.stderr)
			}
			want := fmt.Sprintf(`"name":%q,"labels":[],"state":"idle","version":%q`, tt.wantServer, tt.wantToken)
			if !strings.Contains(got.stdout, want) {
				t.Errorf("answer %s, want it to contain %s", got.stdout, want)
			}
		})
	}

	t.Run("default server", func(t *testing.T) {
		t.Parallel()
		c, err := (&clientConfig{lookupEnv: func(string) (string, bool) { return "", false }}).client()
		if err != nil || c.base != defaultServer || c.token != "" {
			t.Errorf("client() = %+v, %v; want %s without a token", c, err, defaultServer)
		}
	})
}

func TestClientUsageErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badCfg := filepath.Join(dir, "bad.yaml")
	if err := os.WriteFile(badCfg, []byte("sever: http://x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	id := "0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b"
	tests := []struct {
		args       []string
		env        map[string]string
		wantStderr string
	}{
		{[]string{"submit"}, nil, usageLines("expected 1 argument, got 0", "gantry submit")},
		{[]string{"submit", filepath.Join(dir, "missing.yml")}, nil, "gantry: read " + filepath.Join(dir, "missing.yml") + ": no such file or directory\n"},
		{[]string{"submit", "--priority", "urgent", "x.yml"}, nil, usageLines(`--priority "urgent": want critical, high, normal or low`, "gantry submit")},
		{[]string{"submit", "--env", "NOVALUE", "x.yml"}, nil, usageLines(`--env "NOVALUE": want NAME=VALUE`, "gantry submit")},
		{[]string{"logs", "build"}, nil, usageLines(`job id "build" is not a UUID; name a job of a run as RUN JOB (gantry logs web#42 build)`, "gantry logs")},
		{[]string{"logs", "--attempt", "-1", id}, nil, usageLines("--attempt -1: want 1 or more", "gantry logs")},
		{[]string{"runs", "--limit", "0"}, nil, usageLines("--limit 0: want 1 to 500", "gantry runs")},
		{[]string{"runs", "--status", "done"}, nil, usageLines(`--status "done": want pending, running, success, failed or cancelled`, "gantry runs")},
		{[]string{"runs", "extra"}, nil, usageLines(`unexpected argument "extra"`, "gantry runs")},
		{[]string{"runs", "get"}, nil, usageLines("expected 1 argument, got 0", "gantry runs get")},
		{[]string{"runs", "show", "nope"}, nil, usageLines(`run "nope" is not a run id, the start of one (4 hex digits or more), or PROJECT#NUMBER (web#42)`, "gantry runs get")},
		{[]string{"cancel", "nope"}, nil, usageLines(`run "nope" is not a run id, the start of one (4 hex digits or more), or PROJECT#NUMBER (web#42)`, "gantry cancel")},
		{[]string{"retry"}, nil, usageLines("expected 1 argument, got 0", "gantry retry")},
		{[]string{"workers", "--server", "ftp://x"}, nil, usageLines(`--server "ftp://x": want an http:// or https:// URL, or several separated by commas`, "gantry workers")},
		{[]string{"workers"}, map[string]string{"GANTRY_SERVER": "127.0.0.1:8080"}, usageLines(`--server "127.0.0.1:8080": want an http:// or https:// URL, or several separated by commas`, "gantry workers")},
		{[]string{"workers", "--server", "http://a:8080,http://a:8080"}, nil, usageLines("--server: http://a:8080 is given twice", "gantry workers")},
		{[]string{"workers", "--config", filepath.Join(dir, "none.yaml")}, nil,
			usageLines("read config file "+filepath.Join(dir, "none.yaml")+": no such file or directory", "gantry workers")},
		{[]string{"workers"}, map[string]string{"GANTRY_CONFIG": badCfg}, usageLines("config file "+badCfg+": yaml: unmarshal errors:\n  line 1: field sever not found in type cli.clientFile", "gantry workers")},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: tt.args, env: tt.env})
			if got.code != exitUsage {
				t.Errorf("exit code = %d, want %d", got.code, exitUsage)
			}
			if got.stderr != tt.wantStderr {
				t.Errorf("stderr =\n%s\nwant\n%s", got.stderr, tt.wantStderr)
			}
		})
	}
}

// TestClientReplicas: a client command given several replicas (--server a,b, or
// GANTRY_SERVER as a worker on the same machine has it) sends to the first, moves to the
// next when one cannot be reached, with the request's body whole, and from then on asks
// the one that answered first.
func TestClientReplicas(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.Path+" "+string(body))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"workers": []}`)
	}))
	t.Cleanup(srv.Close)
	closed := func() string { // a URL whose port refuses connections
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return "http://" + ln.Addr().String()
	}
	down := closed()

	r := runCLI(t, invocation{args: []string{"workers", "--json"}, env: map[string]string{"GANTRY_SERVER": down + ", " + srv.URL + "/"}})
	if r.code != exitOK || !strings.Contains(r.stdout, `"workers"`) {
		t.Fatalf("gantry workers with %s down: exit %d\nstdout %s\nstderr %s", down, r.code, r.stdout, r.stderr)
	}

	c, err := (&clientConfig{Server: down + "," + srv.URL, lookupEnv: func(string) (string, bool) { return "", false }}).client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.callJSON(t.Context(), http.MethodPost, "/api/v1/things", []byte(`{"a": 1}`)); err != nil {
		t.Fatalf("POST with the first replica down: %v", err)
	}
	if c.baseURL() != srv.URL {
		t.Errorf("after the second replica answered the client asks %s first; want %s", c.baseURL(), srv.URL)
	}
	if _, err := c.callJSON(t.Context(), http.MethodGet, "/api/v1/workers", nil); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	want := []string{"GET /api/v1/workers ", `POST /api/v1/things {"a": 1}`, "GET /api/v1/workers "}
	if !slices.Equal(got, want) {
		t.Errorf("the replica that answered got %q; want %q", got, want)
	}

	// Every replica down: the error says the server could not be reached.
	c, err = (&clientConfig{Server: down + "," + closed(), lookupEnv: func(string) (string, bool) { return "", false }}).client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.callJSON(t.Context(), http.MethodGet, "/api/v1/workers", nil); err == nil || !strings.Contains(err.Error(), "reach the server") {
		t.Errorf("every replica down: %v; want reach the server", err)
	}
}
