package executor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
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
		// Fail rather than skip, so a missing tool never passes for a working sandbox.
		t.Fatal("bwrap is not installed: install bubblewrap (.ci/run does)")
	}
}

// workspace makes a fresh workspace for ex's steps as a worker does: in a directory every
// user may pass through, given to its step user (a root worker's sandbox has one).
func workspace(t *testing.T, ex Executor) string {
	t.Helper()
	ws := t.TempDir()
	for _, dir := range []string{filepath.Dir(ws), ws} {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if p, ok := ex.(interface{ PrepareWorkspace(string) error }); ok {
		if err := p.PrepareWorkspace(ws); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// runStep runs s with ex and returns its trimmed combined output; s.Env defaults to
// pathEnv() and s.Dir to a fresh workspace.
func runStep(t *testing.T, ex Executor, s Step) (string, Result) {
	t.Helper()
	if s.Env == nil {
		s.Env = pathEnv()
	}
	if s.Dir == "" {
		s.Dir = workspace(t, ex)
	}
	var out bytes.Buffer
	s.Stdout, s.Stderr = &out, &out
	res, err := ex.Run(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out.String()), res
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
		{"sandbox root is read-only", "touch /gantry-sandbox-test 2>/dev/null && echo wrote || echo refused", false, "refused", 0},
		{"private tmp", "echo x > /tmp/private && cat /tmp/private", false, "x", 0},
		{"var tmp is the private tmp", "echo v > /var/tmp/private && cat /tmp/private", false, "v", 0},
		{"own pid namespace", "echo $$", false, "2", 0},
		// Only bubblewrap's init and the shell: none of the host's processes.
		{"pid namespace holds only the step", "echo /proc/[0-9]*", false, "/proc/1 /proc/2", 0},
		{"host pids are not visible", fmt.Sprintf("test -e /proc/%d && echo visible || echo hidden", os.Getpid()), false, "hidden", 0},
		{"pid 1 is bubblewrap", `case "$(tr '\0' ' ' </proc/1/cmdline)" in *bwrap*) echo bwrap;; *) echo other;; esac`, false, "bwrap", 0},
		{"no capabilities", "grep CapEff /proc/self/status", false, "CapEff:\t0000000000000000", 0},
		{"private host directories are absent",
			"for d in /root /home /run /var/run /var/lib /srv /mnt /media; do test -e $d && echo $d; done; echo none", false, "none", 0},
		{"secrets under /etc are masked", "test -s /etc/shadow && echo visible || echo masked", false, "masked", 0},
		{"system directories are there", "test -x /bin/sh && test -d /usr/bin && test -d /etc && echo ok", false, "ok", 0},
		// In its own network namespace a step sees only the loopback interface.
		{"no network by default", "grep -c : /proc/net/dev", false, "1", 0},
		{"exit code", "exit 5", false, "", 5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			out, res := runStep(t, Sandbox{}, Step{Script: tt.script, Network: tt.network})
			if res.ExitCode != tt.code || out != tt.want {
				t.Errorf("exit %d output %q; want %d %q", res.ExitCode, out, tt.code, tt.want)
			}
		})
	}
	for _, p := range []string{"/usr/gantry-sandbox-test", "/gantry-sandbox-test"} {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("a sandboxed step wrote %s on the host", p)
		}
	}
}

// TestSandboxHidesRoot shows that a file the shell executor can read in the host's
// /root is not there in the sandbox, and that a workspace under /root still is.
func TestSandboxHidesRoot(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	f, err := os.CreateTemp("/root", "gantry-sandbox-secret-*")
	if err != nil {
		t.Skipf("/root is not writable: %v", err)
	}
	t.Cleanup(func() { _ = os.Remove(f.Name()) })
	if _, err := f.WriteString("secret\n"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	script := "cat " + f.Name() + " 2>/dev/null || echo unreadable"
	if out, _ := runStep(t, Shell{}, Step{Script: script}); out != "secret" {
		t.Fatalf("shell executor read %q, want %q", out, "secret")
	}
	if out, _ := runStep(t, Sandbox{}, Step{Script: script}); out != "unreadable" {
		t.Errorf("sandboxed step read %q from the host's /root, want %q", out, "unreadable")
	}

	// A root worker's steps run as nobody, who cannot pass through /root (mode 0700) to
	// a workspace there: the sandbox says so rather than run the step.
	ws, err := os.MkdirTemp("/root", "gantry-sandbox-ws-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(ws) })
	sb := Sandbox{}
	if err := sb.PrepareWorkspace(ws); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat("/root"); err != nil || st.Mode().Perm()&0o001 != 0 {
		t.Skipf("/root is %v, %v: others may pass through it", st.Mode(), err)
	}
	_, err = sb.Run(t.Context(), Step{Script: "true", Dir: ws, Env: pathEnv()})
	if err == nil || !strings.Contains(err.Error(), "cannot reach "+ws) {
		t.Errorf("a step in a workspace under /root: %v; want an error saying the step user cannot reach it", err)
	}
}

// TestSandboxRootOnlyFiles: the steps of a worker that runs as root run as an
// unprivileged user in the sandbox, so the files only root may read, which the sandbox's
// read-only /etc still holds (the secrets key under /etc/gantry, the engine's
// /etc/docker/key.json), are not theirs to read, as they are a shell step's. A sandbox
// told to run steps as root refuses.
func TestSandboxRootOnlyFiles(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	if os.Geteuid() != 0 {
		t.Fatal("a root worker's steps need root: run the tests as root")
	}
	nobody, err := LookupUser(DefaultSandboxUser)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("/etc", "gantry-sandbox-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	key := filepath.Join(dir, "secrets.key")
	if err := os.WriteFile(key, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// Readable on the way there: only the file's own mode keeps it.
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	files := []string{key}
	if _, err := os.Stat("/etc/docker/key.json"); err == nil {
		files = append(files, "/etc/docker/key.json")
	}
	script := "id -u"
	for _, f := range files {
		script += fmt.Sprintf("; cat %s >/dev/null 2>&1 && echo read %s || echo denied %s", f, f, f)
	}
	for _, tc := range []struct {
		name string
		ex   Executor
		want string
	}{
		{"shell", Shell{}, "0"},
		{"sandbox", Sandbox{}, fmt.Sprint(nobody.UID)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, res := runStep(t, tc.ex, Step{Script: script})
			want := []string{tc.want}
			for _, f := range files {
				if tc.name == "shell" {
					want = append(want, "read "+f)
				} else {
					want = append(want, "denied "+f)
				}
			}
			if res.ExitCode != 0 || out != strings.Join(want, "\n") {
				t.Errorf("exit %d, output %q; want %q", res.ExitCode, out, strings.Join(want, "\n"))
			}
		})
	}
	root := &User{Name: "root"}
	if _, err := (Sandbox{User: root}).Run(t.Context(), Step{Script: "true", Dir: t.TempDir(), Env: pathEnv()}); !errors.Is(err, ErrSandboxRoot) {
		t.Errorf("a sandbox told to run steps as root: %v, want %v", err, ErrSandboxRoot)
	}
}

// TestSandboxFiles shows that what a step writes in its workspace reaches the host,
// and that its /tmp and the host's /tmp do not see each other.
func TestSandboxFiles(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	host, err := os.CreateTemp("/tmp", "gantry-sandbox-host-*")
	if err != nil {
		t.Fatal(err)
	}
	_ = host.Close()
	t.Cleanup(func() { _ = os.Remove(host.Name()) })
	inside := filepath.Join("/tmp", "gantry-sandbox-inside-"+filepath.Base(host.Name()))
	t.Cleanup(func() { _ = os.Remove(inside) })

	ws := workspace(t, Sandbox{})
	script := fmt.Sprintf("echo out > result; touch %s; test -e %s && echo host-tmp-visible || echo ok", inside, host.Name())
	out, res := runStep(t, Sandbox{}, Step{Script: script, Dir: ws})
	if res.ExitCode != 0 || out != "ok" {
		t.Errorf("exit %d output %q; want 0 %q", res.ExitCode, out, "ok")
	}
	if b, err := os.ReadFile(filepath.Join(ws, "result")); err != nil || string(b) != "out\n" {
		t.Errorf("workspace file on the host: %q, %v; want %q", b, err, "out\n")
	}
	if _, err := os.Stat(inside); err == nil {
		t.Errorf("the step's /tmp/%s appeared in the host's /tmp", filepath.Base(inside))
	}
}

// TestSandboxLoopback shows that without Network a step cannot reach a port on the
// host's loopback, and with it can.
func TestSandboxLoopback(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	port := ln.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf("if (exec 3<>/dev/tcp/127.0.0.1/%d) 2>/dev/null; then echo connected; else echo refused; fi", port)
	for _, tt := range []struct {
		network bool
		want    string
	}{{false, "refused"}, {true, "connected"}} {
		t.Run(fmt.Sprintf("network=%v", tt.network), func(t *testing.T) {
			t.Parallel()
			if out, _ := runStep(t, Sandbox{}, Step{Shell: "bash", Script: script, Network: tt.network}); out != tt.want {
				t.Errorf("output %q, want %q", out, tt.want)
			}
		})
	}
}

func TestSandboxEnv(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	ws := workspace(t, Sandbox{})
	tests := []struct {
		name string
		env  []string
		want string
	}{
		{"hidden home moves to tmp", pathEnv("HOME=/root", "TMPDIR=/root/tmp"), "/tmp/home /tmp"},
		{"home in the workspace stays", pathEnv("HOME="+ws, "TMPDIR="+ws), ws + " " + ws},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The steps share ws, so they run one after the other.
			script := `cd && touch "$HOME/.probe" && touch "$TMPDIR/.probe" && echo "$HOME $TMPDIR"`
			out, res := runStep(t, Sandbox{}, Step{Script: script, Dir: ws, Env: tt.env})
			if res.ExitCode != 0 || out != tt.want {
				t.Errorf("exit %d output %q; want 0 %q", res.ExitCode, out, tt.want)
			}
		})
	}
}

// TestSandboxTools shows that a toolchain installed under /usr or /opt still runs.
func TestSandboxTools(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	goBin, err := exec.LookPath("go")
	if err != nil || !inSandboxDirs(goBin) {
		t.Skipf("no go under %v: %q, %v", sandboxDirs, goBin, err)
	}
	out, res := runStep(t, Sandbox{}, Step{Script: goBin + " version"})
	if res.ExitCode != 0 || !strings.HasPrefix(out, "go version go") {
		t.Errorf("exit %d output %q; want go's version", res.ExitCode, out)
	}
}

func TestSandboxNoBwrap(t *testing.T) {
	// Not parallel: it changes the process's PATH, where Run looks for bwrap.
	t.Setenv("PATH", t.TempDir())
	_, err := Sandbox{}.Run(t.Context(), Step{Script: "true", Dir: t.TempDir()})
	if !errors.Is(err, ErrNoSandbox) {
		t.Errorf("Run without bwrap on PATH: %v, want %v", err, ErrNoSandbox)
	}
}

func TestSandboxEnvRewrite(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     []string
		want    []string
		newHome bool
	}{
		{"outside the workspace", []string{"A=1", "HOME=/root", "TMPDIR=/var/tmp/x"}, []string{"A=1", "HOME=/tmp/home", "TMPDIR=/tmp"}, true},
		{"inside the workspace", []string{"HOME=/w/s/h", "TMPDIR=/w/s"}, []string{"HOME=/w/s/h", "TMPDIR=/w/s"}, false},
		{"a sibling with a common prefix", []string{"HOME=/w/sx"}, []string{"HOME=/tmp/home"}, true},
		{"relative", []string{"HOME=s"}, []string{"HOME=/tmp/home"}, true},
		{"unset", []string{"A=1"}, []string{"A=1"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, newHome := sandboxEnv(tt.env, "/w/s")
			if fmt.Sprint(got) != fmt.Sprint(tt.want) || newHome != tt.newHome {
				t.Errorf("sandboxEnv(%q) = %q, %v; want %q, %v", tt.env, got, newHome, tt.want, tt.newHome)
			}
		})
	}
}

func TestSandboxCancel(t *testing.T) {
	t.Parallel()
	needBwrap(t)
	ws := workspace(t, Sandbox{})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan Result, 1)
	go func() {
		res, _ := Sandbox{}.Run(ctx, Step{Script: "touch started; sleep 120", Dir: ws, Env: pathEnv(), Grace: 200 * time.Millisecond})
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
	out, _ := runStep(t, Sandbox{}, Step{Script: "grep -c : /proc/net/dev", Network: true})
	if out == "1" {
		t.Errorf("a step with network: true sees only loopback")
	}
}
