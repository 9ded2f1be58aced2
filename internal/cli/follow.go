package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"time"
)

// A follower's read of the run's changes waits on the coordinator for one (followWait).
// After a change it reads again within followFast (plus a little per job, so that a large
// run's reads stay cheap), so that one read takes the changes that follow at once. From
// a coordinator that answers at once with nothing changed (one that does not wait) it
// backs off to followPoll: a short run still ends moments after its last job rather
// than at the next slow poll.
const (
	followPoll = 250 * time.Millisecond
	followFast = 5 * time.Millisecond
	// followWhole is how often a follower of a run with a job whose reason to wait it
	// tells reads the run whole: why a job waits can change while the job does not, and
	// the change feed lists only jobs that changed. While jobs wait only for their needs
	// or their turn, which it never tells, it does so every followWholeIdle, so that a
	// reason that comes up (the last worker able to take a job went) shows in time.
	followWhole     = waitGrace / 2
	followWholeIdle = 5 * waitGrace
	// followWait is the longest a read of the run's changes waits on the coordinator for
	// one (?wait=), and followWaitTTY on a terminal, whose status line shows the time.
	followWait    = 10 * time.Second
	followWaitTTY = time.Second
	// streamAfter is how long an attempt is seen under way before its log is followed
	// on a stream of its own: most attempts of a large run end sooner, and an attempt
	// that ended is read whole, in one request, with no stream to open and close.
	streamAfter = 20 * time.Millisecond
)

// runFeed is a run as its follower knows it: read whole once, then by its change feed
// (GET /api/v1/runs/{id}?since=SEQ), each job read again only when it changed. A
// coordinator that has no feed answers every job each time, which merges the same.
type runFeed struct {
	c     *apiClient
	id    string
	run   runDetails
	at    map[string]int // job id -> its index in run.Jobs
	whole time.Time      // when the run was last read whole
	// changed are the indexes in run.Jobs of the jobs reads brought since the follower
	// last took them (every job after a whole read): those whose title may have changed.
	changed []int
	// maxWait is the longest a read of changes waits for one on the coordinator, 0 for
	// not at all; waited says the last read waited all it asked, with no change to show:
	// a coordinator that does not wait answers at once.
	maxWait time.Duration
	waited  bool
}

// takeChanged returns the indexes of the jobs read since it was last called.
func (f *runFeed) takeChanged() []int {
	c := f.changed
	f.changed = nil
	return c
}

// read brings the run up to date and says whether it or any of its jobs moved.
func (f *runFeed) read(ctx context.Context) (bool, error) {
	f.waited = false
	untilWhole := wholeEvery(f.run) - time.Since(f.whole)
	if f.at == nil || untilWhole <= 0 {
		r, _, err := getRun(ctx, f.c, f.id)
		if err != nil {
			return false, err
		}
		moved := f.at == nil || changed(f.run, r)
		if f.at != nil {
			// Jobs keep the places they had, which the follower indexes by: jobs new
			// since (a computed matrix's instances) come after them.
			byID := make(map[string]jobView, len(r.Jobs))
			for _, j := range r.Jobs {
				byID[j.ID] = j
			}
			jobs := make([]jobView, 0, len(r.Jobs))
			for _, j := range f.run.Jobs {
				if nj, ok := byID[j.ID]; ok {
					jobs = append(jobs, nj)
					delete(byID, j.ID)
				}
			}
			for _, j := range r.Jobs {
				if _, ok := byID[j.ID]; ok {
					jobs = append(jobs, j)
					moved = true
				}
			}
			r.Jobs = jobs
		}
		f.run, f.whole = r, time.Now()
		f.at = make(map[string]int, len(r.Jobs))
		f.changed = f.changed[:0]
		for i, j := range r.Jobs {
			f.at[j.ID] = i
			f.changed = append(f.changed, i)
		}
		return moved, nil
	}
	var r runDetails
	path := fmt.Sprintf("/api/v1/runs/%s?since=%d", f.id, f.run.Seq)
	// The coordinator answers as soon as a job changes: the follower need not ask again
	// and again. It waits no longer than until the next whole read is due.
	wait := min(f.maxWait, untilWhole).Truncate(time.Millisecond)
	if wait > 0 {
		path += "&wait=" + wait.String()
	}
	began := time.Now()
	if _, err := f.c.getRaw(ctx, path, &r); err != nil {
		return false, fmt.Errorf("get run %s: %w", f.id, err)
	}
	f.waited = wait > 0 && len(r.Jobs) == 0 && time.Since(began) >= wait
	moved := r.Status != f.run.Status
	jobs := f.run.Jobs
	for _, j := range r.Jobs {
		i, ok := f.at[j.ID]
		if !ok {
			f.at[j.ID] = len(jobs)
			f.changed = append(f.changed, len(jobs))
			jobs = append(jobs, j)
			moved = true
			continue
		}
		f.changed = append(f.changed, i)
		if jobs[i].Status != j.Status || jobs[i].Attempt != j.Attempt {
			moved = true
		}
		jobs[i] = j
	}
	r.Jobs = jobs
	f.run = r
	return moved, nil
}

// wholeEvery is how often a follower reads run whole, as its jobs' reasons to wait stand.
func wholeEvery(run runDetails) time.Duration {
	every := time.Duration(math.MaxInt64)
	for _, j := range run.Jobs {
		switch {
		case noteKey(j) != "":
			return followWhole
		case j.Waiting != nil:
			every = followWholeIdle
		}
	}
	return every
}

// followRun prints every job's log lines of run id, prefixed by job key, until the run is terminal, and returns its final status ("success", "failed", "cancelled").
//
// Each job attempt's log is followed on its own stream from its first line as soon as the
// run shows the attempt was claimed, so a job that finished before its stream opened
// still shows every line, each once; an attempt the run already shows ended is read
// whole instead, with no stream. With tty, prefixes are coloured per job and a live
// status line stays at the bottom; without, the output is plain `key | line` lines and
// one final summary.
func followRun(ctx context.Context, c *apiClient, id string, out io.Writer, tty bool) (string, error) {
	return followRunWith(ctx, c, id, out, tty, followOptions{})
}

// followOptions change what followRunWith does beyond printing.
type followOptions struct {
	// noWorker, when set, is told of a job that has waited waitGrace with no live worker
	// able to take it; an error it returns ends the following with that error.
	noWorker func(job jobView) error
}

// waitingView is why a job waits, as the API says it.
type waitingView struct {
	Code    string   `json:"code"`
	Message string   `json:"message"`
	Labels  []string `json:"labels"`
}

// waitGrace is how long a job waits before following says why: most waits end sooner,
// and a worker starting beside the run has registered by then.
const waitGrace = 2 * time.Second

// waitNotes decides when following tells why a job waits: once a job has waited
// waitGrace for one reason, once per reason. Waiting for needs or for a turn in the queue
// is how every run goes, and shows in the status line only. It keeps each job by its
// index in the run's jobs, which a job keeps from one read to the next: observe looks at
// every job on every read of a run, and a map lookup per job was most of its cost.
type waitNotes struct {
	notes []waitNote
}

type waitNote struct {
	since time.Time // when the current reason was first seen
	key   string    // the current reason, "" when none
	shown string    // the reason last printed
}

// noteKey is what must change for a job's reason to be told again; "" is never told.
// A retry's countdown changes on every read, so only a new attempt counts.
func noteKey(j jobView) string {
	w := j.Waiting
	if w == nil {
		return ""
	}
	switch w.Code {
	case "needs", "backlog":
		return ""
	case "retry":
		return fmt.Sprintf("retry %d", j.Attempt)
	}
	return w.Code + " " + w.Message
}

// observe takes a fresh read of the run and returns the jobs whose reason to wait is due
// to be told now, and the jobs that have waited waitGrace with no worker able to take
// them.
func (n *waitNotes) observe(run runDetails, now time.Time) (tell, noWorker []jobView) {
	if len(n.notes) < len(run.Jobs) {
		n.notes = append(n.notes, make([]waitNote, len(run.Jobs)-len(n.notes))...)
	}
	for i, j := range run.Jobs {
		note := &n.notes[i]
		k := noteKey(j)
		if k == "" {
			note.key = ""
			continue
		}
		if note.key != k {
			note.key, note.since = k, now
		}
		if now.Sub(note.since) < waitGrace {
			continue
		}
		if note.shown != k {
			note.shown = k
			tell = append(tell, j)
		}
		if j.Waiting.Code == "no_worker" {
			noWorker = append(noWorker, j)
		}
	}
	return tell, noWorker
}

// followRunWith is followRun with options.
func followRunWith(ctx context.Context, c *apiClient, id string, out io.Writer, tty bool, opts followOptions) (string, error) {
	maxWait := followWait
	if tty {
		maxWait = followWaitTTY
	}
	feed := &runFeed{c: c, id: id, maxWait: maxWait}
	if _, err := feed.read(ctx); err != nil {
		return "", err
	}
	run := feed.run
	f := newRunPrinter(out, tty, run.Jobs)
	feed.takeChanged() // the printer has every job of the first read
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()

	type attemptDone struct {
		job     int // its index in run.Jobs
		attempt int
		err     error
	}
	done := make(chan attemptDone)
	type jobState struct {
		next      int // the next attempt to follow
		streaming bool
		// seen is when next was first seen under way, not yet followed (streamAfter).
		seen time.Time
	}
	// By index in run.Jobs, which is plan order on every read: the loop below looks at
	// every job on every poll, and a map lookup each was most of what following cost.
	var states []jobState
	streaming := 0
	var notes waitNotes
	lastOK := time.Now()
	// Each read costs little (only changed jobs), but the loop below still looks at every
	// job: a large run polls a little less often.
	fast := min(followPoll, followFast+time.Duration(len(run.Jobs))*5*time.Microsecond)
	wait := fast
	poll := time.NewTimer(wait)
	defer poll.Stop()
	// scan says the jobs are looked at this time round: after every read of the run,
	// and once no stream is left. Not after each stream's end, which changes nothing of
	// the run's jobs: looking at all of them then made following a run cost the square
	// of its jobs.
	scan := true
	// held says an attempt under way waits out streamAfter before its stream opens, as
	// the last look at the jobs found.
	held := false
	for {
		caughtUp := scan
		if scan {
			held = false
			now := time.Now()
			// The jobs the reads since the last look brought: the first read's, a computed
			// matrix's instances, and a job whose name: reads its needs, evaluated when it is
			// claimed.
			for _, i := range feed.takeChanged() {
				f.add(run.Jobs, i)
			}
			for len(states) < len(run.Jobs) {
				states = append(states, jobState{next: 1})
			}
			for i, j := range run.Jobs {
				st := &states[i]
				if st.streaming || st.next > j.Attempt {
					continue
				}
				caughtUp = false
				if namedLater(j, st.next) {
					continue
				}
				// An attempt that already ended has stored every line (a worker stores
				// them before it reports the end): one read of them, not a stream.
				ended := j.Attempt > st.next || jobTerminal(j.Status)
				if !ended {
					if st.seen.IsZero() {
						st.seen = now
					}
					if now.Sub(st.seen) < streamAfter {
						held = true
						continue
					}
				}
				st.streaming = true
				streaming++
				attempt, job, at := st.next, j, i
				wg.Add(1)
				go func() {
					defer wg.Done()
					if attempt > 1 {
						f.note(job.ID, fmt.Sprintf("attempt %d of %d", attempt, max(job.MaxAttempts, attempt)))
					}
					var after int64
					show := func(l logLine) {
						f.line(job.ID, l)
						after = l.Seq
					}
					var err error
					if ended {
						err = readLog(ctx, c, job.ID, attempt, 0, show)
					}
					if !ended || retriable(err) {
						// The stream retries what one read does not: a coordinator away.
						_, err = c.streamLog(ctx, job.ID, attempt, after, show)
					}
					select {
					case done <- attemptDone{job: at, attempt: attempt, err: err}:
					case <-ctx.Done():
					}
				}()
			}
			tell, noWorker := notes.observe(run, time.Now())
			for _, j := range tell {
				f.note(j.ID, j.Waiting.Message)
			}
			if opts.noWorker != nil {
				for _, j := range noWorker {
					if err := opts.noWorker(j); err != nil {
						return "", err
					}
				}
			}
			f.status(run)
		}
		if runTerminal(run.Status) && streaming == 0 && caughtUp {
			f.summary(run)
			return run.Status, nil
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case d := <-done:
			streaming--
			if d.err != nil {
				return "", d.err
			}
			st := &states[d.job]
			st.streaming = false
			st.next = d.attempt + 1
			st.seen = time.Time{}
			scan = streaming == 0
			// The job's end likely changed the run: read it soon.
			wait = fast
			poll.Reset(wait)
			continue
		case <-poll.C:
		}
		scan = true
		// A held attempt's stream opens once it has been under way streamAfter: the read
		// waits no longer than that.
		feed.maxWait = maxWait
		if held {
			feed.maxWait = min(maxWait, streamAfter)
		}
		moved, err := feed.read(ctx)
		if err != nil {
			// A coordinator restarting is not the end of the run; a wrong id or a revoked
			// token is.
			var se *serverError
			if errors.As(err, &se) && se.Status < 500 || time.Since(lastOK) > streamGiveUp || ctx.Err() != nil {
				return "", err
			}
			poll.Reset(followPoll)
			continue
		}
		if moved || feed.waited {
			// After a change more may follow at once: a short pause lets one read take
			// them together. A read that waited its whole time asks again as soon.
			wait = fast
		} else {
			wait = min(2*wait, followPoll)
		}
		poll.Reset(wait)
		run, lastOK = feed.run, time.Now()
	}
}

// namedLater says whether attempt of job j waits for its name before its lines are
// followed: a job whose name: reads what its needs left is named by the coordinator
// just after it is claimed, so a read of the run can show it claimed under its name
// unevaluated. Its lines wait for the read that shows the name, or for the attempt's
// end (a name that could not be evaluated fails the job), so that they show under it.
func namedLater(j jobView, attempt int) bool {
	return strings.Contains(j.title(), "${{") && j.Attempt == attempt && !jobTerminal(j.Status)
}

// retriable says whether a read that failed with err may succeed if made again: it was
// not cancelled, and the coordinator did not refuse it.
func retriable(err error) bool {
	return err != nil && !errors.Is(err, context.Canceled) && !refused(err)
}

// changed says whether the run or any of its jobs moved between two reads.
func changed(old, cur runDetails) bool {
	if old.Status != cur.Status || len(old.Jobs) != len(cur.Jobs) {
		return true
	}
	for i := range cur.Jobs {
		if old.Jobs[i].Status != cur.Jobs[i].Status || old.Jobs[i].Attempt != cur.Jobs[i].Attempt {
			return true
		}
	}
	return false
}

// runPrinter writes the lines of many jobs to one writer, each line whole, with the job's
// prefix, and on a terminal keeps a status line below them.
type runPrinter struct {
	out     io.Writer
	tty     bool
	width   int
	start   time.Time
	mu      sync.Mutex
	prefix  map[string]string // job id -> the prefix and separator, padded and coloured; under mu
	current string            // the status line on screen, "" when none
	// w is the width of a job's title in its prefix, titles the title each job's prefix
	// was made for, by the job's index (used by add, on the follower's goroutine only).
	w      int
	titles []string
}

// maxPrefix is the most columns a job key takes in front of its lines.
const maxPrefix = 24

func newRunPrinter(out io.Writer, tty bool, jobs []jobView) *runPrinter {
	_, width := terminal(out)
	p := &runPrinter{out: out, tty: tty, width: width, start: time.Now(), prefix: make(map[string]string, len(jobs))}
	w := 0
	for _, j := range jobs {
		w = max(w, len([]rune(j.title())))
	}
	w = distinctWidth(jobTitles(jobs), min(w, maxPrefix))
	p.w = w
	for i := range jobs {
		p.add(jobs, i)
	}
	return p
}

// add gives job i of jobs a prefix if it has none or its title changed (a placeholder
// that became the first instance of its matrix, a name: evaluated when its job was
// claimed), as wide as the first jobs'. A job keeps its index in jobs from one read of
// the run to the next.
func (p *runPrinter) add(jobs []jobView, i int) {
	if i >= len(p.titles) {
		p.titles = append(p.titles, make([]string, i+1-len(p.titles))...)
	}
	j := jobs[i]
	title := j.title()
	if title != "" && p.titles[i] == title {
		return // "" is a job not seen yet: a key is never empty
	}
	p.titles[i] = title
	key := pad(elide(title, p.w), p.w)
	if p.tty {
		key = jobColours[i%len(jobColours)] + key + ansiReset
	}
	p.mu.Lock()
	p.prefix[j.ID] = key + " | "
	p.mu.Unlock()
}

// line prints one log line of job.
func (p *runPrinter) line(job string, l logLine) {
	text, ok := l.display()
	if !ok {
		return
	}
	if p.tty {
		switch l.Stream {
		case "system":
			text = ansiDim + text + ansiReset
		case "stderr":
			// stderr keeps its own colour: tools colour their errors themselves.
		}
	}
	p.writeFor(job, text+"\n")
}

// note prints a line of Gantry's own about job, such as a new attempt starting.
func (p *runPrinter) note(job, text string) {
	if p.tty {
		text = ansiDim + "--- " + text + " ---" + ansiReset
	} else {
		text = "--- " + text + " ---"
	}
	p.writeFor(job, text+"\n")
}

// writeFor writes s after job's prefix: under the lock, as add may give a job a new
// prefix while its log is being followed.
func (p *runPrinter) writeFor(job, s string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.writeLocked(p.prefix[job] + s)
}

func (p *runPrinter) writeLocked(s string) {
	if p.current != "" {
		s = ansiClearLine + s + p.current
	}
	io.WriteString(p.out, s)
}

// status shows run's progress on the status line (only on a terminal).
func (p *runPrinter) status(run runDetails) {
	if !p.tty {
		return
	}
	counts := map[string]int{}
	for _, j := range run.Jobs {
		counts[j.Status]++
	}
	parts := []string{fmt.Sprintf("%s %s", run.Status, formatDuration(time.Since(p.start).Truncate(time.Second)))}
	for _, s := range []string{"running", "assigned", "queued", "waiting_approval", "pending", "retrying", "success", "failed", "cancelled", "skipped"} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	line := ansiDim + elide(strings.Join(parts, " · "), p.width-1) + ansiReset
	p.mu.Lock()
	defer p.mu.Unlock()
	if line == p.current {
		return
	}
	p.current = line
	io.WriteString(p.out, ansiClearLine+line)
}

// summary replaces the status line with the run's result: how it ended, how long it took,
// how many jobs ended how, and which did not succeed.
func (p *runPrinter) summary(run runDetails) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.current != "" {
		io.WriteString(p.out, ansiClearLine)
		p.current = ""
	}
	io.WriteString(p.out, runSummary(run, p.tty, p.width))
}

// runSummary is the lines that tell how a finished run went.
func runSummary(run runDetails, colour bool, width int) string {
	counts := map[string]int{}
	var bad, skipped []string
	for _, j := range run.Jobs {
		counts[j.Status]++
		if j.Status == "skipped" {
			skipped = append(skipped, skippedNote(j))
		}
		if j.Status == "failed" || j.Status == "cancelled" {
			s := j.title()
			if j.ExitCode != nil && *j.ExitCode != 0 {
				s += fmt.Sprintf(" (exit %d)", *j.ExitCode)
			} else if j.FailureKind != "" && j.FailureKind != "failure" && j.FailureKind != j.Status {
				s += " (" + j.FailureKind + ")"
			}
			bad = append(bad, s)
		}
	}
	var parts []string
	for _, s := range []string{"success", "failed", "cancelled", "skipped"} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	start := run.StartedAt
	if start.IsZero() {
		start = run.CreatedAt
	}
	status := run.Status
	if colour {
		c := ansiRed
		if status == "success" {
			c = ansiGreen
		}
		status = c + status + ansiReset
	}
	var b strings.Builder
	fmt.Fprintf(&b, "run %s %s in %s\n", run.ID, status, formatDuration(elapsed(start, run.FinishedAt, time.Now())))
	b.WriteString(elide("  jobs: "+strings.Join(parts, ", "), width-1))
	b.WriteByte('\n')
	if len(bad) > 0 {
		b.WriteString(elide("  not successful: "+strings.Join(bad, ", "), width-1))
		b.WriteByte('\n')
	}
	// Each skipped job gets a line of its own: its reason is what says whether the
	// pipeline did what was meant. A long list is cut short.
	const maxSkipped = 10
	for i, s := range skipped {
		if i == maxSkipped {
			fmt.Fprintf(&b, "  skipped: %d more (gantry runs get %s)\n", len(skipped)-i, run.ID)
			break
		}
		b.WriteString(elide("  skipped: "+s, width-1))
		b.WriteByte('\n')
	}
	return b.String()
}

// skippedNote is a skipped job's key and, when the server gave one, why it was skipped.
func skippedNote(j jobView) string {
	if j.Reason == "" {
		return j.title()
	}
	return j.title() + " (" + j.Reason + ")"
}
