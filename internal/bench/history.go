package bench

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, to seed PostgreSQL directly
	_ "modernc.org/sqlite"             // the "sqlite" driver, to seed SQLite directly
)

// historyScenario measures claims on a store with no history, then again after a
// million finished job rows were written beside them: old jobs must not slow new ones.
// The rows are copies of the probe's own finished jobs, written by SQL straight into the
// coordinator's database, since a million jobs through the API would take the bench an
// hour.
func historyScenario() Scenario {
	const name = "history"
	return Scenario{
		Name:   name,
		About:  "claims of 2,000 queued jobs with no history, then again beside 1,000,000 finished job rows",
		Stores: []string{SQLite, Postgres},
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			return withCoordinator(ctx, o, name, store, func(c *coordinator, r *Result) error {
				const perRun, workers = 100, 8
				runs := max(1, o.scaled(2000)/perRun)
				history := o.scaled(1_000_000)
				r.Params["probe jobs"], r.Params["finished rows"], r.Params["workers"] = runs*perRun, history, workers
				r.countJobs(2*runs*perRun, "the jobs of both probes (the finished rows written by SQL are not jobs it ran)")
				probe := func() ([]time.Duration, error) {
					sub := &submitter{c: newClient(c.base, 4)}
					if err := sub.closedLoop(ctx, manyJobs(perRun), runs, 4); err != nil {
						return nil, err
					}
					stats := &simStats{ownClaims: true} // claims timed alone, as in backlog
					stop := startPool(ctx, c.base, "sim", workers, 1, nil, 0, nil, stats)
					err := waitCount(ctx, &stats.completed, int64(runs*perRun), stats, 10*time.Minute, "jobs completed")
					stop()
					if err == nil {
						err = stats.err()
					}
					return stats.claim.take(), err
				}
				before, err := probe()
				if err != nil {
					return fmt.Errorf("claims before the history: %w", err)
				}
				began := time.Now()
				var rows int
				err = r.setup(func() (err error) {
					rows, err = seedHistory(ctx, c, store, history)
					return err
				})
				if err != nil {
					return fmt.Errorf("write %d finished jobs: %w", history, err)
				}
				r.addMillis("time to write the history", time.Since(began), nil)
				r.add("finished job rows", float64(rows), "", nil)
				after, err := probe()
				if err != nil {
					return fmt.Errorf("claims beside the history: %w", err)
				}
				b, a := summarize(before), summarize(after)
				r.addLatency("claim (no history)", before, 0)
				r.addLatency("claim (with history)", after, 0)
				if b.P99 > 0 {
					r.add("claim p99 with / without history", float64(a.P99)/float64(b.P99), "x", nil)
				}
				r.Notes = append(r.Notes, "claim: the round trip of a worker's claim request that came back with a job; "+
					"the history is copies of the first probe's finished jobs, inserted by SQL while the coordinator runs")
				return nil
			})
		},
	}
}

// seedHistory copies the store's finished jobs, under new ids, until it holds at least n
// finished job rows, and returns how many it holds.
func seedHistory(ctx context.Context, c *coordinator, store string, n int) (int, error) {
	var (
		db  *sql.DB
		err error
		// newIDs gives every row of seed a fresh id in the store's form.
		newIDs []string
	)
	switch store {
	case SQLite:
		db, err = sql.Open("sqlite", "file:"+filepath.Join(c.dir, "gantry.db")+"?_pragma=busy_timeout(30000)")
		newIDs = []string{
			`UPDATE seed SET id = lower(hex(randomblob(16)))`,
			`UPDATE seed SET id = substr(id, 1, 8) || '-' || substr(id, 9, 4) || '-' || substr(id, 13, 4) || '-' ||
				substr(id, 17, 4) || '-' || substr(id, 21)`,
		}
	case Postgres:
		db, err = sql.Open("pgx", c.db)
		newIDs = []string{`UPDATE seed SET id = gen_random_uuid()`}
	default:
		return 0, fmt.Errorf("unknown store %q", store)
	}
	if err != nil {
		return 0, err
	}
	defer db.Close()
	// The temporary table lives in one session: keep to one connection.
	conn, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	count := func() (int, error) {
		var have int
		err := conn.QueryRowContext(ctx, `SELECT count(*) FROM jobs WHERE status = 'success'`).Scan(&have)
		return have, err
	}
	have, err := count()
	if err != nil {
		return 0, err
	}
	if have == 0 {
		return 0, fmt.Errorf("no finished job to copy")
	}
	if _, err := conn.ExecContext(ctx, `CREATE TEMP TABLE seed AS SELECT * FROM jobs WHERE status = 'success'`); err != nil {
		return 0, err
	}
	// Copy in batches of up to 50,000 rows, each its own statement: big enough to be fast,
	// small enough that the coordinator's writer is never held up for long.
	batch := have
	for batch*2 <= 50_000 {
		if _, err := conn.ExecContext(ctx, `INSERT INTO seed SELECT * FROM seed`); err != nil {
			return 0, err
		}
		batch *= 2
	}
	for have < n {
		for _, q := range newIDs {
			if _, err := conn.ExecContext(ctx, q); err != nil {
				return 0, err
			}
		}
		if _, err := conn.ExecContext(ctx, `INSERT INTO jobs SELECT * FROM seed`); err != nil {
			return 0, err
		}
		have += batch
	}
	if store == Postgres {
		// Plans should see the table as it now is, as autovacuum would soon make them.
		if _, err := conn.ExecContext(ctx, `ANALYZE jobs`); err != nil {
			return 0, err
		}
	}
	return count()
}
