package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
)

// Options tune an Engine.
type Options struct {
	Clock  clock.Clock
	Logger *slog.Logger
	// Rand returns a float in [0, 1) for retry jitter; math/rand/v2 by default.
	Rand func() float64
	// MaxBatch bounds how many write operations share one transaction; default 256.
	MaxBatch int
	// FreeRedeliveries is how many lost attempts a job may have without them counting
	// against its max_attempts, when its retry policy does not retry lost attempts;
	// default 3.
	FreeRedeliveries int
}

// Engine implements store.Store on a SQL database described by a Dialect.
type Engine struct {
	db    *sql.DB // writes
	read  *sql.DB // reads
	d     *Dialect
	clock clock.Clock
	log   *slog.Logger
	rand  func() float64
	free  int
	com   *committer
	hub   *broadcaster // jobs queued
	kills *broadcaster // leased jobs asked to cancel
	wrote *broadcaster // a write committed
	subs  topics       // published notices

	rebound     sync.Map // query -> query with the dialect's placeholders
	stmts       stmtCache
	projects    sync.Map // project name -> id; DeleteProject forgets a name
	labels      labelCache
	claimGroups claimGroups
	quotas      quotaCache
	closeDB     []io.Closer
	runCols     string // what a read of runs selects (see runColumns)

	// statements counts the statements write transactions ran: on PostgreSQL each is a
	// round trip inside a transaction that holds one of the few writers.
	statements atomic.Int64
}

var _ store.Store = (*Engine)(nil)

// New returns an engine writing through write and reading through read, which must both
// be migrated. closers are closed by Close after the engine stops writing.
func New(write, read *sql.DB, d *Dialect, opts Options, closers ...io.Closer) *Engine {
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Rand == nil {
		opts.Rand = rand.Float64
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = 256
	}
	if opts.FreeRedeliveries <= 0 {
		opts.FreeRedeliveries = 3
	}
	if d.Writers <= 0 {
		d.Writers = 1
	}
	if d.Retryable == nil {
		d.Retryable = func(error) bool { return false }
	}
	e := &Engine{
		db: write, read: read, d: d,
		clock: opts.Clock, log: opts.Logger, rand: opts.Rand, free: opts.FreeRedeliveries,
		hub: newBroadcaster(), kills: newBroadcaster(), wrote: newBroadcaster(), closeDB: closers,
	}
	e.labels.sets = map[string]struct{}{}
	e.runCols = runColumns(d)
	e.com = newCommitter(e, d.Writers, opts.MaxBatch)
	return e
}

// WriteStatements returns how many statements write transactions have run so far, for
// benchmarks that count round trips per operation.
func (e *Engine) WriteStatements() int64 { return e.statements.Load() }

// Close stops accepting writes, finishes the batches under way and closes the databases.
func (e *Engine) Close() error {
	e.com.close()
	e.stmts.close()
	var first error
	for _, c := range e.closeDB {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Notify wakes local waiters; a driver calls it when another replica's commit says so.
func (e *Engine) Notify(s Signals) { e.signal(s) }

// signal wakes the waiters a committed write (or another replica's notice) concerns.
func (e *Engine) signal(s Signals) {
	e.wrote.broadcast()
	if s.Queued {
		e.hub.broadcast()
	}
	if s.Cancelled {
		e.kills.broadcast()
	}
}

// WaitForJobs implements store.Notifier.
func (e *Engine) WaitForJobs() (<-chan struct{}, func()) { return e.hub.subscribe() }

// WaitForCancels implements store.Notifier.
func (e *Engine) WaitForCancels() (<-chan struct{}, func()) { return e.kills.subscribe() }

// WaitForWrites implements store.Notifier.
func (e *Engine) WaitForWrites() (<-chan struct{}, func()) { return e.wrote.subscribe() }

// Publish implements store.Notifier: it delivers the notice here and, when the dialect
// has a way to, to the other replicas, whose drivers hand it to Deliver.
func (e *Engine) Publish(ctx context.Context, topic, payload string) error {
	e.subs.deliver(topic, payload)
	if e.d.Publish == nil {
		return nil
	}
	if err := e.d.Publish(ctx, e.db, topic, payload); err != nil {
		return fmt.Errorf("publish %s: %w", topic, err)
	}
	return nil
}

// Deliver hands a notice another replica published to this replica's subscribers.
func (e *Engine) Deliver(topic, payload string) { e.subs.deliver(topic, payload) }

// Subscribe implements store.Notifier.
func (e *Engine) Subscribe(topic string) (<-chan string, func()) { return e.subs.subscribe(topic) }

// write runs fn in a batched write transaction.
func (e *Engine) write(ctx context.Context, fn func(*tx) error) error {
	return e.full(e.com.do(ctx, fn))
}

// writeNumbered runs fn, which takes a project's next run number, in a batched write
// transaction (committer.doNumbered).
func (e *Engine) writeNumbered(ctx context.Context, fn func(*tx) error) error {
	return e.full(e.com.doNumbered(ctx, fn))
}

// writeAlone runs fn in a write transaction of its own (committer.doAlone).
func (e *Engine) writeAlone(ctx context.Context, fn func(*tx) error) error {
	return e.full(e.com.doAlone(ctx, fn))
}

func (e *Engine) full(err error) error {
	if err != nil && e.d.Full != nil && e.d.Full(err) {
		return fmt.Errorf("%w: %w", store.ErrFull, err)
	}
	return err
}

func (e *Engine) q(query string) string {
	if !e.d.NumberedParams {
		return query
	}
	if v, ok := e.rebound.Load(query); ok {
		return v.(string)
	}
	r := e.d.rebind(query)
	e.rebound.Store(query, r)
	return r
}

func (e *Engine) readRow(ctx context.Context, query string, args ...any) *sql.Row {
	if st := e.stmts.get(ctx, e.read, "r", e.q(query)); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return e.read.QueryRowContext(ctx, e.q(query), args...)
}

func (e *Engine) readRows(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := e.stmts.get(ctx, e.read, "r", e.q(query)); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return e.read.QueryContext(ctx, e.q(query), args...)
}

// prepared returns the write pool's prepared statement for query, or nil when it is not
// prepared yet; the caller then runs the query unprepared. A transaction holds the
// writer's only connection, so statements are prepared between batches (preparePending),
// never inside one.
func (e *Engine) prepared(query string) *sql.Stmt {
	return e.stmts.lookup("w"+e.q(query), e.q(query))
}

// preparePending prepares the write statements that batches asked for.
func (e *Engine) preparePending(ctx context.Context) {
	for _, q := range e.stmts.takePending() {
		e.stmts.get(ctx, e.db, "w", q)
	}
}

// stmtCache holds prepared statements per pool. It is bounded because a few queries are
// built with a variable number of placeholders.
type stmtCache struct {
	mu      sync.Mutex
	m       map[string]*sql.Stmt
	pending map[string]bool
}

// lookup returns the statement cached under key or, when there is none, notes query to
// be prepared later.
func (c *stmtCache) lookup(key, query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st, ok := c.m[key]; ok {
		return st
	}
	if len(c.m)+len(c.pending) < maxStmts {
		if c.pending == nil {
			c.pending = map[string]bool{}
		}
		c.pending[query] = true
	}
	return nil
}

func (c *stmtCache) takePending() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]string, 0, len(c.pending))
	for q := range c.pending {
		out = append(out, q)
	}
	c.pending = nil
	return out
}

const maxStmts = 512

func (c *stmtCache) get(ctx context.Context, db *sql.DB, pool, query string) *sql.Stmt {
	key := pool + query
	c.mu.Lock()
	st, ok := c.m[key]
	full := len(c.m) >= maxStmts
	c.mu.Unlock()
	if ok || full {
		return st
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]*sql.Stmt{}
	}
	if prev, ok := c.m[key]; ok {
		_ = st.Close()
		return prev
	}
	c.m[key] = st
	return st
}

func (c *stmtCache) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		_ = st.Close()
	}
	c.m = nil
}

// Times are stored as microseconds since the Unix epoch in both databases, 0 for none,
// so every query and comparison is the same on each.
func us(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMicro()
}

func fromUS(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMicro(v).UTC()
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("marshal %T: %v", v, err)) // only plain data is marshalled here
	}
	return string(b)
}

// padded returns args lengthened to the next power of two by repeating the last, for a
// statement whose IN list names them: a name twice matches the same rows, and statements
// of a few lengths are prepared once each rather than one for every length.
func padded(args []any) []any {
	n := 1
	for n < len(args) {
		n *= 2
	}
	if n == len(args) || len(args) == 0 {
		return args
	}
	out := make([]any, n)
	copy(out, args)
	for i := len(args); i < n; i++ {
		out[i] = args[len(args)-1]
	}
	return out
}

// runsInOrder is what an UPDATE of runs puts in "WHERE id IN (...)" for n run ids that
// also meet cond (SQL on runs' columns, "" for none): the ids, or where writers run at
// once (ForNoKeyUpdate), a subquery that locks those runs in id order first. The UPDATE
// alone takes rows in the order its plan meets them, which for a bitmap scan is where
// they lie on disk: two writers that meet the same runs in different orders, or after
// runs of lower ids, deadlock.
//
// The subquery takes the lock the UPDATE would take (it changes no key of runs), not
// FOR UPDATE: FOR UPDATE also conflicts with the FOR KEY SHARE lock that the foreign key
// check of jobs.run_id takes on the run, which PostgreSQL runs when a transaction updates
// a job row it has already written (a dependent's needs_left, then its status). Two
// completion batches that had each done so for the same run then waited for each other
// on the run's row: a deadlock every deadlock_timeout, writers stalled, heartbeats late
// and live workers' leases reaped (59409f6, taken back in 568ff27).
func (e *Engine) runsInOrder(n int, cond string) string {
	if e.d.ForNoKeyUpdate == "" {
		return inList(n)
	}
	if cond != "" {
		cond = " AND " + cond
	}
	return `SELECT id FROM runs WHERE id IN (` + inList(n) + `)` + cond + ` ORDER BY id` + e.d.ForNoKeyUpdate
}

// inList returns "?, ?, ?" for n placeholders.
func inList(n int) string {
	if n <= 0 {
		return ""
	}
	b := make([]byte, 0, 3*n)
	for i := range n {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '?')
	}
	return string(b)
}

func jsonUnmarshal(s string, v any) error { return json.Unmarshal([]byte(s), v) }
