package source_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/source"
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
	bare := filepath.Join(root, "big.git")
	env := testEnv(root)
	run := func(stdin func(w *bufio.Writer) error, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Env = env
		var out []byte
		if stdin != nil {
			in, err := cmd.StdinPipe()
			if err != nil {
				return "", err
			}
			if err := cmd.Start(); err != nil {
				return "", err
			}
			w := bufio.NewWriterSize(in, 1<<20)
			werr := stdin(w)
			if werr == nil {
				werr = w.Flush()
			}
			in.Close()
			if err := cmd.Wait(); err != nil || werr != nil {
				return "", fmt.Errorf("git %v: %v %v", args, err, werr)
			}
			return "", nil
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("git %v: %v: %s", args, err, out)
		}
		return string(out), nil
	}
	if _, err := run(nil, "init", "--quiet", "--bare", "-b", "main", bare); err != nil {
		return root, "", err
	}
	_, err = run(func(w *bufio.Writer) error {
		n := 0
		for c := range benchCommits {
			msg := "commit " + strconv.Itoa(c) + "\n"
			fmt.Fprintf(w, "commit refs/heads/main\ncommitter Bench <bench@gantry.invalid> %d +0000\ndata %d\n%s", 1700000000+c, len(msg), msg)
			for range benchFilesPerCommit {
				content := fmt.Sprintf("file %d\n%0200d\n", n, n)
				fmt.Fprintf(w, "M 100644 inline d%02d/s%02d/f%05d.txt\ndata %d\n%s\n", n%50, (n/50)%20, n, len(content), content)
				n++
			}
			content := "changed in " + strconv.Itoa(c) + "\n"
			fmt.Fprintf(w, "M 100644 inline README\ndata %d\n%s\n", len(content), content)
		}
		return nil
	}, "-C", bare, "fast-import", "--quiet")
	if err != nil {
		return root, "", err
	}
	out, err := run(nil, "-C", bare, "rev-parse", "main")
	if err != nil {
		return root, "", err
	}
	return root, out[:40], nil
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
