package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/gantry-ci/gantry/internal/source/sourcetest"
)

// checkoutLine is the line a worker writes to a job's log after checking the run's commit
// out: how long it took and whether the mirror had the commit already.
var checkoutLine = regexp.MustCompile(`checkout \S+ at [0-9a-f]{40} \((\d+) ms, mirror (warm|cold)\)`)

// tmpfsDir is where the checkout scenario puts a second worker's workspaces, when it is a
// tmpfs: what a checkout costs there is git's part alone, without the disk's.
const tmpfsDir = "/dev/shm"

// checkoutScenario has real workers check out a 10,000-file, 1,000-commit repository from
// their warm mirror into a fresh workspace, job after job: first with the workspaces on
// the disk, then on a tmpfs.
func checkoutScenario() Scenario {
	const name = "checkout"
	return Scenario{
		Name: name,
		About: "50 jobs, one at a time, each checking a 10,000-file, 1,000-commit repository out from the " +
			"worker's warm mirror into a fresh workspace, through a real worker; workspaces on disk, then on a tmpfs",
		Stores: []string{SQLite},
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			return withRig(ctx, o, name, store, func(g *rig, r *Result) error {
				const filesPerCommit = 10
				// 50 checkouts, not more: on a disk that is slow at creating files one
				// takes seconds, and the series runs twice.
				commits, n := o.scaled(1000), o.scaled(50)
				began := time.Now()
				bare := filepath.Join(g.dir, "big.git")
				sha, err := sourcetest.BigRepo(ctx, bare, commits, filesPerCommit, map[string]string{".gantry.yml": hookPipeline})
				if err != nil {
					return err
				}
				o.Log.Info("checkout: repository built", "commits", commits, "took", time.Since(began))
				r.Params["commits"], r.Params["files"], r.Params["checkouts"] = commits, commits*filesPerCommit+2, n
				h := &hookProject{bare: bare}
				if err := h.connect(ctx, g.c, "big", "file://"+bare, 2); err != nil {
					return err
				}
				// Both workers share one mirror cache, on the disk: only where the
				// workspaces are differs.
				mirrors := filepath.Join(g.dir, "mirrors")
				disk := filepath.Join(g.dir, "work")
				onDisk, cold, err := checkoutSeries(ctx, g, h, sha, disk, mirrors, "disk", n)
				if err != nil {
					return err
				}
				r.countJobs(n+1, "the jobs run, each one checkout, the cold one's included")
				r.addLatency("checkout", onDisk, 300*time.Millisecond)
				r.addMillis("first checkout, cold mirror", cold, nil)
				r.Notes = append(r.Notes, fmt.Sprintf("checkout: what the worker reports in the job's log (ms): opening "+
					"its mirror, finding the commit there, and `git clone --shared` plus the checkout of %d files into "+
					"the job's fresh workspace under %s (%s); the first job, whose worker cloned the mirror, is not counted "+
					"and shows as first checkout, cold mirror", commits*filesPerCommit+2, disk, fsType(disk)))
				shm, ok := tmpfsWorkDir()
				if !ok {
					r.Notes = append(r.Notes, "checkout on tmpfs: not measured, "+tmpfsDir+" is not a tmpfs this user may write")
					return nil
				}
				defer os.RemoveAll(shm)
				onTmpfs, _, err := checkoutSeries(ctx, g, h, sha, shm, mirrors, "tmpfs", n)
				if err != nil {
					return err
				}
				r.countJobs(2*(n+1), "the jobs run, each one checkout, the cold ones' included")
				r.addLatency("checkout on tmpfs", onTmpfs, 300*time.Millisecond)
				r.Notes = append(r.Notes, "checkout on tmpfs: the same, by a second worker whose workspaces are under "+
					shm+" (tmpfs), the mirror still on the disk: git's part without the disk's cost of creating files")
				return nil
			})
		},
	}
}

// tmpfsWorkDir makes a directory on the tmpfs at tmpfsDir, if there is one this user may
// write.
func tmpfsWorkDir() (string, bool) {
	if fsType(tmpfsDir) != "tmpfs" {
		return "", false
	}
	dir, err := os.MkdirTemp(tmpfsDir, "gantry-bench-checkout-")
	if err != nil {
		return "", false
	}
	return dir, true
}

// checkoutSeries starts a worker whose workspaces are under work, runs one job to warm
// its mirror, then n more, one at a time, and returns each checkout's time as its job's
// log tells it, and the first (cold) one's. The worker is stopped at the end.
func checkoutSeries(ctx context.Context, g *rig, h *hookProject, sha, work, mirrors, label string, n int) ([]time.Duration, time.Duration, error) {
	p, err := g.startWorkerAt(work, mirrors)
	if err != nil {
		return nil, 0, err
	}
	defer func() {
		p.stop(10 * time.Second)
		// A stopped worker is no reason for the waits of the next series to give up.
		g.workers = slices.DeleteFunc(g.workers, func(q *process) bool { return q == p })
	}()
	var (
		took []time.Duration
		cold time.Duration
	)
	for i := range n + 1 {
		d, warm, err := checkoutOnce(ctx, g, h, sha, fmt.Sprintf("%s-%d", label, i))
		if err != nil {
			return nil, 0, fmt.Errorf("checkout %d of %d, workspaces on %s: %w", i, n, label, err)
		}
		// The worker removes a job's workspace after reporting it complete: on a slow
		// disk, deleting 10,000 files beside the next checkout would be measured with it.
		if err := waitFor(ctx, 5*time.Minute, "the worker to remove the workspace of checkout "+strconv.Itoa(i), g.processes(), func() (bool, error) {
			left, err := filepath.Glob(filepath.Join(work, "gantry-job-*"))
			return len(left) == 0, err
		}); err != nil {
			return nil, 0, err
		}
		if i == 0 {
			cold = d
			continue
		}
		if !warm {
			return nil, 0, fmt.Errorf("checkout %d of %d, workspaces on %s: the mirror was cold after a first checkout", i, n, label)
		}
		took = append(took, d)
	}
	return took, cold, nil
}

// checkoutOnce delivers a push webhook of sha, waits for its run to succeed on the worker,
// and reads from its job's log how long the checkout took and whether the mirror was warm.
func checkoutOnce(ctx context.Context, g *rig, h *hookProject, sha, delivery string) (time.Duration, bool, error) {
	runs, err := h.deliver(ctx, zeroSHA, sha, delivery)
	if err != nil {
		return 0, false, err
	}
	var run runView
	// Every 20 ms, not waitFor's 2: the polls would take CPU from the checkout measured.
	var last time.Time
	err = waitFor(ctx, 2*time.Minute, "run "+runs[0]+" to end", g.processes(), func() (bool, error) {
		if time.Since(last) < 20*time.Millisecond {
			return false, nil
		}
		last = time.Now()
		if err := h.cl.do(ctx, http.MethodGet, "/api/v1/runs/"+runs[0], "", nil, &run); err != nil {
			return false, err
		}
		switch run.Status {
		case "success", "failed", "cancelled":
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return 0, false, err
	}
	if len(run.Jobs) != 1 {
		return 0, false, fmt.Errorf("run %s has %d jobs, want 1", run.ID, len(run.Jobs))
	}
	log, err := jobLog(ctx, h.cl, run.Jobs[0].ID)
	if err != nil {
		return 0, false, err
	}
	if run.Status != "success" {
		return 0, false, fmt.Errorf("run %s %s; its job's log:\n%s", run.ID, run.Status, log)
	}
	m := checkoutLine.FindStringSubmatch(log)
	if m == nil {
		return 0, false, fmt.Errorf("the log of job %s says nothing of a checkout:\n%s", run.Jobs[0].ID, log)
	}
	ms, err := strconv.Atoi(m[1])
	if err != nil {
		return 0, false, fmt.Errorf("the log of job %s: %w", run.Jobs[0].ID, err)
	}
	return time.Duration(ms) * time.Millisecond, m[2] == "warm", nil
}

// startWorkerAt starts a `gantry worker` of one job whose workspaces are under work and
// whose mirror cache is mirrors.
func (g *rig) startWorkerAt(work, mirrors string) (*process, error) {
	i := len(g.workers)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return nil, fmt.Errorf("make the work dir of worker %d: %w", i, err)
	}
	p, err := startProcess(g.o.Command, fmt.Sprintf("gantry worker %d", i), nil, "worker", "--server", g.c.base,
		"--name", fmt.Sprintf("bench-%d", i), "--max-jobs", "1", "--work-dir", work, "--mirrors", mirrors, "--log-format", "json")
	if err != nil {
		return nil, err
	}
	g.workers = append(g.workers, p)
	g.started = append(g.started, p)
	return p, nil
}

// fsType names the file system dir is on, for the report: where a workspace lives
// decides much of what a checkout costs.
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown file system: " + err.Error()
	}
	switch uint32(st.Type) {
	case 0x01021994:
		return "tmpfs"
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x794C7630:
		return "overlayfs"
	case 0x2FC12FC1:
		return "zfs"
	}
	return fmt.Sprintf("file system type %#x", st.Type)
}
