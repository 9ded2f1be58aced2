package scheduler

import (
	"testing"
	"time"
)

// TestReapedHook: a reaping pass tells Config.Reaped what it took back, expired leases
// apart from jobs revoked past their deadline.
func TestReapedHook(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                   string
		yaml                   string
		advance                time.Duration
		wantExpired, wantTimed int
	}{
		{"expired lease", "jobs: {a: {steps: [{run: x}]}}", 46 * time.Second, 1, 0},
		{"past the deadline", "jobs: {a: {timeout: 30s, steps: [{run: x}]}}", 41 * time.Second, 0, 1},
		{"nothing due", "jobs: {a: {steps: [{run: x}]}}", 10 * time.Second, 0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, b := setup(t)
			var expired, timedOut, calls int
			l := New(Config{Store: b.s, Clock: b.clk, Reaped: func(e, to int) { expired, timedOut, calls = expired+e, timedOut+to, calls+1 }})
			b.claimOne(t, tt.yaml)
			b.clk.Advance(tt.advance)
			if _, err := l.Reap(b.ctx); err != nil {
				t.Fatal(err)
			}
			if calls != 1 || expired != tt.wantExpired || timedOut != tt.wantTimed {
				t.Errorf("Reaped called %d times with %d expired, %d timed out; want once with %d, %d",
					calls, expired, timedOut, tt.wantExpired, tt.wantTimed)
			}
		})
	}
}
