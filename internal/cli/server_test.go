package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer the server's logger and the test can share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

var listening = regexp.MustCompile(`msg="gantry server listening" addr=(\S+)`)

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
		{"server", "--lease-ttl", "10s", "--heartbeat-every", "6s"},
		{"server", "--log-level", "loud"},
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
