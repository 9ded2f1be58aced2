package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/cli"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// Environment that turns the test binary into a `gantry` process, so that the suite can
// SIGKILL a real coordinator or worker: a goroutine cannot be killed mid-write.
const (
	childEnv     = "GANTRY_CHAOS_CHILD"
	childArgsEnv = "GANTRY_CHAOS_ARGS" // newline-separated arguments to cli.Run
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) == "1" {
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		code := cli.Run(ctx, strings.Split(os.Getenv(childArgsEnv), "\n"), os.Stdin, os.Stdout, os.Stderr)
		stop()
		os.Exit(code)
	}
	testdb.Main(m)
}

var (
	// listening finds the address in the server's JSON "listening" record.
	listening = regexp.MustCompile(`"msg":"gantry server listening","addr":"([^"]+)"`)
	// registered finds the worker id in a worker's JSON "worker registered" record.
	registered = regexp.MustCompile(`"msg":"worker registered","worker":"([^"]+)"`)
)

// proc is one incarnation of a `gantry` child process, leader of its own process group.
type proc struct {
	name     string // coordinator#1, w2#3
	cmd      *exec.Cmd
	out      *executortest.SyncBuffer
	exited   chan struct{} // closed once the process has exited and been waited for
	started  time.Time
	killedAt time.Time // zero unless the suite killed it
}

// startProc re-executes the test binary as `gantry <args>` with env added to the test's
// environment. The process group is killed when t ends, if it is still running.
func startProc(t testing.TB, name string, args, env []string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// Later entries win over earlier duplicates, so env overrides the test's own.
	cmd.Env = append(append(os.Environ(), childEnv+"=1", childArgsEnv+"="+strings.Join(args, "\n")), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{name: name, cmd: cmd, out: &executortest.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout = p.out
	cmd.Stderr = p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p.started = time.Now()
	go func() {
		// Only this goroutine waits; the others learn of the exit through exited.
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if err := p.kill(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// kill SIGKILLs the process group and waits until the leader is gone. ESRCH (the group
// is already gone) is not an error.
func (p *proc) kill() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s (pid %d): %w", p.name, p.cmd.Process.Pid, err)
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(20 * time.Second):
		return fmt.Errorf("%s (pid %d) did not exit after SIGKILL", p.name, p.cmd.Process.Pid)
	}
}

// waitFor polls the process's output for re until it matches, the process exits or the
// deadline passes.
func (p *proc) waitFor(re *regexp.Regexp, within time.Duration) (string, error) {
	deadline := time.After(within)
	for {
		if m := re.FindStringSubmatch(p.out.String()); m != nil {
			return m[1], nil
		}
		select {
		case <-p.exited:
			return "", fmt.Errorf("%s exited (%v) before logging %q", p.name, p.cmd.ProcessState, re)
		case <-deadline:
			return "", fmt.Errorf("%s did not log %q within %s", p.name, re, within)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// freeAddr returns a loopback address with a port free now, so that a restarted
// coordinator can listen where the workers already point.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	return addr
}

// coordinator is the `gantry server`, restarted on the same database and address.
type coordinator struct {
	t      testing.TB
	addr   string
	db     string
	extra  []string
	all    []*proc
	cur    *proc
	leases time.Duration
}

// start starts a new incarnation and waits until it listens. A port still held by the
// killed incarnation's sockets is tried again until the deadline.
func (c *coordinator) start() {
	c.t.Helper()
	ttl := c.leases
	args := append([]string{"server", "--addr", c.addr, "--db", c.db, "--lease-ttl", ttl.String(),
		"--heartbeat-every", (ttl / 3).String(), "--reap-every", "1s", "--log-format", "json"}, c.extra...)
	deadline := time.Now().Add(30 * time.Second)
	for {
		p := startProc(c.t, fmt.Sprintf("coordinator#%d", len(c.all)+1), args, nil)
		c.all = append(c.all, p)
		addr, err := p.waitFor(listening, time.Until(deadline))
		if err == nil {
			if addr != c.addr {
				c.t.Fatalf("%s listens on %s, want %s", p.name, addr, c.addr)
			}
			c.cur = p
			return
		}
		if !strings.Contains(p.out.String(), "address already in use") || time.Now().After(deadline) {
			c.t.Fatalf("start %s: %v\n%s", p.name, err, p.out.Tail(40))
		}
		<-time.After(100 * time.Millisecond)
	}
}

// workerSlot is one named worker, restarted under the same name after each kill.
type workerSlot struct {
	name string
	all  []*incarnation
}

// incarnation is one process of a worker slot. Its TMPDIR, which the worker passes to
// the steps it runs, names it in the ledger.
type incarnation struct {
	*proc
	tag      string // base name of its TMPDIR: w2-3
	workerID string // as registered with the coordinator
}

// fleet is the set of workers.
type fleet struct {
	t       testing.TB
	server  string
	dir     string
	maxJobs int
	slots   []*workerSlot
	byTag   map[string]*incarnation
	byID    map[string]*incarnation
}

func newFleet(t testing.TB, server, dir string, n, maxJobs int) *fleet {
	f := &fleet{t: t, server: server, dir: dir, maxJobs: maxJobs, byTag: map[string]*incarnation{}, byID: map[string]*incarnation{}}
	for i := range n {
		f.slots = append(f.slots, &workerSlot{name: "w" + strconv.Itoa(i+1)})
	}
	for _, s := range f.slots {
		f.start(s)
	}
	for _, s := range f.slots {
		f.registered(s.all[len(s.all)-1])
	}
	return f
}

// start starts a new incarnation of s with its own TMPDIR.
func (f *fleet) start(s *workerSlot) *incarnation {
	f.t.Helper()
	tag := fmt.Sprintf("%s-%d", s.name, len(s.all)+1)
	tmp := filepath.Join(f.dir, tag)
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		f.t.Fatalf("worker TMPDIR: %v", err)
	}
	args := []string{"worker", "--server", f.server, "--name", s.name, "--max-jobs", strconv.Itoa(f.maxJobs), "--log-format", "json"}
	p := startProc(f.t, fmt.Sprintf("%s#%d", s.name, len(s.all)+1), args, []string{"TMPDIR=" + tmp})
	inc := &incarnation{proc: p, tag: tag}
	s.all = append(s.all, inc)
	f.byTag[tag] = inc
	return inc
}

// registered waits until inc has registered and records its worker id. A worker whose
// coordinator is down keeps trying, so this waits past a coordinator restart.
func (f *fleet) registered(inc *incarnation) {
	f.t.Helper()
	id, err := inc.waitFor(registered, 60*time.Second)
	if err != nil {
		f.t.Fatalf("%v\n%s", err, inc.out.Tail(40))
	}
	inc.workerID = id
	f.byID[id] = inc
}

// incarnations lists every worker process started, in slot order.
func (f *fleet) incarnations() []*incarnation {
	var out []*incarnation
	for _, s := range f.slots {
		out = append(out, s.all...)
	}
	return out
}

// sweepOrphans SIGKILLs every process whose environment carries marker: the steps of
// killed workers, which run in process groups of their own and outlive their worker.
func sweepOrphans(t testing.TB, marker string) {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Logf("sweep orphaned steps: %v", err)
		return
	}
	needle := []byte("\x00" + marker + "\x00")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(append([]byte{0}, env...), needle) {
			continue
		}
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			t.Errorf("kill orphaned step process %d: %v", pid, err)
		}
	}
}
