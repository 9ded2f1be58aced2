package source_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/source/sourcetest"
)

// TestMain runs a helper process when asked (see TestEnsureCommitAcrossProcesses), and
// removes the benchmark's repository, built once per test binary.
func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(helperEnsureCommit())
	}
	code := m.Run()
	if benchRoot != "" {
		_ = os.RemoveAll(benchRoot)
	}
	os.Exit(code)
}

const (
	benchCommits        = 1000
	benchFilesPerCommit = 10 // 10,000 files at the head
)

var (
	benchOnce sync.Once
	benchRoot string
	benchSHA  string
	benchErr  error
)

// buildBenchRepo writes a bare repository of benchCommits commits that add
// benchFilesPerCommit files each (and touch one shared file), with git fast-import: far
// quicker than committing 1,000 times.
func buildBenchRepo() (root, sha string, err error) {
	root, err = os.MkdirTemp("", "gantry-source-bench-")
	if err != nil {
		return "", "", err
	}
	sha, err = sourcetest.BigRepo(context.Background(), filepath.Join(root, "big.git"), benchCommits, benchFilesPerCommit, nil)
	return root, sha, err
}

// BenchmarkCheckout checks out the head of a 10,000-file, 1,000-commit repository from a
// warm mirror into a fresh directory (the target is the workspace of one job).
func BenchmarkCheckout(b *testing.B) {
	benchOnce.Do(func() { benchRoot, benchSHA, benchErr = buildBenchRepo() })
	if benchErr != nil {
		b.Fatalf("build the benchmark repository: %v", benchErr)
	}
	ctx := context.Background()
	m, err := source.Open(ctx, source.Config{Dir: b.TempDir(), URL: "file://" + filepath.Join(benchRoot, "big.git")})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = m.Close() })
	if err := m.EnsureCommit(ctx, benchSHA); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name string
		opts source.CheckoutOptions
	}{
		{"shared", source.CheckoutOptions{}},
		{"self-contained", source.CheckoutOptions{SelfContained: true}},
		{"depth1", source.CheckoutOptions{Depth: 1}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			parent := b.TempDir()
			i := 0
			// git's CPU time, apart from the wall clock: on a busy machine the two differ a lot.
			cpuBefore := childCPU(b)
			for b.Loop() {
				dir := filepath.Join(parent, strconv.Itoa(i))
				i++
				if err := source.Checkout(ctx, m, benchSHA, dir, bc.opts); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if err := os.RemoveAll(dir); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64((childCPU(b)-cpuBefore).Milliseconds())/float64(i), "git-cpu-ms/op")
		})
	}
}

// childCPU is the user and system CPU time of this process's finished children.
func childCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
