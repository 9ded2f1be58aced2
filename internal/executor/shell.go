package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// DefaultGrace is the SIGTERM-to-SIGKILL grace used when Step.Grace is zero.
const DefaultGrace = 10 * time.Second

// outputDrain bounds how long Run waits for output after the process group
// is gone. Only a descendant that left the group (setsid) can still hold the
// pipes by then; its output is cut off rather than letting it hold the step.
const outputDrain = 2 * time.Second

// Step is one command to run.
type Step struct {
	// Shell is "sh" (the default), "bash" or "python3", which run Script as a -c string;
	// or "pwsh", "powershell", "cmd" or a command line with {0}, which run it as a file
	// (shelltemplate.go).
	Shell  string
	Script string        // the step's run text
	Env    []string      // full environment, KEY=VALUE; nothing else is inherited
	Dir    string        // working directory (the job's workspace)
	Stdout io.Writer     // receives the process's stdout (nil = discard)
	Stderr io.Writer     // receives the process's stderr (nil = discard)
	Grace  time.Duration // SIGTERM -> SIGKILL grace on cancel or timeout; default 10s
	// Timeout stops the step, as a cancel does (SIGTERM, Grace, SIGKILL), once it has
	// run this long; zero means no limit of its own.
	Timeout time.Duration
	// Network lets a sandboxed step reach the network; the Shell executor ignores it.
	Network bool
	// Binds are directories outside Dir that the step may write, at the same paths (the
	// worker's files for $GANTRY_OUTPUT, $GANTRY_ENV and $GANTRY_PATH). The Shell
	// executor needs nothing for them; the sandbox binds them.
	Binds []string
}

// Result is how a step ended.
type Result struct {
	ExitCode  int    // the process's exit code; -1 when killed by a signal
	Signal    string // the signal name when killed by one (e.g. "terminated", "killed"), else ""
	Cancelled bool   // the context ended before the process did
	TimedOut  bool   // the step ran past Step.Timeout and was stopped
}

// Executor runs steps.
type Executor interface {
	Run(ctx context.Context, s Step) (Result, error)
}

// Shell runs steps as local processes.
type Shell struct {
	// Containment ends whatever a step started, even processes that left its process
	// group, and steps whose worker died; nil ends the process group only.
	Containment *Containment
	// User runs the steps as that user; nil runs them as the worker's user.
	User *User
}

var _ Executor = Shell{}

// Contained says whether every process a step starts ends with the step
// (Containment.EndsAll).
func (s Shell) Contained() bool { return s.Containment.EndsAll() }

// ErrUnknownShell is returned for a Step.Shell that is none of those Step.Shell names.
var ErrUnknownShell = errors.New("unknown shell")

// ErrKillNow, as the cause of a step's context (context.WithCancelCause), kills the
// step at once, without the SIGTERM grace: its worker lost its lease, and another
// attempt of the job may start soon.
var ErrKillNow = errors.New("kill the step at once")

// ShellArgs is the command line that runs script in shell ("sh", "bash", "python3"; ""
// is sh; or one that runs a file, shelltemplate.go) the way every executor runs a step:
// sh and bash stop at the first failing command, bash also at a failing pipe.
func ShellArgs(shell, script string) ([]string, error) {
	return shellArgs(shell, script)
}

func shellArgs(shell, script string) ([]string, error) {
	switch shell {
	case "", "sh":
		return []string{"sh", "-e", "-c", script}, nil
	case "bash":
		return []string{"bash", "-e", "-o", "pipefail", "-c", script}, nil
	case "python3":
		return []string{"python3", "-c", script}, nil
	}
	args, ok, err := templateArgs(shell, script)
	switch {
	case !ok:
		return nil, fmt.Errorf("%w %q", ErrUnknownShell, shell)
	case err != nil:
		return nil, fmt.Errorf("%w: %w", ErrUnknownShell, err)
	}
	return args, nil
}

// Run runs the step and returns how it ended. A non-zero exit is a Result,
// not an error; the error is for a step that could not be started. When Run
// returns, no process of the step's process group is left running, and with a
// Containment no process the step started at all.
func (sh Shell) Run(ctx context.Context, s Step) (Result, error) {
	args, err := shellArgs(s.Shell, s.Script)
	if err != nil {
		return Result{}, err
	}
	return run(ctx, s, args, runOptions{cont: sh.Containment, user: sh.User})
}

// runOptions say how run runs a step.
type runOptions struct {
	cont *Containment // nil: the process group only
	user *User        // nil: the worker's user
	// sandboxed spares bubblewrap's own processes the SIGTERM: bubblewrap dies of it
	// without passing it on, which would cut the step's grace short.
	sandboxed bool
}

// run runs argv as the step's process group leader.
func run(ctx context.Context, s Step, args []string, opt runOptions) (Result, error) {
	grace := s.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}

	cmd := exec.Command(args[0], args[1:]...)
	// A nil Env would inherit ours; the caller owns the whole environment.
	cmd.Env = append([]string{}, s.Env...)
	cmd.Dir = s.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithWorker(cmd.SysProcAttr)
	if opt.user != nil {
		cmd.SysProcAttr.Credential = opt.user.credential()
	}

	// Our own pipes rather than exec's: exec's Wait would block on a
	// background child holding stdout, and we must kill the group as soon as
	// the leader exits, before waiting for output.
	out, err := newOutputs(s.Stdout, s.Stderr)
	if err != nil {
		return Result{}, fmt.Errorf("create output pipes: %w", err)
	}
	cmd.Stdout, cmd.Stderr = out.childStdout, out.childStderr
	scope, err := opt.cont.begin(cmd)
	if err != nil {
		out.abort()
		return Result{}, err
	}

	if err := startLeader(cmd); err != nil {
		out.abort()
		scope.end()
		return Result{}, fmt.Errorf("start %s step: %w", args[0], err)
	}
	pgid := cmd.Process.Pid // Setpgid makes the leader's pid the group id.
	scope.started()
	out.started()

	// exited closes when the leader has exited. Where the platform allows
	// (Linux), the leader is not yet reaped then, so its pid, and with it the
	// group id, cannot be reused while we signal the group.
	exited := make(chan struct{})
	var waitErr error
	go func() {
		defer close(exited)
		waitErr = waitLeader(cmd)
	}()

	var timedOut <-chan time.Time
	if s.Timeout > 0 {
		t := time.NewTimer(s.Timeout)
		defer t.Stop()
		timedOut = t.C
	}
	var res Result
	select {
	case <-exited:
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), ErrKillNow) {
			grace = time.Nanosecond
		}
		res.Cancelled = stop(exited, pgid, scope, grace, opt.sandboxed)
	case <-timedOut:
		res.TimedOut = stop(exited, pgid, scope, grace, opt.sandboxed)
	}
	// The step's leftovers must not outlive it, whether it exited or was
	// stopped: a child that ignored SIGTERM may still be running, and one that
	// left the group (setsid) is only found by the scope.
	killGroup(pgid, syscall.SIGKILL)
	scope.end()

	if !leaderWaitReaps {
		waitErr = cmd.Wait()
	}
	leaderReaped(pgid)
	out.drain(outputDrain)

	ps := cmd.ProcessState
	if ps == nil {
		return res, fmt.Errorf("wait for %s step: %w", args[0], waitErr)
	}
	res.ExitCode = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.ExitCode = -1
		res.Signal = ws.Signal().String()
	}
	return res, nil
}

// stop ends a step that is still running: SIGTERM to its processes, grace, then
// SIGKILL. It reports false when the leader had exited on its own already.
func stop(exited <-chan struct{}, pgid int, scope *scope, grace time.Duration, sandboxed bool) bool {
	select {
	case <-exited:
		return false
	default:
	}
	if sandboxed {
		termSandbox(pgid)
	} else {
		killGroup(pgid, syscall.SIGTERM)
	}
	scope.signal(syscall.SIGTERM, sandboxed)
	timer := time.NewTimer(grace)
	defer timer.Stop()
	select {
	case <-exited:
	case <-timer.C:
		killGroup(pgid, syscall.SIGKILL)
		scope.kill()
		<-exited
	}
	return true
}

// killGroup signals every process in the group. ESRCH means the group is
// already gone, which is what we want; other errors leave nothing to do.
func killGroup(pgid int, sig syscall.Signal) {
	_ = syscall.Kill(-pgid, sig)
}

// outputs connects the child's stdout and stderr to the step's writers
// through pipes that Run owns.
type outputs struct {
	childStdout, childStderr *os.File // write ends, given to the child
	readers                  []*os.File
	finished                 chan struct{} // closed when all copies finish
}

func newOutputs(stdout, stderr io.Writer) (*outputs, error) {
	o := &outputs{finished: make(chan struct{})}
	type conn struct {
		r *os.File
		w io.Writer
	}
	var conns []conn
	pipe := func(w io.Writer) (*os.File, error) {
		if w == nil {
			return nil, nil // exec connects nil to /dev/null
		}
		r, wf, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		conns = append(conns, conn{r, w})
		o.readers = append(o.readers, r)
		return wf, nil
	}
	var err error
	if o.childStdout, err = pipe(stdout); err != nil {
		o.abort()
		return nil, err
	}
	if stderr != nil && sameWriter(stdout, stderr) {
		// One pipe, so the writer is never called concurrently.
		o.childStderr = o.childStdout
	} else if o.childStderr, err = pipe(stderr); err != nil {
		o.abort()
		return nil, err
	}

	done := make(chan struct{}, len(conns))
	for _, c := range conns {
		go func() {
			defer func() { done <- struct{}{} }()
			_, _ = io.Copy(c.w, c.r)
		}()
	}
	go func() {
		defer close(o.finished)
		for range conns {
			<-done
		}
	}()
	return o, nil
}

// sameWriter reports whether a and b are the same writer; writers of
// uncomparable types are treated as different.
func sameWriter(a, b io.Writer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// started closes our copies of the write ends so the readers see EOF once
// every process holding them is gone.
func (o *outputs) started() {
	o.closeWriters()
}

func (o *outputs) closeWriters() {
	if o.childStdout != nil {
		_ = o.childStdout.Close()
	}
	if o.childStderr != nil && o.childStderr != o.childStdout {
		_ = o.childStderr.Close()
	}
}

// abort releases everything when the child never started.
func (o *outputs) abort() {
	o.closeWriters()
	for _, r := range o.readers {
		_ = r.Close()
	}
}

// drain waits up to d for the copies to reach EOF, then cuts them off.
func (o *outputs) drain(d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-o.finished:
	case <-timer.C:
	}
	for _, r := range o.readers {
		_ = r.Close() // unblocks a pending Read
	}
	<-o.finished
}
