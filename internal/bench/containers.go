package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	docker "github.com/moby/moby/client"
)

// benchImage is the local image the container scenarios run their jobs in: a static
// busybox and its applets, imported on the spot (no registry is needed).
const benchImage = "gantry-bench/busybox:1"

// busyboxPath is the static busybox the image is made of (Debian's busybox-static).
const busyboxPath = "/bin/busybox"

// containerOverheadTarget is what starting a job's container may add to a job, with a
// local image.
const containerOverheadTarget = 300 * time.Millisecond

// containerOverheadScenario times the same chain of one-step jobs through `gantry run`
// twice, on the host (shell) and in a container of a local image each (docker): the
// difference per job is what a container job costs over a shell one. A chain, so that
// the jobs run one after another and the difference adds up job by job.
func containerOverheadScenario() Scenario {
	const name, jobs, repeats = "container-overhead", 20, 3
	return Scenario{
		Name:    name,
		About:   "a chain of 20 jobs of `true`, on the host and then each in a container of a local image, through `gantry run` (`--docker on`)",
		Stores:  []string{SQLite},
		Repeats: repeats,
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			if err := importBenchImage(ctx); err != nil {
				return nil, err
			}
			dir, cleanup, err := scenarioDir(o, name)
			if err != nil {
				return nil, err
			}
			defer cleanup()
			n := max(2, o.scaled(jobs))
			shell := filepath.Join(dir, "shell.yml")
			image := filepath.Join(dir, "image.yml")
			if err := os.WriteFile(shell, []byte(chainDAG(n)), 0o644); err != nil {
				return nil, err
			}
			if err := os.WriteFile(image, []byte(inImage(chainDAG(n))), 0o644); err != nil {
				return nil, err
			}
			times := o.repeats(repeats)
			median := func(file string) (wall, cpu time.Duration, err error) {
				var runs []runTime
				for range times {
					t, err := timeRun(ctx, o, file, "--docker", "on")
					if err != nil {
						return 0, 0, err
					}
					runs = append(runs, t)
				}
				wall, cpu, _ = medianRun(runs)
				return wall, cpu, nil
			}
			onHost, hostCPU, err := median(shell)
			if err != nil {
				return nil, err
			}
			inContainers, containerCPU, err := median(image)
			if err != nil {
				return nil, err
			}
			workerCPU, err := dockerWorkerCPU(ctx, o, name, store, inImage(chainDAG(n)), n, times)
			if err != nil {
				return nil, err
			}
			r := &Result{Params: map[string]any{"jobs": n, "runs": times, "image": benchImage}}
			r.addMillis("gantry run's CPU per job on the host", hostCPU/time.Duration(n), nil)
			r.addMillis("gantry run's CPU per job in containers", containerCPU/time.Duration(n), nil)
			r.addMillis("docker worker's CPU per job", workerCPU, nil)
			r.addMillis("wall on the host", onHost, nil)
			r.addMillis("wall in containers", inContainers, nil)
			r.addMillis("overhead per job", max(0, inContainers-onHost)/time.Duration(n), atMost(float64(containerOverheadTarget.Milliseconds())))
			r.Notes = append(r.Notes, "overhead per job: (wall in containers - wall on the host) / jobs, medians of `gantry run` of the same chain; "+
				"a container job starts its network and container, runs its step with exec and removes them, the image already local (pull: never)",
				"gantry run's CPU: of `gantry run` and every process it reaped, the Docker client's work included; the Engine's and the containers' own CPU is not in it",
				"docker worker's CPU per job: of a `gantry worker --executor docker` process (warm pool of 2, one job at a time) that ran the same chain in containers, "+
					"submitted to a `gantry server` as many times as gantry run ran it, from its registration to the end of the last run (its threads' /proc schedstat; "+
					"its start-up and shutdown left out) divided by the jobs; GANTRY_BENCH_WORKER_PROFILE=DIR has it write its CPU profile there")
			return r, nil
		},
	}
}

// workerRegistered is the line a `gantry worker` logs once it has registered.
var workerRegistered = regexp.MustCompile(`"msg":"worker (registered)"`)

// dockerWorkerCPU runs the pipeline def, of n jobs in containers, times times through
// a `gantry server` and one `gantry worker --executor docker` of one slot, and returns
// the worker's CPU per job: from its registration to the end of the last run.
func dockerWorkerCPU(ctx context.Context, o *Options, name, store, def string, n, times int) (time.Duration, error) {
	var cpu time.Duration
	_, err := withRig(ctx, o, name+"-worker", store, func(g *rig, r *Result) error {
		work := filepath.Join(g.dir, "docker-worker")
		if err := os.MkdirAll(work, 0o755); err != nil {
			return err
		}
		var env []string
		if pdir := os.Getenv("GANTRY_BENCH_WORKER_PROFILE"); pdir != "" {
			env = append(env, "GANTRY_CPU_PROFILE="+filepath.Join(pdir, filepath.Base(g.dir)+"-docker-worker.pprof"))
		}
		p, err := startProcess(g.o.Command, "gantry worker (docker)", env, "worker", "--server", g.c.base, "--executor", "docker",
			"--name", "bench-docker", "--max-jobs", "1", "--work-dir", work, "--log-format", "json")
		if err != nil {
			return err
		}
		g.workers = append(g.workers, p)
		g.started = append(g.started, p)
		// Its start-up (and, below, its shutdown, which removes the warm containers) is
		// once a worker, not a job's.
		if _, err := p.waitOutput(ctx, workerRegistered, time.Minute); err != nil {
			return err
		}
		idle, err := threadsCPU(p.pid)
		if err != nil {
			return err
		}
		cl := g.c.client()
		for range times {
			run, err := cl.submit(ctx, []byte(def))
			if err != nil {
				return err
			}
			end, err := g.waitRun(ctx, cl, run.ID, time.Duration(n)*30*time.Second)
			if err != nil {
				return err
			}
			if end.Status != "success" {
				return fmt.Errorf("run %s is %s, want success; the worker's output ends:\n%s", run.ID, end.Status, p.out.last(4<<10))
			}
		}
		busy, err := threadsCPU(p.pid)
		if err != nil {
			return err
		}
		cpu = (busy - idle) / time.Duration(n*times)
		return nil
	})
	return cpu, err
}

// threadsCPU is a running process's CPU time so far, the sum of its threads' times on
// the CPU in /proc/PID/task/TID/schedstat: nanoseconds, where /proc/PID/stat counts
// 10 ms ticks, which over a run of 20 jobs is half a millisecond a job. The time of
// threads that have exited is not in it; a Go process's threads seldom exit.
func threadsCPU(pid int) (time.Duration, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, fmt.Errorf("read the threads of process %d: %w", pid, err)
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, t.Name(), "schedstat"))
		if errors.Is(err, fs.ErrNotExist) {
			continue // the thread exited meanwhile
		}
		if err != nil {
			return 0, err
		}
		f := strings.Fields(string(b))
		if len(f) == 0 {
			return 0, fmt.Errorf("empty schedstat of thread %s of process %d", t.Name(), pid)
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("schedstat of thread %s of process %d: %w", t.Name(), pid, err)
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// inImage gives every job of a DAG pipeline (and singleJob's) the bench image.
func inImage(def string) string {
	return strings.ReplaceAll(def, "    steps: [{run: \"true\"}]\n",
		"    image: "+benchImage+"\n    container: {pull: never}\n    steps: [{run: \"true\"}]\n")
}

// importBenchImage makes benchImage from the host's static busybox, unless it is there.
func importBenchImage(ctx context.Context) error {
	const needEngine = "the container scenarios need a Docker Engine (DOCKER_HOST or the default socket)"
	cli, err := docker.New(docker.FromEnv)
	if err != nil {
		return fmt.Errorf("%s: %w", needEngine, err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	pctx, stop := context.WithTimeout(ctx, 10*time.Second)
	defer stop()
	if _, err := cli.Ping(pctx, docker.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return fmt.Errorf("%s: %w", needEngine, err)
	}
	if _, err := cli.ImageInspect(ctx, benchImage); err == nil {
		return nil
	}
	bb, err := os.ReadFile(busyboxPath)
	if err != nil {
		return fmt.Errorf("the container scenarios build their image from a static busybox at %s (busybox-static): %w", busyboxPath, err)
	}
	list, err := exec.CommandContext(ctx, busyboxPath, "--list-full").Output()
	if err != nil {
		return fmt.Errorf("%s --list-full: %w", busyboxPath, err)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	epoch := time.Unix(0, 0)
	for _, d := range []string{"bin", "sbin", "usr", "usr/bin", "usr/sbin", "etc", "tmp", "root", "proc", "sys", "dev", "workspace"} {
		mode := int64(0o755)
		if d == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: mode, ModTime: epoch}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "bin/busybox", Mode: 0o755, Size: int64(len(bb)), ModTime: epoch}); err != nil {
		return err
	}
	if _, err := tw.Write(bb); err != nil {
		return err
	}
	passwd := "root:x:0:0:root:/root:/bin/sh\n"
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "etc/passwd", Mode: 0o644, Size: int64(len(passwd)), ModTime: epoch}); err != nil {
		return err
	}
	if _, err := io.WriteString(tw, passwd); err != nil {
		return err
	}
	for _, a := range strings.Fields(string(list)) {
		a = strings.TrimPrefix(a, "/")
		dir := filepath.Dir(a)
		if a == "bin/busybox" || !slices.Contains([]string{"bin", "sbin", "usr/bin", "usr/sbin"}, dir) {
			continue
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: a, Linkname: "/bin/busybox", Mode: 0o777, ModTime: epoch}); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	res, err := cli.ImageImport(ctx, docker.ImageImportSource{Source: &buf, SourceName: "-"}, benchImage,
		docker.ImageImportOptions{Changes: []string{"ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", `CMD ["sh"]`}})
	if err != nil {
		return fmt.Errorf("import %s: %w", benchImage, err)
	}
	defer res.Close()
	_, _ = io.Copy(io.Discard, res)
	if _, err := cli.ImageInspect(ctx, benchImage); err != nil {
		return fmt.Errorf("import %s: %w", benchImage, err)
	}
	return nil
}
