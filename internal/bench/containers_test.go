package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestInImage: the image variants run the same pipelines as the DAG scenarios, every
// job of them in the bench image, never pulled.
func TestInImage(t *testing.T) {
	for name, def := range map[string]string{"independent": independentDAG(3), "chain": chainDAG(3), "fan": fanDAG(3), "single": string(singleJob())} {
		got := inImage(def)
		jobs := strings.Count(def, "steps:")
		if n := strings.Count(got, "    image: "+benchImage+"\n    container: {pull: never}\n    steps:"); n != jobs {
			t.Errorf("%s: %d of %d jobs in the image:\n%s", name, n, jobs, got)
		}
		if strings.ReplaceAll(strings.ReplaceAll(got, "    image: "+benchImage+"\n", ""), "    container: {pull: never}\n", "") != def {
			t.Errorf("%s: inImage changed more than the jobs' image:\n%s", name, got)
		}
	}
}

// TestImageScenariosWithoutEngine: with no engine at DOCKER_HOST the container
// scenarios fail at once, saying what they need.
func TestImageScenariosWithoutEngine(t *testing.T) {
	t.Setenv("DOCKER_HOST", "tcp://127.0.0.1:1")
	scenarios, err := Select([]string{"dag-independent-image", "dag-chain-image", "dag-fan-image", "container-overhead"})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range scenarios {
		_, err := s.Run(context.Background(), &Options{Scale: 1, Dir: t.TempDir()}, SQLite)
		if err == nil || !strings.Contains(err.Error(), "need a Docker Engine (DOCKER_HOST or the default socket)") {
			t.Errorf("%s without an engine: %v", s.Name, err)
		}
	}
}

// TestThreadsCPU: a live process's CPU from its threads' schedstat grows with the work
// it does, and a process that is gone is an error, not zero.
func TestThreadsCPU(t *testing.T) {
	before, err := threadsCPU(os.Getpid())
	if err != nil || before <= 0 {
		t.Fatalf("this process's CPU: %v, %v; want a positive time", before, err)
	}
	sum := 0
	for i := range 50_000_000 {
		sum += i % 7
	}
	after, err := threadsCPU(os.Getpid())
	if err != nil || after <= before {
		t.Errorf("after a busy loop (%d): %v, then %v, %v; want more", sum, before, after, err)
	}
	done := exec.Command("true")
	if err := done.Run(); err != nil {
		t.Fatal(err)
	}
	if got, err := threadsCPU(done.Process.Pid); err == nil {
		t.Errorf("a process that exited: %v, no error", got)
	}
}
