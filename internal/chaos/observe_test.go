package chaos

import (
	"context"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/store"
)

// reader is the part of the store the observer reads, straight from the database, so
// that it sees the coordinator's record even while the coordinator is down.
type reader interface {
	ListJobs(ctx context.Context, runID uuid.UUID) ([]*store.Job, error)
	ListSteps(ctx context.Context, jobID uuid.UUID) ([]*store.Step, error)
}

// onceRecord is what the store said about a job's once step when the observer first
// saw it succeeded.
type onceRecord struct {
	at      time.Time
	attempt int
	// exact: the step's row showed success in attempt, so that attempt ran it. Otherwise
	// a later claim had already reset the row, and the success was in an attempt before
	// attempt.
	exact bool
}

// jobState is the observer's latest view of one job.
type jobState struct {
	run      uuid.UUID
	key      string
	status   store.JobStatus
	attempt  int
	workerID string
	once     *onceRecord
	// holders names the worker seen holding each attempt: the store forgets it when the
	// job ends.
	holders map[int]string
}

// recovery follows the jobs a killed worker held until the coordinator has taken them
// back and another worker has them.
type recovery struct {
	held       map[uuid.UUID]int // job -> attempt the killed worker held
	unreleased map[uuid.UUID]bool
	pending    int
	releasedAt time.Time // when no held job was leased to the dead worker any more
	doneAt     time.Time // when every held job was seen claimed by another worker or ended
}

// observer polls the store for job states, once-step successes and recoveries.
type observer struct {
	st   reader
	runs []uuid.UUID

	mu         sync.Mutex
	jobs       map[uuid.UUID]*jobState
	recoveries []*recovery
	terminal   int
	lastErr    error
}

func newObserver(st reader, runs []uuid.UUID) *observer {
	return &observer{st: st, runs: runs, jobs: map[uuid.UUID]*jobState{}}
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
	var all []*store.Job
	for _, r := range o.runs {
		jobs, err := o.st.ListJobs(ctx, r)
		if err != nil {
			o.setErr(fmt.Errorf("list jobs of run %s: %w", r, err))
			return
		}
		all = append(all, jobs...)
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
	o.terminal = 0
	for _, j := range all {
		s := o.jobs[j.ID]
		if s == nil {
			s = &jobState{run: j.RunID, key: j.Key, holders: map[int]string{}}
			o.jobs[j.ID] = s
		}
		s.status, s.attempt, s.workerID = j.Status, j.Attempt, j.WorkerID
		if j.Status.Leased() {
			s.holders[j.Attempt] = j.WorkerID
		}
		if j.Status.Terminal() {
			o.terminal++
		}
		if st := steps[j.ID]; st != nil && st.OnceSucceeded && s.once == nil {
			s.once = &onceRecord{at: now, attempt: st.Attempt, exact: st.Status == store.StepSuccess}
		}
	}
	for _, r := range o.recoveries {
		for id, att := range r.held {
			s := o.jobs[id]
			if s == nil {
				continue
			}
			if r.unreleased[id] && (s.attempt > att || !s.status.Leased()) {
				delete(r.unreleased, id)
				if len(r.unreleased) == 0 {
					r.releasedAt = now
				}
			}
			if att >= 0 && (s.status.Terminal() || s.attempt > att && s.status.Leased()) {
				r.held[id] = -1
				r.pending--
				if r.pending == 0 {
					r.doneAt = now
				}
			}
		}
	}
}

func (o *observer) setErr(err error) {
	o.mu.Lock()
	o.lastErr = err
	o.mu.Unlock()
}

// progress returns how many jobs are terminal, of how many, as of the last poll.
func (o *observer) progress() (terminal, total int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.terminal, len(o.jobs)
}

// watchKill records the jobs workerID holds now and returns the recovery to follow.
func (o *observer) watchKill(ctx context.Context, workerID string, at time.Time) (*recovery, error) {
	r := &recovery{held: map[uuid.UUID]int{}, unreleased: map[uuid.UUID]bool{}}
	for _, run := range o.runs {
		jobs, err := o.st.ListJobs(ctx, run)
		if err != nil {
			return nil, fmt.Errorf("list jobs of run %s: %w", run, err)
		}
		for _, j := range jobs {
			if j.WorkerID == workerID && j.Status.Leased() {
				r.held[j.ID] = j.Attempt
				r.unreleased[j.ID] = true
			}
		}
	}
	r.pending = len(r.held)
	if r.pending == 0 {
		r.doneAt, r.releasedAt = at, at
	}
	o.mu.Lock()
	o.recoveries = append(o.recoveries, r)
	o.mu.Unlock()
	return r, nil
}

// recovered returns when the held jobs were released and when all were running
// elsewhere or ended (zero when not yet), and how many are not yet.
func (o *observer) recovered(r *recovery) (released, done time.Time, pending int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return r.releasedAt, r.doneAt, r.pending
}

// onceOf returns what the observer recorded about job's once step.
func (o *observer) onceOf(job uuid.UUID) *onceRecord {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.jobs[job]; s != nil {
		return s.once
	}
	return nil
}

// holder returns the worker the observer saw holding the attempt of job, or "".
func (o *observer) holder(job uuid.UUID, attempt int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if s := o.jobs[job]; s != nil {
		return s.holders[attempt]
	}
	return ""
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

// entry is one line of the ledger the steps write: what ran, for which job attempt, in
// which worker incarnation, when.
type entry struct {
	kind    string // once, start, done
	job     uuid.UUID
	attempt int
	tag     string // the worker incarnation: base name of its TMPDIR
	at      time.Time
	line    string
}

// readLedger parses the ledger file; a malformed line is an error, since lines are short
// enough to be appended atomically.
func readLedger(path string) ([]entry, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read ledger: %w", err)
	}
	var out []entry
	for i, line := range strings.Split(strings.TrimRight(string(data), "\n"), "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) != 5 {
			return nil, fmt.Errorf("ledger line %d %q: want 5 fields", i+1, line)
		}
		job, err := uuid.Parse(f[1])
		if err != nil {
			return nil, fmt.Errorf("ledger line %d %q: %w", i+1, line, err)
		}
		att, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("ledger line %d %q: %w", i+1, line, err)
		}
		ns, err := strconv.ParseInt(f[4], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("ledger line %d %q: %w", i+1, line, err)
		}
		tag := f[3][strings.LastIndex(f[3], "/")+1:]
		out = append(out, entry{kind: f[0], job: job, attempt: att, tag: tag, at: time.Unix(0, ns), line: line})
	}
	return out, nil
}

// ledgerOf groups entries by job.
func ledgerOf(entries []entry) map[uuid.UUID][]entry {
	out := map[uuid.UUID][]entry{}
	for _, e := range entries {
		out[e.job] = append(out[e.job], e)
	}
	return out
}

// logLines joins a job's ledger lines for a failure message.
func logLines(es []entry) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString("\n    " + e.line)
	}
	return b.String()
}

// check logs the observer's last read error, which explains a stalled view.
func (o *observer) check(t testing.TB) {
	t.Helper()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.lastErr != nil {
		t.Logf("observer: last read error (the poll is retried): %v", o.lastErr)
	}
}
