package api

import (
	"cmp"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

// timeFormat is RFC 3339 in UTC with milliseconds. Zero times are omitted from answers.
const timeFormat = "2006-01-02T15:04:05.000Z07:00"

func formatTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(timeFormat)
}

// formatMicros formats t like formatTime, to the microsecond.
func formatMicros(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000000Z07:00")
}

type runJSON struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Number is the run's number in its project (#42).
	Number          int           `json:"number"`
	Project         string        `json:"project"`
	Name            string        `json:"name"`
	Trigger         store.Trigger `json:"trigger"`
	CreatedAt       string        `json:"created_at,omitempty"`
	StartedAt       string        `json:"started_at,omitempty"`
	FinishedAt      string        `json:"finished_at,omitempty"`
	JobsTotal       int           `json:"jobs_total"`
	JobsFinished    int           `json:"jobs_finished"`
	CancelRequested bool          `json:"cancel_requested"`
	// RefVerified says whether the trigger's ref and commit count as the branch's or tag's
	// (store.Trigger.RefVerified); false for one a developer gave by hand.
	RefVerified bool `json:"ref_verified"`
	// Errors say why a run failed before it had jobs (its pipeline file is invalid).
	Errors []store.RunError `json:"errors,omitempty"`
	// Seq is the run's change feed position: GET with ?since= it lists the jobs changed
	// after it (and may list again one that did not change).
	Seq  int64     `json:"seq"`
	Jobs []jobJSON `json:"jobs,omitempty"`
	// State is, in a list, what the run does (store.RunDigest.State): its status, or
	// waiting_approval, queued or retrying while it waits; absent on a run read alone.
	State string `json:"state,omitempty"`
	// Failure says why the run failed: a *failure.Failure on a run read alone, a
	// *failure.Summary in a list; absent when it did not fail.
	Failure any `json:"failure,omitempty"`
	// Reopened lists, in a run re-run's answer only, the ids of the jobs it reopened.
	Reopened []string `json:"reopened_jobs,omitempty"`
}

func newRunJSON(r *store.Run, jobs []*store.Job) runJSON {
	out := runJSON{
		ID:              r.ID.String(),
		Status:          string(r.Status),
		Number:          r.Number,
		Project:         r.Project,
		Name:            r.Name,
		Trigger:         viewTrigger(r.Trigger),
		RefVerified:     r.Trigger.RefVerified(),
		CreatedAt:       formatTime(r.CreatedAt),
		StartedAt:       formatTime(r.StartedAt),
		FinishedAt:      formatTime(r.FinishedAt),
		JobsTotal:       r.JobsTotal,
		JobsFinished:    r.JobsFinished,
		CancelRequested: r.CancelRequested,
		Errors:          r.Errors,
		Seq:             r.JobSeq,
	}
	if jobs != nil {
		out.Jobs = make([]jobJSON, len(jobs))
		for i, j := range jobs {
			out.Jobs[i] = newJobJSON(j)
		}
	}
	return out
}

type matrixJSON struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type jobJSON struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Key  string `json:"key"`
	// DisplayName is the job's name: template with its matrix values, and, for a name
	// that reads what the job's needs left, as written until the job is claimed and as
	// evaluated then; absent when the definition gives none.
	DisplayName string       `json:"display_name,omitempty"`
	Status      string       `json:"status"`
	Attempt     int          `json:"attempt"`
	MaxAttempts int          `json:"max_attempts"`
	FailureKind string       `json:"failure_kind,omitempty"`
	ExitCode    *int         `json:"exit_code,omitempty"`
	Reason      string       `json:"reason,omitempty"`
	Priority    string       `json:"priority"`
	WorkerID    string       `json:"worker_id,omitempty"`
	QueuedAt    string       `json:"queued_at,omitempty"`
	StartedAt   string       `json:"started_at,omitempty"`
	FinishedAt  string       `json:"finished_at,omitempty"`
	Matrix      []matrixJSON `json:"matrix,omitempty"`
	Needs       []string     `json:"needs,omitempty"`
	// Environment is where the job deploys; absent when it names none. A url that reads
	// what the job's steps left is shown once the job ended.
	Environment *environmentRefJSON `json:"environment,omitempty"`
	// Waiting says why a job no worker holds has not started; absent otherwise.
	Waiting *waitingJSON `json:"waiting,omitempty"`
}

func newJobJSON(j *store.Job) jobJSON {
	out := jobJSON{
		ID:          j.ID.String(),
		Name:        j.Name,
		Key:         j.Key,
		Status:      string(j.Status),
		Attempt:     j.Attempt,
		MaxAttempts: j.MaxAttempts,
		FailureKind: string(j.FailureKind),
		ExitCode:    j.ExitCode,
		Reason:      j.Reason,
		Priority:    string(j.Priority),
		WorkerID:    j.WorkerID,
		QueuedAt:    formatTime(j.QueuedAt),
		StartedAt:   formatTime(j.StartedAt),
		FinishedAt:  formatTime(j.FinishedAt),
	}
	if j.Spec != nil {
		for _, m := range j.Spec.Matrix {
			out.Matrix = append(out.Matrix, matrixJSON{Name: m.Name, Value: m.Value})
		}
		out.Needs = j.Spec.Needs
		if e := j.Spec.Environment; e != nil {
			out.Environment = &environmentRefJSON{Name: e.Name, URL: cmp.Or(j.EnvironmentURL, e.URL)}
		}
		out.DisplayName = cmp.Or(j.EvaluatedName, j.Spec.DisplayName)
	}
	return out
}

// environmentRefJSON is the environment a job deploys to.
type environmentRefJSON struct {
	Name string `json:"name"`
	// URL is where the deployment can be seen; absent when none is known (yet).
	URL string `json:"url,omitempty"`
}

// jobDetailJSON is a job on its own: the run's view of it plus its run and steps.
type jobDetailJSON struct {
	jobJSON
	RunID string `json:"run_id"`
	// RunNumber and Project name the job's run as users do (web #42).
	RunNumber int        `json:"run_number"`
	Project   string     `json:"project"`
	Steps     []stepJSON `json:"steps"`
	// Approval is where the approval of a job whose environment needs one stands.
	Approval *approvalJSON `json:"approval,omitempty"`
	// Outputs are what the job left the jobs that need it; absent when nothing.
	Outputs map[string]string `json:"outputs,omitempty"`
	// Attempts are the job's attempts, the current one last.
	Attempts []attemptJSON `json:"attempts,omitempty"`
}

type stepJSON struct {
	Index    int    `json:"index"`
	Name     string `json:"name"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code,omitempty"`
	// FailureKind says why a failed step failed: "timeout" or "failure".
	FailureKind string `json:"failure_kind,omitempty"`
	StartedAt   string `json:"started_at,omitempty"`
	FinishedAt  string `json:"finished_at,omitempty"`
}

func newJobDetailJSON(j *store.Job, steps []*store.Step) jobDetailJSON {
	out := jobDetailJSON{jobJSON: newJobJSON(j), RunID: j.RunID.String(), Steps: make([]stepJSON, len(steps)), Outputs: j.Outputs}
	for i, s := range steps {
		out.Steps[i] = newStepJSON(s)
	}
	return out
}

func newStepJSON(s *store.Step) stepJSON {
	return stepJSON{
		Index:       s.Index,
		Name:        s.Name,
		Status:      string(s.Status),
		ExitCode:    s.ExitCode,
		FailureKind: string(s.FailureKind),
		StartedAt:   formatTime(s.StartedAt),
		FinishedAt:  formatTime(s.FinishedAt),
	}
}

type workerJSON struct {
	ID           string   `json:"id"`
	Name         string   `json:"name"`
	Labels       []string `json:"labels"`
	MilliCPU     int64    `json:"milli_cpu"`
	Memory       int64    `json:"memory"`
	MaxJobs      int      `json:"max_jobs"`
	State        string   `json:"state"`
	Version      string   `json:"version"`
	RegisteredAt string   `json:"registered_at,omitempty"`
	LastSeenAt   string   `json:"last_seen_at,omitempty"`
}

func newWorkerJSON(w *store.Worker) workerJSON {
	labels := w.Labels
	if labels == nil {
		labels = []string{}
	}
	return workerJSON{
		ID:           w.ID,
		Name:         w.Name,
		Labels:       labels,
		MilliCPU:     w.MilliCPU,
		Memory:       w.Memory,
		MaxJobs:      w.MaxJobs,
		State:        string(w.State),
		Version:      w.Version,
		RegisteredAt: formatTime(w.RegisteredAt),
		LastSeenAt:   formatTime(w.LastSeenAt),
	}
}

// viewTrigger is a run's trigger as the API shows it: without the webhook payload, which
// the forge's delivery log already has and which would swell every list of runs.
func viewTrigger(tr store.Trigger) store.Trigger {
	tr.Payload = nil
	return tr
}
