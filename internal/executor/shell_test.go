package executor

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// syncBuffer is a writer safe for concurrent use that signals when a line
// starting with "pgid " arrives, so tests can wait for a step to start.
type syncBuffer struct {
	mu      sync.Mutex
	buf     bytes.Buffer
	once    sync.Once
	started chan int // receives the pgid from the marker line
}

func newSyncBuffer() *syncBuffer { return &syncBuffer{started: make(chan int, 1)} }

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.buf.Write(p)
	for _, line := range strings.Split(b.buf.String(), "\n") {
		rest, ok := strings.CutPrefix(line, "pgid ")
		if !ok {
			continue
		}
		if pgid, err := strconv.Atoi(strings.TrimSpace(rest)); err == nil && strings.Contains(b.buf.String(), line+"\n") {
			b.once.Do(func() { b.started <- pgid })
		}
	}
	return n, err
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// pathEnv is the minimal environment a step needs to find its programs.
func pathEnv(extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH")}, extra...)
}

func TestShellExitCodes(t *testing.T) {
	t.Parallel()
	_, pyErr := exec.LookPath("python3")
	tests := []struct {
		name   string
		shell  string
		script string
		want   int
		needPy bool
	}{
		{name: "exit 0", script: "exit 0", want: 0},
		{name: "exit 3", script: "exit 3", want: 3},
		{name: "sh -e stops at false", script: "false\nexit 0", want: 1},
		{name: "default shell is sh", shell: "sh", script: "exit 5", want: 5},
		{name: "bash pipefail", shell: "bash", script: "false | true\nexit 0", want: 1},
		{name: "bash ok", shell: "bash", script: "true | true", want: 0},
		{name: "python3 exit", shell: "python3", script: "import sys; sys.exit(4)", want: 4, needPy: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.needPy && pyErr != nil {
				t.Skip("python3 not on PATH")
			}
			res, err := Shell{}.Run(t.Context(), Step{Shell: tt.shell, Script: tt.script, Env: pathEnv(), Dir: t.TempDir()})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.ExitCode != tt.want || res.Signal != "" || res.Cancelled {
				t.Errorf("Run = %+v, want ExitCode %d", res, tt.want)
			}
		})
	}
}

func TestShellIO(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	realDir, err := filepath.EvalSymlinks(dir)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name       string
		step       Step
		wantStdout string
		wantStderr string
	}{
		{
			name:       "stdout and stderr are separate",
			step:       Step{Script: "echo out; echo err >&2"},
			wantStdout: "out\n",
			wantStderr: "err\n",
		},
		{
			name:       "env is only what is given",
			step:       Step{Script: `echo "foo=$FOO"; echo "home=${HOME-unset}"; echo "leak=${GANTRY_EXECUTOR_TEST_LEAK-unset}"`, Env: []string{"FOO=bar"}},
			wantStdout: "foo=bar\nhome=unset\nleak=unset\n",
		},
		{
			name:       "dir",
			step:       Step{Script: "pwd -P", Dir: dir},
			wantStdout: realDir + "\n",
		},
		{
			name:       "bash",
			step:       Step{Shell: "bash", Script: `echo "${BASH_VERSION:+bash}"`, Env: pathEnv()},
			wantStdout: "bash\n",
		},
	}
	// Set in our environment to prove the step does not inherit it.
	if err := os.Setenv("GANTRY_EXECUTOR_TEST_LEAK", "leaked"); err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stdout, stderr syncBuffer
			step := tt.step
			step.Stdout, step.Stderr = &stdout, &stderr
			res, err := Shell{}.Run(t.Context(), step)
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if res.ExitCode != 0 {
				t.Errorf("ExitCode = %d, stderr %q", res.ExitCode, stderr.String())
			}
			if got := stdout.String(); got != tt.wantStdout {
				t.Errorf("stdout = %q, want %q", got, tt.wantStdout)
			}
			if got := stderr.String(); got != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", got, tt.wantStderr)
			}
		})
	}
}

func TestShellSameWriter(t *testing.T) {
	t.Parallel()
	var out syncBuffer
	_, err := Shell{}.Run(t.Context(), Step{Script: "echo a; echo b >&2; echo c", Stdout: &out, Stderr: &out})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if got := out.String(); got != "a\nb\nc\n" {
		t.Errorf("output = %q", got)
	}
}

func TestShellStartErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		step    Step
		wantErr error
	}{
		{name: "unknown shell", step: Step{Shell: "fish", Script: "true"}, wantErr: ErrUnknownShell},
		{name: "unclosed quote", step: Step{Shell: "bash '{0}", Script: "true"}, wantErr: ErrUnknownShell},
		{name: "nothing before {0}", step: Step{Shell: "{0} x", Script: "true"}, wantErr: ErrUnknownShell},
		{name: "missing dir", step: Step{Script: "true", Dir: filepath.Join(os.TempDir(), "gantry-executor-no-such-dir")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Shell{}.Run(t.Context(), tt.step)
			if err == nil {
				t.Fatal("Run succeeded, want error")
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Run error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// waitGroupGone polls until no process of the group is alive: kill(-pgid, 0)
// fails with ESRCH, or, where /proc shows them, every member left is a
// zombie. A killed orphan stays a zombie until init reaps it, and some
// container inits reap late or never; a zombie runs nothing.
func waitGroupGone(t *testing.T, pgid int) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		err := syscall.Kill(-pgid, 0)
		if errors.Is(err, syscall.ESRCH) {
			return
		}
		live, known := liveMembers(pgid)
		if known && len(live) == 0 {
			return
		}
		select {
		case <-deadline:
			t.Fatalf("process group %d still exists (kill 0: %v); live members %v", pgid, err, live)
		case <-tick.C:
		}
	}
}

// liveMembers lists the non-zombie processes of the group from /proc;
// known is false where /proc is not available.
func liveMembers(pgid int) (live []string, known bool) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		return nil, false
	}
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, false
	}
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited while we looked
		}
		// Fields after "(comm) ": state ppid pgrp ...
		s := string(b)
		end := strings.LastIndexByte(s, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(s[end+1:])
		if len(f) < 3 || f[2] != strconv.Itoa(pgid) || f[0] == "Z" {
			continue
		}
		live = append(live, s[:end+1])
	}
	return live, true
}

type runResult struct {
	res Result
	err error
}

func TestShellCancel(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		script     string
		wantSignal string // "" = either "terminated" or exit 143
	}{
		{
			name:       "children ignore SIGTERM",
			script:     "trap '' TERM\necho \"pgid $$\"\nsleep 60 &\nsleep 60 &\nwait",
			wantSignal: "killed",
		},
		{
			name:   "double fork ignores SIGTERM",
			script: "echo \"pgid $$\"\n(sh -c 'trap \"\" TERM; sleep 60' &) ; sleep 60",
		},
		{
			name:   "exits on SIGTERM",
			script: "echo \"pgid $$\"\nsleep 60",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			stdout := newSyncBuffer()
			done := make(chan runResult, 1)
			go func() {
				res, err := Shell{}.Run(ctx, Step{Script: tt.script, Env: pathEnv(), Stdout: stdout, Grace: 200 * time.Millisecond})
				done <- runResult{res, err}
			}()

			var pgid int
			select {
			case pgid = <-stdout.started:
			case r := <-done:
				t.Fatalf("Run returned before the step started: %+v, %v", r.res, r.err)
			case <-time.After(10 * time.Second):
				t.Fatal("step did not start")
			}
			cancel()

			var r runResult
			select {
			case r = <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("Run did not return after cancel")
			}
			if r.err != nil {
				t.Fatalf("Run: %v", r.err)
			}
			if !r.res.Cancelled {
				t.Errorf("Cancelled = false, result %+v", r.res)
			}
			switch tt.wantSignal {
			case "":
				if r.res.Signal != "terminated" && r.res.ExitCode != 143 {
					t.Errorf("result %+v, want Signal terminated or ExitCode 143", r.res)
				}
			default:
				if r.res.Signal != tt.wantSignal || r.res.ExitCode != -1 {
					t.Errorf("result %+v, want Signal %q, ExitCode -1", r.res, tt.wantSignal)
				}
			}
			waitGroupGone(t, pgid)
		})
	}
}

func TestShellKillsLeftovers(t *testing.T) {
	t.Parallel()
	stdout := newSyncBuffer()
	done := make(chan runResult, 1)
	go func() {
		res, err := Shell{}.Run(t.Context(), Step{Script: "echo \"pgid $$\"\nsleep 60 &\necho done", Env: pathEnv(), Stdout: stdout})
		done <- runResult{res, err}
	}()
	var r runResult
	select {
	case r = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after the step exited")
	}
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	if r.res != (Result{}) {
		t.Errorf("result %+v, want exit 0", r.res)
	}
	if !strings.HasSuffix(stdout.String(), "done\n") {
		t.Errorf("stdout = %q", stdout.String())
	}
	var pgid int
	select {
	case pgid = <-stdout.started:
	default:
		t.Fatalf("no pgid marker in %q", stdout.String())
	}
	waitGroupGone(t, pgid)
}

func TestShellWords(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		want []string
	}{
		{"msys2 {0}", []string{"msys2", "{0}"}},
		{`D:\cygwin\bin\bash.exe '{0}'`, []string{`D:\cygwin\bin\bash.exe`, "{0}"}},
		{`pwsh -command ". '{0}'"`, []string{"pwsh", "-command", ". '{0}'"}},
		{"  perl\t-w  {0} ", []string{"perl", "-w", "{0}"}},
		{`sh -c 'a "b" c' x{0}y`, []string{"sh", "-c", `a "b" c`, "x{0}y"}},
		{`a '' b`, []string{"a", "", "b"}},
	}
	for _, tt := range tests {
		got, err := ShellWords(tt.in)
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("ShellWords(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// TestKnownShellFiles: pwsh, powershell and cmd run the script from a file with GitHub's
// extension, pwsh and powershell with the lines GitHub's runner puts around it.
func TestKnownShellFiles(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ shell, ext, program, before string }{
		{"pwsh", ".ps1", "pwsh", "$ErrorActionPreference = 'stop'\n"},
		{"powershell", ".ps1", "powershell", "$ErrorActionPreference = 'stop'\n"},
		{"cmd", ".cmd", "cmd", ""},
		{"perl {0}", "", "perl", ""},
	} {
		args, err := ShellArgs(tt.shell, "echo hi")
		if err != nil {
			t.Fatalf("%s: %v", tt.shell, err)
		}
		// sh -c WRAPPER sh SHELL EXT SCRIPT PROGRAM ARGS...
		if len(args) < 8 || args[0] != "sh" || args[4] != tt.shell || args[5] != tt.ext || args[7] != tt.program ||
			!strings.HasPrefix(args[6], tt.before+"echo hi") {
			t.Errorf("%s: %q", tt.shell, args)
		}
	}
}
