package cli

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/executor/executortest"
)

var upBanner = regexp.MustCompile(`Gantry is up: (http://\S+)`)

// startUp runs `gantry up` in process on data and returns its base URL and a function that
// stops it (the first Ctrl-C) and returns its exit code.
func startUp(t *testing.T, data string, extra ...string) (string, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	args := append([]string{"up", "--addr", "127.0.0.1:0", "--data", data, "--workers", "2", "--lease-ttl", "2s", "--docker", "off"}, extra...)
	go func() { exit <- Run(ctx, args, strings.NewReader(""), &stdout, &stderr) }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := upBanner.FindStringSubmatch(stdout.String()); m != nil {
			stopped := false
			code := 0
			stop := func() int {
				if !stopped {
					stopped = true
					cancel()
					select {
					case code = <-exit:
					case <-time.After(30 * time.Second):
						t.Fatalf("gantry up did not stop:\n%s", stderr.String())
					}
				}
				return code
			}
			t.Cleanup(func() { stop() })
			return m[1], stop
		}
		select {
		case code := <-exit:
			t.Fatalf("gantry up exited with %d before it was up:\n%s%s", code, stdout.String(), stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("gantry up did not say it was up:\n%s%s", stdout.String(), stderr.String())
		}
	}
}

// submitFile submits the pipeline in path over the API and returns the run's id.
func submitFile(t testing.TB, base, path string) string {
	t.Helper()
	yaml, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return submitRun(t, base, string(yaml)).ID
}

// TestUp: `gantry up` runs the diamond example with its local workers, serves the
// workers list, lets a running job finish on Ctrl-C, and keeps everything for the next
// start on the same data directory.
func TestUp(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	base, stop := startUp(t, data)
	run := submitFile(t, base, "../../examples/diamond.yml")
	waitRun(t, base, run, func(r runDetails) bool { return r.Status == "success" })
	// gantry run with a run id shows that run, wave by wave.
	show := runCLI(t, invocation{args: []string{"run", run, "--server", base}})
	if show.code != exitOK || !strings.Contains(show.stdout, "package") || !strings.Contains(show.stdout, "success") {
		t.Errorf("gantry run %s: exit %d\n%s%s", run, show.code, show.stdout, show.stderr)
	}
	var workers struct{ Workers []struct{ Name string } }
	getJSON(t, http.DefaultClient, base+"/api/v1/workers", &workers)
	if len(workers.Workers) != 2 {
		t.Errorf("workers = %+v, want the two local ones", workers)
	}

	// A second up on the same data directory is refused while the first runs.
	var out syncBuffer
	if code := Run(t.Context(), []string{"up", "--addr", "127.0.0.1:0", "--data", data}, strings.NewReader(""), &out, &out); code != exitFailure ||
		!strings.Contains(out.String(), "in use by another gantry process") {
		t.Errorf("second up on the same data: exit %d\n%s", code, out.String())
	}

	// Ctrl-C while a job runs: the job finishes before up exits.
	slow := submitRun(t, base, "name: slow\njobs:\n  a: {steps: [{run: 'sleep 1 && echo finished'}]}\n").ID
	waitRun(t, base, slow, func(r runDetails) bool { return r.Status == "running" })
	if code := stop(); code != exitOK {
		t.Fatalf("up exited with %d after Ctrl-C", code)
	}
	base, _ = startUp(t, data)
	if r := waitRun(t, base, slow, func(r runDetails) bool { return r.Status != "running" }); r.Status != "success" {
		t.Errorf("the job running at Ctrl-C ended %s, want success", r.Status)
	}
	if r := waitRun(t, base, run, func(runDetails) bool { return true }); r.Status != "success" {
		t.Errorf("after a restart the first run is %s", r.Status)
	}
}

// TestUpResumesAfterCrash: a `gantry up` process killed with SIGKILL mid-job takes its
// running step with it, even one that left the step's session; started again on its data
// directory, it runs the job again and succeeds.
func TestUpResumesAfterCrash(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	pidFile, mark := filepath.Join(dir, "pid"), filepath.Join(dir, "mark")
	token := executortest.Token(t)
	args := []string{"up", "--addr", "127.0.0.1:0", "--data", data, "--workers", "1", "--lease-ttl", "2s", "--docker", "off"}
	p := startChild(t, args)
	base := waitUpBanner(t, p)
	run := submitRun(t, base, `name: crash
jobs:
  a:
    steps:
      - run: test -f `+mark+` || { touch `+mark+`; setsid sleep 1`+token+` & echo $$ > `+pidFile+`; exec sleep 2`+token+`; }
  b: {needs: [a], steps: [{run: echo after}]}
`).ID
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat(pidFile); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the first attempt did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	waitProcesses(t, token, 2)
	p.kill(t)
	waitNoProcesses(t, token, "after gantry up was killed")
	p = startChild(t, args)
	base = waitUpBanner(t, p)
	r := waitRun(t, base, run, func(r runDetails) bool {
		return r.Status == "success" || r.Status == "failed" || r.Status == "cancelled"
	})
	if r.Status != "success" {
		t.Fatalf("after the restart the run ended %s, want success", r.Status)
	}
}

func waitUpBanner(t *testing.T, p *serverProcess) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := upBanner.FindStringSubmatch(p.stderr.String()); m != nil {
			return m[1]
		}
		select {
		case <-p.exited:
			t.Fatalf("gantry up exited before it was up:\n%s", p.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("gantry up did not say it was up:\n%s", p.stderr.String())
		}
	}
}

func TestUpUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"up", "--workers", "0"},
		{"up", "--executor", "docker"},
		{"up", "--lease-ttl", "1s"},
		{"up", "--log-level", "loud"},
		{"up", "extra"},
	} {
		if r := runCLI(t, invocation{args: args}); r.code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, r.code, exitUsage, r.stderr)
		}
	}
}

// waitProcesses waits until n live processes carry token.
func waitProcesses(t *testing.T, token string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(executortest.Processes(token)) < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d processes carry %s, want %d: %v", len(executortest.Processes(token)), token, n, executortest.Processes(token))
		}
		<-time.After(20 * time.Millisecond)
	}
}

// TestUpAuthOn: gantry up --auth on refuses a call without a token, keeps an admin token
// for the CLI in the data directory that the API and the CLI take, and keeps that same
// token when started again; --auth off is refused on an address other than loopback.
func TestUpAuthOn(t *testing.T) {
	t.Parallel()
	data := filepath.Join(t.TempDir(), "data")
	base, stop := startUp(t, data, "--auth", "on")
	resp, err := http.Get(base + "/api/v1/runs")
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /api/v1/runs without a token: %d, want 401", resp.StatusCode)
	}
	file := filepath.Join(data, "admin.token")
	info, err := os.Stat(file)
	if err != nil {
		t.Fatalf("no admin token kept: %v", err)
	}
	if perm := info.Mode().Perm(); perm != 0o600 {
		t.Errorf("admin token file mode %v, want 0600", perm)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(raw))
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, base+"/api/v1/tokens", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /api/v1/tokens (admin only) with the kept token: %d, want 200", resp.StatusCode)
	}
	// The CLI takes it as a token file, and an admin's command works.
	env := map[string]string{"GANTRY_SERVER": base, "GANTRY_TOKEN_FILE": file}
	if out := runCLI(t, invocation{args: []string{"token", "list"}, env: env}); out.code != exitOK || !strings.Contains(out.stdout, "gantry up admin") {
		t.Errorf("gantry token list with the admin token: exit %d\n%s%s", out.code, out.stdout, out.stderr)
	}
	if out := runCLI(t, invocation{args: []string{"token", "list"}, env: map[string]string{"GANTRY_SERVER": base}}); out.code == exitOK {
		t.Errorf("gantry token list without a token succeeded:\n%s", out.stdout)
	}
	if code := stop(); code != exitOK {
		t.Fatalf("up exited with %d", code)
	}
	startUp(t, data, "--auth", "on")
	if again, err := os.ReadFile(file); err != nil || string(again) != string(raw) {
		t.Errorf("a second start changed the admin token (err %v)", err)
	}

	var out syncBuffer
	if code := Run(t.Context(), []string{"up", "--addr", "0.0.0.0:0", "--data", t.TempDir(), "--auth", "off"}, strings.NewReader(""), &out, &out); code != exitUsage ||
		!strings.Contains(out.String(), "--auth off is allowed only on a loopback address") {
		t.Errorf("up --auth off on 0.0.0.0: exit %d\n%s", code, out.String())
	}
}
