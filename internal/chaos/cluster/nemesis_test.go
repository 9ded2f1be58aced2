package cluster

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The nemesis's actions and the kinds of node they hit. A fault kind is "action-target":
// kill-replica, pause-docker-worker, partition-db, ...
const (
	actKill      = "kill"      // docker kill (SIGKILL to everything in it), then docker start
	actPause     = "pause"     // docker pause (the cgroup frozen: a stalled process), then unpause
	actPartition = "partition" // docker network disconnect, then connect again with its address
)

var (
	actions = []string{actKill, actPause, actPartition}
	// targetKinds: a coordinator replica, a shell worker, a docker-executor worker (whose
	// jobs run in containers of their own beside it), the PostgreSQL server.
	targetKinds = []string{"replica", "worker", "docker-worker", "db"}
)

// allFaultKinds lists every fault kind the nemesis knows, in a fixed order.
func allFaultKinds() []string {
	var out []string
	for _, a := range actions {
		for _, k := range targetKinds {
			out = append(out, a+"-"+k)
		}
	}
	return out
}

// parseFaultKinds reads a comma-separated list of fault kinds; "" is all of them.
func parseFaultKinds(s string) ([]string, error) {
	all := allFaultKinds()
	if strings.TrimSpace(s) == "" {
		return all, nil
	}
	var out []string
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		if !slices.Contains(all, k) {
			return nil, fmt.Errorf("unknown fault %q: want some of %s", k, strings.Join(all, ", "))
		}
		if !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out, nil
}

// parseSeeds reads a comma-separated list of seeds (unsigned decimal numbers).
func parseSeeds(s string) ([]uint64, error) {
	var out []uint64
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		n, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("bad seed %q: want an unsigned decimal number (seeds are comma-separated)", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// fault is one planned fault: what, on which node, when (from the nemesis's start) and
// for how long until it is healed.
type fault struct {
	Kind   string
	Target string
	At     time.Duration
	For    time.Duration
	// Long says For reaches past a lease (TTL + reap grace): a worker's jobs must be
	// fenced and run again elsewhere.
	Long bool
}

func (f fault) action() string { a, _, _ := strings.Cut(f.Kind, "-"); return a }
func (f fault) targetKind() string {
	_, k, _ := strings.Cut(f.Kind, "-")
	return k
}

func (f fault) String() string {
	length := "short"
	if f.Long {
		length = "long"
	}
	return fmt.Sprintf("+%5.1fs %-24s %-4s for %4.1fs (%s)", f.At.Seconds(), f.Kind, f.Target, f.For.Seconds(), length)
}

// nodes names the containers each target kind may hit.
type nodes map[string][]string

// planParams is what a plan is drawn from besides the seed.
type planParams struct {
	duration time.Duration // faults start and heal within it
	kinds    []string
	nodes    nodes
	leaseTTL time.Duration
	grace    time.Duration // the coordinator's reap grace
}

// plan draws the faults of one run of the suite from seed alone: the same seed and
// params give the same faults, whatever the system does meanwhile. Faults come one after
// another, each healed before the next begins, so that at most one node is down at a
// time and every fault's effect can be told apart. Every kind comes once, in an order the
// seed shuffles, before any comes again; a pause or partition is long (past TTL + reap
// grace: the worker's jobs must be fenced and run elsewhere) or short (ridden out) by
// turns, the first by the seed.
func plan(seed uint64, p planParams) ([]fault, error) {
	if p.duration <= 0 {
		return nil, fmt.Errorf("plan faults: the duration must be positive, not %s", p.duration)
	}
	if len(p.kinds) == 0 {
		return nil, errors.New("plan faults: no fault kinds")
	}
	for _, k := range p.kinds {
		_, target, _ := strings.Cut(k, "-")
		if len(p.nodes[target]) == 0 {
			return nil, fmt.Errorf("plan faults: fault %s has no %s node to hit", k, target)
		}
	}
	rng := mrand.New(mrand.NewPCG(seed, seed^0x6a09e667f3bcc908))
	between := func(lo, hi time.Duration) time.Duration { return lo + time.Duration(rng.Int64N(int64(hi-lo)+1)) }
	long := rng.IntN(2) == 0
	var out []fault
	var at time.Duration
	var round []string
	for {
		if len(round) == 0 {
			round = slices.Clone(p.kinds)
			rng.Shuffle(len(round), func(i, j int) { round[i], round[j] = round[j], round[i] })
		}
		kind := round[0]
		round = round[1:]
		_, target, _ := strings.Cut(kind, "-")
		f := fault{Kind: kind, Target: p.nodes[target][rng.IntN(len(p.nodes[target]))]}
		at += between(500*time.Millisecond, 2500*time.Millisecond)
		f.At = at
		switch {
		case strings.HasPrefix(kind, actKill+"-"):
			// Down for a moment: what matters is what the SIGKILL cut short.
			f.For = between(500*time.Millisecond, 2*time.Second)
		case long:
			f.For = between(p.leaseTTL+p.grace+500*time.Millisecond, p.leaseTTL+p.grace+2*time.Second)
			f.Long = true
			long = false
		default:
			f.For = between(500*time.Millisecond, p.leaseTTL/3)
			long = true
		}
		if f.At+f.For > p.duration {
			break
		}
		out = append(out, f)
		at += f.For
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("plan faults: %s is too short for any fault", p.duration)
	}
	return out, nil
}

// faultEvent is a fault as it happened: when (boot-clock time, the ledger's clock) it
// was injected and healed, and what went wrong doing so.
type faultEvent struct {
	fault
	// start is when the fault was injected; healing is when its heal was asked for (a
	// paused container may run again from then on: the engine thaws it before it
	// answers) and healed when the heal returned. Boot clock.
	start, healing, healed time.Duration
	err                    error
}

// injector applies faults to the cluster's containers.
type injector interface {
	inject(ctx context.Context, f fault) error
	heal(ctx context.Context, f fault) error
}

// nemesis runs a plan against the cluster, logging each fault and its times.
type nemesis struct {
	plan []fault
	inj  injector
	logf func(format string, args ...any)

	mu     sync.Mutex
	events []faultEvent
}

// run injects each fault and heals it after its length, until the plan is spent or ctx
// ends; a fault not healed yet is healed before it returns. The first fault comes at its
// time from begin, each next one its planned gap after the one before was healed: an
// engine slow to start a killed container delays what follows rather than cutting it
// short.
func (n *nemesis) run(ctx context.Context, begin time.Time) {
	due := begin
	var plannedEnd time.Duration
	for _, f := range n.plan {
		due = due.Add(f.At - plannedEnd)
		plannedEnd = f.At + f.For
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(due)):
		}
		ev := faultEvent{fault: f, start: bootNow()}
		injected := time.Now()
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		ev.err = n.inj.inject(ictx, f)
		cancel()
		n.logf("nemesis: %s: injected%s", f, errSuffix(ev.err))
		// The heal always runs, ctx or not: the checks read a whole cluster.
		select {
		case <-ctx.Done():
		case <-time.After(time.Until(injected.Add(f.For))):
		}
		hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 60*time.Second)
		ev.healing = bootNow()
		herr := n.inj.heal(hctx, f)
		cancel()
		ev.healed = bootNow()
		ev.err = errors.Join(ev.err, herr)
		n.logf("nemesis: %s: healed after %.1fs%s", f.Kind+" "+f.Target, (ev.healed - ev.start).Seconds(), errSuffix(herr))
		due = time.Now()
		n.mu.Lock()
		n.events = append(n.events, ev)
		n.mu.Unlock()
	}
}

// happened returns the faults injected so far.
func (n *nemesis) happened() []faultEvent {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.events)
}

func errSuffix(err error) string {
	if err == nil {
		return ""
	}
	return " (error: " + err.Error() + ")"
}
