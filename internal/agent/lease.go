package agent

import (
	"sync"
	"time"
)

// fenceMargin is how long before its lease runs out, by the worker's own clock, a job
// that could not renew it is stopped: an eighth of the TTL. With the coordinator's reap
// grace (by default also an eighth) it absorbs the clocks' rate drift over one TTL and
// the time the kill takes (docs/reliability.md has the bound).
func fenceMargin(ttl time.Duration) time.Duration { return ttl / 8 }

// fence stops a job whose lease was not renewed in time. It counts by the worker's
// monotonic clock from when the last request that the coordinator answered with a
// renewal (the claim, then each heartbeat) was sent: the coordinator received it later,
// so by that count the lease never lasts longer than the coordinator grants it. When
// the lease has less than the margin left, fire runs, once.
type fence struct {
	margin time.Duration
	fire   func(left time.Duration)

	mu    sync.Mutex
	until time.Time // when the lease ends; zero while unknown
	timer *time.Timer
	done  bool // fired or stopped
	// tell, when set, is told every new deadline (watch).
	tell func(deadline time.Time)
}

// newFence arms a fence for a lease granted by a request sent at sent and lasting
// validFor from its receipt; a validFor of zero (a coordinator that does not say) arms
// it only at the first renewal.
func newFence(sent time.Time, validFor, margin time.Duration, fire func(left time.Duration)) *fence {
	f := &fence{margin: margin, fire: fire}
	f.renewed(sent, validFor)
	return f
}

// renewed extends the lease: a request sent at sent renewed it for validFor. A renewal
// that ends no later than the one known changes nothing.
func (f *fence) renewed(sent time.Time, validFor time.Duration) {
	if validFor <= 0 {
		return
	}
	until := sent.Add(validFor)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.done || !until.After(f.until) {
		return
	}
	f.until = until
	if f.tell != nil {
		f.tell(until.Add(-f.margin))
	}
	wait := time.Until(until) - f.margin
	if f.timer == nil {
		f.timer = time.AfterFunc(wait, f.expire)
		return
	}
	f.timer.Reset(wait)
}

// expire fires the fence unless a renewal moved the lease's end since the timer was set.
func (f *fence) expire() {
	f.mu.Lock()
	left := time.Until(f.until)
	if f.done || left > f.margin {
		f.mu.Unlock()
		return
	}
	f.done = true
	f.mu.Unlock()
	f.fire(left)
}

// watch calls tell with the fence's deadline (when it fires unless the lease is renewed
// first, by the worker's clock) at once if it is known, and after every renewal that
// moves it, until the returned stop is called: a job's environment that fences itself
// (executor.Fenced) kills the steps then too, should the worker not be there to. tell
// is called with the fence's lock held, and must not block.
func (f *fence) watch(tell func(deadline time.Time)) (stop func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.tell = tell
	if !f.until.IsZero() && !f.done {
		tell(f.until.Add(-f.margin))
	}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.tell = nil
	}
}

// stop disarms the fence.
func (f *fence) stop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.done = true
	if f.timer != nil {
		f.timer.Stop()
	}
}

// left says how long the lease has left by the worker's clock, and whether that is
// known.
func (f *fence) left() (time.Duration, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.until.IsZero() {
		return 0, false
	}
	return time.Until(f.until), true
}
