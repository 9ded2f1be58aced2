package docker

import (
	"sync"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/moby/moby/client"
)

// PullsMade is how many pulls d has made.
func PullsMade(d *Docker) int64 { return d.pullsMade.Load() }

// PullWaiters is how many callers wait on a pull of d's.
func PullWaiters(d *Docker) int64 { return d.pullWaiters.Load() }

// RegistryAuth exposes registryAuth.
func RegistryAuth(ref string, auth map[string]executor.RegistryCredential) (named, encoded, user string, err error) {
	return registryAuth(ref, auth)
}

// WaitRemovals waits until the objects of d's ended jobs are removed.
func WaitRemovals(d *Docker) { d.waitRemovals() }

// HoldRemovals keeps d's removals of ended jobs from starting (on) until released (off).
func HoldRemovals(d *Docker, on bool) {
	if on {
		hold := make(chan struct{})
		d.holdRemovals.Store(&hold)
	} else if hold := d.holdRemovals.Swap(nil); hold != nil {
		close(*hold)
	}
}

// PoolCounts is how many warm containers d's pool made, gave to jobs, and removed
// unused; ready is how many it holds made and not taken.
func PoolCounts(d *Docker) (made, taken, discarded, ready int64) {
	p := d.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, k := range p.kinds {
		for _, w := range k.warms {
			if w.sess != nil {
				ready++
			}
		}
	}
	return p.made, p.taken, p.discarded, ready
}

// NeverStarted makes every inspect of d's step execs answer as for an exec the engine has
// not started (see NotStartedFirst).
func NeverStarted(d *Docker) {
	h := func(r client.ExecInspectResult) client.ExecInspectResult {
		return client.ExecInspectResult{ID: r.ID, ContainerID: r.ContainerID}
	}
	d.execInspected.Store(&h)
}

// NotStartedFirst makes the first inspect of each of d's step execs answer as the engine
// does for an exec it has not started yet: not running, no pid, no exit code (which the
// client gives as 0). The engine answers so when the inspect comes between the attach
// and its start of the process; this makes every step meet that window.
func NotStartedFirst(d *Docker) {
	var mu sync.Mutex
	seen := map[string]bool{}
	h := func(r client.ExecInspectResult) client.ExecInspectResult {
		mu.Lock()
		defer mu.Unlock()
		if seen[r.ID] {
			return r
		}
		seen[r.ID] = true
		return client.ExecInspectResult{ID: r.ID, ContainerID: r.ContainerID}
	}
	d.execInspected.Store(&h)
}

// ProcessOf is what LabelProcess says of process pid, a child of this one.
func ProcessOf(pid int) string { return processOf(pid) }

// The exit codes of a container's process 1 that fenced itself.
const (
	ExitWorkerGone = exitWorkerGone
	ExitLeaseOut   = exitLeaseOut
)

// Disarm exposes disarm.
func Disarm(dir string) (int, error) { return disarm(dir) }
