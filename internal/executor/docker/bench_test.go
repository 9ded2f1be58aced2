package docker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
)

// BenchmarkJob measures a container job's overhead with a local image: Begin, one
// step that does nothing, End, one job after the other, with the warm pool of two
// containers and without. Compare with BenchmarkShellStep for the overhead over the
// shell executor.
func BenchmarkJob(b *testing.B) {
	for _, pool := range []int{0, 2} {
		b.Run(fmt.Sprintf("pool=%d", pool), func(b *testing.B) { benchmarkJob(b, pool) })
	}
}

func benchmarkJob(b *testing.B, pool int) {
	cli := dockertest.Client(b)
	workerID := fmt.Sprintf("bench-%d-%d", os.Getpid(), time.Now().UnixNano())
	dockertest.NoLeftovers(b, cli, workerID)
	img := dockertest.Image(b, dockertest.Busybox)
	d, err := docker.New(context.Background(), docker.Config{WorkerID: workerID, WarmPool: pool})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	parent := b.TempDir()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// A workspace of its own per job, as the agent makes: a warm container's
		// takes its place.
		ws := filepath.Join(parent, fmt.Sprintf("job-%d", i))
		if err := os.Mkdir(ws, 0o700); err != nil {
			b.Fatal(err)
		}
		s, err := d.Begin(b.Context(), executor.Job{ID: "bench", Attempt: i, WorkerID: workerID, Workspace: ws, Image: img})
		if err != nil {
			b.Fatal(err)
		}
		if res, err := s.Run(b.Context(), executor.Step{Script: "true"}); err != nil || res.ExitCode != 0 {
			b.Fatalf("step: %+v %v", res, err)
		}
		if err := s.End(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkShellStep is the same step on the shell executor, the baseline.
func BenchmarkShellStep(b *testing.B) {
	ws := b.TempDir()
	for b.Loop() {
		if res, err := (executor.Shell{}).Run(b.Context(), executor.Step{Script: "true", Dir: ws, Env: []string{"PATH=/usr/bin:/bin"}}); err != nil || res.ExitCode != 0 {
			b.Fatalf("step: %+v %v", res, err)
		}
	}
}
