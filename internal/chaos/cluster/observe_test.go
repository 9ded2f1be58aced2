package cluster

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/store"
)

// reader is the part of the store the observer reads, straight from PostgreSQL, so that
// it sees the record while replicas are down or cut off.
type reader interface {
	ListJobs(ctx context.Context, runID uuid.UUID) ([]*store.Job, error)
	ListSteps(ctx context.Context, jobID uuid.UUID) ([]*store.Step, error)
}

// jobState is the observer's latest view of one job.
type jobState struct {
	run      uuid.UUID
	name     string
	key      string
	status   store.JobStatus
	attempt  int
	workerID string
	once     *onceRecord
	// holders names the worker seen holding each attempt: the store forgets it when the
	// job ends.
	holders map[int]string
	ended   time.Time // when the store says it finished
}

// observer polls the database for job states, once-step successes and holders, and the
// engine for running containers.
type observer struct {
	st      reader
	running func(context.Context) ([]string, error)

	mu        sync.Mutex
	runs      []uuid.UUID
	ended     map[uuid.UUID]bool // runs all of whose jobs were terminal at a poll: nothing changes them
	jobs      map[uuid.UUID]*jobState
	sightings []sighting
	lastErr   error
	polls     int
}

func newObserver(st reader, running func(context.Context) ([]string, error)) *observer {
	return &observer{st: st, running: running, jobs: map[uuid.UUID]*jobState{}, ended: map[uuid.UUID]bool{}}
}

// watch adds a run to those polled.
func (o *observer) watch(run uuid.UUID) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range o.runs {
		if r == run {
			return
		}
	}
	o.runs = append(o.runs, run)
}

// run polls every interval until ctx ends.
func (o *observer) run(ctx context.Context, interval time.Duration) {
	for {
		o.poll(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(interval):
		}
	}
}

func (o *observer) poll(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Containers first: a sighting's time is taken before the engine is asked, so the
	// container ran at some moment after it.
	at := bootNow()
	hosts, err := o.running(ctx)
	if err != nil {
		o.setErr(fmt.Errorf("list containers: %w", err))
	}
	o.mu.Lock()
	for _, h := range hosts {
		o.sightings = append(o.sightings, sighting{host: h, at: at})
	}
	var runs []uuid.UUID
	for _, r := range o.runs {
		if !o.ended[r] {
			runs = append(runs, r)
		}
	}
	o.mu.Unlock()

	// Only runs with a job not ended yet: a long run of the suite submits hundreds.
	var all []*store.Job
	var ended []uuid.UUID
	for _, r := range runs {
		jobs, err := o.st.ListJobs(ctx, r)
		if err != nil {
			o.setErr(fmt.Errorf("list jobs of run %s: %w", r, err))
			return
		}
		all = append(all, jobs...)
		if len(jobs) > 0 && !slices.ContainsFunc(jobs, func(j *store.Job) bool { return !j.Status.Terminal() }) {
			ended = append(ended, r)
		}
	}
	// Steps only of jobs that have been claimed and whose once step is not yet seen.
	steps := map[uuid.UUID]*store.Step{}
	o.mu.Lock()
	var ask []uuid.UUID
	for _, j := range all {
		if s := o.jobs[j.ID]; j.Attempt > 0 && (s == nil || s.once == nil) {
			ask = append(ask, j.ID)
		}
	}
	o.mu.Unlock()
	for _, id := range ask {
		st, err := o.st.ListSteps(ctx, id)
		if err != nil {
			o.setErr(fmt.Errorf("list steps of job %s: %w", id, err))
			return
		}
		if len(st) > 0 {
			steps[id] = st[0]
		}
	}
	now := time.Now()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.polls++
	for _, r := range ended {
		o.ended[r] = true
	}
	for _, j := range all {
		s := o.jobs[j.ID]
		if s == nil {
			s = &jobState{run: j.RunID, name: j.Name, key: j.Key, holders: map[int]string{}}
			o.jobs[j.ID] = s
		}
		s.status, s.attempt, s.workerID, s.ended = j.Status, j.Attempt, j.WorkerID, j.FinishedAt
		if j.Status.Leased() {
			s.holders[j.Attempt] = j.WorkerID
		}
		if st := steps[j.ID]; st != nil && st.OnceSucceeded && s.once == nil {
			s.once = &onceRecord{at: now, attempt: st.Attempt, exact: st.Status == store.StepSuccess}
		}
	}
}

func (o *observer) setErr(err error) {
	o.mu.Lock()
	o.lastErr = err
	o.mu.Unlock()
}

// progress returns how many jobs are terminal, of how many, as of the last poll, and
// the number of polls so far.
func (o *observer) progress() (terminal, total, polls int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, s := range o.jobs {
		if s.status.Terminal() {
			terminal++
		}
	}
	return terminal, len(o.jobs), o.polls
}

// snapshot copies what the observer knows.
func (o *observer) snapshot() (map[uuid.UUID]jobState, []sighting) {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := make(map[uuid.UUID]jobState, len(o.jobs))
	for id, s := range o.jobs {
		c := *s
		c.holders = make(map[int]string, len(s.holders))
		for a, w := range s.holders {
			c.holders[a] = w
		}
		out[id] = c
	}
	return out, append([]sighting(nil), o.sightings...)
}

// notTerminal describes the jobs not terminal at the last poll.
func (o *observer) notTerminal() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for id, s := range o.jobs {
		if !s.status.Terminal() {
			out = append(out, fmt.Sprintf("%s %s (run %s): %s, attempt %d, worker %q", id, s.key, s.run, s.status, s.attempt, s.workerID))
		}
	}
	sort.Strings(out)
	return out
}

// err is the observer's last read error, which explains a stale view.
func (o *observer) err() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.lastErr
}
