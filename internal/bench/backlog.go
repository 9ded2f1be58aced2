package bench

import (
	"context"
	"time"
)

// backlogScenario queues 100,000 jobs across 1,000 runs with no worker to take them,
// then lets a few simulated workers claim a part of them: a claim must stay fast, and
// the coordinator small, however deep the queue behind it.
func backlogScenario() Scenario {
	const name = "backlog"
	return Scenario{
		Name:   name,
		About:  "100,000 queued jobs across 1,000 runs, then 8 simulated workers claim 5,000 of them: claim latency and coordinator RSS",
		Stores: []string{SQLite, Postgres},
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			return withCoordinator(ctx, o, name, store, func(c *coordinator, r *Result) error {
				const perRun, workers, submitters = 100, 8, 4
				runs := o.scaled(1000)
				claims := min(o.scaled(5000), runs*perRun)
				r.Params["runs"], r.Params["jobs per run"], r.Params["workers"], r.Params["claimed"] = runs, perRun, workers, claims
				r.countJobs(runs*perRun, "the jobs queued, of which the claimed ones were completed")
				m, err := meter(c.pid)
				if err != nil {
					return err
				}
				sub := &submitter{c: newClient(c.base, submitters)}
				began := time.Now()
				if err := sub.closedLoop(ctx, manyJobs(perRun), runs, submitters); err != nil {
					return err
				}
				r.addMillis("time to queue every job", time.Since(began), nil)
				// The target is the claim's own latency: a claim carried by a completion
				// would time the completion too.
				stats := &simStats{ownClaims: true}
				stop := startPool(ctx, c.base, "sim", workers, 1, nil, 0, nil, stats)
				err = waitCount(ctx, &stats.completed, int64(claims), stats, 10*time.Minute, "jobs completed")
				stop()
				if err != nil {
					return err
				}
				_, rss, err := m.end()
				if err != nil {
					return err
				}
				r.addLatency("claim", stats.claim.take(), 5*time.Millisecond)
				r.add("coordinator RSS", float64(rss)/mib, "MiB", atMost(300))
				r.Notes = append(r.Notes, "claim: the round trip of a worker's claim request that came back with a job, "+
					"with the backlog queued behind it; RSS: the coordinator's highest, from the first submit to the last claim")
				return stats.err()
			})
		},
	}
}
