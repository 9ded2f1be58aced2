package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
)

// workerChildEnv turns the test binary into `gantry <args>` with args taken from its real
// command line after "--", so that what the worker does with its own argv and environ
// (re-executing itself without the token) happens as it would in a real process.
const workerChildEnv = "GANTRY_TEST_WORKER_CHILD"

func init() {
	if os.Getenv(workerChildEnv) != "1" {
		return
	}
	i := slices.Index(os.Args, "--")
	if i < 0 {
		fmt.Fprintln(os.Stderr, "worker child: no -- in the command line")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := Run(ctx, os.Args[i+1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// stepSnoop is a step that shows everything of its worker a step could read to find
// credentials: its own environment, and the command line and environment of every
// ancestor up to the worker, whose pid is $WORKER_PID (it stops there: what runs the
// test is none of its business).
const stepSnoop = `env
pid=$$
while [ "$pid" -gt 1 ]; do
  echo "PROC $pid"
  tr '\0' '\n' < /proc/$pid/cmdline
  echo
  tr '\0' '\n' < /proc/$pid/environ || echo "environ of $pid unreadable"
  [ "$pid" = "$WORKER_PID" ] && break
  pid=$(awk '/^PPid:/ {print $2}' /proc/$pid/status)
done
echo CHAIN-DONE
`

// TestWorkerTokenOutOfStepsReach runs a real worker process given its register token on
// the command line and in the environment, and a step that reads the worker's
// environment and its ancestors' /proc cmdline and environ: neither the register token
// nor any credential may be in what the step sees.
func TestWorkerTokenOutOfStepsReach(t *testing.T) {
	t.Parallel()
	for _, how := range []string{"GANTRY_TOKEN", "--token", "--token-file"} {
		t.Run(how, func(t *testing.T) {
			t.Parallel()
			ctx := t.Context()
			dir := t.TempDir()
			st, err := sqlite.Open(ctx, filepath.Join(dir, "gantry.db"), sqlite.Options{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			srv := httptest.NewServer(api.New(api.Config{Store: st, Auth: true}).Handler())
			t.Cleanup(srv.Close)
			register, err := api.IssueToken(ctx, st, "fleet", store.RoleRegister, "")
			if err != nil {
				t.Fatal(err)
			}
			writer, err := api.IssueToken(ctx, st, "ci", store.RoleWrite, "")
			if err != nil {
				t.Fatal(err)
			}

			args := []string{"worker", "--server", srv.URL, "--name", "snooped", "--max-jobs", "1", "--work-dir", dir}
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), workerChildEnv+"=1")
			switch how {
			case "--token":
				args = append(args, "--token", register)
			case "--token-file":
				file := filepath.Join(dir, "register-token")
				if err := os.WriteFile(file, []byte(register+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				args = append(args, "--token-file", file)
			default:
				cmd.Env = append(cmd.Env, "GANTRY_TOKEN="+register)
			}
			cmd.Args = append(append(cmd.Args, "--"), args...)
			out := &lockedBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatalf("start worker: %v", err)
			}
			exited := make(chan struct{})
			go func() { _ = cmd.Wait(); close(exited) }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill()
				<-exited
				if t.Failed() {
					t.Logf("worker output:\n%s", out.String())
				}
			})

			pid := strconv.Itoa(cmd.Process.Pid)
			body := fmt.Sprintf(`{"pipeline": %q}`, "jobs:\n  snoop:\n    env: {WORKER_PID: \""+pid+"\"}\n    steps:\n      - run: |\n"+
				tokIndent(stepSnoop, "          "))
			runID := tokSubmit(t, srv.URL, writer, body)
			jobID := tokWaitRun(t, srv.URL, writer, runID, exited, out)
			logs := tokGet(t, srv.URL+"/api/v1/jobs/"+jobID+"/logs", writer)

			if !strings.Contains(logs, "CHAIN-DONE") || !strings.Contains(logs, "PROC "+pid+"\n") {
				t.Fatalf("the step did not walk up to the worker (pid %s):\n%s", pid, logs)
			}
			if strings.Contains(logs, register) {
				t.Errorf("the step saw the register token:\n%s", logs)
			}
			if strings.Contains(logs, "gtk_") {
				t.Errorf("the step saw a Gantry secret:\n%s", logs)
			}
			if strings.Contains(logs, "GANTRY_TOKEN=") {
				t.Errorf("the step saw GANTRY_TOKEN:\n%s", logs)
			}
			// What the worker itself now shows in /proc.
			for _, f := range []string{"cmdline", "environ"} {
				b, err := os.ReadFile("/proc/" + pid + "/" + f)
				if err != nil {
					continue // undumpable and we lack CAP_SYS_PTRACE: unreadable is as good
				}
				if bytes.Contains(b, []byte(register)) {
					t.Errorf("/proc/%s/%s still holds the token", pid, f)
				}
			}
			if how == "--token" && !strings.Contains(out.String(), "use --token-file") {
				t.Errorf("no warning recommending --token-file in the worker's output:\n%s", out.String())
			}
		})
	}
}

func tokIndent(s, prefix string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return prefix + strings.Join(lines, "\n"+prefix) + "\n"
}

func tokDo(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read %s: %v", url, err)
	}
	return res.StatusCode, string(b)
}

func tokGet(t *testing.T, url, token string) string {
	t.Helper()
	status, body := tokDo(t, http.MethodGet, url, token, "")
	if status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, status, body)
	}
	return body
}

func tokSubmit(t *testing.T, base, token, body string) string {
	t.Helper()
	status, out := tokDo(t, http.MethodPost, base+"/api/v1/runs", token, body)
	if status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", status, out)
	}
	var v struct {
		ID string `json:"id"`
	}
	tokDecode(t, out, &v)
	return v.ID
}

// waitRunDone polls the run until it ends, and returns its first job's id.
func tokWaitRun(t *testing.T, base, token, runID string, exited <-chan struct{}, out *lockedBuffer) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var v struct {
			Status string `json:"status"`
			Jobs   []struct {
				ID string `json:"id"`
			} `json:"jobs"`
		}
		tokDecode(t, tokGet(t, base+"/api/v1/runs/"+runID, token), &v)
		switch v.Status {
		case "success":
			return v.Jobs[0].ID
		case "failed", "cancelled":
			t.Fatalf("run %s: %s", runID, v.Status)
		}
		select {
		case <-exited:
			t.Fatalf("the worker exited before the run ended:\n%s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %s still %s after 60s", runID, v.Status)
		}
		select {
		case <-time.After(50 * time.Millisecond):
		case <-exited:
		}
	}
}

func tokDecode(t *testing.T, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("decode %s: %v", body, err)
	}
}

// TestTokenSources: the token is read from a file or a descriptor; giving it twice, an
// empty or missing file, or a bad descriptor is a clear error; the client commands read
// --token-file too.
func TestTokenSources(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "token")
	if err := os.WriteFile(good, []byte("  gtk_abc  \nsecond line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	if err := os.WriteFile(empty, []byte("\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if tok, err := readTokenFile(good); err != nil || tok != "gtk_abc" {
		t.Errorf("readTokenFile = %q, %v; want gtk_abc", tok, err)
	}
	if _, err := readTokenFile(empty); err == nil || !strings.Contains(err.Error(), "empty") {
		t.Errorf("readTokenFile of an empty file: %v, want it to say empty", err)
	}
	if _, err := readTokenFile(filepath.Join(dir, "missing")); err == nil || !strings.Contains(err.Error(), "--token-file") {
		t.Errorf("readTokenFile of a missing file: %v, want it to name --token-file", err)
	}
	if _, err := readTokenFD(1); err == nil {
		t.Error("readTokenFD(1) read stdout")
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteString("gtk_piped"); err != nil {
		t.Fatal(err)
	}
	w.Close()
	// readTokenFD closes the descriptor it reads: give it its own, so that r's close
	// later does not close a descriptor number reused meanwhile.
	fd, err := syscall.Dup(int(r.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if tok, err := readTokenFD(fd); err != nil || tok != "gtk_piped" {
		t.Errorf("readTokenFD = %q, %v; want gtk_piped", tok, err)
	}

	args := []string{"gantry", "worker", "--token", "a", "--server", "http://x", "--token=b", "--labels", "l"}
	if got := withoutToken(args); strings.Join(got, " ") != "gantry worker --server http://x --labels l" || hasTokenArg(got) || !hasTokenArg(args) {
		t.Errorf("withoutToken = %q", got)
	}
	if got := withoutEnv([]string{"A=1", "GANTRY_TOKEN=x", "GANTRY_TOKEN_FILE=f"}, "GANTRY_TOKEN"); strings.Join(got, " ") != "A=1 GANTRY_TOKEN_FILE=f" {
		t.Errorf("withoutEnv = %q", got)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--token", "a", "--token-file", good}, usageLines("give the register token once: --token-file, --token or GANTRY_TOKEN", "gantry worker")},
		{[]string{"worker", "--token-file", empty}, "gantry: --token-file " + empty + ": read token: it is empty\n"},
		{[]string{"workers", "--token", "a", "--token-file", good}, usageLines("--token (or GANTRY_TOKEN) and --token-file both give a token: give one", "gantry workers")},
	} {
		got := runCLI(t, invocation{args: tc.args})
		if got.stderr != tc.want {
			t.Errorf("%q: stderr %q, want %q", tc.args, got.stderr, tc.want)
		}
	}

	// A client command sends the file's token.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"workers":[{"id":"w","name":"n","labels":[],"state":"idle","version":%q}]}`, r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	got := runCLI(t, invocation{args: []string{"workers", "--json", "--server", srv.URL, "--token-file", good}})
	if got.code != exitOK || !strings.Contains(got.stdout, `"version":"Bearer gtk_abc"`) {
		t.Errorf("workers --token-file: exit %d, stdout %s, stderr %s", got.code, got.stdout, got.stderr)
	}
}
