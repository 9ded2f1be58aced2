package scheduler

import (
	"context"
	"log/slog"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
)

// Maintenance is the part of the store the loops drive.
type Maintenance interface {
	ReapExpiredLeases(ctx context.Context) (int, error)
	RevokeTimedOut(ctx context.Context) (int, error)
	PromoteRetries(ctx context.Context) (int, error)
	ExpireApprovals(ctx context.Context) (int, error)
}

// Defaults for Config's intervals.
const (
	DefaultReapEvery    = 5 * time.Second
	DefaultPromoteEvery = time.Second
)

// maxRounds bounds how often one pass repeats a call that keeps finding work, so a huge
// backlog cannot keep a pass from yielding to the other loop forever.
const maxRounds = 20

// Config configures Loops.
type Config struct {
	Store  Maintenance
	Clock  clock.Clock
	Logger *slog.Logger
	// ReapEvery is how often expired leases are reaped and timed-out jobs revoked.
	ReapEvery time.Duration
	// PromoteEvery is how often due retries are queued; retries can come due at any
	// moment, so this is shorter than ReapEvery.
	PromoteEvery time.Duration
	// StartGrace delays the first reap after Run starts; set it to the lease TTL. Leases
	// that expired while no coordinator was up belong to workers that could not reach one,
	// and a heartbeat on an expired lease that was not reaped yet still renews it: this
	// gives those workers a full TTL to heartbeat before their jobs are taken away.
	// Zero reaps first after ReapEvery.
	StartGrace time.Duration
	// Reaped, when set, is told what each reaping pass took back: leases that expired
	// and jobs revoked past their deadline (metrics).
	Reaped func(expired, timedOut int)
}

// Loops runs the maintenance loops.
type Loops struct {
	cfg Config
}

// New returns loops with cfg's zero fields set to their defaults.
func New(cfg Config) *Loops {
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.ReapEvery <= 0 {
		cfg.ReapEvery = DefaultReapEvery
	}
	if cfg.PromoteEvery <= 0 {
		cfg.PromoteEvery = DefaultPromoteEvery
	}
	return &Loops{cfg: cfg}
}

// Run runs the loops until ctx ends. A failing pass is logged and tried again at the next
// tick: the store is the only state, so nothing is lost by waiting.
func (l *Loops) Run(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		l.every(ctx, l.cfg.PromoteEvery, l.cfg.PromoteEvery, l.Promote)
	}()
	l.every(ctx, max(l.cfg.ReapEvery, l.cfg.StartGrace), l.cfg.ReapEvery, l.Reap)
	<-done
}

// every runs pass first after first, then every d.
func (l *Loops) every(ctx context.Context, first, d time.Duration, pass func(context.Context) (int, error)) {
	for wait := first; ; wait = d {
		select {
		case <-ctx.Done():
			return
		case <-l.cfg.Clock.After(wait):
		}
		if _, err := pass(ctx); err != nil && ctx.Err() == nil {
			l.cfg.Logger.Error("scheduler pass failed", "err", err)
		}
	}
}

// Reap runs one reaping pass: expired leases, then jobs past their hard deadline, then
// jobs that waited for approval past their environment's timeout (rejected; minutes or
// hours long, so the reaping interval is precise enough). It returns how many jobs
// changed.
func (l *Loops) Reap(ctx context.Context) (int, error) {
	reaped, err := drain(ctx, l.cfg.Store.ReapExpiredLeases)
	revoked, expired := 0, 0
	if err == nil {
		revoked, err = drain(ctx, l.cfg.Store.RevokeTimedOut)
	}
	if err == nil {
		expired, err = drain(ctx, l.cfg.Store.ExpireApprovals)
	}
	if l.cfg.Reaped != nil {
		l.cfg.Reaped(reaped, revoked)
	}
	if reaped+revoked > 0 {
		l.cfg.Logger.Info("reaped jobs", "lost", reaped, "timed_out", revoked)
	}
	if expired > 0 {
		l.cfg.Logger.Info("rejected jobs not approved in time", "jobs", expired)
	}
	return reaped + revoked + expired, err
}

// Promote queues the retries that are due and returns how many.
func (l *Loops) Promote(ctx context.Context) (int, error) {
	n, err := drain(ctx, l.cfg.Store.PromoteRetries)
	if n > 0 {
		l.cfg.Logger.Debug("promoted retries", "jobs", n)
	}
	return n, err
}

// drain calls fn until it finds nothing more to do (each call handles a bounded batch).
func drain(ctx context.Context, fn func(context.Context) (int, error)) (int, error) {
	total := 0
	for range maxRounds {
		n, err := fn(ctx)
		total += n
		if err != nil || n == 0 || ctx.Err() != nil {
			return total, err
		}
	}
	return total, nil
}
