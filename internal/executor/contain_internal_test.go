package executor

import (
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
