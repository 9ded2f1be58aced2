package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var retryTests = []test{
	{"BackoffWithJitter", testRetryBackoff},
	{"Outcomes", testRetryOutcomes},
}

// testRetryBackoff fails ten jobs through six attempts each and checks every retry_after
// against full jitter: uniformly within [now, now + min(max_backoff, backoff*2^(attempt-1))].
func testRetryBackoff(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
name: flaky
jobs:
  flaky:
    matrix: { n: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10] }
    retry: { max_attempts: 6, backoff: 10s, max_backoff: 1m, on: [failure] }
    steps:
      - run: "false"
  after:
    needs: [flaky]
    steps:
      - run: "true"
`)
	const jobs, maxAttempts = 10, 6
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		cs := b.claimAll()
		if len(cs) != jobs {
			t.Fatalf("attempt %d: claimed %d jobs, want %d", attempt, len(cs), jobs)
		}
		for _, c := range cs {
			if c.Job.Attempt != attempt {
				t.Fatalf("claimed %q at attempt %d, want %d", c.Job.Key, c.Job.Attempt, attempt)
			}
		}
		b.clk.Advance(time.Second)
		now := b.clk.Now()
		bound := min(time.Minute, (10*time.Second)<<(attempt-1))

		retryAt := map[uuid.UUID]time.Time{}
		for _, c := range cs {
			j := b.complete(c, store.JobFailed)
			if attempt == maxAttempts {
				if j.Status != store.JobFailed || j.FailureKind != store.FailureExit || j.ExitCode == nil || *j.ExitCode != 1 {
					t.Errorf("last attempt of %q: %s; want failed, kind failure, exit 1", j.Key, jobState(j))
				}
				wantTime(t, "FinishedAt", j.FinishedAt, now)
				continue
			}
			if j.Status != store.JobRetrying || j.LeaseToken != "" {
				t.Fatalf("attempt %d of %q: %s; want retrying without a lease", attempt, j.Key, jobState(j))
			}
			wantWithin(t, fmt.Sprintf("attempt %d of %q: RetryAfter", attempt, j.Key), j.RetryAfter, now, bound)
			stored := b.getJob(j.ID)
			wantTime(t, "stored RetryAfter", stored.RetryAfter, j.RetryAfter)
			if stored.Status != store.JobRetrying {
				t.Errorf("stored status %s, want retrying", stored.Status)
			}
			retryAt[j.ID] = stored.RetryAfter
		}
		if attempt == maxAttempts {
			break
		}
		distinct := map[int64]bool{}
		for _, at := range retryAt {
			distinct[at.UnixMilli()] = true
		}
		if len(distinct) < 2 {
			t.Errorf("attempt %d: all %d jobs retry at the same moment; want full jitter", attempt, len(retryAt))
		}

		// Promote at the failure time, halfway through the window and past it: each job
		// is queued exactly when its retry_after has come.
		promoted := 0
		for _, at := range []time.Time{now, now.Add(bound / 2), now.Add(bound + time.Second)} {
			b.clk.Advance(at.Sub(b.clk.Now()))
			promoted += b.promote()
			if n := b.promote(); n != 0 {
				t.Errorf("a second PromoteRetries at once changed %d jobs", n)
			}
			for id, ra := range retryAt {
				j := b.getJob(id)
				switch {
				case j.Status == store.JobQueued && ra.After(at.Add(timeTolerance)):
					t.Errorf("job %q queued at %v, before its retry_after %v", j.Key, at, ra)
				case j.Status == store.JobRetrying && !ra.After(at.Add(-timeTolerance)):
					t.Errorf("job %q still retrying at %v, after its retry_after %v", j.Key, at, ra)
				case j.Status != store.JobQueued && j.Status != store.JobRetrying:
					t.Errorf("job %q is %s while waiting to retry", j.Key, j.Status)
				}
			}
		}
		if promoted != jobs {
			t.Fatalf("attempt %d: PromoteRetries changed %d jobs in all, want %d", attempt, promoted, jobs)
		}
	}
	b.expectNoClaim(store.ClaimParams{Max: 8})
	b.wantJobStatus(b.jobsByKey(run.ID)["after"].ID, store.JobSkipped)
	b.wantRunDone(run.ID, store.RunFailed)
}

// testRetryOutcomes checks which endings of an attempt are retried.
func testRetryOutcomes(t *testing.T, h Harness) {
	tests := []struct {
		name     string
		retry    string
		status   store.JobStatus
		kind     store.FailureKind
		want     store.JobStatus
		wantKind store.FailureKind
	}{
		{"failure retried", "{ max_attempts: 2, on: [failure] }", store.JobFailed, store.FailureExit, store.JobRetrying, ""},
		{"empty kind means failure, retried", "{ max_attempts: 2, on: [failure] }", store.JobFailed, "", store.JobRetrying, ""},
		{"empty kind means failure, terminal", "{ max_attempts: 1, on: [failure] }", store.JobFailed, "", store.JobFailed, store.FailureExit},
		{"timeout retried", "{ max_attempts: 2, on: [timeout] }", store.JobFailed, store.FailureTimeout, store.JobRetrying, ""},
		{"timeout not in on", "{ max_attempts: 3, on: [failure] }", store.JobFailed, store.FailureTimeout, store.JobFailed, store.FailureTimeout},
		// A worker's lost follows the reaper's rule (testReapRetriesLost, testReapFreeRedeliveries):
		// back in the queue at once, counted with lost in on, free without.
		{"lost from a worker retried", "{ max_attempts: 2, on: [lost] }", store.JobFailed, store.FailureLost, store.JobQueued, ""},
		{"lost from a worker not in on", "{ max_attempts: 3, on: [failure] }", store.JobFailed, store.FailureLost, store.JobQueued, ""},
		{"lost from a worker, attempts spent", "{ max_attempts: 1, on: [lost] }", store.JobFailed, store.FailureLost, store.JobFailed, store.FailureLost},
		{"failure not in on", "{ max_attempts: 3, on: [timeout, lost] }", store.JobFailed, store.FailureExit, store.JobFailed, store.FailureExit},
		{"attempts spent", "{ max_attempts: 1, on: [failure, timeout] }", store.JobFailed, store.FailureExit, store.JobFailed, store.FailureExit},
		{"cancelled is not retried", "{ max_attempts: 3, on: [failure, timeout, lost] }", store.JobCancelled, "", store.JobCancelled, ""},
		{"success is final", "{ max_attempts: 3, on: [failure] }", store.JobSuccess, "", store.JobSuccess, ""},
	}
	// The rows share a database: each claims the one queued job and leaves none queued.
	_, shared := setup(t, h)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := shared.with(t)
			run, _ := b.create(fmt.Sprintf(`
name: outcome
jobs:
  job:
    retry: %s
    steps:
      - run: "true"
`, tc.retry))
			c := b.claimOne()
			if c.Job.RunID != run.ID {
				t.Fatalf("claimed a job of another row's run")
			}
			b.clk.Advance(time.Second)
			exit := 7
			if tc.status == store.JobSuccess {
				exit = 0
			}
			j, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: tc.status, FailureKind: tc.kind, ExitCode: &exit})
			if err != nil {
				t.Fatalf("CompleteJob: %v", err)
			}
			for _, j := range []*store.Job{j, b.getJob(c.Job.ID)} {
				if j.Status != tc.want {
					t.Fatalf("status %s (%s), want %s", j.Status, jobState(j), tc.want)
				}
				if j.LeaseToken != "" {
					t.Errorf("lease token %q kept after completion", j.LeaseToken)
				}
				if !tc.want.Terminal() {
					continue
				}
				if tc.want == store.JobFailed && j.FailureKind != tc.wantKind {
					t.Errorf("failure kind %q, want %q", j.FailureKind, tc.wantKind)
				}
				if j.ExitCode == nil || *j.ExitCode != exit {
					t.Errorf("exit code %v, want %d", j.ExitCode, exit)
				}
				wantTime(t, "FinishedAt", j.FinishedAt, b.clk.Now())
			}
			r := b.getRun(run.ID)
			switch tc.want {
			case store.JobRetrying, store.JobQueued:
				if r.Status != store.RunRunning || r.JobsFinished != 0 {
					t.Errorf("run while its job retries: %s, %d finished; want running, 0", r.Status, r.JobsFinished)
				}
			case store.JobSuccess:
				b.wantRunDone(run.ID, store.RunSuccess)
			case store.JobFailed:
				b.wantRunDone(run.ID, store.RunFailed)
			case store.JobCancelled:
				if !r.Status.Terminal() || r.Status == store.RunSuccess || r.JobsFinished != 1 {
					t.Errorf("run after its only job was cancelled: %s, %d finished; want failed or cancelled, 1", r.Status, r.JobsFinished)
				}
			}
			if tc.want == store.JobQueued {
				// Back in the queue at once, a free redelivery unless on lists lost; claimed
				// again here, so no row is left queued for the next.
				free := !strings.Contains(tc.retry, "lost")
				again := b.claimOne()
				if again.Job.ID != c.Job.ID || again.Job.Attempt != 2 || (again.Job.Redeliveries == 1) != free {
					t.Fatalf("claim after the lost attempt: %s %s; want the job at attempt 2, free redelivery %v", again.Job.Key, jobState(again.Job), free)
				}
				b.complete(again, store.JobSuccess)
			}
		})
	}
}
