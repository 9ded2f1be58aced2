// Package executortest is the conformance suite every executor passes: exit codes, the
// environment, cancel with its grace, the step timeout, and that nothing a step
// started, not even a process that called setsid and forked again, outlives it.
package executortest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
)

// Run runs the suite against the executors newExecutor makes, one per test.
func Run(t *testing.T, newExecutor func(t *testing.T) executor.Executor) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*testing.T, executor.Executor)
	}{
		{"ExitCodes", testExitCodes},
		{"Env", testEnv},
		{"Output", testOutput},
		{"Stdin", testStdin},
		{"CancelGrace", testCancelGrace},
		{"CancelKillsAfterGrace", testCancelKill},
		{"Timeout", testTimeout},
		{"TimeoutNotReached", testTimeoutNotReached},
		{"TreeKilled", testTreeKilled},
		{"TemplatedShell", testTemplatedShell},
		{"TemplatedShellCancelGrace", testTemplatedShellCancelGrace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, newExecutor(t))
		})
	}
}

// SyncBuffer is a bytes.Buffer safe for concurrent use: a process or a step writes to it
// while the test reads it.
type SyncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *SyncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *SyncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Tail returns the last n lines written, after a line saying how many came before.
func (b *SyncBuffer) Tail(n int) string {
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

func pathEnv(extra ...string) []string {
	return append([]string{"PATH=" + os.Getenv("PATH")}, extra...)
}

type outcome struct {
	res  executor.Result
	err  error
	out  string
	took time.Duration
}

// start runs s in the background in a fresh workspace; the returned channel gets how it
// ended.
func start(ctx context.Context, t *testing.T, ex executor.Executor, s executor.Step) (ws string, done <-chan outcome) {
	t.Helper()
	if s.Dir == "" {
		s.Dir = Workspace(t, ex)
	}
	if s.Env == nil {
		s.Env = pathEnv()
	}
	out := &SyncBuffer{}
	s.Stdout, s.Stderr = out, out
	ch := make(chan outcome, 1)
	began := time.Now()
	go func() {
		res, err := ex.Run(ctx, s)
		ch <- outcome{res, err, strings.TrimSpace(out.String()), time.Since(began)}
	}()
	return s.Dir, ch
}

// Workspace makes a fresh workspace for ex's steps as a worker does: in a directory
// every user may pass through (as a step user must to reach it), and given to the
// executor's step user, when it has one, by its PrepareWorkspace.
func Workspace(t *testing.T, ex executor.Executor) string {
	t.Helper()
	ws := t.TempDir()
	// t.TempDir makes both the test's directory and ws 0700.
	for _, dir := range []string{filepath.Dir(ws), ws} {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	if p, ok := ex.(interface{ PrepareWorkspace(string) error }); ok {
		if err := p.PrepareWorkspace(ws); err != nil {
			t.Fatalf("PrepareWorkspace: %v", err)
		}
	}
	return ws
}

func runStep(t *testing.T, ex executor.Executor, s executor.Step) outcome {
	t.Helper()
	_, done := start(t.Context(), t, ex, s)
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("Run: %v", o.err)
		}
		return o
	case <-time.After(30 * time.Second):
		t.Fatal("the step did not end")
	}
	return outcome{}
}

// WorkspaceReader is an executor whose steps' workspace is not the worker's directory
// (the kubernetes executor's pods have a copy of their own): the suite reads what a
// step wrote there through it.
type WorkspaceReader interface {
	ReadWorkspaceFile(ctx context.Context, ws, name string) ([]byte, error)
}

// waitFile waits until the step has written name in its workspace ws.
func waitFile(t *testing.T, ex executor.Executor, ws, name string, done <-chan outcome) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	read := func() ([]byte, error) { return os.ReadFile(filepath.Join(ws, name)) }
	poll := 10 * time.Millisecond
	if r, ok := ex.(WorkspaceReader); ok {
		read = func() ([]byte, error) { return r.ReadWorkspaceFile(t.Context(), ws, name) }
		poll = 100 * time.Millisecond
	}
	for {
		if b, err := read(); err == nil && len(b) > 0 && bytes.HasSuffix(b, []byte("\n")) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the step did not write %s", name)
		}
		select {
		case o := <-done:
			t.Fatalf("the step ended before writing %s: %+v %v, output %q", name, o.res, o.err, o.out)
		case <-time.After(poll):
		}
	}
}

func wait(t *testing.T, done <-chan outcome, within time.Duration) outcome {
	t.Helper()
	select {
	case o := <-done:
		if o.err != nil {
			t.Fatalf("Run: %v", o.err)
		}
		return o
	case <-time.After(within):
		t.Fatalf("Run did not return within %s", within)
	}
	return outcome{}
}

func testExitCodes(t *testing.T, ex executor.Executor) {
	for _, tt := range []struct {
		shell, script string
		want          int
	}{
		{"", "exit 0", 0},
		{"", "exit 3", 3},
		{"sh", "false\nexit 0", 1},
		{"bash", "false | true\nexit 0", 1},
		{"bash", "exit 42", 42},
	} {
		o := runStep(t, ex, executor.Step{Shell: tt.shell, Script: tt.script})
		if o.res.ExitCode != tt.want || o.res.Cancelled || o.res.TimedOut || o.res.Signal != "" {
			t.Errorf("%s %q: %+v, want exit code %d", tt.shell, tt.script, o.res, tt.want)
		}
	}
}

func testEnv(t *testing.T, ex executor.Executor) {
	// Set in the test process to prove a step does not inherit the executor's
	// environment. Not t.Setenv: the suite runs in parallel.
	const leak = "GANTRY_EXECUTORTEST_LEAK"
	_ = os.Setenv(leak, "leaked")
	o := runStep(t, ex, executor.Step{Script: `echo "foo=$FOO leak=${` + leak + `-unset}"`, Env: pathEnv("FOO=bar baz")})
	if o.res.ExitCode != 0 || o.out != "foo=bar baz leak=unset" {
		t.Errorf("exit %d, output %q; want the given env only", o.res.ExitCode, o.out)
	}
}

func testOutput(t *testing.T, ex executor.Executor) {
	o := runStep(t, ex, executor.Step{Script: "echo out; echo err >&2; pwd -P > where"})
	if o.res.ExitCode != 0 || o.out != "out\nerr" {
		t.Errorf("exit %d, output %q", o.res.ExitCode, o.out)
	}
}

// testStdin: a step's stdin is empty (what the executor uses to talk to the step, if
// anything, is not it): a step that reads it gets end of file at once.
func testStdin(t *testing.T, ex executor.Executor) {
	o := runStep(t, ex, executor.Step{Script: `if read -r line; then echo "read: $line"; else echo "eof"; fi; cat; echo done`})
	if o.res.ExitCode != 0 || o.out != "eof\ndone" {
		t.Errorf("a step reading stdin: exit %d, output %q; want end of file at once", o.res.ExitCode, o.out)
	}
}

// testTemplatedShell: a shell with {0} runs the script from a file whose path takes the
// place of {0}, with the command's exit code; a program the environment lacks fails the
// step with 127, naming it.
func testTemplatedShell(t *testing.T, ex executor.Executor) {
	o := runStep(t, ex, executor.Step{Shell: `sh -c '. "$1"' template-arg {0}`, Script: `echo "from $1"; exit 5`})
	if o.res.ExitCode != 5 || !strings.HasPrefix(o.out, "from /") || !strings.Contains(o.out, "/gantry-step.") {
		t.Errorf("templated shell: %+v, output %q; want exit 5 and the script's file path", o.res, o.out)
	}
	o = runStep(t, ex, executor.Step{Shell: "gantry-no-such-shell --flag {0}", Script: "true"})
	if o.res.ExitCode != 127 || !strings.Contains(o.out, `shell "gantry-no-such-shell --flag {0}": gantry-no-such-shell is not installed here`) {
		t.Errorf("missing shell program: %+v, output %q; want exit 127 naming it", o.res, o.out)
	}
}

// testTemplatedShellCancelGrace: a cancelled step of a templated shell gets its grace, as
// any step does, and its own exit code is kept.
func testTemplatedShellCancelGrace(t *testing.T, ex executor.Executor) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ws, done := start(ctx, t, ex, executor.Step{Grace: 10 * time.Second, Shell: "sh -e {0}",
		Script: "trap 'echo cleaning up; exit 7' TERM\necho go > ready\nwhile :; do sleep 0.05 || :; done"})
	waitFile(t, ex, ws, "ready", done)
	cancel()
	o := wait(t, done, 8*time.Second)
	if !o.res.Cancelled || o.res.ExitCode != 7 || !strings.Contains(o.out, "cleaning up") {
		t.Errorf("cancelled templated step: %+v, output %q; want Cancelled, exit 7 from its TERM handler", o.res, o.out)
	}
}

// testCancelGrace: a step that handles SIGTERM gets to finish its handler within the
// grace, and its own exit code is kept.
func testCancelGrace(t *testing.T, ex executor.Executor) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ws, done := start(ctx, t, ex, executor.Step{Grace: 10 * time.Second,
		// "|| :": under sh -e, a sleep that dies of the SIGTERM too would otherwise end
		// the script before its trap runs.
		Script: "trap 'echo cleaning up; exit 7' TERM\necho go > ready\nwhile :; do sleep 0.05 || :; done"})
	waitFile(t, ex, ws, "ready", done)
	cancel()
	o := wait(t, done, 8*time.Second)
	if !o.res.Cancelled || o.res.TimedOut || o.res.ExitCode != 7 || !strings.Contains(o.out, "cleaning up") {
		t.Errorf("cancelled step: %+v, output %q; want Cancelled, exit 7 from its TERM handler", o.res, o.out)
	}
}

// testCancelKill: a step that ignores SIGTERM is killed once the grace is over.
func testCancelKill(t *testing.T, ex executor.Executor) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ws, done := start(ctx, t, ex, executor.Step{Grace: 300 * time.Millisecond,
		Script: "trap '' TERM\necho go > ready\nwhile :; do sleep 0.05; done"})
	waitFile(t, ex, ws, "ready", done)
	cancel()
	o := wait(t, done, 30*time.Second)
	if !o.res.Cancelled || o.res.ExitCode == 0 {
		t.Errorf("cancelled step that ignores SIGTERM: %+v; want Cancelled and not exit 0", o.res)
	}
}

func testTimeout(t *testing.T, ex executor.Executor) {
	o := runStep(t, ex, executor.Step{Timeout: 500 * time.Millisecond, Grace: 300 * time.Millisecond,
		Script: "trap '' TERM\nwhile :; do sleep 0.05; done"})
	if !o.res.TimedOut || o.res.Cancelled || o.res.ExitCode == 0 {
		t.Errorf("step past its timeout: %+v; want TimedOut", o.res)
	}
	// The script never ends of itself, so its end is the timeout's doing; runStep's own
	// bound (30 s) fails an executor that never enforces it. A tighter bound here only
	// timed the machine: a pod's exec on a loaded machine took 8.7 s.
	if o.took < 500*time.Millisecond {
		t.Errorf("a step with a 500ms timeout and 300ms grace took %s", o.took)
	}
}

func testTimeoutNotReached(t *testing.T, ex executor.Executor) {
	o := runStep(t, ex, executor.Step{Timeout: time.Minute, Script: "exit 4"})
	if o.res.TimedOut || o.res.ExitCode != 4 {
		t.Errorf("step within its timeout: %+v; want exit 4", o.res)
	}
}

// testTreeKilled: whether a step exits, is cancelled or times out, nothing it started
// is left running: not a background child, not a process that called setsid and forked
// again so that it left the step's process group and lost its parent.
func testTreeKilled(t *testing.T, ex executor.Executor) {
	for _, end := range []string{"exits", "cancelled", "timed out"} {
		t.Run(end, func(t *testing.T) {
			t.Parallel()
			token := Token(t)
			// Both sleeps carry the token in their arguments, so they are found from
			// the host even inside a pid namespace.
			script := fmt.Sprintf(`setsid sh -c 'sleep 1%[1]s & echo $! > escaped' &
sleep 2%[1]s &
while [ ! -s escaped ]; do sleep 0.01; done
echo go > ready
`, token)
			s := executor.Step{Script: script, Grace: 300 * time.Millisecond}
			switch end {
			case "cancelled":
				s.Script += "while :; do sleep 0.05; done\n"
			case "timed out":
				s.Script += "while :; do sleep 0.05; done\n"
				// Long enough for an executor whose workspace is read through an exec (pods).
				s.Timeout = 5 * time.Second
			}
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			ws, done := start(ctx, t, ex, s)
			if end != "exits" {
				waitFile(t, ex, ws, "ready", done)
				if n := len(Processes(token)); n < 2 {
					t.Fatalf("%d processes carry the token while the step runs, want 2 or more", n)
				}
			}
			if end == "cancelled" {
				cancel()
			}
			o := wait(t, done, 15*time.Second)
			switch {
			case end == "exits" && (o.res.ExitCode != 0 || o.res.Cancelled || o.res.TimedOut):
				t.Errorf("result %+v, output %q; want exit 0", o.res, o.out)
			case end == "cancelled" && !o.res.Cancelled:
				t.Errorf("result %+v; want Cancelled", o.res)
			case end == "timed out" && !o.res.TimedOut:
				t.Errorf("result %+v; want TimedOut", o.res)
			}
			if left := Processes(token); len(left) > 0 {
				t.Errorf("after Run returned, the step's processes are still running: %v", left)
			}
		})
	}
}

// Token returns a number unique to the test, for a step to put in the arguments of its
// processes ("sleep 1<token>") so that Processes finds them.
func Token(t *testing.T) string {
	t.Helper()
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	// "000." and digits: sleep reads it as a long time, not as an error.
	return fmt.Sprintf("000.%012d", binary.BigEndian.Uint64(b[:])%1e12)
}

// Processes lists the live (not zombie) processes whose command line contains token,
// as "pid: cmdline".
func Processes(token string) []string {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		panic(fmt.Sprintf("executortest needs /proc: %v", err))
	}
	var out []string
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(token)) {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		if i := bytes.LastIndexByte(stat, ')'); i > 0 && len(stat) > i+2 && stat[i+2] == 'Z' {
			continue
		}
		out = append(out, e.Name()+": "+strings.ReplaceAll(string(bytes.TrimRight(cmdline, "\x00")), "\x00", " "))
	}
	return out
}
