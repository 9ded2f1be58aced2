package executor

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// markVar names the environment variable that marks a step's processes on the
// subreaper path: a process that left the step's process group is still known as the
// step's by it.
const markVar = "GANTRY_STEP_MARK"

// killWait bounds how long ending a scope waits for its processes to be gone.
const killWait = 10 * time.Second

// Containment keeps a worker's steps, and everything they start, from outliving the
// step or the worker.
//
// Where the host lets the worker make cgroup v2 groups, each step starts inside a
// cgroup of its own (the clone puts it there, so nothing runs outside it even for an
// instant), and ending the step writes cgroup.kill: no setsid or double fork escapes.
// A small guard process, started with the worker, kills the worker's cgroups once the
// worker is gone, however it went.
//
// Otherwise the worker makes itself a child subreaper, so the orphans of its steps are
// re-parented to it rather than to PID 1, starts steps with a parent-death SIGKILL, and
// marks every step's environment; ending the step kills its process group and every
// marked process.
//
// Either way each running step is recorded in the state directory, and a new
// Containment on the same directory first kills whatever the records of a worker that
// is no longer running name.
type Containment struct {
	log      *slog.Logger
	stateDir string
	owner    string // "<pid>.<start time>": this process, in record names
	cgroup   string // the worker's own cgroup directory; "" on the subreaper path
	// reaper says the worker is a child subreaper, so a step's orphans are its children.
	reaper    bool
	reclaimed int

	guard     *os.File      // write end of the guard's pipe
	guardDone chan struct{} // closed when the guard process has exited

	closeOnce sync.Once
}

// Scopes and containments are numbered per process, not per Containment: two
// containments in one process (tests make many) must not share a name or a mark.
var scopeSeq, containmentSeq atomic.Uint64

// ContainmentConfig configures NewContainment.
type ContainmentConfig struct {
	// StateDir is where running steps are recorded (the worker's work dir, say); ""
	// records nothing, and so leaves nothing for the next worker to clean up.
	StateDir string
	// NoCgroup takes the subreaper path even where cgroups would work.
	NoCgroup bool
	Logger   *slog.Logger
}

// NewContainment kills what the records in cfg.StateDir name of workers no longer
// running, then sets up the containment of this worker's steps.
func NewContainment(cfg ContainmentConfig) (*Containment, error) {
	c := &Containment{log: cfg.Logger, stateDir: cfg.StateDir}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	self, err := readProc(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("containment: read our own process status: %w", err)
	}
	c.owner = fmt.Sprintf("%d.%d", self.pid, self.start)
	if c.stateDir != "" {
		if err := os.MkdirAll(c.stateDir, 0o700); err != nil {
			return nil, fmt.Errorf("containment: create state dir: %w", err)
		}
		if err := checkPrivate(c.stateDir); err != nil {
			return nil, err
		}
		if c.reclaimed, err = c.reclaim(); err != nil {
			return nil, err
		}
	}
	if !cfg.NoCgroup {
		if err := c.setupCgroup(); err != nil {
			c.log.Info("steps are not put in cgroups; a subreaper and parent-death signal contain them", "reason", err)
			c.cgroup = ""
		}
	}
	if c.cgroup == "" {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			c.log.Warn("cannot become a child subreaper; a step's orphans are found by their mark only", "err", err)
		} else {
			c.reaper = true
		}
	}
	return c, nil
}

// EndsAll says whether every process a step starts ends with it, whatever it does to
// escape: the cgroup path only (on the subreaper path an orphan that drops its mark
// is lost). Nil ends nothing.
func (c *Containment) EndsAll() bool { return c != nil && c.cgroup != "" }

// Mode names how steps are contained: "cgroup" or "subreaper".
func (c *Containment) Mode() string {
	if c.cgroup != "" {
		return "cgroup"
	}
	return "subreaper"
}

// Reclaimed is how many steps of earlier workers NewContainment found recorded and
// killed.
func (c *Containment) Reclaimed() int { return c.reclaimed }

// Close kills whatever is left in the worker's cgroups and removes them. Steps still
// running are ended.
func (c *Containment) Close() error {
	var err error
	c.closeOnce.Do(func() {
		if c.cgroup == "" {
			return
		}
		if err = killCgroupTree(c.cgroup); err != nil {
			err = fmt.Errorf("containment: remove the worker's cgroup: %w", err)
		}
		_ = c.guard.Close()
		select {
		case <-c.guardDone:
		case <-time.After(killWait):
		}
	})
	return err
}

// setupCgroup makes the worker's cgroup, proves a process can be started in a child of
// it, and starts the guard.
func (c *Containment) setupCgroup() error {
	own, err := ownCgroup()
	if err != nil {
		return err
	}
	removeStaleCgroups(own)
	name := fmt.Sprintf("gantry-worker-%d", os.Getpid())
	if n := containmentSeq.Add(1); n > 1 {
		name += "-" + strconv.FormatUint(n, 10)
	}
	dir := filepath.Join(own, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	c.cgroup = dir
	sh, err := exec.LookPath("sh")
	if err != nil {
		_ = os.Remove(dir)
		return fmt.Errorf("find sh: %w", err)
	}
	// The probe is a step in all but name: if it cannot be started in a cgroup of its
	// own, neither can a step.
	probe := exec.Command(sh, "-c", "exit 0")
	probe.SysProcAttr = &syscall.SysProcAttr{}
	sc, err := c.begin(probe)
	if err == nil {
		err = startLeader(probe)
		if err == nil {
			sc.started()
			err = probe.Wait()
			leaderReaped(probe.Process.Pid)
		}
		sc.end()
	}
	if err != nil {
		_ = os.Remove(dir)
		return fmt.Errorf("start a process in a cgroup under %s: %w", dir, err)
	}

	// The guard reads until the worker's end of the pipe closes, which the kernel does
	// when the worker exits, even by SIGKILL; then it kills every step cgroup.
	r, w, err := os.Pipe()
	if err != nil {
		_ = os.Remove(dir)
		return fmt.Errorf("create the guard's pipe: %w", err)
	}
	guard := exec.Command(sh, "-c", `cat >/dev/null; echo 1 > "$1/cgroup.kill"`, "gantry-step-guard", dir)
	guard.Stdin = r
	// Its own session: a signal to the worker's terminal or process group must not
	// take the guard down with the worker.
	guard.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = guard.Start()
	_ = r.Close()
	if err != nil {
		_ = w.Close()
		_ = os.Remove(dir)
		return fmt.Errorf("start the step guard: %w", err)
	}
	c.guard, c.guardDone = w, make(chan struct{})
	go func() {
		defer close(c.guardDone)
		_ = guard.Wait()
	}()
	return nil
}

// removeStaleCgroups removes the empty cgroups that workers no longer running left in
// own: a killed worker's guard empties them, but only a worker can remove them. One
// that still has processes is left to the records of its state dir.
func removeStaleCgroups(own string) {
	entries, err := os.ReadDir(own)
	if err != nil {
		return
	}
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), "gantry-worker-")
		if !ok || !e.IsDir() {
			continue
		}
		pidText, _, _ := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() {
			continue
		}
		if _, err := readProc(pid); err == nil {
			continue // that worker may still be running
		}
		_ = removeCgroup(filepath.Join(own, e.Name())) // fails, harmlessly, if populated
	}
}

// ownCgroup is the directory of this process's cgroup v2 group: the cgroup2 mount from
// /proc/self/mountinfo joined with the "0::" path of /proc/self/cgroup.
func ownCgroup() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("read /proc/self/cgroup: %w", err)
	}
	path, found := "", false
	for _, line := range strings.Split(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			path, found = p, true
		}
	}
	if !found {
		return "", errors.New("no cgroup v2 group in /proc/self/cgroup")
	}
	if strings.HasSuffix(path, " (deleted)") {
		return "", fmt.Errorf("our cgroup %s was removed", path)
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("read mountinfo: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options... - fstype source superoptions
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		if !ok || !strings.HasPrefix(post, "cgroup2 ") {
			continue
		}
		fields := strings.Fields(pre)
		if len(fields) < 5 {
			continue
		}
		root, mount := UnescapeMountinfo(fields[3]), UnescapeMountinfo(fields[4])
		// A mount of a subtree (as in a container) shows paths below its root.
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, "../") {
			continue
		}
		return filepath.Join(mount, rel), nil
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read mountinfo: %w", err)
	}
	return "", errors.New("no cgroup2 file system is mounted")
}

// UnescapeMountinfo undoes the octal escapes of a path in /proc/*/mountinfo (\040 for a
// space).
func UnescapeMountinfo(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// record is what the state directory keeps of a running step.
type record struct {
	Cgroup string `json:"cgroup,omitempty"`
	Mark   string `json:"mark,omitempty"`
}

// reclaim kills the steps recorded by workers that are no longer running and deletes
// their records. A record of a running worker (two workers may share a work dir) is
// left alone.
func (c *Containment) reclaim() (int, error) {
	names, err := filepath.Glob(filepath.Join(c.stateDir, "*.json"))
	if err != nil {
		return 0, fmt.Errorf("containment: list step records: %w", err)
	}
	n := 0
	var marks []string
	for _, name := range names {
		owner, _, _ := strings.Cut(filepath.Base(name), "-")
		if owner == c.owner || ownerAlive(owner) {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			return n, fmt.Errorf("containment: read step record: %w", err)
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			// A record cut short by a crash while it was written: its step never started.
			c.log.Warn("removing a step record that cannot be read", "record", name, "err", err)
			_ = os.Remove(name)
			continue
		}
		if r.Cgroup != "" && stepCgroup(r.Cgroup) {
			if err := killCgroupTree(r.Cgroup); err != nil && !errors.Is(err, os.ErrNotExist) {
				return n, fmt.Errorf("containment: kill the cgroup of a step an earlier worker left: %w", err)
			}
			// The dead worker's own cgroup goes once its last step's does.
			_ = os.Remove(filepath.Dir(r.Cgroup))
		}
		if r.Mark != "" {
			marks = append(marks, r.Mark)
		}
		if err := os.Remove(name); err != nil {
			return n, fmt.Errorf("containment: remove step record: %w", err)
		}
		n++
	}
	if len(marks) > 0 {
		// The dead worker's orphans went to PID 1 (or a subreaper above it): look at
		// every process.
		killMarked(marks, -1)
	}
	if n > 0 {
		c.log.Warn("killed the steps an earlier worker left running", "steps", n)
	}
	return n, nil
}

// checkPrivate refuses a state dir that someone else could write: its records say what
// to kill, so one planted in a shared /tmp would have the worker kill what it names.
func checkPrivate(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("containment: state dir: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("containment: state dir %s is not a directory", dir)
	case ok && int(st.Uid) != os.Geteuid():
		return fmt.Errorf("containment: state dir %s belongs to uid %d, not to the worker's user", dir, st.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("containment: state dir %s is writable by others (mode %#o)", dir, uint32(fi.Mode().Perm()))
	}
	return nil
}

// stepCgroup reports whether dir looks like a step cgroup a worker made: a
// "step-<n>" in a "gantry-worker-..." cgroup on a cgroup2 file system. A record that
// names anything else is not acted on.
func stepCgroup(dir string) bool {
	var fs unix.Statfs_t
	if !filepath.IsAbs(dir) || filepath.Clean(dir) != dir || unix.Statfs(dir, &fs) != nil || fs.Type != unix.CGROUP2_SUPER_MAGIC {
		return false
	}
	return strings.HasPrefix(filepath.Base(dir), "step-") && strings.HasPrefix(filepath.Base(filepath.Dir(dir)), "gantry-worker-")
}

// ownerAlive reports whether the process a record's owner ("<pid>.<start>") names is
// still running: same pid and same start time, so a reused pid does not count.
func ownerAlive(owner string) bool {
	p, s, ok := strings.Cut(owner, ".")
	if !ok {
		return false
	}
	pid, err1 := strconv.Atoi(p)
	start, err2 := strconv.ParseUint(s, 10, 64)
	if err1 != nil || err2 != nil {
		return false
	}
	st, err := readProc(pid)
	return err == nil && st.start == start && st.state != "Z"
}

// scope is one step's share of a Containment. Its methods do nothing on a nil scope,
// which is what a nil Containment begins.
type scope struct {
	c      *Containment
	cmd    *exec.Cmd
	cgroup string   // the step's cgroup directory
	fd     *os.File // the cgroup directory, open until the step has started
	mark   string
	record string
}

// begin prepares cmd to start inside a new scope and records the scope before anything
// runs in it.
func (c *Containment) begin(cmd *exec.Cmd) (*scope, error) {
	if c == nil {
		return nil, nil
	}
	n := scopeSeq.Add(1)
	id := fmt.Sprintf("%s-%d", c.owner, n)
	s := &scope{c: c, cmd: cmd}
	var r record
	if c.cgroup != "" {
		s.cgroup = filepath.Join(c.cgroup, "step-"+strconv.FormatUint(n, 10))
		if err := os.Mkdir(s.cgroup, 0o755); err != nil {
			return nil, fmt.Errorf("create the step's cgroup: %w", err)
		}
		fd, err := os.Open(s.cgroup)
		if err != nil {
			_ = os.Remove(s.cgroup)
			return nil, fmt.Errorf("open the step's cgroup: %w", err)
		}
		s.fd = fd
		cmd.SysProcAttr.UseCgroupFD = true
		cmd.SysProcAttr.CgroupFD = int(fd.Fd())
		r.Cgroup = s.cgroup
	} else {
		s.mark = id
		cmd.Env = append(cmd.Env, markVar+"="+id)
		r.Mark = id
	}
	if c.stateDir != "" {
		b, err := json.Marshal(r)
		if err != nil {
			s.end()
			return nil, fmt.Errorf("encode step record: %w", err)
		}
		s.record = filepath.Join(c.stateDir, id+".json")
		// Written whole before the step starts: a worker that dies a moment later
		// leaves a record the next one can act on.
		if err := writeFileSync(s.record, b); err != nil {
			s.record = ""
			s.end()
			return nil, fmt.Errorf("record the step: %w", err)
		}
	}
	return s, nil
}

func writeFileSync(name string, b []byte) error {
	tmp := name + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, name)
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// started releases what was only needed to start the step.
func (s *scope) started() {
	if s == nil || s.fd == nil {
		return
	}
	_ = s.fd.Close()
	s.fd = nil
}

// leaders are the steps' first processes, every executor's, from their start until
// their exec.Cmd has reaped them: the children of the process that reapOrphans must
// leave alone.
var leaders = struct {
	sync.Mutex
	pids map[int]bool
}{pids: map[int]bool{}}

// startLeader starts a step's first process and counts it among the leaders. Under the
// lock: reapOrphans must not see it exit before it is counted.
func startLeader(cmd *exec.Cmd) error {
	leaders.Lock()
	defer leaders.Unlock()
	if err := cmd.Start(); err != nil {
		return err
	}
	leaders.pids[cmd.Process.Pid] = true
	return nil
}

func leaderReaped(pid int) {
	leaders.Lock()
	delete(leaders.pids, pid)
	leaders.Unlock()
}

// signal sends sig to every process of the scope, but to bubblewrap's own when
// spareBwrap is set.
func (s *scope) signal(sig syscall.Signal, spareBwrap bool) {
	if s == nil {
		return
	}
	var pids []int
	if s.cgroup != "" {
		pids = cgroupProcs(s.cgroup)
	} else {
		live, _ := s.members()
		for _, p := range live {
			pids = append(pids, p.pid)
		}
	}
	for _, pid := range pids {
		if !spareBwrap || !isBwrap(pid) {
			_ = syscall.Kill(pid, sig)
		}
	}
}

// termSandbox sends SIGTERM to the sandboxed step's process group, but not to
// bubblewrap: the step gets its grace, and its exit code comes back through
// bubblewrap as usual.
func termSandbox(pgid int) {
	for _, p := range listProcs() {
		if p.pgrp == pgid && !isBwrap(p.pid) {
			_ = syscall.Kill(p.pid, syscall.SIGTERM)
		}
	}
}

func isBwrap(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/comm")
	return err == nil && strings.TrimSpace(string(b)) == "bwrap"
}

// kill kills every process of the scope at once.
func (s *scope) kill() {
	if s == nil {
		return
	}
	if s.cgroup != "" {
		_ = cgroupKill(s.cgroup)
		return
	}
	s.signal(syscall.SIGKILL, false)
}

// end kills what is left of the scope, waits until it is gone, and removes the
// scope's cgroup and record.
func (s *scope) end() {
	if s == nil {
		return
	}
	s.started()
	var err error
	if s.cgroup != "" {
		err = killCgroupTree(s.cgroup)
	} else {
		err = s.killMembers()
	}
	if err != nil {
		// The record stays, so the next worker on this state dir tries again.
		s.c.log.Error("a step's processes outlived it", "err", err)
		return
	}
	if s.record != "" {
		if err := os.Remove(s.record); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.c.log.Warn("remove step record", "record", s.record, "err", err)
		}
	}
}

// members lists the live processes of a step on the subreaper path: its process group,
// the marked processes the worker adopted, and everything below them. unsure reports
// that the list may miss some, so an empty one does not yet mean the step is gone.
func (s *scope) members() (out []procStat, unsure bool) {
	if s.cmd.Process == nil {
		return nil, false
	}
	return scopeTree(listProcs(), os.Getpid(), s.cmd.Process.Pid, s.c.reaper, func(pid int) (bool, bool) {
		return hasMark(pid, s.mark)
	})
}

// scopeTree finds a step's live processes in procs, one pass over /proc: those in the
// process group pgid, those marked (of the worker self's children only, when it is a
// subreaper), and everything below them. marked reports whether a process carries the
// step's mark, and whether its environment could be read at all.
//
// One pass over /proc is not atomic, and it may miss a process that is moving:
//   - a process read before its parent exited, whose parent was then reaped before it
//     was read, hangs from a parent not in procs. It is read again, where it settled;
//   - a marked parent that is exiting has no environment left to read, while its
//     children are not yet given to the worker. That is reported as unsure: the next
//     pass sees them where they settle.
func scopeTree(procs map[int]procStat, self, pgid int, reaper bool, marked func(pid int) (has, readable bool)) (out []procStat, unsure bool) {
	children := map[int][]int{}
	for pid, p := range procs {
		if _, ok := procs[p.ppid]; !ok && p.ppid != 0 && p.ppid != self {
			// Its parent was reaped after it was read: read where it went.
			if q, err := readProc(pid); err == nil && q.start == p.start {
				p = q
				procs[pid] = q
			}
		}
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	var roots []int
	for _, p := range procs {
		switch {
		case p.pid == self:
		case p.pgrp == pgid:
			roots = append(roots, p.pid)
		case p.ppid == self || !reaper:
			has, readable := marked(p.pid)
			switch {
			case has:
				roots = append(roots, p.pid)
			case !readable && p.exiting && p.state != "Z":
				unsure = true
			}
		}
	}
	seen := map[int]bool{}
	for len(roots) > 0 {
		pid := roots[len(roots)-1]
		roots = roots[:len(roots)-1]
		if seen[pid] || pid == self {
			continue
		}
		seen[pid] = true
		if p, ok := procs[pid]; ok && p.state != "Z" {
			out = append(out, p)
		}
		roots = append(roots, children[pid]...)
	}
	return out, unsure
}

// killMembers kills the step's processes until none is left, then reaps those that
// became the worker's children (it adopted them as a subreaper). The leader is left to
// its exec.Cmd.
func (s *scope) killMembers() error {
	self := os.Getpid()
	leader := -1
	if s.cmd.Process != nil {
		leader = s.cmd.Process.Pid
	}
	killed := map[int]uint64{}
	deadline := time.Now().Add(killWait)
	for {
		live, unsure := s.members()
		if len(live) == 0 && (!unsure || time.Now().After(deadline)) {
			break
		}
		if len(live) > 0 && time.Now().After(deadline) {
			return fmt.Errorf("%d processes of the step survived SIGKILL", len(live))
		}
		for _, p := range live {
			_ = syscall.Kill(p.pid, syscall.SIGKILL)
			killed[p.pid] = p.start
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !s.c.reaper {
		return nil
	}
	defer s.c.reapOrphans()
	for len(killed) > 0 && time.Now().Before(deadline) {
		for pid, start := range killed {
			st, err := readProc(pid)
			switch {
			case err != nil || st.start != start || pid == leader:
				// Gone, or the leader, which its exec.Cmd reaps.
				delete(killed, pid)
			case st.state != "Z" || st.ppid != self:
				// Still dying, or its parent (killed too) is not reaped yet; once it
				// is, this one is re-parented to us.
			default:
				var ws syscall.WaitStatus
				if wpid, _ := syscall.Wait4(pid, &ws, syscall.WNOHANG, nil); wpid == pid {
					delete(killed, pid)
				}
			}
		}
		if len(killed) > 0 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	return nil
}

// reapOrphans reaps the zombies among the worker's children that are not steps'
// leaders: as a subreaper the worker adopts the orphans of its steps, and one that exited
// on its own while its step ran would otherwise stay a zombie for the worker's life. So
// a process that uses the subreaper path must start no children of its own that it
// waits for, other than steps (the gantry worker starts none).
func (c *Containment) reapOrphans() {
	self := os.Getpid()
	leaders.Lock()
	defer leaders.Unlock()
	for pid, p := range listProcs() {
		if p.ppid != self || p.state != "Z" || leaders.pids[pid] {
			continue
		}
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
	}
}

// killMarked kills every process carrying one of marks in its environment; parent, if
// not -1, limits the search to that process's children.
func killMarked(marks []string, parent int) {
	for range 100 {
		found := false
		for _, p := range listProcs() {
			if p.state == "Z" || p.pid == os.Getpid() || parent != -1 && p.ppid != parent {
				continue
			}
			for _, m := range marks {
				if has, _ := hasMark(p.pid, m); has {
					_ = syscall.Kill(p.pid, syscall.SIGKILL)
					found = true
				}
			}
		}
		if !found {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hasMark reports whether process pid's environment carries mark. readable is false
// when there is no environment to read: the process is gone, not ours to read, or
// exiting (its memory, which holds the environment, is released before its children
// are given to a new parent).
func hasMark(pid int, mark string) (has, readable bool) {
	if mark == "" {
		return false, true // nothing to look for
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil || len(b) == 0 {
		return false, false
	}
	want := markVar + "=" + mark
	for _, kv := range strings.Split(string(b), "\x00") {
		if kv == want {
			return true, true
		}
	}
	return false, true
}

// cgroupKill kills every process in the cgroup dir and its children.
func cgroupKill(dir string) error {
	err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return serr
		}
		// A kernel before 5.14 has no cgroup.kill: kill the members one by one until
		// none is left.
		for _, pid := range cgroupProcs(dir) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		return nil
	}
	return err
}

// killCgroupTree kills everything in the cgroup dir, waits until it is empty, and
// removes it and the cgroups below it.
func killCgroupTree(dir string) error {
	// The usual end of a step: its processes are gone and it made no cgroups below, and
	// the kernel removes a cgroup only then, so one rmdir does it (zombies do not count:
	// they run nothing). Anything else (EBUSY) is killed first.
	if err := os.Remove(dir); err == nil {
		return nil
	}
	if _, err := os.Stat(dir); err != nil {
		return err
	}
	deadline := time.Now().Add(killWait)
	for {
		if err := cgroupKill(dir); err != nil {
			return fmt.Errorf("kill cgroup %s: %w", dir, err)
		}
		if !cgroupPopulated(dir) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup %s still has processes %v after SIGKILL", dir, cgroupProcs(dir))
		}
		time.Sleep(2 * time.Millisecond)
	}
	return removeCgroup(dir)
}

// removeCgroup removes an empty cgroup and the cgroups below it, deepest first.
func removeCgroup(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("list cgroup %s: %w", dir, err)
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroup(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove cgroup %s: %w", dir, err)
	}
	return nil
}

// cgroupPopulated reports whether a process is left in dir or below it.
func cgroupPopulated(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return len(cgroupProcs(dir)) > 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "populated "); ok {
			return strings.TrimSpace(v) != "0"
		}
	}
	return len(cgroupProcs(dir)) > 0
}

// cgroupProcs lists the processes of the cgroup dir itself.
func cgroupProcs(dir string) []int {
	b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

// procStat is what /proc/<pid>/stat tells about a process.
type procStat struct {
	pid, ppid, pgrp int
	state           string
	start           uint64 // clock ticks after boot
	exiting         bool   // it has begun to exit (so have zombies)
}

// pfExiting is the kernel's PF_EXITING, in the flags of /proc/<pid>/stat.
const pfExiting = 0x4

func readProc(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	return parseStat(pid, string(b))
}

// parseStat reads a stat line: "pid (comm) state ppid pgrp session ... starttime ...".
// comm may hold spaces and parentheses, so the fields start after the last ')'.
func parseStat(pid int, s string) (procStat, error) {
	end := strings.LastIndexByte(s, ')')
	if end < 0 {
		return procStat{}, fmt.Errorf("process %d: malformed stat", pid)
	}
	f := strings.Fields(s[end+1:])
	// starttime is field 22 of the line; f[0] is field 3.
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("process %d: short stat", pid)
	}
	ppid, err1 := strconv.Atoi(f[1])
	pgrp, err2 := strconv.Atoi(f[2])
	flags, err3 := strconv.ParseUint(f[6], 10, 64)
	start, err4 := strconv.ParseUint(f[19], 10, 64)
	if err := errors.Join(err1, err2, err3, err4); err != nil {
		return procStat{}, fmt.Errorf("process %d: stat: %w", pid, err)
	}
	return procStat{pid: pid, ppid: ppid, pgrp: pgrp, state: f[0], start: start, exiting: flags&pfExiting != 0}, nil
}

// listProcs reads every process's stat; one that exits meanwhile is left out.
func listProcs() map[int]procStat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	out := make(map[int]procStat, len(entries))
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readProc(pid); err == nil {
			out[pid] = st
		}
	}
	return out
}

// dieWithWorker makes the kernel SIGKILL a step's leader when the worker dies.
func dieWithWorker(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}

// MarkEnv is the environment entry that marks a process, and everything it starts that
// keeps its environment, as one step's: KillMarked(mark) then finds them even after they
// left the step's process group (setsid) and lost their parent. `gantry pod-exec` marks
// the steps it runs in a pod this way.
func MarkEnv(mark string) string { return markVar + "=" + mark }

// KillMarked kills every process this process can see that carries MarkEnv(mark), until
// none is left.
func KillMarked(mark string) { killMarked([]string{mark}, -1) }
