package executor

import (
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// TestContainmentRefusesPlantedRecords: the records in a state dir say what a worker
// kills as it starts, so a state dir others can write is refused, and a record naming
// a cgroup that is not a step's is not acted on.
func TestContainmentRefusesPlantedRecords(t *testing.T) {
	t.Parallel()
	shared := t.TempDir()
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := NewContainment(ContainmentConfig{StateDir: shared, NoCgroup: true}); err == nil {
		t.Error("NewContainment on a world-writable state dir succeeded")
	}

	own, err := ownCgroup()
	if err != nil {
		t.Fatal(err)
	}
	victim := filepath.Join(own, "gantry-test-victim-"+strconv.Itoa(os.Getpid()))
	if err := os.Mkdir(victim, 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := os.Open(victim)
	if err != nil {
		t.Fatal(err)
	}
	sleep := exec.Command("sleep", "60")
	sleep.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(fd.Fd())}
	err = sleep.Start()
	_ = fd.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = sleep.Process.Kill()
		_ = sleep.Wait()
		_ = killCgroupTree(victim)
	})

	state := t.TempDir()
	// A dead owner (no such pid), so the record would be acted on if it were trusted.
	planted := filepath.Join(state, "999999999.1-1.json")
	if err := os.WriteFile(planted, []byte(`{"cgroup":"`+victim+`"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := NewContainment(ContainmentConfig{StateDir: state, NoCgroup: true})
	if err != nil {
		t.Fatal(err)
	}
	// Not kill(pid, 0): a killed child stays a zombie until we wait for it.
	if st, err := readProc(sleep.Process.Pid); err != nil || st.state == "Z" {
		t.Errorf("a record naming a cgroup that is not a step's killed its process: %+v, %v", st, err)
	}
	if _, err := os.Stat(victim); err != nil {
		t.Errorf("a record naming a cgroup that is not a step's removed it: %v", err)
	}
	if _, err := os.Stat(planted); !os.IsNotExist(err) {
		t.Errorf("the planted record is still there: %v", err)
	}
	_ = c.Close()
}

// TestScopeTree: a step's processes are its process group, the marked children of the
// worker, and all below them; a snapshot that may have missed one says so.
func TestScopeTree(t *testing.T) {
	t.Parallel()
	const self, leader = 100, 200
	procs := func(ps ...procStat) map[int]procStat {
		m := map[int]procStat{self: {pid: self, ppid: 1, pgrp: self, state: "S"}, 1: {pid: 1, state: "S"}}
		for _, p := range ps {
			m[p.pid] = p
		}
		return m
	}
	marks := map[int]bool{}
	unreadable := map[int]bool{}
	marked := func(pid int) (bool, bool) { return marks[pid], !unreadable[pid] }
	pids := func(ps []procStat) map[int]bool {
		out := map[int]bool{}
		for _, p := range ps {
			out[p.pid] = true
		}
		return out
	}

	tree := procs(
		procStat{pid: leader, ppid: self, pgrp: leader, state: "S"},
		procStat{pid: 201, ppid: leader, pgrp: leader, state: "S"},
		procStat{pid: 202, ppid: 201, pgrp: 202, state: "S"},       // setsid'ed below the leader
		procStat{pid: 203, ppid: self, pgrp: 203, state: "S"},      // escaped, adopted, marked
		procStat{pid: 204, ppid: 203, pgrp: 203, state: "S"},       // below it
		procStat{pid: 205, ppid: leader, pgrp: leader, state: "Z"}, // a zombie: not live
		procStat{pid: 300, ppid: self, pgrp: 300, state: "S"},      // another step's leader
		procStat{pid: 301, ppid: self, pgrp: 301, state: "S"},      // another step's escaped process
		procStat{pid: 400, ppid: 1, pgrp: 400, state: "S"},         // not the worker's
		procStat{pid: 401, ppid: 1, pgrp: 400, state: "S", exiting: true},
	)
	marks[203], marks[401] = true, true
	unreadable[401] = true
	got, unsure := scopeTree(tree, self, leader, true, marked)
	want := map[int]bool{leader: true, 201: true, 202: true, 203: true, 204: true}
	if g := pids(got); !maps.Equal(g, want) || unsure {
		t.Errorf("subreaper: members %v, unsure %v; want %v, sure", g, unsure, want)
	}

	// Without the subreaper, marked processes anywhere are the step's.
	got, _ = scopeTree(tree, self, leader, false, marked)
	want[401] = true
	if g := pids(got); !maps.Equal(g, want) {
		t.Errorf("no subreaper: members %v; want %v", g, want)
	}

	// A child of the worker that is exiting has no environment to read, and the
	// processes below it are not the worker's yet: the snapshot is unsure.
	exiting := procs(
		procStat{pid: 203, ppid: self, pgrp: 203, state: "R", exiting: true},
		procStat{pid: 204, ppid: 203, pgrp: 203, state: "S"},
	)
	marks[203], unreadable[203] = false, true
	if got, unsure := scopeTree(exiting, self, leader, true, marked); len(got) != 0 || !unsure {
		t.Errorf("an exiting child: members %v, unsure %v; want none, unsure", pids(got), unsure)
	}
	// Once it is a zombie its children have moved: sure again.
	exiting[203] = procStat{pid: 203, ppid: self, pgrp: 203, state: "Z", exiting: true}
	if _, unsure := scopeTree(exiting, self, leader, true, marked); unsure {
		t.Error("a zombie child: unsure")
	}
}

// TestScopeTreeRereadsOrphans: a process read while its parent lived, whose parent was
// reaped before the pass read it, is read again where it settled.
func TestScopeTreeRereadsOrphans(t *testing.T) {
	t.Parallel()
	child := exec.Command("sleep", "60")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	st, err := readProc(child.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	self := os.Getpid()
	stale := st
	stale.ppid = 1 << 30 // no such process: its parent, reaped
	procs := map[int]procStat{st.pid: stale}
	got, unsure := scopeTree(procs, self, -1, true, func(pid int) (bool, bool) { return pid == st.pid, true })
	if len(got) != 1 || got[0].pid != st.pid || got[0].ppid != self || unsure {
		t.Errorf("members %+v, unsure %v; want the child, read again with the worker as its parent", got, unsure)
	}
}

func TestParseStatExiting(t *testing.T) {
	t.Parallel()
	line := func(flags string) string {
		return "42 (a) b) S 1 42 42 0 -1 " + flags + " 0 0 0 0 0 0 0 0 20 0 1 0 12345 0 0"
	}
	for flags, want := range map[string]bool{"4194304": false, "4194308": true} {
		st, err := parseStat(42, line(flags))
		if err != nil {
			t.Fatal(err)
		}
		if st.exiting != want || st.ppid != 1 || st.pgrp != 42 || st.start != 12345 {
			t.Errorf("flags %s: %+v, want exiting %v, ppid 1, pgrp 42, start 12345", flags, st, want)
		}
	}
}
