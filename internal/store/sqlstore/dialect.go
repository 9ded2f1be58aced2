package sqlstore

import (
	"context"
	"database/sql"
	"strconv"
	"strings"
)

// Dialect is what differs between the SQL databases the store runs on.
type Dialect struct {
	Name string
	// Numbered placeholders ($1, $2) instead of ?.
	NumberedParams bool
	// SkipLocked is appended to a SELECT that picks rows to change, so concurrent
	// claimers skip rows another transaction holds ("" where one writer serialises all).
	SkipLocked string
	// ForUpdate is appended to a SELECT of a row the transaction is about to change.
	ForUpdate string
	// ForNoKeyUpdate is appended to a SELECT that locks rows ahead of an UPDATE that
	// changes none of their keys, taking the lock that UPDATE takes and no stronger
	// (PostgreSQL's FOR NO KEY UPDATE; "" where one writer serialises all). ForUpdate
	// there would also block the foreign key checks of rows that reference them.
	ForNoKeyUpdate string
	// Retryable reports errors after which the whole transaction may be run again
	// (deadlocks, serialization failures, a busy database).
	Retryable func(error) bool
	// Full reports errors that mean the database's storage is full; writes failing so
	// are returned wrapping store.ErrFull.
	Full func(error) bool
	// BeforeCommit runs inside a transaction that queued jobs or asked running jobs to
	// cancel, just before it commits (PostgreSQL sends NOTIFY here, so the wake-up
	// travels with the commit).
	BeforeCommit func(ctx context.Context, tx *sql.Tx, s Signals) error
	// GroupLock, when set, takes a transaction-scoped lock on a concurrency group and
	// reports whether it got it; used where claimers run in parallel.
	GroupLock func(ctx context.Context, tx *sql.Tx, key string) (bool, error)
	// LockWorkers, when set, takes a transaction-scoped lock on the capacity of each of
	// the workers named (sorted) that registered a limit, waiting for it, and says how
	// many it locked; used where claimers run in parallel, so that two claims of one
	// worker count each other's jobs.
	LockWorkers func(ctx context.Context, tx *sql.Tx, workerIDs []string) (int, error)
	// Publish, when set, sends a notice to the other replicas (PostgreSQL NOTIFY); the
	// driver hands the notices it receives to Engine.Deliver.
	Publish func(ctx context.Context, db *sql.DB, topic, payload string) error
	// Writers is how many transactions run at once; 1 for SQLite's single writer.
	Writers int
	// Savepoints puts each operation of a batch in a savepoint (see committer).
	Savepoints bool
	// StatementsUncancelled runs a writer transaction's statements without its
	// deadline: the transaction is still rolled back when the deadline passes, from its
	// next statement on, but a statement under way is not interrupted. For a database
	// whose statements never wait long for another (SQLite, whose busy timeout bounds a
	// wait for a lock), where watching a deadline costs the driver a goroutine and a
	// progress handler per statement.
	StatementsUncancelled bool
	// InsertOrIgnore says the database takes INSERT OR IGNORE for rows whose key is
	// kept already (SQLite). An ON CONFLICT clause there makes SQLite journal every
	// statement in case it aborts; OR IGNORE cannot abort on a row of values the caller
	// checked, so it needs no journal: a fifth less CPU on a batch of test results.
	InsertOrIgnore bool
	// RunChangeCursor, when set, is the SQL expression a read of runs selects as each
	// run's change feed cursor (Run.JobSeq) in place of the run's own counter (r.job_seq),
	// for a driver whose change numbers do not come from the run's row. It must be taken
	// in the reading statement's snapshot and be below the number of every change that
	// snapshot does not see.
	RunChangeCursor string
	// WriteCTEs says that a WITH may hold INSERTs (PostgreSQL's data-modifying
	// statements), so that one statement, one round trip, writes several tables.
	WriteCTEs bool
	// QueuedNotice, when set, is a SELECT that does what BeforeCommit does for queued jobs
	// (PostgreSQL: pg_notify, sent when the transaction commits). A statement that
	// writes several tables with WriteCTEs and queues jobs ends with it, which spares
	// BeforeCommit its own round trip.
	QueuedNotice string
}

// rebind rewrites ? placeholders to $n for dialects that number them. Queries in this
// package never contain ? inside string literals.
func (d *Dialect) rebind(q string) string {
	if !d.NumberedParams || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Signals says what a committed transaction means for waiters.
type Signals struct {
	Queued    bool // a job became queued: wake claimers
	Cancelled bool // a leased job was asked to cancel: wake control channels
}
