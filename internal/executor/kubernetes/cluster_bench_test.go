package kubernetes_test

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/kubernetes"
)

// The cluster benchmarks (make bench-k8s; BENCHMARKS.md "The kubernetes executor on a
// real cluster"). Times are medians of interleaved rounds. CPU: the whole machine's
// (/proc/stat) net of what it uses idle, so it must be quiet; the pods' own (their
// cgroup); and this process's (rusage), which is the worker's side of the executor.

// podTimes is one job in a pod: create to ready, create to the end of a first `true`
// step, and End to the pod being gone from the API.
type podTimes struct{ ready, firstStep, teardown time.Duration }

func onePod(b testing.TB, en *env, i int) podTimes {
	ctx := context.Background()
	j := en.job(b, strconv.Itoa(i))
	t0 := time.Now()
	s, err := en.e.Begin(ctx, j)
	if err != nil {
		b.Fatal(err)
	}
	t1 := time.Now()
	res, err := s.Run(ctx, executor.Step{Script: "true", Dir: j.Workspace})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("first step: %+v %v", res, err)
	}
	t2 := time.Now()
	pod := podOf(b, en, j.ID)
	if err := s.End(ctx); err != nil {
		b.Fatal(err)
	}
	waitGone(b, en, pod)
	return podTimes{ready: t1.Sub(t0), firstStep: t2.Sub(t0), teardown: time.Since(t2)}
}

func podOf(b testing.TB, en *env, job string) string {
	pods, err := en.c.Client.CoreV1().Pods(en.ns).List(context.Background(), metav1.ListOptions{LabelSelector: kubernetes.LabelJob + "=" + job})
	if err != nil || len(pods.Items) != 1 {
		b.Fatalf("the pod of job %s: %v %v", job, pods, err)
	}
	return pods.Items[0].Name
}

func waitGone(b testing.TB, en *env, pod string) {
	deadline := time.Now().Add(3 * time.Minute)
	for {
		_, err := en.c.Client.CoreV1().Pods(en.ns).Get(context.Background(), pod, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("pod %s not gone 3 minutes after End: %v", pod, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// shellStep is the same first step with the shell executor, for the overhead.
func shellStep(b testing.TB) time.Duration {
	dir := b.TempDir()
	t0 := time.Now()
	res, err := executor.Shell{}.Run(context.Background(), executor.Step{Script: "true", Dir: dir, Env: []string{"PATH=" + os.Getenv("PATH")}})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("shell step: %+v %v", res, err)
	}
	return time.Since(t0)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// BenchmarkClusterPodOverhead: in each round (b.N of them: -benchtime=10x), a job's pod
// and then the shell executor's same first step: create to ready, create to the first
// step's end, End to gone, and the shell step; medians, and the overhead of the pod's
// first step over the shell's.
func BenchmarkClusterPodOverhead(b *testing.B) {
	en := newEnv(b)
	onePod(b, en, -1) // images into the page cache, the namespace warm
	idle := idleCPU()
	var ready, first, down, shell []time.Duration
	cpu0, self0, pods0, t0 := machineCPU(), selfCPU(), podsCPU(), time.Now()
	b.ResetTimer()
	for i := range b.N {
		p := onePod(b, en, i)
		ready, first, down = append(ready, p.ready), append(first, p.firstStep), append(down, p.teardown)
		shell = append(shell, shellStep(b))
	}
	b.StopTimer()
	b.ReportMetric(ms(median(ready)), "ms-ready")
	b.ReportMetric(ms(median(first)), "ms-first-step")
	b.ReportMetric(ms(median(down)), "ms-teardown")
	b.ReportMetric(ms(median(shell)), "ms-shell-step")
	b.ReportMetric(ms(median(first)-median(shell)), "ms-overhead")
	busy := machineCPU() - cpu0 - time.Duration(idle*float64(time.Since(t0)))
	b.ReportMetric(busy.Seconds()/float64(b.N), "machine-cpu-s/job")
	b.ReportMetric(idle, "machine-idle-cpu-s/s")
	b.ReportMetric((selfCPU()-self0).Seconds()/float64(b.N), "worker-cpu-s/job")
	b.ReportMetric((podsCPU()-pods0).Seconds()/float64(b.N), "pods-cpu-s/job")
}

// idleCPU is the CPU the cluster uses per second of wall time with no job: what the
// per-job figures leave out.
func idleCPU() float64 {
	c0, t0 := machineCPU(), time.Now()
	time.Sleep(5 * time.Second)
	return (machineCPU() - c0).Seconds() / time.Since(t0).Seconds()
}

// BenchmarkCluster50Jobs: 50 jobs begun at once on the one node, each running a first
// `true` step and ending: the wall time until every first step has run, until every
// pod is gone, and the CPU per job.
func BenchmarkCluster50Jobs(b *testing.B) {
	const n = 50
	en := newEnv(b)
	onePod(b, en, -1)
	idle := idleCPU()
	var all, gone []time.Duration
	var cpu, self, pods time.Duration
	b.ResetTimer()
	for range b.N {
		cpu0, self0, pods0 := machineCPU(), selfCPU(), podsCPU()
		t0 := time.Now()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var lastFirst time.Time
		for i := range n {
			wg.Go(func() {
				ctx := context.Background()
				j := en.job(b, strconv.Itoa(i))
				s, err := en.e.Begin(ctx, j)
				if err != nil {
					b.Error(err)
					return
				}
				if res, err := s.Run(ctx, executor.Step{Script: "true", Dir: j.Workspace}); err != nil || res.ExitCode != 0 {
					b.Errorf("first step: %+v %v", res, err)
				}
				mu.Lock()
				if now := time.Now(); now.After(lastFirst) {
					lastFirst = now
				}
				mu.Unlock()
				pod := podOf(b, en, j.ID)
				if err := s.End(ctx); err != nil {
					b.Error(err)
				}
				waitGone(b, en, pod)
			})
		}
		wg.Wait()
		all, gone = append(all, lastFirst.Sub(t0)), append(gone, time.Since(t0))
		cpu += machineCPU() - cpu0 - time.Duration(idle*float64(time.Since(t0)))
		self += selfCPU() - self0
		pods += podsCPU() - pods0
	}
	b.StopTimer()
	b.ReportMetric(median(all).Seconds(), "s-all-first-steps")
	b.ReportMetric(median(gone).Seconds(), "s-all-gone")
	b.ReportMetric(cpu.Seconds()/float64(b.N*n), "machine-cpu-s/job")
	b.ReportMetric(idle, "machine-idle-cpu-s/s")
	b.ReportMetric(self.Seconds()/float64(b.N*n), "worker-cpu-s/job")
	b.ReportMetric(pods.Seconds()/float64(b.N*n), "pods-cpu-s/job")
}

// machineCPU is the CPU the whole machine has used (user, nice, system, irq, softirq
// and steal in /proc/stat): the cluster's processes, the pods, and this process, which
// is the worker's side. Taken on a quiet machine, net of idleCPU, it is what the jobs
// cost; per-process figures would miss the containerd shims, which take their CPU
// with them when they exit.
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	var ticks int64
	for _, k := range []int{1, 2, 3, 6, 7, 8} {
		if k < len(f) {
			n, _ := strconv.ParseInt(f[k], 10, 64)
			ticks += n
		}
	}
	return time.Duration(ticks) * (time.Second / 100) // USER_HZ
}

// podsCPU is the CPU the pods' own processes have used (cgroup v1's cpuacct of
// kubepods, where the kubelet puts them).
func podsCPU() time.Duration {
	b, err := os.ReadFile("/sys/fs/cgroup/cpuacct/kubepods/cpuacct.usage")
	if err != nil {
		return 0
	}
	n, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return time.Duration(n)
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
