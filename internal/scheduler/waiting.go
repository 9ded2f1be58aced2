package scheduler

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// WaitCode says, for machines, why a job no worker holds has not started.
type WaitCode string

// Why a job waits. A job may wait for more than one reason; it is given the first that
// holds in this order, the one that must clear first.
const (
	// WaitNeeds: jobs it needs have not finished.
	WaitNeeds WaitCode = "needs"
	// WaitApproval: its environment needs approvals it does not have yet.
	WaitApproval WaitCode = "approval"
	// WaitRetry: an attempt failed and the next one is not due yet.
	WaitRetry WaitCode = "retry"
	// WaitNoWorker: no live worker could ever take it (labels or resources); only a new
	// or changed worker helps.
	WaitNoWorker WaitCode = "no_worker"
	// WaitConcurrency: another job of its concurrency group holds the group.
	WaitConcurrency WaitCode = "concurrency"
	// WaitQuota: its project has as many jobs leased as its limit of concurrent jobs.
	WaitQuota WaitCode = "quota"
	// WaitBacklog: it can run, and waits its turn or for a worker to be free.
	WaitBacklog WaitCode = "backlog"
)

// Waiting is why a job waits: a code and one short sentence for people.
type Waiting struct {
	Code    WaitCode
	Message string
	// Labels are, for WaitNoWorker, the labels no live worker offers: those no worker
	// carries, else the job's whole set when no one worker carries all of it. A tool
	// that starts workers can offer them.
	Labels []string
}

// WaitInput is what Why needs to know about the world around one job. The caller gathers
// it with a few batched reads; Why itself does no I/O.
type WaitInput struct {
	Now time.Time
	// Workers are the live workers (see LiveWorkers).
	Workers []*store.Worker
	// NeedsLeft names, in the job's order, the jobs it needs that have not finished
	// (see RunNeeds).
	NeedsLeft []string
	// Holder is the job holding the job's concurrency group, nil when none does.
	Holder *store.Job
	// Project is the load of the job's project, nil when unknown; the quota reason reads
	// it.
	Project *store.ProjectLoad
	// Queue is a snapshot of the queue, nil when unknown; the backlog reason reads it.
	Queue *store.QueueStats
	// Approvals are the decisions so far on a job waiting for approval, and
	// RequiredApprovals how many its environment needs (see ListApprovals).
	Approvals         []*store.Approval
	RequiredApprovals int
}

// Why says why j, which no worker holds, waits. ok is false for a job that does not wait:
// leased or finished.
func Why(j *store.Job, in WaitInput) (w Waiting, ok bool) {
	switch j.Status {
	case store.JobPending:
		return whyPending(in.NeedsLeft), true
	case store.JobRetrying:
		next := j.Attempt + 1
		of := max(j.MaxAttempts, next)
		d := j.RetryAfter.Sub(in.Now)
		if d <= 0 {
			return Waiting{Code: WaitRetry, Message: fmt.Sprintf("retry due now (attempt %d of %d)", next, of)}, true
		}
		return Waiting{Code: WaitRetry, Message: fmt.Sprintf("retry in %s (attempt %d of %d)", roundWait(d), next, of)}, true
	case store.JobQueued:
		return whyQueued(j, in), true
	case store.JobWaitingApproval:
		return whyApproval(in.Approvals, in.RequiredApprovals), true
	}
	return Waiting{}, false
}

func whyPending(left []string) Waiting {
	if len(left) == 0 {
		// Its needs just finished; the transition that queues or skips it is under way.
		return Waiting{Code: WaitNeeds, Message: "waiting: its needs finished, deciding whether it runs"}
	}
	const shown = 2
	msg := "waiting for " + strings.Join(left[:min(len(left), shown)], ", ")
	if len(left) > shown {
		msg += fmt.Sprintf(" (%d more)", len(left)-shown)
	}
	return Waiting{Code: WaitNeeds, Message: msg}
}

// whyApproval says how far a job's approval is: "waiting for approval (1 of 2: alice
// approved)".
func whyApproval(approvals []*store.Approval, required int) Waiting {
	var who []string
	for _, a := range approvals {
		if a.Decision == store.Approved {
			who = append(who, a.Approver)
		}
	}
	required = max(required, 1)
	msg := fmt.Sprintf("waiting for approval (%d of %d", len(who), required)
	if len(who) > 0 {
		msg += ": " + strings.Join(who, ", ") + " approved"
	}
	return Waiting{Code: WaitApproval, Message: msg + ")"}
}

func whyQueued(j *store.Job, in WaitInput) Waiting {
	// Workers that carry every label the job asks for.
	var labelled []*store.Worker
	for _, w := range in.Workers {
		if carries(w.Labels, j.Labels) {
			labelled = append(labelled, w)
		}
	}
	if len(labelled) == 0 {
		msg, missing := noWorkerMessage(j.Labels, in.Workers)
		return Waiting{Code: WaitNoWorker, Message: msg, Labels: missing}
	}
	// Workers big enough in total.
	var capable []*store.Worker
	for _, w := range labelled {
		if BigEnough(w, j.MilliCPU, j.Memory) {
			capable = append(capable, w)
		}
	}
	if len(capable) == 0 {
		var want []string
		if !slices.ContainsFunc(labelled, func(w *store.Worker) bool { return fits(w.MilliCPU, j.MilliCPU) }) {
			want = append(want, FormatCPU(j.MilliCPU))
		}
		if !slices.ContainsFunc(labelled, func(w *store.Worker) bool { return fits(w.Memory, j.Memory) }) {
			want = append(want, FormatMemory(j.Memory)+" memory")
		}
		msg := "waiting: no worker has " + strings.Join(want, " and ")
		if len(want) == 0 {
			// Each resource fits some worker, but no one worker has both.
			msg = "waiting: no worker has both " + FormatCPU(j.MilliCPU) + " and " + FormatMemory(j.Memory) + " memory"
		}
		if len(j.Labels) > 0 {
			msg += " among those with labels [" + strings.Join(j.Labels, ", ") + "]"
		}
		return Waiting{Code: WaitNoWorker, Message: msg}
	}
	if h := in.Holder; h != nil && h.ID != j.ID {
		return Waiting{Code: WaitConcurrency, Message: fmt.Sprintf("waiting: concurrency group %s is held by run %s (job %s)",
			j.ConcurrencyGroup, h.RunID, h.Key)}
	}
	if in.Project.AtLimit() {
		return Waiting{Code: WaitQuota, Message: fmt.Sprintf("waiting: project %s is at its limit of %d concurrent %s",
			in.Project.Name, in.Project.MaxConcurrentJobs, plural(in.Project.MaxConcurrentJobs, "job", "jobs"))}
	}
	busy := 0
	for _, w := range capable {
		if w.State == store.WorkerBusy {
			busy++
		}
	}
	others := -1
	if in.Queue != nil {
		others = queuedAhead(in.Queue, j)
	}
	lane := j.Priority
	if lane == "" {
		lane = pipeline.PriorityNormal
	}
	var parts []string
	if others > 0 {
		parts = append(parts, fmt.Sprintf("queued with %d other %s in lane %s or higher", others,
			plural(others, "job", "jobs"), lane))
	}
	if busy == len(capable) {
		parts = append(parts, fmt.Sprintf("%s that can run it %s busy", countWorkers(len(capable)), plural(len(capable), "is", "are")))
	}
	if len(parts) == 0 {
		return Waiting{Code: WaitBacklog, Message: "queued: a free worker can take it"}
	}
	return Waiting{Code: WaitBacklog, Message: strings.Join(parts, "; ")}
}

// noWorkerMessage names what no live worker offers of labels: the labels no worker
// carries at all, else the set no one worker carries whole.
func noWorkerMessage(labels []string, workers []*store.Worker) (string, []string) {
	if len(workers) == 0 {
		if len(labels) == 0 {
			return "waiting: no worker is online", nil
		}
		if slices.Contains(labels, pipeline.DockerLabel) {
			return "waiting: no worker is online (it needs a worker with the docker executor, labels [" + strings.Join(labels, ", ") + "])", labels
		}
		return "waiting: no worker is online (it needs labels [" + strings.Join(labels, ", ") + "])", labels
	}
	var missing []string
	for _, l := range labels {
		if !slices.ContainsFunc(workers, func(w *store.Worker) bool { return slices.Contains(w.Labels, l) }) {
			missing = append(missing, l)
		}
	}
	if slices.Contains(missing, pipeline.DockerLabel) || slices.Contains(missing, pipeline.PrivilegedLabel) {
		// A job with an image asks for the label the docker executor gives its worker,
		// and a privileged one for the label of a worker that allows them: say what to
		// start rather than which label is missing.
		msg := "waiting: needs a worker with the docker executor (gantry worker --executor docker)"
		if slices.Contains(missing, pipeline.PrivilegedLabel) {
			msg = "waiting: needs a docker worker that allows privileged containers (gantry worker --executor docker --docker-allow-privileged)"
		}
		if others := slices.DeleteFunc(slices.Clone(missing), func(l string) bool {
			return l == pipeline.DockerLabel || l == pipeline.PrivilegedLabel
		}); len(others) > 0 {
			msg += " and labels [" + strings.Join(others, ", ") + "]"
		}
		return msg, missing
	}
	if len(missing) > 0 {
		return "waiting: no worker has labels [" + strings.Join(missing, ", ") + "]", missing
	}
	return "waiting: no worker has all of the labels [" + strings.Join(labels, ", ") + "]", labels
}

// queuedAhead counts the queued jobs other than j in j's lane and the lanes above it.
// The queue snapshot has no order within a lane, so these are the jobs j may be behind.
func queuedAhead(q *store.QueueStats, j *store.Job) int {
	rank := laneRank(j.Priority)
	n := 0
	for _, d := range q.Queued {
		if laneRank(d.Priority) <= rank {
			n += d.Jobs
		}
	}
	return max(0, n-1)
}

func laneRank(p pipeline.Priority) int {
	switch p {
	case pipeline.PriorityCritical:
		return 0
	case pipeline.PriorityHigh:
		return 1
	case pipeline.PriorityLow:
		return 3
	}
	return 2 // normal, and a job from before lanes had names
}

// LiveWorkers returns the workers that can take new jobs: neither offline (by
// store.Worker.StateAt, the rule `gantry workers` and /api/v1/stats use) nor draining.
func LiveWorkers(ws []*store.Worker, now time.Time, offlineAfter time.Duration) []*store.Worker {
	var out []*store.Worker
	for _, w := range ws {
		switch w.StateAt(now, offlineAfter) {
		case store.WorkerDraining, store.WorkerOffline:
			continue
		}
		out = append(out, w)
	}
	return out
}

// RunNeeds returns, for the jobs of one run, a function that lists the needs of one of
// them that have not finished, by name (a matrix job's instances share one), in the order
// the job lists them. It indexes the run once, so asking for every job stays linear.
func RunNeeds(jobs []*store.Job) func(j *store.Job) []string {
	byKey := make(map[string]*store.Job, len(jobs))
	for _, j := range jobs {
		byKey[j.Key] = j
	}
	return func(j *store.Job) []string {
		if j.Spec == nil {
			return nil
		}
		var out []string
		for _, k := range j.Spec.Needs {
			n := byKey[k]
			if n == nil || n.Status.Terminal() {
				continue
			}
			if !slices.Contains(out, n.Name) {
				out = append(out, n.Name)
			}
		}
		return out
	}
}

// carries reports whether a worker with labels have may run a job asking for want.
func carries(have, want []string) bool {
	for _, l := range want {
		if !slices.Contains(have, l) {
			return false
		}
	}
	return true
}

// fits reports whether a job's need fits a worker's total; zero total is unlimited.
func fits(total, need int64) bool { return total <= 0 || need <= total }

// BigEnough reports whether a worker has in total the cpu and memory a job asks for: a
// worker that registered without one offers any amount of it, as in a claim. Why a job
// waits and the scaling answer ask the same.
func BigEnough(w *store.Worker, milliCPU, memory int64) bool {
	return fits(w.MilliCPU, milliCPU) && fits(w.Memory, memory)
}

// FormatCPU formats milli-CPUs as people write them: "64 CPUs", "1 CPU", "0.5 CPUs".
func FormatCPU(milli int64) string {
	s := strconv.FormatFloat(float64(milli)/1000, 'f', -1, 64)
	if milli == 1000 {
		return s + " CPU"
	}
	return s + " CPUs"
}

// FormatMemory formats bytes in the binary units a pipeline's resources use: "512Gi",
// "1.5Gi", "300Mi".
func FormatMemory(b int64) string {
	for _, u := range []struct {
		suffix string
		size   int64
	}{{"Ti", 1 << 40}, {"Gi", 1 << 30}, {"Mi", 1 << 20}, {"Ki", 1 << 10}} {
		if b >= u.size {
			if b%u.size == 0 {
				return strconv.FormatInt(b/u.size, 10) + u.suffix
			}
			return strconv.FormatFloat(float64(b)/float64(u.size), 'f', 1, 64) + u.suffix
		}
	}
	return strconv.FormatInt(b, 10) + "B"
}

// roundWait shows a wait to the second, or under a second to the tenth: "12s", "1m30s",
// "400ms".
func roundWait(d time.Duration) string {
	if d < time.Second {
		return d.Round(100 * time.Millisecond).String()
	}
	return d.Round(time.Second).String()
}

func countWorkers(n int) string {
	if n == 1 {
		return "the one worker"
	}
	return "all " + strconv.Itoa(n) + " workers"
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
