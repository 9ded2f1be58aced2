package api

import (
	"context"
	"slices"
	"strings"

	"github.com/gantry-ci/gantry/internal/scheduler"
	"github.com/gantry-ci/gantry/internal/store"
)

// waitingJSON says why a job no worker holds has not started (scheduler.Why).
type waitingJSON struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Labels are, for no_worker, the labels no live worker offers.
	Labels []string `json:"labels,omitempty"`
}

// waiting says why each of jobs waits (nil for a job that does not: leased or finished).
// runJobs are every job of their run, read only when a pending job's needs must be named;
// nil reads them. Jobs are of one run. It costs at most five reads however many jobs
// there are: the run's jobs, the workers, the holders of the groups asked for, the
// project's load and, when some job waits its turn, the queue's depth. A read that fails leaves the reasons out
// rather than failing the answer: the job's status is still true without them.
func (s *Server) waiting(ctx context.Context, jobs, runJobs []*store.Job) []*waitingJSON {
	out := make([]*waitingJSON, len(jobs))
	var waits, pending, queued bool
	var groups []string
	for _, j := range jobs {
		switch j.Status {
		case store.JobPending:
			waits, pending = true, true
		case store.JobRetrying, store.JobWaitingApproval:
			waits = true
		case store.JobQueued:
			waits, queued = true, true
			if j.ConcurrencyGroup != "" && !slices.Contains(groups, j.ConcurrencyGroup) {
				groups = append(groups, j.ConcurrencyGroup)
			}
		}
	}
	if !waits {
		return out
	}
	in := scheduler.WaitInput{Now: s.clock.Now()}
	needsLeft := func(*store.Job) []string { return nil }
	if pending {
		if runJobs == nil {
			var err error
			if runJobs, err = s.store.ListJobs(ctx, jobs[0].RunID); err != nil {
				s.log.WarnContext(ctx, "why jobs wait: list the run's jobs", "run", jobs[0].RunID, "err", err)
				return out
			}
		}
		needsLeft = scheduler.RunNeeds(runJobs)
	}
	var holders map[string]*store.Job
	if queued {
		workers, err := s.store.ListWorkers(ctx)
		if err != nil {
			s.log.WarnContext(ctx, "why jobs wait: list workers", "err", err)
			return out
		}
		in.Workers = scheduler.LiveWorkers(workers, in.Now, s.offlineAfter())
		if len(groups) > 0 {
			if holders, err = s.store.ConcurrencyHolders(ctx, jobs[0].ProjectID, groups); err != nil {
				s.log.WarnContext(ctx, "why jobs wait: read concurrency group holders", "err", err)
				return out
			}
		}
		if in.Project, err = s.store.ProjectLoad(ctx, jobs[0].ProjectID); err != nil {
			s.log.WarnContext(ctx, "why jobs wait: read the project's load", "err", err)
			return out
		}
	}
	// Queued jobs that ask for the same thing wait for the same reason: a matrix of
	// thousands is worked out once per kind, not once per job against every worker.
	type kind struct {
		labels, group    string
		milliCPU, memory int64
		priority         string
	}
	memo := map[kind]scheduler.Waiting{}
	why := func(j *store.Job) (scheduler.Waiting, bool) {
		var k kind
		if j.Status == store.JobQueued {
			k = kind{strings.Join(j.Labels, ","), j.ConcurrencyGroup, j.MilliCPU, j.Memory, string(j.Priority)}
			if w, ok := memo[k]; ok {
				return w, true
			}
		}
		in := in
		in.NeedsLeft = needsLeft(j)
		if j.ConcurrencyGroup != "" {
			in.Holder = holders[j.ConcurrencyGroup]
		}
		if j.Status == store.JobWaitingApproval {
			// Few jobs wait for approval at once: their decisions are read one by one.
			if a := s.approvalState(ctx, j); a != nil {
				in.RequiredApprovals = a.Required
				for _, d := range a.Decisions {
					in.Approvals = append(in.Approvals, &store.Approval{Approver: d.Approver, Decision: store.Decision(d.Decision)})
				}
			}
		}
		w, ok := scheduler.Why(j, in)
		if ok && j.Status == store.JobQueued {
			memo[k] = w
		}
		return w, ok
	}
	backlog := false
	for _, j := range jobs {
		if w, ok := why(j); ok && w.Code == scheduler.WaitBacklog {
			backlog = true
			break
		}
	}
	if backlog {
		// Only a job waiting its turn is told how long the queue is.
		if q, err := s.store.QueueStats(ctx); err != nil {
			s.log.WarnContext(ctx, "why jobs wait: queue stats", "err", err)
		} else {
			in.Queue = q
			clear(memo)
		}
	}
	for i, j := range jobs {
		if w, ok := why(j); ok {
			out[i] = &waitingJSON{Code: string(w.Code), Message: w.Message, Labels: w.Labels}
		}
	}
	return out
}
