// Package pgcluster starts a throwaway PostgreSQL server in a temp directory, on a free
// port of 127.0.0.1, from the PostgreSQL programs installed on the machine, and removes it
// again: the database of the PostgreSQL store's tests (internal/testdb) and of
// `gantry bench` when no server is named.
package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

const (
	// dirPrefix names the temp directory of every throwaway cluster, so that a later
	// process can find and remove the clusters of processes that died.
	dirPrefix = "gantry-pgcluster-"
	// ownerFile in that directory holds the PID of the process that owns it.
	ownerFile = "owner.pid"
	// libGlob is where Debian and Ubuntu install each PostgreSQL version's programs,
	// off PATH.
	libGlob = "/usr/lib/postgresql/*/bin"

	initTimeout  = 2 * time.Minute
	startTimeout = 30 * time.Second
	stopTimeout  = 30 * time.Second
	startTries   = 3
)

// ErrNoPostgres says PostgreSQL is not installed: Start found no initdb and pg_ctl.
var ErrNoPostgres = errors.New("no PostgreSQL programs (initdb and pg_ctl) on PATH or in " + libGlob)

// Options say how to start a cluster.
type Options struct {
	// Conf is appended to the cluster's postgresql.conf, after listen_addresses =
	// '127.0.0.1' and the socket directory: settings as postgresql.conf lines.
	Conf string
	// Logf, when set, is told what Start did (and what stale clusters it removed).
	Logf func(format string, args ...any)
}

// Cluster is a throwaway PostgreSQL server owned by this process.
type Cluster struct {
	dir  string              // temp dir: data/, the Unix socket, postgres.log, owner.pid
	bin  string              // directory holding initdb, pg_ctl and postgres
	cred *syscall.Credential // when running as root: the postgres user, since initdb refuses root
	port int
	conf string
}

func (c *Cluster) dataDir() string { return filepath.Join(c.dir, "data") }
func (c *Cluster) logFile() string { return filepath.Join(c.dir, "postgres.log") }

// URL is the cluster's postgres database, as its superuser postgres (trusted, no
// password), over TCP.
func (c *Cluster) URL() *url.URL {
	return &url.URL{
		Scheme:   "postgres",
		User:     url.User("postgres"),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(c.port)),
		Path:     "/postgres",
		RawQuery: "sslmode=disable",
	}
}

// Start creates and starts a cluster in a new temp dir, or returns an error wrapping
// ErrNoPostgres when PostgreSQL is not installed. Stop stops and removes it; a cluster
// whose process died without Stop is removed by the next Start of any process.
func Start(o Options) (*Cluster, error) {
	logf := o.Logf
	if logf == nil {
		logf = func(string, ...any) {}
	}
	begin := time.Now()
	bin, err := findBinDir(exec.LookPath, libGlob)
	if err != nil {
		return nil, err
	}
	cred, err := credential()
	if err != nil {
		return nil, err
	}
	reapStale(bin, cred, logf)

	dir, err := os.MkdirTemp("", dirPrefix)
	if err != nil {
		return nil, fmt.Errorf("create cluster directory: %w", err)
	}
	c := &Cluster{dir: dir, bin: bin, cred: cred, conf: o.Conf}
	if err := c.create(); err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	// The free port is only free until postgres binds it; another process can take it in
	// between, so a failed start is retried on a new port.
	for try := 1; ; try++ {
		err := c.start()
		if err == nil {
			break
		}
		if try == startTries {
			return nil, errors.Join(err, c.Stop())
		}
		logf("pgcluster: start PostgreSQL (try %d of %d): %v", try, startTries, err)
	}
	logf("pgcluster: started a throwaway PostgreSQL cluster (%s) in %s on 127.0.0.1:%d in %v",
		bin, dir, c.port, time.Since(begin).Round(time.Millisecond))
	return c, nil
}

// create runs initdb and writes the server configuration, all but the port.
func (c *Cluster) create() error {
	owner := []byte(strconv.Itoa(os.Getpid()) + "\n")
	if err := os.WriteFile(filepath.Join(c.dir, ownerFile), owner, 0o644); err != nil {
		return fmt.Errorf("write cluster owner: %w", err)
	}
	if c.cred != nil {
		if err := os.Chown(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return fmt.Errorf("give cluster directory to the postgres user: %w", err)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), initTimeout)
	defer cancel()
	out, err := c.command(ctx, "initdb",
		"--pgdata="+c.dataDir(), "--username=postgres", "--auth=trust",
		"--encoding=UTF8", "--locale=C", "--no-sync").CombinedOutput()
	if err != nil {
		hint := ""
		if c.cred != nil {
			hint = fmt.Sprintf(" (running as the postgres user: every parent of %s must be searchable by it)", c.dir)
		}
		return fmt.Errorf("initdb in %s%s: %w\n%s", c.dir, hint, err, out)
	}

	conf := "\n# Added by Gantry's internal/pgcluster for a throwaway cluster.\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = " + quoteConf(c.dir) + "\n" + c.conf + "\n"
	f, err := os.OpenFile(filepath.Join(c.dataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("open postgresql.conf: %w", err)
	}
	if _, err := f.WriteString(conf); err != nil {
		f.Close()
		return fmt.Errorf("write postgresql.conf: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write postgresql.conf: %w", err)
	}
	return nil
}

// start starts the server on a free port and waits, at most startTimeout, until it
// accepts connections.
func (c *Cluster) start() error {
	port, err := freePort()
	if err != nil {
		return err
	}
	c.port = port

	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	// -w makes pg_ctl return as soon as the postmaster reports ready, or fail as soon as
	// it exits; -l sends the server's output to a file, so pg_ctl's pipes close.
	secs := strconv.Itoa(int(startTimeout / time.Second))
	out, err := c.command(ctx, "pg_ctl", "start", "--pgdata="+c.dataDir(), "--log="+c.logFile(),
		"--wait", "--timeout="+secs, "--silent", "-o", "-p "+strconv.Itoa(port)).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl start on port %d: %w\n%s%s", port, err, out, c.logTail())
	}
	return c.waitReady(ctx)
}

// waitReady polls until a connection to the admin database succeeds or ctx ends.
func (c *Cluster) waitReady(ctx context.Context) error {
	backoff := 5 * time.Millisecond
	for {
		conn, err := pgx.Connect(ctx, c.URL().String())
		if err == nil {
			err = conn.Ping(ctx)
			conn.Close(ctx)
			if err == nil {
				return nil
			}
		}
		timer := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("wait for PostgreSQL on port %d: %w (last error: %v)%s", c.port, ctx.Err(), err, c.logTail())
		case <-timer.C:
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

// Stop stops the server, if it is running, without a checkpoint, and removes the
// cluster's directory.
func (c *Cluster) Stop() error {
	var stopErr error
	if _, err := os.Stat(filepath.Join(c.dataDir(), "postmaster.pid")); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), stopTimeout)
		defer cancel()
		secs := strconv.Itoa(int(stopTimeout / time.Second))
		out, err := c.command(ctx, "pg_ctl", "stop", "--pgdata="+c.dataDir(),
			"--mode=immediate", "--wait", "--timeout="+secs, "--silent").CombinedOutput()
		if err != nil {
			stopErr = fmt.Errorf("stop PostgreSQL in %s: %w\n%s", c.dir, err, out)
		}
	}
	// Removed even when the stop failed: a postmaster whose lock file disappears shuts
	// itself down within a minute.
	if err := os.RemoveAll(c.dir); err != nil {
		return errors.Join(stopErr, fmt.Errorf("remove cluster directory: %w", err))
	}
	return stopErr
}

// command prepares one of the PostgreSQL programs: in its own process group, killed
// with the group when ctx ends, without the caller's PG* variables (which would point
// it elsewhere), and as the postgres user when running as root.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir // the tools chdir-check their working directory, so it must be theirs
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	cmd.Cancel = func() error {
		err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		if errors.Is(err, syscall.ESRCH) {
			return nil
		}
		return err
	}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

// logTail returns the end of the server log, to explain a failed start.
func (c *Cluster) logTail() string {
	b, err := os.ReadFile(c.logFile())
	if err != nil || len(b) == 0 {
		return ""
	}
	const max = 2000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return "\nserver log " + c.logFile() + ":\n" + string(b)
}

// credential returns nil when not root. initdb and postgres refuse to run as root, so as
// root they run as the postgres system user that Debian's package creates.
func credential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("running as root, which initdb refuses, and no postgres user to run it as: %w", err)
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user's uid %q: %w", u.Uid, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return nil, fmt.Errorf("postgres user's gid %q: %w", u.Gid, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// findBinDir returns the directory holding initdb and pg_ctl: the one of the initdb on
// PATH, else the highest version under libGlob.
func findBinDir(lookPath func(string) (string, error), libGlob string) (string, error) {
	if p, err := lookPath("initdb"); err == nil {
		// Resolve links so pg_ctl comes from the same installation as initdb.
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if dir := filepath.Dir(p); isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
	}
	dirs, err := filepath.Glob(libGlob)
	if err != nil {
		return "", fmt.Errorf("look for PostgreSQL in %s: %w", libGlob, err)
	}
	slices.SortFunc(dirs, func(a, b string) int { return slices.Compare(versionOf(b), versionOf(a)) })
	for _, dir := range dirs {
		if isExecutable(filepath.Join(dir, "initdb")) && isExecutable(filepath.Join(dir, "pg_ctl")) {
			return dir, nil
		}
	}
	return "", ErrNoPostgres
}

// versionOf reads the version from a .../<version>/bin path: "9.6" is [9 6], "16" is
// [16]. A part that is not a number sorts below every number.
func versionOf(binDir string) []int {
	var v []int
	for _, part := range strings.Split(filepath.Base(filepath.Dir(binDir)), ".") {
		n, err := strconv.Atoi(part)
		if err != nil {
			n = -1
		}
		v = append(v, n)
	}
	return v
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// quoteConf quotes s as a postgresql.conf string value.
func quoteConf(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// reapStale stops and removes clusters whose process died without stopping them: killed
// by a test's -timeout, a signal or a crash. It is best effort; what it cannot remove
// it reports and leaves.
func reapStale(bin string, cred *syscall.Credential, logf func(format string, args ...any)) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue // not ours, or its owner has not written the file yet
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid == os.Getpid() || alive(pid) {
			continue
		}
		stale := &Cluster{dir: dir, bin: bin, cred: cred}
		if err := stale.Stop(); err != nil {
			logf("pgcluster: remove the cluster left by exited process %d: %v", pid, err)
			continue
		}
		logf("pgcluster: removed the cluster in %s left by exited process %d", dir, pid)
	}
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
