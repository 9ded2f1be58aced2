package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// errClosed is returned for writes submitted after Close.
var errClosed = errors.New("store is closed")

// txTimeout bounds one batch transaction, whatever the callers' contexts say.
const txTimeout = 30 * time.Second

type request struct {
	ctx  context.Context
	fn   func(*tx) error
	done chan error
	// alone runs the operation in a transaction of its own, never in a batch: one that
	// reads what the DAG's advance would change, which a batch defers to its end for the
	// operations before it.
	alone bool
}

// committer runs write operations in batches: each writer takes every operation waiting
// for it, runs them in one transaction and commits once. While a commit waits for its
// fsync the next batch gathers, so throughput is not one fsync per operation.
//
// Where savepoints are cheap (SQLite) each operation runs inside one, so an operation's
// failure undoes only its own writes. Where they are not (PostgreSQL, where many
// subtransactions slow every concurrent snapshot) an operation's failure abandons the
// batch and each of its operations runs again in a transaction of its own. Operations
// therefore reset their outputs when they start: they may run twice, the first run rolled
// back.
//
// Where several writers run (PostgreSQL), operations that take a project's next run
// number (nextRunNumber) have a writer of their own, the numbered lane: each such operation holds the
// project's counter row until its transaction commits, so two writers each with a run
// creation of one project take turns, the second waiting for the first one's whole batch
// and commit, with the claims and completions of its own batch held up behind it. In
// throughput-64 on PostgreSQL that wait was 21 ms a run creation on average. One writer
// for them makes the creations of a moment one batch that takes the row once; that writer
// takes other operations too.
type committer struct {
	e        *Engine
	reqs     chan *request
	numbered chan *request // the numbered lane, when writers > 1; else reqs
	maxBatch int
	stop     chan struct{}
	wg       sync.WaitGroup
	once     sync.Once
}

func newCommitter(e *Engine, writers, maxBatch int) *committer {
	c := &committer{e: e, reqs: make(chan *request), maxBatch: maxBatch, stop: make(chan struct{})}
	c.numbered = c.reqs
	if writers > 1 {
		// The first writer takes the numbered lane's operations and any others, so
		// that a batch of creations also carries the claims and completions waiting
		// then (fewer transactions); the rest take only the others.
		c.numbered = make(chan *request)
		writers--
		c.wg.Add(1)
		go c.loop(c.numbered, c.reqs)
	}
	for range writers {
		c.wg.Add(1)
		go c.loop(c.reqs, nil)
	}
	return c
}

// do runs fn in a write transaction and returns its error once the transaction has
// committed (or failed). An operation whose context ends before its batch starts is not
// run.
func (c *committer) do(ctx context.Context, fn func(*tx) error) error {
	return c.submit(c.reqs, &request{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

// doNumbered is do for an operation that takes a project's next run number: it goes
// to the numbered lane.
func (c *committer) doNumbered(ctx context.Context, fn func(*tx) error) error {
	return c.submit(c.numbered, &request{ctx: ctx, fn: fn, done: make(chan error, 1)})
}

// doAlone is do for an operation that must not share its transaction (request.alone).
func (c *committer) doAlone(ctx context.Context, fn func(*tx) error) error {
	return c.submit(c.reqs, &request{ctx: ctx, fn: fn, done: make(chan error, 1), alone: true})
}

func (c *committer) submit(lane chan<- *request, r *request) error {
	ctx := r.ctx
	select {
	case lane <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.stop:
		return errClosed
	}
	// Once submitted the operation may commit; wait for the outcome rather than report a
	// failure that did not happen. Batches are short and bounded by txTimeout.
	return <-r.done
}

func (c *committer) close() {
	c.once.Do(func() { close(c.stop) })
	c.wg.Wait()
}

// loop runs batches of the operations of reqs and of also (nil for none).
func (c *committer) loop(reqs, also <-chan *request) {
	defer c.wg.Done()
	for {
		var first *request
		select {
		case first = <-reqs:
		case first = <-also:
		case <-c.stop:
			return
		}
		batch := []*request{first}
	gather:
		for len(batch) < c.maxBatch {
			select {
			case r := <-reqs:
				batch = append(batch, r)
			case r := <-also:
				batch = append(batch, r)
			default:
				break gather
			}
		}
		c.runBatch(batch)
		c.e.preparePending(context.Background())
	}
}

func (c *committer) runBatch(batch []*request) {
	live := batch[:0:0]
	var alone []*request
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- err
			continue
		}
		if r.alone {
			alone = append(alone, r)
			continue
		}
		live = append(live, r)
	}
	defer func() {
		for _, r := range alone {
			r.done <- c.runAlone(r)
		}
	}()
	if len(live) == 0 {
		return
	}
	if len(live) == 1 {
		live[0].done <- c.runAlone(live[0])
		return
	}
	errs, sig, err := c.tryBatch(live)
	if err != nil {
		// The batch as a whole failed (a deadlock, a failed commit): nothing of it was
		// kept, so each operation runs again on its own and gets its own answer.
		c.e.log.Debug("batch failed; running its operations one by one", slog.Int("ops", len(live)), slog.Any("err", err))
		for _, r := range live {
			r.done <- c.runAlone(r)
		}
		return
	}
	c.e.signal(sig)
	for i, r := range live {
		r.done <- errs[i]
	}
}

// tryBatch runs the operations in one transaction. It returns each operation's own error,
// whether any queued a job, and a non-nil error when the transaction itself failed.
func (c *committer) tryBatch(batch []*request) (errs []error, sig Signals, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	sqlTx, err := c.e.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, sig, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = sqlTx.Rollback()
		}
	}()
	errs = make([]error, len(batch))
	var hooks []func()
	shared := &batchState{}
	ctl := c.e.newTx(ctx, sqlTx, shared)
	for i, r := range batch {
		if c.e.d.Savepoints {
			if _, err := ctl.exec("SAVEPOINT op"); err != nil {
				return nil, sig, fmt.Errorf("savepoint: %w", err)
			}
		}
		t := c.e.newTx(ctx, sqlTx, shared)
		if opErr := r.fn(t); opErr != nil {
			if !c.e.d.Savepoints || c.e.d.Retryable(opErr) {
				// Without a savepoint the operation's partial writes cannot be undone
				// alone: give up on the batch, and each operation runs by itself.
				return nil, sig, opErr
			}
			if _, err := ctl.exec("ROLLBACK TO SAVEPOINT op"); err != nil {
				return nil, sig, fmt.Errorf("rollback to savepoint: %w", err)
			}
			errs[i] = opErr
		} else {
			sig.Queued = sig.Queued || t.queued
			sig.Cancelled = sig.Cancelled || t.cancelled
			hooks = append(hooks, t.onCommit...)
			ctl.ended = append(ctl.ended, t.ended...)
		}
		if c.e.d.Savepoints {
			if _, err := ctl.exec("RELEASE SAVEPOINT op"); err != nil {
				return nil, sig, fmt.Errorf("release savepoint: %w", err)
			}
		}
	}
	if len(ctl.ended) > 0 {
		if err := ctl.advance(ctl.ended, c.e.clock.Now()); err != nil {
			return nil, sig, err
		}
		sig.Queued = sig.Queued || ctl.queued
	}
	if err := c.e.beforeCommit(ctx, sqlTx, sig, shared); err != nil {
		return nil, sig, fmt.Errorf("before commit: %w", err)
	}
	if err := sqlTx.Commit(); err != nil {
		return nil, sig, fmt.Errorf("commit: %w", err)
	}
	for _, h := range hooks {
		h()
	}
	return errs, sig, nil
}

// runAlone runs one operation in its own transaction, again when the database reports a
// retryable conflict.
func (c *committer) runAlone(r *request) error {
	var err error
	for attempt := range 8 {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt*attempt) * time.Millisecond)
		}
		if err = r.ctx.Err(); err != nil {
			return err
		}
		var sig Signals
		sig, err = c.runOne(r)
		if err == nil {
			c.e.signal(sig)
			return nil
		}
		if !c.e.d.Retryable(err) {
			return err
		}
	}
	return err
}

func (c *committer) runOne(r *request) (sig Signals, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), txTimeout)
	defer cancel()
	sqlTx, err := c.e.db.BeginTx(ctx, nil)
	if err != nil {
		return sig, fmt.Errorf("begin: %w", err)
	}
	t := c.e.newTx(ctx, sqlTx, &batchState{})
	err = r.fn(t)
	if err == nil && len(t.ended) > 0 {
		err = t.advance(t.ended, c.e.clock.Now())
	}
	if err != nil {
		_ = sqlTx.Rollback()
		return sig, err
	}
	sig = Signals{Queued: t.queued, Cancelled: t.cancelled}
	if err := c.e.beforeCommit(ctx, sqlTx, sig, t.batch); err != nil {
		_ = sqlTx.Rollback()
		return Signals{}, fmt.Errorf("before commit: %w", err)
	}
	if err := sqlTx.Commit(); err != nil {
		return Signals{}, fmt.Errorf("commit: %w", err)
	}
	for _, h := range t.onCommit {
		h()
	}
	return sig, nil
}

// tx is what operations use: a transaction that rewrites placeholders and records
// whether a job became queued.
type tx struct {
	ctx context.Context
	// sctx is what the transaction's statements run with: ctx, or ctx without its
	// deadline where the dialect says so (Dialect.StatementsUncancelled).
	sctx context.Context
	tx   *sql.Tx
	e    *Engine
	// batch is what the operations of one transaction share.
	batch  *batchState
	queued bool
	// cancelled is set when the operation asked a leased job to cancel.
	cancelled bool
	// ended lists jobs the operation ended; the DAG and the runs advance for them at the
	// end of the batch.
	ended []ended
	// onCommit runs after the transaction commits with this operation in it: caches
	// learn only what is durable.
	onCommit []func()
}

func (e *Engine) newTx(ctx context.Context, t *sql.Tx, b *batchState) *tx {
	sctx := ctx
	if e.d.StatementsUncancelled {
		sctx = context.WithoutCancel(ctx)
	}
	return &tx{ctx: ctx, sctx: sctx, tx: t, e: e, batch: b}
}

// batchState is shared by the operations of one transaction.
type batchState struct {
	// queuedGen counts the operations so far that queued a job.
	queuedGen int
	// noCandidates remembers claims that found no queued job, by what they looked for,
	// with the queuedGen they saw: until another operation queues a job, a claim looking
	// for the same finds nothing either. Many workers woken by one queued job then cost
	// one search, not one each.
	noCandidates map[string]int
	// noticed: a statement of the transaction sent the dialect's QueuedNotice, so
	// BeforeCommit need not.
	noticed bool
}

// beforeCommit is the dialect's BeforeCommit for what the transaction signals, less the
// notice of queued jobs a statement of it already sent.
func (e *Engine) beforeCommit(ctx context.Context, sqlTx *sql.Tx, sig Signals, b *batchState) error {
	if b.noticed {
		sig.Queued = false
	}
	if !(sig.Queued || sig.Cancelled) || e.d.BeforeCommit == nil {
		return nil
	}
	return e.d.BeforeCommit(ctx, sqlTx, sig)
}

// searchedEmpty reports whether a claim of this batch already searched for key and found
// nothing, with no job queued since.
func (b *batchState) searchedEmpty(key string) bool {
	gen, ok := b.noCandidates[key]
	return ok && gen == b.queuedGen
}

// foundNothing notes that a search for key found no queued job.
func (b *batchState) foundNothing(key string) {
	if b.noCandidates == nil {
		b.noCandidates = map[string]int{}
	}
	b.noCandidates[key] = b.queuedGen
}

// markQueued notes that the operation queued a job.
func (t *tx) markQueued() {
	t.queued = true
	t.batch.queuedGen++
}

// Statements are prepared once and reused: parsing SQL would otherwise cost more than
// running it.
func (t *tx) exec(q string, args ...any) (sql.Result, error) {
	t.e.statements.Add(1)
	if st := t.e.prepared(q); st != nil {
		return t.tx.StmtContext(t.sctx, st).ExecContext(t.sctx, args...)
	}
	return t.tx.ExecContext(t.sctx, t.e.q(q), args...)
}

func (t *tx) query(q string, args ...any) (*sql.Rows, error) {
	t.e.statements.Add(1)
	if st := t.e.prepared(q); st != nil {
		return t.tx.StmtContext(t.sctx, st).QueryContext(t.sctx, args...)
	}
	return t.tx.QueryContext(t.sctx, t.e.q(q), args...)
}

func (t *tx) row(q string, args ...any) *sql.Row {
	t.e.statements.Add(1)
	if st := t.e.prepared(q); st != nil {
		return t.tx.StmtContext(t.sctx, st).QueryRowContext(t.sctx, args...)
	}
	return t.tx.QueryRowContext(t.sctx, t.e.q(q), args...)
}
