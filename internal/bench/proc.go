package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// process is a gantry process the bench started, in its own process group.
type process struct {
	name     string
	pid      int
	out      *tailBuffer
	exited   chan struct{}
	state    *os.ProcessState
	stopOnce sync.Once
}

// startProcess starts `gantry <args>`, made by command, with its output kept (the last
// part of it) for error messages.
func startProcess(command func(args ...string) *exec.Cmd, name string, env []string, args ...string) (*process, error) {
	cmd := command(args...)
	cmd.Env = append(cmd.Environ(), env...)
	p := &process{name: name, out: &tailBuffer{max: 256 << 10}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.pid = cmd.Process.Pid
	go func() {
		_ = cmd.Wait()
		p.state = cmd.ProcessState
		close(p.exited)
	}()
	return p, nil
}

// stop sends SIGTERM to the process group and waits for the process, sending SIGKILL
// after grace. Only the first call signals: the group's id is free for reuse after it.
func (p *process) stop(grace time.Duration) {
	p.stopOnce.Do(func() {
		_ = syscall.Kill(-p.pid, syscall.SIGTERM)
		select {
		case <-p.exited:
		case <-time.After(grace):
			_ = syscall.Kill(-p.pid, syscall.SIGKILL)
			<-p.exited
		}
		// Whatever the process started and left behind goes too.
		_ = syscall.Kill(-p.pid, syscall.SIGKILL)
	})
}

// cpu is the process's user and system CPU: once it has exited, over its whole life
// with that of the processes it reaped (wait4's rusage); before, its own so far (/proc).
func (p *process) cpu() time.Duration {
	select {
	case <-p.exited:
		if p.state == nil {
			return 0
		}
		return p.state.UserTime() + p.state.SystemTime()
	default:
	}
	u, err := readUsage(p.pid)
	if err != nil {
		return 0
	}
	return u.CPU
}

// failure describes a process that did not do what it should, with its last output.
func (p *process) failure(what string) error {
	state := "still running"
	select {
	case <-p.exited:
		state = p.state.String()
	default:
	}
	return fmt.Errorf("%s %s (%s); its output ends:\n%s", p.name, what, state, p.out.last(4<<10))
}

// waitOutput waits until re matches the process's output and returns the first
// submatch.
func (p *process) waitOutput(ctx context.Context, re *regexp.Regexp, within time.Duration) (string, error) {
	deadline := time.After(within)
	for {
		if m := re.FindSubmatch(p.out.bytes()); m != nil {
			return string(m[1]), nil
		}
		select {
		case <-p.exited:
			return "", p.failure("exited early")
		case <-deadline:
			return "", p.failure("did not print " + re.String())
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// tailBuffer keeps the first max bytes written to it and, beyond that, the most recent.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		// Keep the head (start-up records) and the newest half.
		head := t.max / 4
		keep := t.max / 2
		t.b = append(t.b[:head:head], t.b[len(t.b)-keep:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) bytes() []byte {
	t.mu.Lock()
	defer t.mu.Unlock()
	return bytes.Clone(t.b)
}

func (t *tailBuffer) last(n int) string {
	b := t.bytes()
	return string(b[max(0, len(b)-n):])
}

// coordinator is a `gantry server` process.
type coordinator struct {
	*process
	base string
	db   string
	dir  string // the scenario's directory, which holds its data
	drop func() // removes the scenario's database
	// pg reads the PostgreSQL server's CPU from the database's creation to the
	// coordinator's stop, into pgCPU (pgRead when it could).
	pg     serverMeter
	pgCPU  time.Duration
	pgRead bool

	dropOnce sync.Once
}

var listening = regexp.MustCompile(`"msg":"gantry server listening","addr":"([^"]+)"`)

// startCoordinator starts `gantry server` on a fresh store of the given kind under dir,
// with extra flags, and waits until it listens.
func startCoordinator(ctx context.Context, o *Options, store, dir string, extra ...string) (*coordinator, error) {
	c := &coordinator{drop: func() {}, dir: dir}
	switch store {
	case SQLite:
		c.db = "sqlite://" + filepath.Join(dir, "gantry.db")
	case Postgres:
		db, drop, pm, err := createDatabase(ctx, o.Postgres)
		if err != nil {
			return nil, err
		}
		c.db, c.drop, c.pg = db, drop, startServerMeter(pm)
	default:
		return nil, fmt.Errorf("unknown store %q", store)
	}
	args := append([]string{"server", "--addr", "127.0.0.1:0", "--db", c.db, "--auth", "off", "--log-format", "json",
		"--blobs", "file://" + filepath.Join(dir, "blobs"), "--logs-dir", filepath.Join(dir, "logs")}, extra...)
	// GANTRY_BENCH_SERVER_PROFILE=DIR has each coordinator write its CPU profile into DIR,
	// named for the scenario's directory, so a scenario's server time can be read apart
	// from the bench's own.
	var env []string
	if pdir := os.Getenv("GANTRY_BENCH_SERVER_PROFILE"); pdir != "" {
		env = append(env, "GANTRY_CPU_PROFILE="+filepath.Join(pdir, filepath.Base(dir)+"-"+store+".pprof"))
	}
	p, err := startProcess(o.Command, "gantry server", env, args...)
	if err != nil {
		c.drop()
		return nil, err
	}
	c.process = p
	addr, err := p.waitOutput(ctx, listening, time.Minute)
	if err != nil {
		c.close()
		return nil, err
	}
	c.base = "http://" + addr
	return c, nil
}

// close stops the coordinator and drops its database; calls after the first do nothing.
// The PostgreSQL server's CPU is read in between: the drop is not the scenario's.
func (c *coordinator) close() {
	c.stop(10 * time.Second)
	c.dropOnce.Do(func() {
		c.pgCPU, c.pgRead = c.pg.end()
		c.drop()
	})
}

// PostgresVersion is the version of the PostgreSQL server at url, as it says it.
func PostgresVersion(ctx context.Context, url string) (string, error) {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var v string
	if err := conn.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		return "", fmt.Errorf("read PostgreSQL's version: %w", err)
	}
	return v, nil
}

// createDatabase makes a database of its own on the server at base and returns its URL,
// a function that drops it, and the server's postmaster when it runs on this machine
// (else 0).
func createDatabase(ctx context.Context, base string) (string, func(), int, error) {
	if base == "" {
		return "", nil, 0, errors.New("no PostgreSQL server: pass --postgres URL (a user that may CREATE DATABASE)")
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, 0, fmt.Errorf("parse --postgres: %w", err)
	}
	conn, err := pgx.Connect(ctx, base)
	if err != nil {
		return "", nil, 0, fmt.Errorf("connect to PostgreSQL at %s: %w", u.Redacted(), err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "gantry_bench_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", nil, 0, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	drop := func() {
		dctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
		defer stop()
		conn, err := pgx.Connect(dctx, base)
		if err != nil {
			return
		}
		defer conn.Close(dctx)
		_, _ = conn.Exec(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
	}
	return u.String(), drop, postmaster(ctx, conn), nil
}

// usage is a process's CPU time and memory, from /proc.
type usage struct {
	CPU time.Duration
	RSS int64 // bytes resident now
	HWM int64 // bytes resident at the peak
}

// clockTick is the unit of /proc/PID/stat's CPU times (USER_HZ, 100 on Linux).
const clockTick = 10 * time.Millisecond

func readUsage(pid int) (usage, error) {
	var u usage
	st, err := readStat(pid)
	if err != nil {
		return u, err
	}
	u.CPU = st.cpu
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return u, fmt.Errorf("parse %s: %w", k, err)
		}
		if k == "VmRSS" {
			u.RSS = kb << 10
		} else {
			u.HWM = kb << 10
		}
	}
	return u, nil
}

// scenarioDir makes a directory of the scenario's own under o.Dir.
func scenarioDir(o *Options, name string) (string, func(), error) {
	dir, err := os.MkdirTemp(o.Dir, "gantry-bench-"+name+"-")
	if err != nil {
		return "", nil, err
	}
	return dir, func() { _ = os.RemoveAll(dir) }, nil
}
