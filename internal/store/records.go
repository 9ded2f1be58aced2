package store

import (
	"encoding/json"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/google/uuid"
)

// NewID returns a new time-ordered id (UUIDv7), so ids sort by creation and index well.
func NewID() uuid.UUID { return uuid.Must(uuid.NewV7()) }

// JobStatus is a job's place in its state machine (DESIGN.md §4):
//
//	pending -> queued -> assigned -> running -> success | failed | cancelled
//	pending -> waiting_approval (environment needs approvals) -> queued | failed | cancelled
//	pending -> failed (the environment does not allow the run's ref)
//	pending -> skipped
//	assigned | running -> retrying (lease lost, failure or timeout with attempts left) -> queued
type JobStatus string

// Job statuses, as the API shows them.
const (
	JobPending   JobStatus = "pending"
	JobQueued    JobStatus = "queued"
	JobAssigned  JobStatus = "assigned"
	JobRunning   JobStatus = "running"
	JobSuccess   JobStatus = "success"
	JobFailed    JobStatus = "failed"
	JobCancelled JobStatus = "cancelled"
	JobSkipped   JobStatus = "skipped"
	JobRetrying  JobStatus = "retrying"
)

// Terminal reports whether the status is final (only an explicit user retry changes it).
func (s JobStatus) Terminal() bool {
	switch s {
	case JobSuccess, JobFailed, JobCancelled, JobSkipped:
		return true
	}
	return false
}

// Leased reports whether a worker holds the job.
func (s JobStatus) Leased() bool { return s == JobAssigned || s == JobRunning }

// CommitState is the forge package's state for a job's commit status: pending until it runs
// (waiting on needs, queued, held for approval, waiting to retry, assigned), then its
// end. The dispatcher compares it with a message's to drop one the job moved past.
func (s JobStatus) CommitState() (state, description string) {
	switch s {
	case JobRunning:
		return "running", "Running"
	case JobSuccess:
		return "success", "Passed"
	case JobFailed:
		return "failure", "Failed"
	case JobCancelled:
		return "cancelled", "Cancelled"
	case JobSkipped:
		return "skipped", "Skipped"
	case JobQueued, JobAssigned:
		return "pending", "Waiting for a worker"
	case JobWaitingApproval:
		return "pending", "Waiting for approval"
	case JobRetrying:
		return "pending", "Waiting to retry"
	}
	return "pending", "Waiting for the jobs it needs"
}

// RunStatus is a run's state, kept up to date on every job transition.
type RunStatus string

// Run statuses.
const (
	RunPending   RunStatus = "pending"
	RunRunning   RunStatus = "running"
	RunSuccess   RunStatus = "success"
	RunFailed    RunStatus = "failed"
	RunCancelled RunStatus = "cancelled"
)

// Terminal reports whether the run has finished.
func (s RunStatus) Terminal() bool {
	return s == RunSuccess || s == RunFailed || s == RunCancelled
}

// StepStatus is a step's state within the current attempt of its job.
type StepStatus string

// Step statuses.
const (
	StepPending   StepStatus = "pending"
	StepRunning   StepStatus = "running"
	StepSuccess   StepStatus = "success"
	StepFailed    StepStatus = "failed"
	StepSkipped   StepStatus = "skipped"
	StepCancelled StepStatus = "cancelled"
)

// FailureKind says why a job attempt ended without success. Empty for success.
type FailureKind string

// Failure kinds. The first three are the pipeline's retry reasons.
const (
	FailureNone      FailureKind = ""
	FailureExit      FailureKind = FailureKind(pipeline.FailureExit) // a step failed
	FailureLost      FailureKind = FailureKind(pipeline.FailureLost) // the lease expired, or the job's environment went
	FailureTimeout   FailureKind = FailureKind(pipeline.FailureTimeout)
	FailureFlaky     FailureKind = FailureKind(pipeline.FailureFlaky) // a failure of known flaky tests only
	FailureCancelled FailureKind = "cancelled"
	// FailureMatrix: the job's matrix, computed from its needs' outputs, could not be
	// made (Job.Reason says why); the job never ran.
	FailureMatrix FailureKind = "matrix"
)

// WorkerState is what a worker last said it was doing, or offline when it stopped
// reporting (see Worker.StateAt).
type WorkerState string

// Worker states.
const (
	WorkerIdle     WorkerState = "idle"
	WorkerBusy     WorkerState = "busy"
	WorkerDraining WorkerState = "draining"
	WorkerOffline  WorkerState = "offline"
)

// Trigger says what started a run; if: conditions read branch, event and sha from it.
type Trigger struct {
	Ref    string `json:"ref,omitempty"`
	Branch string `json:"branch,omitempty"`
	SHA    string `json:"sha,omitempty"`
	Event  string `json:"event,omitempty"`
	Actor  string `json:"actor,omitempty"`
	// Tag is the tag pushed, without refs/tags/ (event tag).
	Tag string `json:"tag,omitempty"`
	// Before is the commit the ref pointed at before a push; "" when new or unknown.
	Before string `json:"before,omitempty"`
	// Repository is the forge's full name of the repository (owner/name).
	Repository string `json:"repository,omitempty"`
	// CloneURL is the git remote workers check the run's commit out from (the project's
	// repository URL); "" when the run has no repository to check out.
	CloneURL string `json:"clone_url,omitempty"`
	// PRNumber is the pull (merge) request's number (event pull_request).
	PRNumber int `json:"pr_number,omitempty"`
	// Fork says the pull request's head lives in another repository than the project's:
	// its jobs get no secrets unless the project allows it (secrets_for_forks).
	Fork bool `json:"fork,omitempty"`
	// DeliveryID is the forge's id of the webhook delivery that started the run.
	DeliveryID string `json:"delivery_id,omitempty"`
	// Payload is that delivery's body as the forge sent it (up to MaxEventPayload), which
	// a workflow reads as github.event; nil for other runs. A pointer, as Inputs.
	Payload *json.RawMessage `json:"payload,omitempty"`
	// Inputs are a dispatch's inputs, validated and in canonical form (event dispatch).
	// A pointer keeps Trigger comparable.
	Inputs *InputValues `json:"inputs,omitempty"`
	// Vars are the configuration variables a workflow reads as vars.NAME: the project's
	// project-wide variables as they were when the run was created (CreateRun reads
	// them), with those given to gantry run --var over them. Kept with the run, so that a
	// retry reads the same values. A pointer, as Inputs.
	Vars *Variables `json:"vars,omitempty"`
	// EnvironmentVars are the variables of the environments the run's jobs name, as
	// they were when the run was created, without the names given to gantry run --var;
	// a job in one of them reads them over Vars (JobVars). A pointer, as Inputs.
	EnvironmentVars *EnvironmentVariables `json:"environment_vars,omitempty"`
	// BaseRef and HeadRef are a pull request's base (target) and head branch names,
	// without refs/heads/ (event pull_request): github.base_ref and github.head_ref.
	BaseRef string `json:"base_ref,omitempty"`
	HeadRef string `json:"head_ref,omitempty"`
	// WorkflowID and WorkflowVersion name the registered workflow, and the version of
	// its definition, that the run is of.
	WorkflowID      string `json:"workflow_id,omitempty"`
	WorkflowVersion int    `json:"workflow_version,omitempty"`
	// Verified says how Gantry knows that Ref, Branch, Tag and SHA are the project's
	// repository's and that the run's definition is the one its repository holds there;
	// "" when it does not (a ref a developer typed). See RefVerified.
	Verified RefSource `json:"verified,omitempty"`
	// User is the Gantry user (a token's Principal) who submitted or dispatched the run;
	// "" for runs of webhooks and schedules, and with authentication off.
	User string `json:"user,omitempty"`
	// Message is the commit's message (a pull request's title for event pull_request), and
	// AuthorName the commit's author, as the webhook or the repository said; "" when
	// unknown. Shown in the runs list; nothing decides on them.
	Message    string `json:"message,omitempty"`
	AuthorName string `json:"author_name,omitempty"`
	// WorkflowRun says which run's activity started the run (event workflow_run); nil
	// for other runs. A pointer, as Inputs.
	WorkflowRun *WorkflowRunCause `json:"workflow_run,omitempty"`
}

// WorkflowRunCause is the run whose activity started a run of event workflow_run.
type WorkflowRunCause struct {
	// RunID, Name and Number are that run's id, pipeline name and number in the project.
	RunID  uuid.UUID `json:"run_id"`
	Name   string    `json:"name"`
	Number int       `json:"number,omitempty"`
	// Action is what happened to it: requested, in_progress or completed (the
	// pipeline.WorkflowRun* types); Conclusion, when it completed, how it ended in
	// GitHub's words: success, failure, cancelled or skipped.
	Action     string `json:"action"`
	Conclusion string `json:"conclusion,omitempty"`
	// Branch and SHA are the branch and commit that run was for ("" when it had none).
	Branch string `json:"branch,omitempty"`
	SHA    string `json:"sha,omitempty"`
	// Depth counts the runs of workflow_run from the first run that was not one to this
	// one: 1 for a run started by such a run. A run of depth
	// pipeline.MaxWorkflowRunDepth starts none.
	Depth int `json:"depth"`
}

// WorkflowRunValues is what the run's conditions and ${{ workflow_run.X }} read of the run that
// started it; the zero value for a run no workflow_run started.
func (t Trigger) WorkflowRunValues() pipeline.WorkflowRunValues {
	w := t.WorkflowRun
	if w == nil {
		return pipeline.WorkflowRunValues{}
	}
	return pipeline.WorkflowRunValues{ID: w.RunID.String(), Name: w.Name, Number: w.Number, Action: w.Action,
		Conclusion: w.Conclusion, Branch: w.Branch, SHA: w.SHA}
}

// WorkflowRunDepth is how far down a chain of workflow_run the run is: 0 unless a run's
// activity started it.
func (t Trigger) WorkflowRunDepth() int {
	if t.WorkflowRun == nil {
		return 0
	}
	return t.WorkflowRun.Depth
}

// MaxCommitMessage bounds the commit message a run keeps (Trigger.Message), in bytes.
const MaxCommitMessage = 4 << 10

// SetCommit records the commit's message and author, without surrounding blank space,
// the message cut to MaxCommitMessage bytes on a character boundary.
func (t *Trigger) SetCommit(message, author string) {
	message = strings.TrimSpace(strings.ToValidUTF8(message, "\uFFFD"))
	if len(message) > MaxCommitMessage {
		cut := MaxCommitMessage
		for cut > 0 && !utf8.RuneStart(message[cut]) {
			cut--
		}
		message = message[:cut]
	}
	t.Message, t.AuthorName = message, strings.TrimSpace(author)
}

// MaxEventPayload bounds the webhook payload a run keeps (Trigger.Payload): a larger
// one (a push of very many commits) is not kept, and github.event reads what Gantry
// knows of the event instead.
const MaxEventPayload = 1 << 20

// RefSource is how a run's ref was verified.
type RefSource string

// The sources a ref is verified by.
const (
	// RefFromWebhook: a webhook delivery signed with the project's secret said so.
	RefFromWebhook RefSource = "webhook"
	// RefFromRepository: the coordinator resolved the ref in its mirror of the project's
	// repository and read the pipeline file at that commit itself (a dispatch of the
	// project, a schedule of its file).
	RefFromRepository RefSource = "repository"
	// RefFromAdmin: the server's admin (or, with authentication off, anyone) gave it.
	RefFromAdmin RefSource = "admin"
)

// RefVerified is the one rule for whether a run's ref counts for what is the branch's or
// tag's own: an environment's branch and tag rules (Environment.Gate), the branch's cache
// scope (CacheScopes) and commit statuses (StatusSHA). A ref is verified when it came from
// a signed webhook, from the repository itself, or from an admin. A ref anyone else typed
// (POST /api/v1/runs, a registered workflow's dispatch or schedule, whose definition is
// whoever registered it's) is shown as given and counts for none of them: running one's
// own definition under main's name must not get main's secrets, caches or checks.
func (t Trigger) RefVerified() bool {
	switch t.Verified {
	case RefFromWebhook, RefFromRepository, RefFromAdmin:
		return true
	}
	return false
}

// Author is who started the run, named as approvers are: the Gantry user who submitted
// or dispatched it (User), or for a webhook's run the forge account that pushed or opened
// the pull request (Actor, the forge's login); "" when neither is known (a schedule, or
// authentication off). A retry keeps the run's author.
func (t Trigger) Author() string {
	switch {
	case t.User != "":
		return t.User
	case t.Verified == RefFromWebhook:
		return t.Actor
	}
	return ""
}

// RunActor is who a run is listed under (the runs list's actor filter): the Gantry user
// who submitted or dispatched it, else the forge account its event names.
func (t Trigger) RunActor() string {
	if t.User != "" {
		return t.User
	}
	return t.Actor
}

// StatusSHA is the commit a run reports commit statuses on: its SHA when its ref is
// verified, else "" (none), so a definition nobody vouches for never marks a commit as
// passed.
func (t Trigger) StatusSHA() string {
	if !t.RefVerified() {
		return ""
	}
	return t.SHA
}

// InputValues are dispatch inputs by name.
type InputValues map[string]string

// Variables are configuration variables by name (a Trigger's Vars).
type Variables map[string]string

// Project groups runs; fair share in dispatch is between projects. A project made on
// first use by a run has only a name; one connected to a repository has the rest.
type Project struct {
	ID   uuid.UUID
	Name string
	// RepoURL is the git remote the project builds ("" when not connected).
	RepoURL string
	// Provider is the forge whose webhooks and status API the project speaks: github,
	// gitlab, gitea, forgejo or generic ("" when not connected).
	Provider string
	// PipelinePath is the pipeline file in the repository, read at each event's commit.
	PipelinePath string
	// DefaultBranch is the repository's default branch (schedules read its file).
	DefaultBranch string
	// WebhookSecret verifies the forge's webhooks. It is never shown after creation. It is
	// stored in plain text only by a coordinator without a secrets key (and in rows made
	// before 0022 until a coordinator with one seals them); otherwise it is "" and
	// WebhookSecretSealed holds it, sealed by package secret.
	WebhookSecret string
	// WebhookSecretSealed is WebhookSecret sealed (secret.Keyring.Seal); the zero value
	// when there is none.
	WebhookSecretSealed SealedValue
	// CommitStatuses is what the project's runs report to its forge: CommitStatusesJobs
	// (also "") or CommitStatusesRun.
	CommitStatuses string
	// APIBaseURL and APITokenFile configure status reports to the forge: the API root
	// ("" for the provider's public default) and a file on the coordinator holding the
	// token.
	APIBaseURL   string
	APITokenFile string
	// RepoTokenSecret names the project secret holding an access token for an http(s)
	// RepoURL, sent with RepoTokenUser ("" = the provider's usual user name).
	// RepoSSHKeySecret names the secret holding a private key for an ssh RepoURL, and
	// RepoKnownHostsSecret the one holding the known_hosts its host must match. They
	// name secrets; the values stay sealed in the secrets store. "" = none.
	RepoTokenSecret      string
	RepoTokenUser        string
	RepoSSHKeySecret     string
	RepoKnownHostsSecret string
	// GitHubTokenSecret names the project secret that a workflow's secrets.GITHUB_TOKEN
	// and github.token read; "" is the secret named GITHUB_TOKEN
	// (pipeline.GitHubTokenSecret). See GitHubToken.
	GitHubTokenSecret string
	// MaxConcurrentJobs bounds how many of the project's jobs are leased (assigned or
	// running) at once; 0 = no limit. A claim never hands out a job past it.
	MaxConcurrentJobs int
	// FairWeight is the project's share in fair queueing, 1 to MaxFairWeight: while
	// projects are all backlogged, one of weight 2 is dispatched about twice as many jobs
	// as one of weight 1. 0 means DefaultFairWeight.
	FairWeight int
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// GitHubToken is the name of the project secret that secrets.GITHUB_TOKEN and
// github.token read: GitHubTokenSecret, or pipeline.GitHubTokenSecret when it names none.
func (p *Project) GitHubToken() string {
	if p.GitHubTokenSecret != "" {
		return p.GitHubTokenSecret
	}
	return pipeline.GitHubTokenSecret
}

// What a project reports as commit statuses. With CommitStatusesJobs (the default) a run
// of at most MaxJobStatuses jobs reports one status per job beside its own; a larger run
// reports its own only, so a wide matrix does not flood the forge.
const (
	CommitStatusesJobs = "jobs"
	CommitStatusesRun  = "run"
	MaxJobStatuses     = 50
)

// SealedValue is a value as package secret sealed it: the id of the key-encryption key
// that wrapped its data key, the wrapped data key, and the ciphertext.
type SealedValue struct {
	KeyID      string
	WrappedKey []byte
	Ciphertext []byte
}

// IsZero reports whether there is no sealed value.
func (v SealedValue) IsZero() bool { return v.KeyID == "" && len(v.Ciphertext) == 0 }

// The bounds of a project's quota settings.
const (
	DefaultFairWeight = 1
	MaxFairWeight     = 100
	// MaxConcurrentJobsLimit bounds MaxConcurrentJobs: far beyond any pool of workers.
	MaxConcurrentJobsLimit = 1_000_000
)

// DefaultPipelinePath is the pipeline file a connected project reads when it names none.
const DefaultPipelinePath = ".gantry.yml"

// Delivery is a webhook delivery a project has seen, with what it led to, so that a
// redelivery (the same delivery id) answers the same and starts nothing.
type Delivery struct {
	ProjectID  uuid.UUID
	DeliveryID string
	Event      string      // the event kind: push, tag, pull_request, ping
	RunIDs     []uuid.UUID // the runs it created, none when nothing ran
	Reason     string      // why nothing ran, or why it did
	CreatedAt  time.Time
}

// ClaimHookEventParams name an event a signed webhook reported and the delivery that
// reports it now; see Projects.ClaimHookEvent.
type ClaimHookEventParams struct {
	ProjectID  uuid.UUID
	Event      string // the event kind, and for pull requests the action: "pull_request/closed"
	Ref        string
	SHA        string
	DeliveryID string
	Window     time.Duration
}

// HookEventClaim is the delivery that first reported an event within the window.
type HookEventClaim struct {
	DeliveryID string
	ClaimedAt  time.Time
}

// RunError is one mistake in a run's pipeline file: a run created from an invalid file
// fails at once, has no jobs, and carries these instead.
type RunError struct {
	// File is set for a mistake in a reusable workflow the pipeline file calls.
	File    string `json:"file,omitempty"`
	Path    string `json:"path,omitempty"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
	Message string `json:"message"`
}

// Run is one execution of a pipeline.
type Run struct {
	ID        uuid.UUID
	ProjectID uuid.UUID
	Project   string
	// Number is the run's number in its project: 1 for its first run, then 2, 3 ...
	// in the order the runs were created, never shared by two runs of a project.
	Number          int
	Name            string
	Status          RunStatus
	Trigger         Trigger
	IdempotencyKey  string // empty when none was given
	Env             map[string]string
	CancelRequested bool
	JobsTotal       int
	JobsFinished    int // jobs in a terminal status
	// Errors are the pipeline file's mistakes of a run that failed before it had jobs.
	Errors     []RunError
	CreatedAt  time.Time
	StartedAt  time.Time // zero until a job is claimed
	FinishedAt time.Time // zero until the run is terminal
	// JobSeq is the run's change feed position as of this read: ListJobsChanged from it
	// lists every job that changed since (see Runs.ListJobsChanged). On SQLite it is the
	// number the last change of one of its jobs took; on PostgreSQL it comes from the
	// reader's snapshot and moves on with other runs' changes too. Zero on a run not read
	// back from the store.
	JobSeq int64
}

// Job is one schedulable unit of a run (a pipeline job or one matrix instance).
type Job struct {
	ID        uuid.UUID
	RunID     uuid.UUID
	ProjectID uuid.UUID
	Key       string // unique within the run, e.g. "test (go=1.26, shard=2)"
	Name      string
	Status    JobStatus
	Priority  pipeline.Priority
	Labels    []string // the worker must carry all of them
	MilliCPU  int64
	Memory    int64
	// Attempt counts attempts so far, starting at 1 when first claimed (0 before).
	Attempt     int
	MaxAttempts int
	// Redeliveries counts attempts lost with their worker that did not count against
	// MaxAttempts.
	Redeliveries     int
	RetryAfter       time.Time // when a retrying job is queued again
	LeaseToken       string    // empty unless assigned or running
	WorkerID         string
	LeaseExpiresAt   time.Time
	Deadline         time.Time // hard timeout: the lease is revoked after it
	ConcurrencyGroup string    // empty when none
	ExitCode         *int
	FailureKind      FailureKind
	// Reason says why a skipped or cancelled job did not run, for the user: the if:
	// condition that was false or the need that did not succeed. Empty when it ran.
	Reason          string
	CancelRequested bool
	// Spec is the planned job: steps, env, condition, retry policy, timeout.
	Spec *pipeline.Job
	// Outputs are what the job left the jobs that need it; GetJob fills them in, nil
	// when it left none.
	Outputs    map[string]string
	CreatedAt  time.Time
	QueuedAt   time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	// EvaluatedName is the job's name: as its latest claim evaluated it, for a name that
	// reads what its needs left (Spec.NameTemplate, SetJobName); "" until then, and for
	// every other job, whose name is Spec.DisplayName.
	EvaluatedName string
	// EnvironmentURL is its environment's url as the end of its latest attempt that
	// ended the job gave it, for a url that reads what its steps left
	// (Spec.Environment.URLTemplate); "" until then, and for every other job, whose url
	// is Spec.Environment.URL.
	EnvironmentURL string
}

// Step is the state of one step of a job, for the job's current attempt.
type Step struct {
	JobID    uuid.UUID
	Index    int
	Name     string
	Attempt  int
	Status   StepStatus
	ExitCode *int
	// FailureKind says why a failed step failed: FailureExit or FailureTimeout. Empty
	// for a step that did not fail.
	FailureKind FailureKind
	StartedAt   time.Time
	FinishedAt  time.Time
	// OnceSucceeded is set when a `once` step's success in any attempt was recorded (its
	// report came under that attempt's lease); such a step is skipped on later attempts.
	// A success never recorded (the worker cut off or dead first) does not set it.
	OnceSucceeded bool
}

// Worker is a registered worker agent.
type Worker struct {
	ID           string
	Name         string
	Labels       []string
	MilliCPU     int64
	Memory       int64
	MaxJobs      int
	State        WorkerState
	Version      string
	RegisteredAt time.Time
	LastSeenAt   time.Time
}

// StateAt is the worker's state at now: what it last said while it keeps reporting, and
// WorkerOffline once its last sign of life is more than offlineAfter old, whatever it
// last said. State alone is only what a worker said: a killed worker never says it
// stopped, so every reader of the registry (the workers list, the stats, the scaling
// answer, the metrics, why a job waits) asks this, and they all agree on who is offline.
func (w *Worker) StateAt(now time.Time, offlineAfter time.Duration) WorkerState {
	if now.Sub(w.LastSeenAt) > offlineAfter {
		return WorkerOffline
	}
	return w.State
}

// ArtifactState says whether an artifact's blob has been stored.
type ArtifactState string

// Artifact states.
const (
	ArtifactPending ArtifactState = "pending"
	ArtifactStored  ArtifactState = "stored"
)

// Artifact is a file a job kept, stored by content address.
type Artifact struct {
	ID        uuid.UUID
	JobID     uuid.UUID
	Attempt   int
	Name      string // path relative to the workspace
	SHA256    string
	Size      int64
	MediaType string
	// Mode holds the file's permission bits (0644 when zero at registration).
	Mode      uint32
	State     ArtifactState
	CreatedAt time.Time
	ExpiresAt time.Time // zero: never
	// Set names the set the file was kept in, as a workflow's upload-artifact names it;
	// "" for a job's artifacts: of Gantry's own language. SetPath is the file's path
	// within the set ("" when Set is): a download puts it there under its directory.
	// One file of an attempt may be in several sets.
	Set, SetPath string
}

// LogChunk is a range of a job attempt's log lines kept in the database.
type LogChunk struct {
	JobID     uuid.UUID
	Attempt   int
	FirstSeq  int64
	LastSeq   int64
	Bytes     int64
	Location  string // where the lines are when not in Data (LogBlobLocation); empty when inline
	Data      []byte // the lines, as the log storage encodes them
	CreatedAt time.Time
}

// OutboxMessage is a notification to deliver at least once (webhooks).
type OutboxMessage struct {
	ID          uuid.UUID
	Topic       string
	Payload     []byte
	Attempts    int
	NextAttempt time.Time
	CreatedAt   time.Time
	DeliveredAt time.Time
	// LastError is why the last attempt failed; "" when none has.
	LastError string
	// DeadAt is when the message was dead-lettered (attempts spent, or an error retrying
	// cannot help); zero while it is still to be delivered.
	DeadAt time.Time
}

// Outbox topics.
const (
	// TopicStatus is a commit status for the run's forge (payload StatusMessage).
	TopicStatus = "status"
	// TopicWebhook is an event for one outbound webhook subscription (payload
	// WebhookMessage).
	TopicWebhook = "webhook"
	// TopicWorkflowRun is a run's activity (requested, started, ended) that a definition
	// of its project listens for with on: workflow_run (payload WorkflowRunMessage).
	// Delivering it starts their runs.
	TopicWorkflowRun = "workflow_run"
)

// OutboxState selects outbox messages by how their delivery stands.
type OutboxState string

// The outbox states ListOutbox filters on. Pending messages are still to be delivered
// (failed ones included); failed ones are pending after at least one failed attempt.
const (
	OutboxPending   OutboxState = "pending"
	OutboxFailed    OutboxState = "failed"
	OutboxDead      OutboxState = "dead"
	OutboxDelivered OutboxState = "delivered"
	// OutboxSuperseded messages were not sent: what they reported had changed by then
	// (SupersedeOutbox). They are done, and not counted as delivered.
	OutboxSuperseded OutboxState = "superseded"
)

// OutboxSupersededNote is the LastError of a superseded message: done, not sent.
const OutboxSupersededNote = "superseded: not sent, the state it reported had changed"

// StatusMessage is the payload of a TopicStatus message: one run state to report as a
// commit status. The provider settings are read from the project at delivery, so a
// token changed since is used.
type StatusMessage struct {
	RunID uuid.UUID `json:"run_id"`
	// RunNumber is the run's number in its project, which Description names (#42).
	RunNumber int `json:"run_number,omitempty"`
	// JobID, when set, makes it the status of one job of the run (its own context).
	JobID      uuid.UUID `json:"job_id,omitzero"`
	Project    string    `json:"project"`
	ProjectID  uuid.UUID `json:"project_id"`
	Repository string    `json:"repository,omitempty"`
	SHA        string    `json:"sha"`
	// State is the run's state in the forge package's words: pending, running, success,
	// failure or cancelled.
	State       string `json:"state"`
	Context     string `json:"context"`
	Description string `json:"description"`
	// Path is the run page's path on the dashboard; the dispatcher adds the public URL.
	Path string `json:"path"`
}

// WebhookMessage is the payload of a TopicWebhook message: one event for one
// subscription, whose URL and secret are read at delivery.
type WebhookMessage struct {
	WebhookID uuid.UUID   `json:"webhook_id"`
	Event     string      `json:"event"` // WebhookRunFinished or WebhookJobFinished
	Project   string      `json:"project"`
	Run       WebhookRun  `json:"run"`
	Job       *WebhookJob `json:"job,omitempty"`
}

// WebhookRun is what an outbound webhook says of a run.
type WebhookRun struct {
	ID uuid.UUID `json:"id"`
	// Number is the run's number in its project (#42).
	Number     int       `json:"number"`
	Name       string    `json:"name"`
	Status     RunStatus `json:"status"`
	Ref        string    `json:"ref,omitempty"`
	SHA        string    `json:"sha,omitempty"`
	Event      string    `json:"event,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// Path is the run page's path on the dashboard; the dispatcher sends it as a URL.
	Path string `json:"path"`
}

// WebhookJob is what a job.finished webhook says of the job.
type WebhookJob struct {
	ID     uuid.UUID `json:"id"`
	Key    string    `json:"key"`
	Name   string    `json:"name"`
	Status JobStatus `json:"status"`
}

// WorkflowRunMessage is the payload of a TopicWorkflowRun message: what happened to a
// run, as it was in the transaction that made the change. What does not change (its
// trigger, number and name) is read from the run when the message is delivered.
type WorkflowRunMessage struct {
	RunID     uuid.UUID `json:"run_id"`
	ProjectID uuid.UUID `json:"project_id"`
	Project   string    `json:"project"`
	// Workflow is the run's pipeline name, which on: workflow_run's workflows match.
	Workflow string `json:"workflow"`
	// Action is requested, in_progress or completed (the pipeline.WorkflowRun* types).
	Action string `json:"action"`
	// Conclusion is, for completed, how the run ended in GitHub's words: success,
	// failure, cancelled, or skipped when every job of it was skipped.
	Conclusion string `json:"conclusion,omitempty"`
	// Attempt is the highest attempt of the run's jobs then (1 before any was retried),
	// as github.run_attempt reads it in the run's steps.
	Attempt int       `json:"attempt"`
	At      time.Time `json:"at"`
}

// Outbound webhook events.
const (
	WebhookRunFinished = "run.finished"
	WebhookJobFinished = "job.finished"
)

// Webhook is a project's subscription to outbound webhooks: Gantry POSTs each event it
// wants to URL, signed (HMAC-SHA256) with its secret: Secret in plain text, or
// SecretSealed (secret.Keyring.Seal), which leaves Secret "".
type Webhook struct {
	ID           uuid.UUID
	ProjectID    uuid.UUID
	URL          string
	Secret       string
	SecretSealed SealedValue
	Events       []string // WebhookRunFinished, WebhookJobFinished
	CreatedAt    time.Time
}

// Role is what a token may do.
type Role string

// Token roles. Admin is the server admin; read and write are viewer and developer on
// every project (see EffectiveRole and the project roles in access.go); register may
// only register workers, and agent is the credential a worker gets at registration.
const (
	RoleAdmin    Role = "admin"
	RoleWrite    Role = "write"
	RoleRead     Role = "read"
	RoleRegister Role = "register"
	RoleAgent    Role = "agent"
)

// Token is an API token or a worker's credential. Only the hash of its secret is kept.
type Token struct {
	ID       uuid.UUID
	Name     string
	Role     Role
	Hash     string // hex SHA-256 of the secret
	WorkerID string // the worker an agent credential belongs to
	// Labels, when set, are the only labels a worker registered with this token (or
	// holding a credential issued under it) may declare.
	Labels []string
	// Projects, when set, name the only projects whose jobs such a worker may claim.
	// For the tokens of users they are the token's scope (see EffectiveRole): project
	// names, ScopeAll, or none to follow the memberships of its User.
	Projects []string
	// User is whom the token acts for, matched against project members and approvers;
	// "" means its Name (see Principal).
	User string
	// ParentID is the register token an agent credential was issued under; revoking it
	// revokes the credential too. Zero for tokens made directly.
	ParentID   uuid.UUID
	CreatedAt  time.Time
	ExpiresAt  time.Time // zero: never
	RevokedAt  time.Time // zero: not revoked
	LastUsedAt time.Time // zero: never used; recorded at most about once a minute
}

// Valid reports whether the token may still be used at now: not revoked and not expired.
func (t *Token) Valid(now time.Time) bool {
	return t.RevokedAt.IsZero() && (t.ExpiresAt.IsZero() || now.Before(t.ExpiresAt))
}

// LogBlobLocation is the location of a log chunk whose lines are the blob with this
// SHA-256 digest.
func LogBlobLocation(sha256 string) string { return "sha256:" + sha256 }
