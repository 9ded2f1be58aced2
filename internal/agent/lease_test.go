package agent

import (
	"testing"
	"time"
)

// TestFence: the fence fires once the lease, counted from the send time of the last
// renewal, has less than the margin left, and never before; a renewal moves it; a lease
// of unknown length arms it only at its first renewal; a stopped fence never fires.
func TestFence(t *testing.T) {
	t.Parallel()
	const validFor, margin = 400 * time.Millisecond, 100 * time.Millisecond
	fired := func() (chan time.Duration, func(time.Duration)) {
		ch := make(chan time.Duration, 2)
		return ch, func(left time.Duration) { ch <- left }
	}
	within := func(t *testing.T, ch chan time.Duration, d time.Duration) time.Time {
		t.Helper()
		select {
		case left := <-ch:
			if left > margin {
				t.Errorf("fired with %s left, more than the margin %s", left, margin)
			}
			return time.Now()
		case <-time.After(d):
			t.Fatalf("the fence did not fire within %s", d)
		}
		return time.Time{}
	}
	quiet := func(t *testing.T, ch chan time.Duration, d time.Duration) {
		t.Helper()
		select {
		case left := <-ch:
			t.Fatalf("the fence fired (%s left) when it must not", left)
		case <-time.After(d):
		}
	}

	t.Run("fires before the lease ends, not earlier", func(t *testing.T) {
		t.Parallel()
		ch, fire := fired()
		sent := time.Now()
		f := newFence(sent, validFor, margin, fire)
		defer f.stop()
		at := within(t, ch, 10*time.Second)
		if d := at.Sub(sent); d < validFor-margin {
			t.Errorf("fired %s after the send, before the lease had less than the margin left (%s)", d, validFor-margin)
		}
		quiet(t, ch, 2*validFor) // once
	})
	t.Run("renewals move it", func(t *testing.T) {
		t.Parallel()
		// A longer lease here, so that a test goroutine slow to renew under load does
		// not let it run out.
		const validFor = 800 * time.Millisecond
		ch, fire := fired()
		f := newFence(time.Now(), validFor, margin, fire)
		defer f.stop()
		// Renew every 50ms for two leases' worth: it must not fire meanwhile.
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for end := time.Now().Add(2 * validFor); time.Now().Before(end); {
			select {
			case left := <-ch:
				t.Fatalf("fired (%s left) while renewed every 50ms", left)
			case <-tick.C:
				f.renewed(time.Now(), validFor)
			}
		}
		last := time.Now()
		f.renewed(last, validFor)
		if at := within(t, ch, 10*time.Second); at.Sub(last) < validFor-margin {
			t.Errorf("fired %s after the last renewal, want at least %s", at.Sub(last), validFor-margin)
		}
		// A renewal that ends earlier than the known end changes nothing.
		g := newFence(time.Now(), time.Hour, margin, fire)
		defer g.stop()
		g.renewed(time.Now(), validFor)
		if left, ok := g.left(); !ok || left < time.Hour-time.Minute {
			t.Errorf("a shorter renewal moved the lease's end: %s left", left)
		}
	})
	t.Run("unknown length", func(t *testing.T) {
		t.Parallel()
		ch, fire := fired()
		f := newFence(time.Now(), 0, margin, fire)
		defer f.stop()
		if _, ok := f.left(); ok {
			t.Error("a lease of unknown length has a known end")
		}
		quiet(t, ch, validFor)
		f.renewed(time.Now(), validFor)
		within(t, ch, 10*time.Second)
	})
	t.Run("watched", func(t *testing.T) {
		t.Parallel()
		_, fire := fired()
		sent := time.Now()
		f := newFence(sent, time.Hour, margin, fire)
		defer f.stop()
		var told []time.Time // tell runs under the fence's lock, on the renewing goroutine
		stop := f.watch(func(d time.Time) { told = append(told, d) })
		f.renewed(sent.Add(time.Second), time.Hour)
		f.renewed(sent, time.Hour) // ends no later: nothing to tell
		stop()
		f.renewed(sent.Add(2*time.Second), time.Hour)
		want := []time.Time{sent.Add(time.Hour - margin), sent.Add(time.Second + time.Hour - margin)}
		if len(told) != len(want) || !told[0].Equal(want[0]) || !told[1].Equal(want[1]) {
			t.Errorf("told %v, want %v", told, want)
		}
		unknown := newFence(time.Now(), 0, margin, fire)
		defer unknown.stop()
		told = nil
		defer unknown.watch(func(d time.Time) { told = append(told, d) })()
		if len(told) != 0 {
			t.Errorf("a lease of unknown length told a deadline: %v", told)
		}
	})
	t.Run("stopped", func(t *testing.T) {
		t.Parallel()
		ch, fire := fired()
		f := newFence(time.Now(), validFor, margin, fire)
		f.stop()
		quiet(t, ch, 2*validFor)
	})
}
