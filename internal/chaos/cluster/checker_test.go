package cluster

import (
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// The invariants the checker names in its failures (DESIGN.md §5.8).
const (
	invTerminal  = "terminal"  // every job ends within a bound once the faults stop
	invLost      = "lost"      // every run submitted exists, and its jobs succeed
	invOverlap   = "overlap"   // no two attempts of one job run at the same time
	invOnce      = "once"      // a once step whose success was recorded never runs again
	invLog       = "log"       // a log has no gap and no duplicate line
	invArtifact  = "artifact"  // an artifact reads back as uploaded
	invFence     = "fence"     // a fenced attempt's container is gone before the next attempt runs
	invAgreement = "agreement" // replicas answer the same once quiet
	invLeftover  = "leftover"  // nothing of an ended job runs once quiet
)

// violation is one broken invariant, with what shows it.
type violation struct {
	invariant string
	job       uuid.UUID // uuid.Nil when it is not one job's
	detail    string
}

func (v violation) String() string {
	if v.job == uuid.Nil {
		return fmt.Sprintf("[%s] %s", v.invariant, v.detail)
	}
	return fmt.Sprintf("[%s] job %s: %s", v.invariant, v.job, v.detail)
}

// span is an attempt's marks: the first and last, and where it ran.
type span struct {
	attempt     int
	first, last time.Duration
	where       string
	marks       []mark
}

func spansOf(atts map[int][]mark) []span {
	var out []span
	for a, ms := range atts {
		out = append(out, span{attempt: a, first: ms[0].at, last: ms[len(ms)-1].at, where: ms[0].where, marks: ms})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].attempt < out[j].attempt })
	return out
}

// handover is the gap between two attempts of a job that both ran steps: from the
// earlier one's last mark to the later one's first. Negative is an overlap.
type handover struct {
	job      uuid.UUID
	from, to span
	gap      time.Duration
	excused  string // why an overlap is not a violation ("" when it is one, or none)
}

// thawBound is how long after a paused shell worker is thawed its job's steps may still
// write: the worker and its steps wake together, and the worker's fence fires at once
// but not before every step has run (docs/reliability.md, the assumptions).
const thawBound = time.Second

// checkOverlaps finds the job attempts that ran at the same time, by the ledger. The one
// overlap it excuses is a shell worker's step writing within thawBound of its frozen
// worker (and so itself) being thawed, past the lease: a stopped process runs no timer.
func checkOverlaps(marks []mark, faults []faultEvent) ([]violation, []handover) {
	var out []violation
	var hs []handover
	for job, atts := range byAttempt(marks) {
		spans := spansOf(atts)
		for i := 1; i < len(spans); i++ {
			for _, earlier := range spans[:i] {
				h := handover{job: job, from: earlier, to: spans[i], gap: spans[i].first - earlier.last}
				if h.gap <= 0 {
					h.excused = thawExcuse(earlier, spans[i].first, faults)
					if h.excused == "" {
						out = append(out, violation{invOverlap, job, fmt.Sprintf(
							"attempt %d (on %s) wrote %s after attempt %d (on %s) began at %s: they overlap by %s%s",
							earlier.attempt, earlier.where, fmtBoot(earlier.last), spans[i].attempt, spans[i].where,
							fmtBoot(spans[i].first), (-h.gap).Round(10*time.Millisecond), sinceThaw(earlier, faults))})
					}
				}
				if earlier.attempt == spans[i-1].attempt {
					hs = append(hs, h)
				}
			}
		}
	}
	return out, hs
}

// thawExcuse says why the marks of earlier after from are excused, or "": each was
// written where a pause was being healed, from when the heal was asked for (the engine
// thaws the container before it answers, which may take a while) to thawBound after it
// returned.
func thawExcuse(earlier span, from time.Duration, faults []faultEvent) string {
	var thawed time.Duration
	for _, m := range earlier.marks {
		if m.at < from {
			continue
		}
		ok := false
		for _, f := range faults {
			if f.action() == actPause && f.targetKind() == "worker" && f.Target == m.where &&
				m.at >= f.thawFrom()-10*time.Millisecond && m.at <= f.healed+thawBound {
				ok, thawed = true, f.thawFrom()
			}
		}
		if !ok {
			return ""
		}
	}
	return fmt.Sprintf("written %s after %s's thaw was asked for", (earlier.last - thawed).Round(10*time.Millisecond), earlier.where)
}

// sinceThaw says how long after the last thaw of its worker asked for before it the
// earlier attempt's last mark came, when its worker was paused: how long the thawed
// worker took to fence its steps. "" otherwise.
func sinceThaw(earlier span, faults []faultEvent) string {
	var last *faultEvent
	for i, f := range faults {
		if f.action() == actPause && f.targetKind() == "worker" && f.Target == earlier.where && f.thawFrom() <= earlier.last &&
			(last == nil || f.thawFrom() > last.thawFrom()) {
			last = &faults[i]
		}
	}
	if last == nil {
		return ""
	}
	return fmt.Sprintf(" (%s after %s's thaw was asked for)", (earlier.last - last.thawFrom()).Round(10*time.Millisecond), earlier.where)
}

// thawFrom is the earliest a paused container may run again: when its heal was asked for
// (healed, for an event that did not record it).
func (f faultEvent) thawFrom() time.Duration {
	if f.healing > 0 {
		return f.healing
	}
	return f.healed
}

// onceRecord is what the database said about a job's once step when the observer first
// saw it succeeded.
type onceRecord struct {
	at      time.Time
	attempt int
	// exact: the step's row showed success in attempt, so that attempt ran it. Otherwise
	// a later claim had already reset the row, and the success was in an earlier one.
	exact bool
}

// checkOnce finds once steps that ran in an attempt after the one whose success the
// database recorded.
func checkOnce(marks []mark, recs map[uuid.UUID]*onceRecord, onceJobs []uuid.UUID) []violation {
	var out []violation
	ran := map[uuid.UUID]map[int]bool{}
	for _, m := range marks {
		if m.kind != markOnce {
			continue
		}
		if ran[m.job] == nil {
			ran[m.job] = map[int]bool{}
		}
		ran[m.job][m.attempt] = true
	}
	for _, job := range onceJobs {
		rec := recs[job]
		if len(ran[job]) == 0 {
			out = append(out, violation{invOnce, job, "the once step never ran"})
			continue
		}
		if rec == nil {
			out = append(out, violation{invOnce, job, "the database never showed the once step succeeded"})
			continue
		}
		for a := range ran[job] {
			if a > rec.attempt || !rec.exact && a == rec.attempt {
				out = append(out, violation{invOnce, job, fmt.Sprintf(
					"the once step ran in attempt %d after the database recorded its success (seen at %s in attempt %d, exact %v)",
					a, rec.at.Format("15:04:05.000"), rec.attempt, rec.exact)})
			}
		}
	}
	return out
}

// logLine is a stored log line as the API returns it.
type logLine struct {
	Seq    int64  `json:"seq"`
	Stream string `json:"stream"`
	Text   string `json:"text"`
}

// printedLine finds the lines a job's work step prints: "L<n> <job key>".
var printedLine = regexp.MustCompile(`^L(\d+) (\S+)$`)

// checkLog checks an attempt's stored log: seqs dense from 1, and the lines the step
// printed each there once, in order, all want of them; want < 0 takes any number of
// them from the first (an attempt cut short).
func checkLog(job uuid.UUID, key string, lines []logLine, want int) []violation {
	var out []violation
	bad := func(format string, args ...any) {
		out = append(out, violation{invLog, job, fmt.Sprintf(format, args...)})
	}
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			bad("line %d of the log has seq %d: a gap or a duplicate", i+1, l.Seq)
			return out
		}
	}
	next := 1
	for _, l := range lines {
		m := printedLine.FindStringSubmatch(l.Text)
		if m == nil || m[2] != key {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		if n != next {
			bad("printed line L%d at seq %d, want L%d: a line lost, repeated or out of order", n, l.Seq, next)
			return out
		}
		next++
	}
	if want >= 0 && next-1 != want {
		bad("the log holds %d of the %d lines the step printed", next-1, want)
	}
	return out
}

// sighting is a container the watcher saw running, by its host name (the first 12
// characters of its id, which the steps in it write to the ledger), at a boot-clock time
// taken before the engine was asked.
type sighting struct {
	host string
	at   time.Duration
}

// checkContainers finds containers that ran an attempt and were seen running after a
// later attempt of the same job had begun: a fenced attempt's container outlived the
// fence.
func checkContainers(sightings []sighting, marks []mark) []violation {
	type attemptOf struct {
		job     uuid.UUID
		attempt int
	}
	ranIn := map[string]attemptOf{}
	for _, m := range marks {
		ranIn[m.where] = attemptOf{m.job, m.attempt}
	}
	firsts := map[uuid.UUID]map[int]time.Duration{}
	for job, atts := range byAttempt(marks) {
		firsts[job] = map[int]time.Duration{}
		for a, ms := range atts {
			firsts[job][a] = ms[0].at
		}
	}
	var out []violation
	reported := map[string]bool{}
	for _, s := range sightings {
		a, ok := ranIn[s.host]
		if !ok || reported[s.host] {
			continue
		}
		for later, first := range firsts[a.job] {
			if later > a.attempt && s.at > first {
				reported[s.host] = true
				out = append(out, violation{invFence, a.job, fmt.Sprintf(
					"container %s of attempt %d was running at %s, after attempt %d began at %s",
					s.host, a.attempt, fmtBoot(s.at), later, fmtBoot(first))})
				break
			}
		}
	}
	return out
}

// jobView is what a replica answers about a job once the cluster is quiet.
type jobView struct {
	Key     string `json:"key"`
	Status  string `json:"status"`
	Attempt int    `json:"attempt"`
}

// checkAgreement compares the replicas' answers about every run: the same jobs, in the
// same states, at the same attempts.
func checkAgreement(views map[string]map[uuid.UUID]map[uuid.UUID]jobView) []violation {
	var replicas []string
	for r := range views {
		replicas = append(replicas, r)
	}
	sort.Strings(replicas)
	if len(replicas) < 2 {
		return nil
	}
	var out []violation
	first := views[replicas[0]]
	for _, r := range replicas[1:] {
		for run, jobs := range first {
			other, ok := views[r][run]
			if !ok {
				out = append(out, violation{invAgreement, uuid.Nil, fmt.Sprintf("run %s: %s answers it, %s does not", run, replicas[0], r)})
				continue
			}
			for id, v := range jobs {
				if w, ok := other[id]; !ok || w != v {
					out = append(out, violation{invAgreement, id, fmt.Sprintf("%s says %+v, %s says %+v", replicas[0], v, r, w)})
				}
			}
			if len(other) != len(jobs) {
				out = append(out, violation{invAgreement, uuid.Nil, fmt.Sprintf("run %s: %s lists %d jobs, %s %d", run, replicas[0], len(jobs), r, len(other))})
			}
		}
		if len(views[r]) != len(first) {
			out = append(out, violation{invAgreement, uuid.Nil, fmt.Sprintf("%s answered %d runs, %s %d", replicas[0], len(first), r, len(views[r]))})
		}
	}
	return out
}

// fenceFigure is, for one fault on a worker, how the attempts it held fared: how long
// each went on writing after the fault began, and the gap to the attempt that ran the
// job next.
type fenceFigure struct {
	fault    faultEvent
	attempts int
	// after is the longest time an attempt cut off by the fault went on writing marks
	// after it began; gap the shortest handover from such an attempt to the next.
	after, gap time.Duration
	gaps       int
}

// fenceFigures attributes to each worker fault the attempts whose last mark came from
// that worker while it was faulted, or that a worker's attempt never finished.
func fenceFigures(faults []faultEvent, hs []handover, holderOf func(job uuid.UUID, attempt int) string) []fenceFigure {
	var out []fenceFigure
	for _, f := range faults {
		if !strings.HasSuffix(f.Kind, "worker") {
			continue
		}
		fig := fenceFigure{fault: f, gap: -1}
		for _, h := range hs {
			where := h.from.where
			if f.targetKind() == "docker-worker" {
				where = holderOf(h.job, h.from.attempt)
			}
			if where != f.Target || h.from.first > f.start || h.from.last < f.start-time.Second {
				continue
			}
			fig.attempts++
			fig.after = max(fig.after, h.from.last-f.start)
			if fig.gap < 0 || h.gap < fig.gap {
				fig.gap = h.gap
			}
			fig.gaps++
		}
		out = append(out, fig)
	}
	return out
}

// fmtBoot shows a boot-clock time.
func fmtBoot(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// sortViolations orders violations for a stable report.
func sortViolations(vs []violation) {
	slices.SortFunc(vs, func(a, b violation) int { return strings.Compare(a.String(), b.String()) })
}
