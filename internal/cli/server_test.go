package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/executor/executortest"
)

// syncBuffer is a bytes.Buffer the server's logger and the test can share.
type syncBuffer = executortest.SyncBuffer

// listening finds the address in the server's "listening" record, in either log format.
var listening = regexp.MustCompile(`(?:msg="gantry server listening" addr=|"msg":"gantry server listening","addr":")([^\s"]+)`)

// TestServer starts `gantry server` in process on a free port and a fresh SQLite store,
// submits a run over HTTP, reads it back, and stops the server the way Ctrl-C does.
func TestServer(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "data", "gantry.db")
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- Run(ctx, []string{"server", "--addr", "127.0.0.1:0", "--db", db}, strings.NewReader(""), &stdout, &stderr)
	}()

	var base string
	deadline := time.Now().Add(20 * time.Second)
	for base == "" {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			base = "http://" + m[1]
			break
		}
		select {
		case code := <-exit:
			t.Fatalf("server exited with %d before listening:\n%s", code, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not report its address:\n%s", stderr.String())
		}
	}

	resp, err := http.Post(base+"/api/v1/runs", "application/yaml", strings.NewReader("name: t\njobs: {a: {steps: [{run: 'true'}]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	err = json.NewDecoder(resp.Body).Decode(&created)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted || created.ID == "" {
		t.Fatalf("POST /api/v1/runs = %d, %+v, %v", resp.StatusCode, created, err)
	}
	resp, err = http.Get(fmt.Sprintf("%s/api/v1/runs/%s", base, created.ID))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET run = %d", resp.StatusCode)
	}

	cancel()
	select {
	case code := <-exit:
		if code != exitOK {
			t.Fatalf("server exit code %d after shutdown:\n%s", code, stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("server did not stop after its context ended")
	}
	if !strings.Contains(stderr.String(), "shutting down") {
		t.Errorf("no shutdown in the log:\n%s", stderr.String())
	}
}

func TestServerUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"server", "--db", "mysql://x"},
		{"server", "--reap-every", "0s"},
		{"server", "--reap-grace", "-1s"},
		{"up", "--reap-grace", "-1s"},
		{"server", "--lease-ttl", "10s", "--heartbeat-every", "6s"},
		{"server", "--log-level", "loud"},
		{"server", "--cache-max-size", "lots"},
		{"server", "--cache-max-size", "-1Gi"},
		{"server", "--cache-max-age", "-1h"},
		{"server", "extra"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Run(t.Context(), args, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, code, exitUsage, stderr.String())
		}
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"postgres://u:secret@h/db":  "postgres://u:xxxxx@h/db",
		"postgres://u@h/db":         "postgres://u@h/db",
		"sqlite:///var/lib/x.db":    "sqlite:///var/lib/x.db",
		"postgres://h/db?x=a@b.com": "postgres://h/db?x=a@b.com",
	} {
		if got := redactURL(in); got != want {
			t.Errorf("redactURL(%q) = %q, want %q", in, got, want)
		}
	}
}

// startServer runs `gantry server` in process with args and returns its base URL and a
// function, safe to call more than once, that stops it and returns its exit code.
func startServer(t *testing.T, args ...string) (string, func() int) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- Run(ctx, append([]string{"server", "--addr", "127.0.0.1:0"}, args...), strings.NewReader(""), &stdout, &stderr)
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := listening.FindStringSubmatch(stderr.String()); m != nil {
			var once sync.Once
			code := 0
			return "http://" + m[1], func() int {
				once.Do(func() { cancel(); code = <-exit })
				return code
			}
		}
		select {
		case code := <-exit:
			t.Fatalf("server exited with %d before listening:\n%s", code, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("server did not report its address:\n%s", stderr.String())
		}
	}
}

func TestServerAuth(t *testing.T) {
	t.Parallel()
	db := "sqlite://" + filepath.Join(t.TempDir(), "gantry.db")
	var stdout, stderr bytes.Buffer
	if code := Run(t.Context(), []string{"token", "create", "--db", db, "--role", "write", "--name", "ci"}, strings.NewReader(""), &stdout, &stderr); code != exitOK {
		t.Fatalf("token create: exit %d: %s", code, stderr.String())
	}
	token := strings.TrimSpace(stdout.String())
	if !strings.HasPrefix(token, "gtk_") {
		t.Fatalf("token create printed %q", token)
	}
	base, stop := startServer(t, "--db", db, "--auth", "on")
	defer stop()
	post := func(auth string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/runs", strings.NewReader("jobs: {a: {steps: [{run: x}]}}"))
		req.Header.Set("Content-Type", "application/yaml")
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := post(""); got != http.StatusUnauthorized {
		t.Errorf("submit without a token: %d, want 401", got)
	}
	if got := post(token); got != http.StatusAccepted {
		t.Errorf("submit with the created token: %d, want 202", got)
	}
	if code := stop(); code != exitOK {
		t.Errorf("server exit %d", code)
	}
}

func TestAuthUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"server", "--addr", "0.0.0.0:8080", "--auth", "off"},
		{"server", "--auth", "maybe"},
		{"token", "create", "--role", "write"},
		{"token", "create", "--name", "x", "--role", "root"},
		{"token", "create", "--name", "x", "--db", "mysql://x"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Run(t.Context(), args, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, code, exitUsage, stderr.String())
		}
	}
	for addr, want := range map[string]bool{"127.0.0.1:80": true, "localhost:8080": true, "[::1]:1": true, "0.0.0.0:80": false, ":8080": false, "10.0.0.1:80": false} {
		if got := loopback(addr); got != want {
			t.Errorf("loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// TestServerStopsWithWaitsUnderWay: a coordinator asked to stop while a worker's control
// poll waits on it (for up to a minute) answers the poll at once and exits 0. Before,
// the graceful shutdown waited for the poll until its own 15 s ran out, and the server
// exited with that error.
func TestServerStopsWithWaitsUnderWay(t *testing.T) {
	t.Parallel()
	base, stop := startServer(t, "--db", "sqlite://"+filepath.Join(t.TempDir(), "gantry.db"))
	defer stop()
	post := func(path, body string) (int, string, error) {
		res, err := http.Post(base+path, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, "", err
		}
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		return res.StatusCode, string(data), err
	}
	code, body, err := post("/api/v1/agent/register", `{"name": "w1", "max_jobs": 1}`)
	if err != nil || code != http.StatusOK {
		t.Fatalf("register: %d %s %v", code, body, err)
	}
	var reg struct {
		WorkerID string `json:"worker_id"`
	}
	if err := json.Unmarshal([]byte(body), &reg); err != nil {
		t.Fatal(err)
	}
	type answer struct {
		code int
		body string
		err  error
	}
	polled := make(chan answer, 1)
	go func() {
		code, body, err := post("/api/v1/agent/control", `{"worker_id": "`+reg.WorkerID+`", "wait": "1m", "state": "busy"}`)
		polled <- answer{code, body, err}
	}()
	// The poll marks the worker busy before it waits.
	deadline := time.After(20 * time.Second)
	for {
		var list struct {
			Workers []struct {
				ID    string `json:"id"`
				State string `json:"state"`
			} `json:"workers"`
		}
		getJSON(t, http.DefaultClient, base+"/api/v1/workers", &list)
		if len(list.Workers) == 1 && list.Workers[0].State == "busy" {
			break
		}
		select {
		case <-deadline:
			t.Fatalf("the control poll did not mark the worker busy within 20s: %+v", list.Workers)
		case <-time.After(10 * time.Millisecond):
		}
	}
	if code := stop(); code != exitOK {
		t.Errorf("server exited %d with a control poll under way, want %d", code, exitOK)
	}
	a := <-polled
	if a.err != nil || a.code != http.StatusOK || !strings.Contains(a.body, `"cancel":[]`) {
		t.Errorf("the control poll under way when the server stopped: %d %q %v; want 200 with nothing to cancel", a.code, a.body, a.err)
	}
}
