package executor

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func needBwrap(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("bwrap"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("bwrap is missing on CI: .ci/run installs bubblewrap")
		}
		t.Skip("bwrap is not installed")
	}
}

func TestSandbox(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	tests := []struct {
		name    string
		script  string
		network bool
		want    string
		code    int
	}{
		{"workspace is writable", "echo hi > f && cat f", false, "hi", 0},
		{"host root is read-only", "touch /usr/gantry-sandbox-test 2>/dev/null && echo wrote || echo refused", false, "refused", 0},
		{"private tmp", "echo x > /tmp/private && cat /tmp/private", false, "x", 0},
		{"own pid namespace", "echo $$", false, "2", 0},
		// In its own network namespace a step sees only the loopback interface.
		{"no network by default", "grep -c : /proc/net/dev", false, "1", 0},
		{"exit code", "exit 5", false, "", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ws := t.TempDir()
			var out bytes.Buffer
			res, err := Sandbox{}.Run(t.Context(), Step{Script: tt.script, Dir: ws, Env: []string{"PATH=" + os.Getenv("PATH")},
				Stdout: &out, Stderr: &out, Network: tt.network})
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tt.code || strings.TrimSpace(out.String()) != tt.want {
				t.Errorf("exit %d output %q; want %d %q", res.ExitCode, out.String(), tt.code, tt.want)
			}
		})
	}
	if _, err := os.Stat("/usr/gantry-sandbox-test"); err == nil {
		t.Error("a sandboxed step wrote to the host's /usr")
	}
}

func TestSandboxCancel(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	ws := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan Result, 1)
	go func() {
		res, _ := Sandbox{}.Run(ctx, Step{Script: "touch started; sleep 120", Dir: ws, Env: []string{"PATH=" + os.Getenv("PATH")}, Grace: 200 * time.Millisecond})
		done <- res
	}()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(ws, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sandboxed step never started")
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case res := <-done:
			t.Fatalf("step ended early: %+v", res)
		}
	}
	cancel()
	select {
	case res := <-done:
		if !res.Cancelled {
			t.Errorf("result %+v, want cancelled", res)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("cancel did not stop the sandboxed step")
	}
}

func TestSandboxNetwork(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	var out bytes.Buffer
	_, err := Sandbox{}.Run(t.Context(), Step{Script: "grep -c : /proc/net/dev", Dir: t.TempDir(), Env: []string{"PATH=" + os.Getenv("PATH")},
		Stdout: &out, Network: true})
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(out.String()) == "1" {
		t.Errorf("a step with network: true sees only loopback")
	}
}
