package scheduler

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type bundle struct {
	ctx context.Context
	clk *clock.Fake
	s   store.Store
}

func setup(t *testing.T) (*Loops, *bundle) {
	t.Helper()
	clk := clock.NewFake(epoch)
	s, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	l := New(Config{Store: s, Clock: clk, ReapEvery: 5 * time.Second, PromoteEvery: time.Second})
	return l, &bundle{ctx: t.Context(), clk: clk, s: s}
}

func (b *bundle) claimOne(t *testing.T, yaml string) *store.Claim {
	t.Helper()
	p, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := b.s.CreateRun(b.ctx, store.CreateRunParams{Plan: p}); err != nil {
		t.Fatal(err)
	}
	cs, err := b.s.Claim(b.ctx, store.ClaimParams{WorkerID: "w", LeaseTTL: 45 * time.Second, TimeoutGrace: 10 * time.Second})
	if err != nil || len(cs) != 1 {
		t.Fatalf("Claim = %d jobs, %v", len(cs), err)
	}
	return cs[0]
}

func (b *bundle) status(t *testing.T, c *store.Claim) store.JobStatus {
	t.Helper()
	j, err := b.s.GetJob(b.ctx, c.Job.ID)
	if err != nil {
		t.Fatal(err)
	}
	return j.Status
}

func TestPasses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		yaml    string
		advance time.Duration
		pass    func(*Loops, context.Context) (int, error)
		want    store.JobStatus
	}{
		{"expired lease is reaped", "jobs: {a: {steps: [{run: x}]}}", 46 * time.Second, (*Loops).Reap, store.JobQueued},
		{"live lease is kept", "jobs: {a: {steps: [{run: x}]}}", 44 * time.Second, (*Loops).Reap, store.JobAssigned},
		{"job past its deadline is revoked", "jobs: {a: {timeout: 30s, retry: {on: [lost]}, steps: [{run: x}]}}", 41 * time.Second, (*Loops).Reap, store.JobFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, b := setup(t)
			c := b.claimOne(t, tt.yaml)
			b.clk.Advance(tt.advance)
			if _, err := tt.pass(l, b.ctx); err != nil {
				t.Fatal(err)
			}
			if got := b.status(t, c); got != tt.want {
				t.Errorf("status = %s, want %s", got, tt.want)
			}
		})
	}
}

func TestPromote(t *testing.T) {
	t.Parallel()
	l, b := setup(t)
	c := b.claimOne(t, "jobs: {a: {retry: {max_attempts: 2, backoff: 10s}, steps: [{run: x}]}}")
	if _, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token}, Status: store.JobFailed}); err != nil {
		t.Fatal(err)
	}
	if got := b.status(t, c); got != store.JobRetrying {
		t.Fatalf("status after failure = %s, want retrying", got)
	}
	b.clk.Advance(11 * time.Second) // past any full-jitter wait under a 10s backoff
	if n, err := l.Promote(b.ctx); err != nil || n != 1 {
		t.Fatalf("Promote = %d, %v; want 1", n, err)
	}
	if got := b.status(t, c); got != store.JobQueued {
		t.Errorf("status = %s, want queued", got)
	}
}

// TestRunLoops drives the running loops with the fake clock: each advance fires the
// timers the loops are waiting on.
func TestRunLoops(t *testing.T) {
	t.Parallel()
	l, b := setup(t)
	c := b.claimOne(t, "jobs: {a: {steps: [{run: x}]}}")
	ctx, cancel := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.Run(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for b.status(t, c) != store.JobQueued {
		if time.Now().After(deadline) {
			t.Fatal("the running loops did not reap the expired lease")
		}
		b.clk.Advance(5 * time.Second)
		runtimeYield()
	}
	cancel()
	wg.Wait()
}

// runtimeYield lets the loop goroutine run between advances without sleeping for a fixed
// time: it waits for nothing but a scheduling point.
func runtimeYield() {
	done := make(chan struct{})
	go close(done)
	<-done
}

type failing struct{ calls int }

func (f *failing) ReapExpiredLeases(context.Context) (int, error) {
	f.calls++
	return 0, errors.New("database is down")
}
func (f *failing) RevokeTimedOut(context.Context) (int, error)  { return 0, nil }
func (f *failing) PromoteRetries(context.Context) (int, error)  { return 0, nil }
func (f *failing) ExpireApprovals(context.Context) (int, error) { return 0, nil }

type busy struct{ left int }

func (b *busy) ReapExpiredLeases(context.Context) (int, error) {
	n := min(b.left, 500)
	b.left -= n
	return n, nil
}
func (b *busy) RevokeTimedOut(context.Context) (int, error)  { return 0, nil }
func (b *busy) PromoteRetries(context.Context) (int, error)  { return 0, nil }
func (b *busy) ExpireApprovals(context.Context) (int, error) { return 0, nil }

func TestDrain(t *testing.T) {
	t.Parallel()
	f := &failing{}
	if _, err := New(Config{Store: f}).Reap(context.Background()); err == nil || f.calls != 1 {
		t.Errorf("Reap on a failing store = %v after %d calls; want the error after 1", err, f.calls)
	}
	b := &busy{left: 1234}
	if n, err := New(Config{Store: b}).Reap(context.Background()); err != nil || n != 1234 || b.left != 0 {
		t.Errorf("Reap of a backlog = %d, %v (%d left); want all 1234 in one pass", n, err, b.left)
	}
	huge := &busy{left: 500 * (maxRounds + 5)}
	if n, _ := New(Config{Store: huge}).Reap(context.Background()); n != 500*maxRounds {
		t.Errorf("one pass took %d jobs; want it bounded at %d", n, 500*maxRounds)
	}
}

// recordingClock reports the wait of every timer the loops set.
type recordingClock struct {
	*clock.Fake
	waits chan time.Duration
}

func (c recordingClock) After(d time.Duration) <-chan time.Time {
	ch := c.Fake.After(d)
	select {
	case c.waits <- d:
	default: // the test has seen what it needed
	}
	return ch
}

// TestStartGrace: a lease that expired while no coordinator ran is not reaped before the
// worker holding it had one lease TTL to heartbeat, and is reaped after that.
func TestStartGrace(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	c := b.claimOne(t, "jobs: {a: {steps: [{run: x}]}}") // lease TTL 45s
	b.clk.Advance(time.Hour)                             // the coordinator was down
	clk := recordingClock{Fake: b.clk, waits: make(chan time.Duration, 16)}
	l := New(Config{Store: b.s, Clock: clk, ReapEvery: 5 * time.Second, PromoteEvery: time.Second, StartGrace: 45 * time.Second})
	ctx, cancel := context.WithCancel(b.ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		l.Run(ctx)
	}()
	defer wg.Wait()
	defer cancel()
	var first []time.Duration
	for len(first) < 2 {
		select {
		case d := <-clk.waits:
			first = append(first, d)
		case <-time.After(10 * time.Second):
			t.Fatalf("the loops set timers %v; want two", first)
		}
	}
	if max(first[0], first[1]) != 45*time.Second {
		t.Fatalf("first waits %v; want the reap loop's first wait to be the 45s grace", first)
	}
	if got := b.status(t, c); got != store.JobAssigned {
		t.Fatalf("status before the grace ended = %s, want assigned", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.status(t, c) != store.JobQueued {
		if time.Now().After(deadline) {
			t.Fatal("the expired lease was not reaped after the grace")
		}
		b.clk.Advance(5 * time.Second)
		for len(clk.waits) > 0 {
			<-clk.waits
		}
		runtimeYield()
	}
}
