// Package postgres is Gantry's scale-out store driver: PostgreSQL through pgx, with row
// locks and SKIP LOCKED for concurrent claimers and LISTEN/NOTIFY to wake claimers on
// every coordinator replica.
//
// It holds only what is particular to PostgreSQL; every state transition lives in sqlstore.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlstore"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

//go:embed migrations/*.sql
var migrations embed.FS

// Options tune the store; see sqlstore.Options.
type Options = sqlstore.Options

// The NOTIFY channels on which replicas announce newly queued jobs and leased jobs asked
// to cancel.
const (
	jobsChannel    = "gantry_jobs"
	cancelsChannel = "gantry_cancels"
	eventsChannel  = "gantry_events" // Publish: "<topic> <payload>"
)

// migrationLock is the advisory lock key replicas hold while migrating, so that two
// replicas starting together do not race to create the same tables.
const migrationLock = 0x67616e747279 // "gantry"

// writers is how many write transactions run at once; each batches the operations
// waiting for it.
const writers = 4

var dialect = sqlstore.Dialect{
	Name:           "postgres",
	NumberedParams: true,
	SkipLocked:     " FOR UPDATE SKIP LOCKED",
	ForUpdate:      " FOR UPDATE",
	ForNoKeyUpdate: " FOR NO KEY UPDATE",
	Retryable:      retryable,
	Full:           full,
	BeforeCommit: func(ctx context.Context, tx *sql.Tx, s sqlstore.Signals) error {
		if s.Queued {
			if _, err := tx.ExecContext(ctx, queuedNotice); err != nil {
				return err
			}
		}
		if s.Cancelled {
			if _, err := tx.ExecContext(ctx, `SELECT pg_notify('`+cancelsChannel+`', '')`); err != nil {
				return err
			}
		}
		return nil
	},
	GroupLock: func(ctx context.Context, tx *sql.Tx, key string) (bool, error) {
		var ok bool
		err := tx.QueryRowContext(ctx, `SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))`, key).Scan(&ok)
		return ok, err
	},
	LockWorkers: func(ctx context.Context, tx *sql.Tx, ids []string) (int, error) {
		// A key space of its own (the seed), apart from the concurrency groups'. The
		// locks are taken in the order of the ids: PostgreSQL calls a volatile function
		// of a sorted query's output after sorting.
		rows, err := tx.QueryContext(ctx, `SELECT pg_advisory_xact_lock(hashtextextended(id, 1)) FROM workers
			WHERE id = ANY($1::text[]) AND (milli_cpu > 0 OR memory > 0) ORDER BY id`, ids)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		n := 0
		for rows.Next() {
			n++
		}
		return n, rows.Err()
	},
	Publish: func(ctx context.Context, db *sql.DB, topic, payload string) error {
		_, err := db.ExecContext(ctx, `SELECT pg_notify('`+eventsChannel+`', $1)`, topic+" "+payload)
		return err
	},
	Writers: writers,
	// Change numbers are transaction ids (migration 0025), so a run's cursor is its
	// reader's snapshot: below every change that snapshot does not see.
	RunChangeCursor: "jobs_change_cursor()",
	WriteCTEs:       true,
	QueuedNotice:    queuedNotice,
}

// queuedNotice wakes the claimers of every replica once its transaction commits.
const queuedNotice = `SELECT pg_notify('` + jobsChannel + `', '')`

// Open connects to the database at url (postgres://...), migrates it and starts
// listening for other replicas' wake-ups.
func Open(ctx context.Context, url string, opts Options) (*sqlstore.Engine, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	db := sql.OpenDB(unavailableConnector{stdlib.GetConnector(*cfg, stdlib.OptionAfterConnect(registerUUID))})
	db.SetMaxOpenConns(writers + 12)
	db.SetMaxIdleConns(writers + 12)
	db.SetConnMaxIdleTime(5 * time.Minute)
	if err := migrate(ctx, db); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("open postgres store: %w", err)
	}
	d := dialect
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	l := &listener{cfg: cfg, log: log, done: make(chan struct{})}
	lctx, cancel := context.WithCancel(context.Background())
	l.cancel = cancel
	e := sqlstore.New(db, db, &d, opts, l, db)
	l.notify = e.Notify
	l.deliver = e.Deliver
	ready := make(chan error, 1)
	go l.run(lctx, ready)
	select {
	case err := <-ready:
		if err != nil {
			_ = e.Close()
			return nil, fmt.Errorf("open postgres store: listen: %w", err)
		}
	case <-ctx.Done():
		_ = e.Close()
		return nil, fmt.Errorf("open postgres store: %w", ctx.Err())
	}
	return e, nil
}

func migrate(ctx context.Context, db *sql.DB) error {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrationLock); err != nil {
		return fmt.Errorf("migrate: take lock: %w", err)
	}
	defer func() {
		_, _ = conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrationLock)
	}()
	sub, err := fs.Sub(migrations, "migrations")
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	d := dialect
	return sqlstore.Migrate(ctx, conn, &d, sub)
}

// unavailableConnector connects as its driver does, and says of a connection that could
// not be made because the server is not there or not taking connections yet that the
// database is unavailable (store.ErrUnavailable), for the callers to retry: an address
// that does not resolve or answer, a server starting, recovering or shutting down. A
// refusal that waiting does not mend (a wrong password, no such database) stays as it is.
type unavailableConnector struct{ driver.Connector }

func (c unavailableConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil && ctx.Err() == nil && unreachable(err) {
		return nil, fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return conn, err
}

// unreachable reports a failed connection attempt that a later one may not repeat.
func unreachable(err error) bool {
	var ce *pgconn.ConnectError
	if !errors.As(err, &ce) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		// Class 57: the server is starting, recovering or shutting down (57P01-57P03);
		// class 53: it has no room for another connection now. Anything else (28: a
		// bad password, 3D000: no such database) is for the operator to mend.
		return strings.HasPrefix(pe.Code, "57") || strings.HasPrefix(pe.Code, "53")
	}
	return true
}

// full reports PostgreSQL's disk_full (53100): the server could not extend a file.
func full(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53100"
}

// retryable reports serialization failures, deadlocks and lock timeouts: the engine runs
// the transaction again.
func retryable(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "40001", "40P01", "55P03":
		return true
	}
	return false
}

// listener holds a connection that LISTENs for other replicas' wake-ups and passes each
// on to the engine's waiting claimers. It reconnects after a failure; wake-ups missed
// meanwhile cost at most a claimer's long-poll timeout, and a wake-up is sent after every
// reconnect in case one was missed.
type listener struct {
	cfg     *pgx.ConnConfig
	log     *slog.Logger
	notify  func(sqlstore.Signals)
	deliver func(topic, payload string)
	cancel  context.CancelFunc
	done    chan struct{}
}

func (l *listener) run(ctx context.Context, ready chan<- error) {
	defer close(l.done)
	first := true
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		err := l.listen(ctx, func() {
			if first {
				first = false
				ready <- nil
			} else {
				l.notify(sqlstore.Signals{Queued: true, Cancelled: true})
			}
			backoff = 100 * time.Millisecond
		})
		if ctx.Err() != nil {
			return
		}
		if first {
			ready <- err
			return
		}
		l.log.Warn("store listener lost its connection; reconnecting", "err", err, "in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

func (l *listener) listen(ctx context.Context, connected func()) error {
	conn, err := pgx.ConnectConfig(ctx, l.cfg)
	if err != nil {
		if ctx.Err() == nil && unreachable(err) {
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, ch := range []string{jobsChannel, cancelsChannel, eventsChannel} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			return err
		}
	}
	connected()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Channel == eventsChannel {
			if topic, payload, ok := strings.Cut(n.Payload, " "); ok {
				l.deliver(topic, payload)
			}
			continue
		}
		l.notify(sqlstore.Signals{Queued: n.Channel == jobsChannel, Cancelled: n.Channel == cancelsChannel})
	}
}

// Close stops listening.
func (l *listener) Close() error {
	l.cancel()
	<-l.done
	return nil
}
