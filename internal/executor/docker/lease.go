package docker

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor"
)

// A job's container fences itself. Its process 1 holds the worker's lease on it: the
// container is created with its stdin open once (OpenStdin, StdinOnce), and the worker
// holds an attach to that stdin for the container's life, on a connection of its own to
// the engine.
//
//   - When the worker process dies (SIGKILL, a crash, its host's engine connection
//     reset), the connection closes, the engine closes the container's stdin, and process
//     1 kills every process in the container and exits: the steps die with their worker,
//     whatever host the job's next attempt runs on.
//   - While the worker lives it writes a line to that stdin every feedEvery, and at once
//     when the agent moves the job's fence (SetDeadline), saying how long the container
//     may live from now without another line: the worker's own fence deadline less now.
//     A worker that is frozen (SIGSTOP, a paused container, a stalled VM) writes nothing,
//     so its container kills its steps about when the worker would have, had it run.
//
// Process 1 is POSIX sh (the images already need sh and sleep): a background reader turns
// each line into a deadline in /proc/uptime centiseconds (a monotonic clock that a
// stepped wall clock does not move) in a file under /dev/shm (which the engine mounts
// writable in every container; /tmp when it does not), and process 1 compares the clock
// with it every second, or at the deadline when that comes sooner (to the hundredth of a
// second where sleep takes fractions). A line's first word is a fixed tag, so that the
// tail of a line whose head a killed reader took is never read as a number.
//
// Process 1 runs as root (session.user). The end of every step that runs as root kills
// the reader with everything else (kill -1 spares process 1 only), and so does killAll
// (a step of another user cannot reach them): the tick's sleep dies with it, which ends
// process 1's wait, and process 1 looks at the reader again 50 ms later (the reader may
// not have died yet when the sleep had) and starts it again, so that no line the worker writes meanwhile
// waits long in the pipe (a line read late gives the container more time than the
// worker meant). A reader is alive when /proc says it is there and not a zombie. One
// killed alone is started again at the next tick. Waiting for the tick's sleep also
// reaps the steps' orphans, as before.
//
// The tick was half a second at first; sleeping until the deadline when it is nearer
// made the fence as prompt with one tick a second, and each tick is a sleep process:
// about 6 ms of CPU on a loaded two-core machine with fuse-overlayfs, where an idle
// container cost 13.6 ms of CPU a second with half-second ticks and 7 ms with one-second
// ones.

// The exit codes of a container's process 1 that fenced itself.
const (
	// exitWorkerGone: its stdin ended, the worker's attach closed.
	exitWorkerGone = 86
	// exitLeaseOut: its deadline passed without a line from the worker.
	exitLeaseOut = 87
)

// feedEvery is how often the worker tells a container how long it may live.
const feedEvery = time.Second

// unleased is how long a container may live past its worker's last line while it
// follows no lease: a warm container, or one whose caller never set a deadline. It bounds
// how long such a container outlives a worker that froze without closing its
// connection; one whose worker died goes at once all the same.
const unleased = 5 * time.Minute

// feedWriteTimeout bounds the write of one line to a container's stdin.
const feedWriteTimeout = 5 * time.Second

// leaseTag starts every line the worker writes to process 1.
const leaseTag = "gantry-lease"

// processOne is the job container's process 1 (see above); $1 is how long, in
// centiseconds, it lives before the worker's first line. It outlives every step, and a
// stop (SIGTERM) ends it at once. Being process 1, it is the one process that "kill -1"
// in the container spares, which is how a step is stopped (see killAll). A sleep that
// cannot run (126, 127) ends it rather than spin. Its own stderr is fd 4: the shell's
// notes on the jobs it waited for (a sleep killed with a step) go nowhere.
var processOne = []string{"sh", "-c", `trap 'exit 0' TERM INT
trap 'kill -KILL -1; echo "gantry: the worker is gone (its attach to this container closed): killed the steps" >&4; exit ` + strconv.Itoa(exitWorkerGone) + `' USR1
exec 3<&0 </dev/null 4>&2 2>/dev/null
f=/dev/shm/.gantry-lease
[ -d /dev/shm ] && [ -w /dev/shm ] || f=/tmp/.gantry-lease
q=
sleep 0.01 && q=1
cs() { read u _ </proc/uptime; c=$(( ${u%.*} * 100 + 1${u#*.} - 100 )); }
feed() {
	while read -r k v <&3; do
		[ "$k" = ` + leaseTag + ` ] || continue
		case $v in ''|*[!0-9]*) continue;; esac
		cs
		echo $(( c + v / 10 )) >"$f"
	done
	kill -USR1 1
}
alive() { read -r _ _ s _ <"/proc/$r/stat" && [ "$s" != Z ]; }
cs; d=$(( c + $1 ))
feed & r=$!
while :; do
	{ read n <"$f"; } && case $n in ''|*[!0-9]*) ;; *) d=$n;; esac
	cs
	if [ "$c" -ge "$d" ]; then kill -KILL -1; echo "gantry: the worker stopped renewing its lease on this container: killed the steps" >&4; exit ` + strconv.Itoa(exitLeaseOut) + `; fi
	alive || { feed & r=$!; }
	w=$(( d - c )); z=1
	[ $w -lt 100 ] && [ $q ] && z=0.$(( w / 10 ))$(( w % 10 ))
	[ $x ] && [ $q ] && [ $w -gt 5 ] && z=0.05
	x=
	sleep $z & wait $!
	case $? in 126|127) echo "gantry: sleep does not run in this image" >&4; exit 127;; 137|143) x=1;; esac
done`, "sh", strconv.FormatInt(int64(unleased/(10*time.Millisecond)), 10)}

// leaseHolder is the worker's end of a container's lease: the attach to its stdin, and
// what feeds it.
type leaseHolder struct {
	att   client.HijackedResponse
	poke  chan struct{} // a new deadline to write at once
	stop  chan struct{} // closed by close
	ended chan struct{} // closed once the attach ended: the container stopped, or the connection broke
	fed   chan struct{} // closed once feed returned
	once  sync.Once

	mu sync.Mutex
	// deadline is the worker's fence deadline for the container; zero while it has none
	// (unleased).
	deadline time.Time
	// told is when, by the worker's clock, the container's deadline falls per the last
	// line written to it; started says feed runs.
	told    time.Time
	started bool
}

// attachLease attaches to the stdin of container id, which is created and not started
// yet: the container's process 1 sees its stdin end when this attach does. The
// connection is the lease's own, not tied to ctx past the handshake.
func (d *Docker) attachLease(ctx context.Context, id string) (*leaseHolder, error) {
	att, err := d.cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdin: true})
	if err != nil {
		return nil, fmt.Errorf("attach to the stdin of the job's container, which holds the worker's lease on it: %w", err)
	}
	h := &leaseHolder{att: att.HijackedResponse, poke: make(chan struct{}, 1), stop: make(chan struct{}), ended: make(chan struct{}),
		fed: make(chan struct{})}
	go func() {
		// Nothing comes this way (no stdout, no stderr): the read ends with the attach.
		_, _ = io.Copy(io.Discard, att.Reader)
		close(h.ended)
	}()
	return h, nil
}

// start feeds the container from now on; it is started.
func (h *leaseHolder) start() {
	h.mu.Lock()
	h.started = true
	h.mu.Unlock()
	go h.feed()
}

// setDeadline makes t the container's deadline, and tells it at once.
func (h *leaseHolder) setDeadline(t time.Time) {
	h.mu.Lock()
	h.deadline = t
	h.mu.Unlock()
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// feed writes a line every feedEvery and on every new deadline, until the holder is
// closed or the attach ends.
func (h *leaseHolder) feed() {
	defer close(h.fed)
	t := time.NewTicker(feedEvery)
	defer t.Stop()
	for {
		if err := h.write(); err != nil {
			// The attach is broken: process 1 has seen its stdin end, or its
			// container has stopped.
			return
		}
		select {
		case <-h.stop:
			return
		case <-h.ended:
			return
		case <-t.C:
		case <-h.poke:
		}
	}
}

// write tells the container how long it may live from now.
func (h *leaseHolder) write() error {
	h.mu.Lock()
	left := unleased
	if !h.deadline.IsZero() {
		left = max(0, time.Until(h.deadline))
	}
	h.told = time.Now().Add(left)
	h.mu.Unlock()
	_ = h.att.Conn.SetWriteDeadline(time.Now().Add(feedWriteTimeout))
	_, err := fmt.Fprintf(h.att.Conn, "%s %d\n", leaseTag, left.Milliseconds())
	return err
}

// mayHaveFenced says whether the container may have ended its steps on its own: its
// attach ended, or the deadline it was last told is near or past (the reader it was
// told through may have missed a line, which costs it up to a tick or two).
func (h *leaseHolder) mayHaveFenced() bool {
	if h == nil {
		return false
	}
	if h.gone() {
		return true
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.started && !time.Now().Before(h.told.Add(-2*feedEvery))
}

// gone says whether the attach has ended: the container stopped, or this worker's
// connection to the engine broke (and the container stops).
func (h *leaseHolder) gone() bool {
	if h == nil {
		return false
	}
	select {
	case <-h.ended:
		return true
	default:
		return false
	}
}

// close ends the attach, which makes process 1 kill what runs in the container and exit,
// and waits for feed to return.
func (h *leaseHolder) close() {
	if h == nil {
		return
	}
	h.once.Do(func() {
		close(h.stop)
		h.att.Close()
		h.mu.Lock()
		started := h.started
		h.mu.Unlock()
		if started {
			<-h.fed
		}
	})
}

// SetDeadline implements executor.Fenced: the container kills the job's steps at t
// (give or take a tick of its process 1) unless told a later one first, and at once
// when this worker is gone.
func (s *session) SetDeadline(t time.Time) {
	if s.lease != nil {
		s.lease.setDeadline(t)
	}
}

var _ executor.Fenced = (*session)(nil)

// fenceReason says why a container whose process 1 exited with code fenced itself, or
// "" when it did not.
func fenceReason(code int) string {
	switch code {
	case exitWorkerGone:
		return "its worker is gone (the worker's attach to the container closed: the worker died, or its connection to the Docker Engine broke)"
	case exitLeaseOut:
		return "its worker stopped renewing its lease on it in time (the worker was frozen, starved or cut off from the engine)"
	}
	return ""
}

// errFenced is a step's error when the job's container killed it on its own.
func errFenced(code int) error {
	return fmt.Errorf("the job's container killed the step and stopped: %s: %w", fenceReason(code), executor.ErrEnvironmentLost)
}

// fencedError is the error of a step that ended without success, when the container
// ended it on its own: the job's environment was lost, not the step's doing. It is nil
// otherwise. It waits a moment for the engine to record a container that is stopping:
// the step's exec may end before process 1 has.
func (s *session) fencedError(ctx context.Context) error {
	if !s.lease.mayHaveFenced() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, outputDrain)
	defer cancel()
	for {
		r, err := s.d.cli.ContainerInspect(ctx, s.container, client.ContainerInspectOptions{})
		if err == nil && r.Container.State != nil && !r.Container.State.Running {
			if fenceReason(r.Container.State.ExitCode) == "" {
				return nil
			}
			return errFenced(r.Container.State.ExitCode)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(20 * time.Millisecond):
		}
	}
}
