package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// A scenario on PostgreSQL also costs the server CPU, which on a machine that runs both
// is CPU the coordinator does not get. Where the server runs on this machine and its
// processes may be read, the bench reads that CPU from /proc: the postmaster's own and
// its children's, those it reaped included (a connection's backend ends when the
// connection does, and its CPU then moves into the postmaster's children's times).

// postmaster is the process id of the PostgreSQL server that conn is connected to, when
// it runs on this machine and can be read, else 0: the parent of conn's backend, when
// the parent's working directory is the server's data directory. Reading a setting the
// user may not see, or a backend that is not on this machine, gives 0.
func postmaster(ctx context.Context, conn *pgx.Conn) int {
	var backend int
	var dataDir string
	if err := conn.QueryRow(ctx, "SELECT pg_backend_pid(), current_setting('data_directory')").Scan(&backend, &dataDir); err != nil {
		return 0
	}
	st, err := readStat(backend)
	if err != nil || st.ppid <= 1 {
		return 0
	}
	parent := st.ppid
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", parent))
	if err != nil || !sameDir(cwd, dataDir) {
		return 0
	}
	return parent
}

func sameDir(a, b string) bool {
	if ra, err := filepath.EvalSymlinks(a); err == nil {
		a = ra
	}
	if rb, err := filepath.EvalSymlinks(b); err == nil {
		b = rb
	}
	return filepath.Clean(a) == filepath.Clean(b)
}

// serverCPU is the user and system CPU of the process pid, of the children it reaped,
// and of its children alive now (backends, the checkpointer, the WAL writer ...).
func serverCPU(pid int) (time.Duration, error) {
	st, err := readStat(pid)
	if err != nil {
		return 0, err
	}
	children, err := childrenCPU(pid, nil)
	if err != nil {
		return 0, err
	}
	return st.cpu + st.reaped + children, nil
}

// childrenCPU is the user and system CPU so far of the live children of parent that keep
// (nil: all) keeps.
func childrenCPU(parent int, keep func(pid int) bool) (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	var total time.Duration
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == parent {
			continue
		}
		st, err := readStat(pid)
		if err != nil || st.ppid != parent || (keep != nil && !keep(pid)) {
			continue // gone since the listing, or not a child, or not one to count
		}
		total += st.cpu
	}
	return total, nil
}

// procStat is what the bench reads of /proc/PID/stat.
type procStat struct {
	ppid   int
	cpu    time.Duration // user and system
	reaped time.Duration // user and system of the children it waited for
}

func readStat(pid int) (procStat, error) {
	var st procStat
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, err
	}
	// The command name may hold spaces; the fields after it are fixed.
	i := bytes.LastIndexByte(raw, ')')
	if i < 0 {
		return st, errors.New("unreadable /proc stat")
	}
	f := strings.Fields(string(raw[i+1:]))
	if len(f) < 15 {
		return st, errors.New("short /proc stat")
	}
	var n [5]int64
	for k, idx := range []int{1, 11, 12, 13, 14} { // ppid, utime, stime, cutime, cstime
		if n[k], err = strconv.ParseInt(f[idx], 10, 64); err != nil {
			return st, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
		}
	}
	st.ppid = int(n[0])
	st.cpu = time.Duration(n[1]+n[2]) * clockTick
	st.reaped = time.Duration(n[3]+n[4]) * clockTick
	return st, nil
}

// serverMeter reads the CPU the PostgreSQL server spent between its start and end; a
// zero serverMeter (the server is not on this machine) reads nothing.
type serverMeter struct {
	pid   int
	began time.Duration
}

func startServerMeter(pid int) serverMeter {
	if pid == 0 {
		return serverMeter{}
	}
	began, err := serverCPU(pid)
	if err != nil {
		return serverMeter{}
	}
	return serverMeter{pid: pid, began: began}
}

// end is the server's CPU since the meter started, and whether it was read.
func (m serverMeter) end() (time.Duration, bool) {
	if m.pid == 0 {
		return 0, false
	}
	now, err := serverCPU(m.pid)
	if err != nil || now < m.began {
		return 0, false
	}
	return now - m.began, true
}

// pgMeter reads the CPU time of the PostgreSQL backends that serve one database, when
// the server runs on this machine: the coordinator's store work on PostgreSQL is mostly
// done there, not in the coordinator. The server's background processes (WAL writer,
// checkpointer, autovacuum) are left out: their work comes later and is the whole
// server's, not one request's. The coordinator keeps its connections open (five minutes
// idle), so its backends live through a scenario.
type pgMeter struct {
	postmaster int
	db         string
}

// postgresMeter finds the postmaster of the server behind dbURL when store is PostgreSQL
// and the server runs here; otherwise its readings are zero and ok is false.
func postgresMeter(ctx context.Context, store, dbURL string) (*pgMeter, error) {
	if store != Postgres {
		return &pgMeter{}, nil
	}
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return nil, fmt.Errorf("connect to the scenario's database: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var db string
	if err := conn.QueryRow(ctx, `SELECT current_database()`).Scan(&db); err != nil {
		return nil, fmt.Errorf("ask for the database's name: %w", err)
	}
	// A server elsewhere (or in another pid namespace): its CPU is not to be read here.
	pm := postmaster(ctx, conn)
	if pm == 0 {
		return &pgMeter{}, nil
	}
	return &pgMeter{postmaster: pm, db: db}, nil
}

// ok reports whether the meter reads a server: false on SQLite, and for a server
// elsewhere.
func (m *pgMeter) ok() bool { return m.postmaster > 0 }

// cpu is the CPU time so far of the server's live backends connected to m.db, which
// name it in their process title ("postgres: USER DB HOST(PORT) STATE").
func (m *pgMeter) cpu() (time.Duration, error) {
	if !m.ok() {
		return 0, nil
	}
	return childrenCPU(m.postmaster, func(pid int) bool {
		title, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		return err == nil && strings.Contains(string(title), " "+m.db+" ")
	})
}
