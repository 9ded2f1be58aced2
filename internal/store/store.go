package store

import (
	"context"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/google/uuid"
)

// Store is everything Gantry keeps. It is the one deliberately wide boundary, split by
// concern so that consumers can depend on the part they use.
type Store interface {
	Runs
	Queue
	Maintenance
	Workers
	Artifacts
	LogIndex
	Outbox
	Webhooks
	Notifier
	Stats
	Tokens
	Projects
	Workflows
	WorkflowRunListeners
	Schedules
	Secrets
	ProjectVariables
	Audit
	Environments
	Caches
	Members
	Annotations
	Summaries
	TestResults
	Quarantines
	QuarantineRules
	Reruns
	ApprovalInbox
	// CancelRequested lists the jobs a worker holds that were asked to cancel.
	CancelRequested(ctx context.Context, workerID string) ([]uuid.UUID, error)
	// Close releases the store's connections; in-flight writes are finished first.
	Close() error
}

// Runs creates runs and reads runs, jobs and steps.
type Runs interface {
	// CreateRun stores a run with every job of its plan in one transaction and queues the
	// jobs that need nothing. When IdempotencyKey names a run the project already has, it
	// returns that run, its jobs and created=false, and changes nothing.
	CreateRun(ctx context.Context, p CreateRunParams) (run *Run, jobs []*Job, created bool, err error)
	GetRun(ctx context.Context, id uuid.UUID) (*Run, error)
	// RunDefinition returns the definition run id was created from, as submitted (nil
	// when none was given); ErrNotFound when there is no such run. A Run does not carry
	// it: it is as large as the pipeline file, and read only where it is needed.
	RunDefinition(ctx context.Context, id uuid.UUID) ([]byte, error)
	// GetRunByNumber returns the named project's run of that number (Run.Number);
	// ErrNotFound when the project has none so numbered, or there is no such project.
	GetRunByNumber(ctx context.Context, project string, number int) (*Run, error)
	// ListRuns lists runs newest first.
	ListRuns(ctx context.Context, p ListRunsParams) ([]*Run, error)
	// CountRuns counts the runs ListRuns would list with p and no page bounds (Before and
	// Limit are ignored), up to upTo: a count that reaches it stops there, so that counting
	// costs at most upTo index entries however many runs match. No bound when upTo <= 0.
	CountRuns(ctx context.Context, p ListRunsParams, upTo int) (int, error)
	// DigestRuns gives the digest of each run named that exists, in three reads however
	// many runs: what a list of runs shows of their jobs.
	DigestRuns(ctx context.Context, runIDs []uuid.UUID) (map[uuid.UUID]*RunDigest, error)
	GetJob(ctx context.Context, id uuid.UUID) (*Job, error)
	// ListJobs lists a run's jobs in plan order (by wave, then definition order).
	ListJobs(ctx context.Context, runID uuid.UUID) ([]*Job, error)
	// ListJobsChanged lists, in plan order, the run's jobs that changed after its change
	// feed stood at since (Run.JobSeq): every job when since is 0. Read the run first and
	// its JobSeq is a cursor that misses nothing; a job that changes between the two reads
	// may be listed again on the next call. A driver may list again a job that did not
	// change at all (PostgreSQL's cursor stays below every transaction open when the run
	// was read), so a reader merges what it lists by job id.
	ListJobsChanged(ctx context.Context, runID uuid.UUID, since int64) ([]*Job, error)
	ListSteps(ctx context.Context, jobID uuid.UUID) ([]*Step, error)
	// NeedsOf gives what the jobs a job needs left it, by their definition names: each
	// one's result (a matrix job's instances combined, pipeline.CombineResults; a failed
	// job that continues on error reads as a success) and outputs (a matrix job's
	// instances merged in plan order, a later instance's value winning).
	NeedsOf(ctx context.Context, jobID uuid.UUID) (map[string]NeedResult, error)
	// CancelRun cancels every unfinished job of the run (see CancelJob) and marks the run
	// cancel-requested. The run is cancelled once its last job is terminal. ErrConflict
	// when the run already finished.
	CancelRun(ctx context.Context, id uuid.UUID) error
	// CancelJob cancels a job: pending, queued and retrying jobs become cancelled at once;
	// assigned and running ones are flagged, and their worker learns it from its next
	// heartbeat and completes them as cancelled. Jobs downstream of a cancelled job are
	// cancelled too. ErrConflict when the job already finished.
	CancelJob(ctx context.Context, id uuid.UUID) error
	// RetryRun gives every failed, cancelled and skipped job of a finished run a new
	// attempt: they go back to pending, those whose needs all succeeded are queued, and
	// the DAG resumes from there. The run is running (or pending) again. ErrConflict when
	// the run has not finished or has nothing to retry.
	RetryRun(ctx context.Context, id uuid.UUID) error
	// RetryJob does the same for one failed, cancelled or skipped job and the failed,
	// cancelled and skipped jobs downstream of it; the run reopens if it had finished.
	// ErrConflict when the job is not in one of those statuses.
	RetryJob(ctx context.Context, id uuid.UUID) error
}

// NeedResult is what a job shows the jobs that need it.
type NeedResult struct {
	Result  string
	Outputs map[string]string
}

// CreateRunParams describe a run to create.
type CreateRunParams struct {
	Project string // created on first use; "default" when empty
	// Trigger is what started the run. The run keeps it with the project's variables
	// (ProjectVariables) as they are now: its Vars become the project-wide ones with
	// Trigger.Vars over them, and its EnvironmentVars those of each environment a job
	// of the plan names, without the names Trigger.Vars gives (gantry run --var wins).
	// What Trigger.EnvironmentVars holds is replaced.
	Trigger        Trigger
	IdempotencyKey string
	Definition     []byte
	Env            map[string]string
	Plan           *pipeline.Plan
	// Priority, when set, overrides every job's priority lane.
	Priority pipeline.Priority
	// Tick, when set, makes the run a schedule's: the schedule takes the tick in the
	// transaction that creates the run, and when it already handled that tick or a
	// later one (another replica fired it) nothing is created and the error is
	// ErrConflict. See Schedules.
	Tick *ScheduleTick
}

// ListRunsParams filter and page ListRuns. Zero values do not filter.
type ListRunsParams struct {
	Project string
	// ProjectIDs, when not nil, keeps only runs of these projects (none when empty): the
	// projects the caller may see.
	ProjectIDs []uuid.UUID
	Status     RunStatus
	Ref        string
	// Branch, Event and Actor match the trigger's branch, event and author (Trigger.RunActor).
	Branch string
	Event  string
	Actor  string
	// Before pages: only runs whose id sorts before it (ids are time-ordered).
	Before uuid.UUID
	Limit  int // default 50, at most 500
}

// RunDigest is what a list of runs shows of each run's jobs without reading them all:
// how many are in each status, and the first that failed with the step it failed in.
type RunDigest struct {
	// Jobs counts the run's jobs by status.
	Jobs map[JobStatus]int
	// Failed is the run's first failed job (by the time it finished, then plan order),
	// or for a run with none, its first cancelled one; nil when neither. Without its Spec.
	Failed *Job
	// FailedStep is Failed's first failed (or cancelled) step of its current attempt; nil
	// when none did (the job was lost, or never ran).
	FailedStep *Step
}

// States a run is listed in besides its RunStatus: what its jobs do while it runs.
const (
	RunStateWaitingApproval = "waiting_approval" // a job waits for an approval, none runs
	RunStateQueued          = "queued"           // a job waits for a worker, none runs
	RunStateRetrying        = "retrying"         // a job waits to retry, none runs or waits for a worker
)

// State is a run of status s as a list shows it: its status once it finished, and while
// it has not, what its jobs do: running while a worker holds one, else waiting_approval,
// queued or retrying when one does that, else its status (pending: on needs). A nil
// digest (no jobs) is the status.
func (d *RunDigest) State(s RunStatus) string {
	if s.Terminal() || d == nil {
		return string(s)
	}
	switch {
	case d.Jobs[JobRunning] > 0 || d.Jobs[JobAssigned] > 0:
		return string(RunRunning)
	case d.Jobs[JobWaitingApproval] > 0:
		return RunStateWaitingApproval
	case d.Jobs[JobQueued] > 0:
		return RunStateQueued
	case d.Jobs[JobRetrying] > 0:
		return RunStateRetrying
	}
	return string(s)
}

// Queue is the worker-facing half: claiming jobs and reporting on them under a lease.
// Every call that names a job with a lease token fails with ErrLeaseLost, changing
// nothing, when the token is not the job's current one.
type Queue interface {
	// Claim leases up to Max of the best queued jobs the worker can run: highest priority
	// lane first, then fair share between projects, then oldest first; only jobs whose
	// labels are a subset of the worker's, whose resources fit the free capacity given, and
	// whose concurrency group has no job assigned or running (the oldest waiter of a group
	// goes first). Each claimed job becomes assigned with a fresh lease token, attempt + 1,
	// and a hard deadline of its timeout plus TimeoutGrace. It returns at once, possibly
	// with no jobs; waiting is the caller's, on Notifier.
	Claim(ctx context.Context, p ClaimParams) ([]*Claim, error)
	// StartJob moves an assigned job to running.
	StartJob(ctx context.Context, l LeaseRef) error
	// SetJobName keeps what the job's name: came out as when it was claimed
	// (Job.EvaluatedName), for a name that reads what its needs left; the lease must be
	// current. ErrInvalid for a name that is empty, not UTF-8 or longer than
	// pipeline.MaxJobNameBytes.
	SetJobName(ctx context.Context, l LeaseRef, name string) error
	// LeaseAttempt returns the attempt a current lease is for, or ErrLeaseLost: the cheap
	// check of a worker's write that the store does not otherwise fence (a log batch).
	LeaseAttempt(ctx context.Context, l LeaseRef) (int, error)
	// Heartbeat extends the lease to now + TTL and says whether the job was cancelled.
	Heartbeat(ctx context.Context, p HeartbeatParams) (HeartbeatResult, error)
	// UpdateStep records a step's progress in the current attempt.
	UpdateStep(ctx context.Context, p UpdateStepParams) error
	// CompleteJob ends the current attempt. A failure (or timeout) with attempts left under
	// the job's retry policy makes the job retrying; a failure of kind lost goes back to
	// the queue at once by ReapExpiredLeases' rule; otherwise the job is terminal and the
	// DAG advances in the same transaction: each dependent whose needs are all terminal
	// is queued, or skipped when its if: condition (default success()) says not to run,
	// and skips propagate. The run's status follows. It returns the job as it now is,
	// without its Spec (GetJob has it).
	CompleteJob(ctx context.Context, p CompleteParams) (*Job, error)
	// ReleaseClaims hands back jobs whose claim never reached its worker (the claim's
	// answer could not be written): each job whose lease token is still the one named
	// goes back to queued in its old place in the queue, its lease cleared and its attempt
	// taken back, so the attempt that never ran counts against nothing; a job asked to
	// cancel meanwhile is cancelled instead. A job whose token is no longer the one named
	// is left alone. It returns how many jobs it released.
	ReleaseClaims(ctx context.Context, leases []LeaseRef) (int, error)
}

// ClaimParams describe the claiming worker.
type ClaimParams struct {
	WorkerID string
	Labels   []string
	// FreeMilliCPU and FreeMemory are the worker's free capacity; a job whose requirement
	// exceeds either is not offered. Zero or negative means unlimited.
	FreeMilliCPU int64
	FreeMemory   int64
	Max          int // jobs to claim at most; default 1
	LeaseTTL     time.Duration
	// TimeoutGrace is added to a job's timeout to get the deadline after which the
	// coordinator revokes the lease, so the worker's own timeout acts first.
	TimeoutGrace time.Duration
	// Start starts the claimed jobs at once: they are running, as StartJob would make
	// them, instead of assigned, for a worker that begins every job as it gets it.
	Start bool
	// Projects, when set, limits the claim to jobs of the projects so named: the scope
	// of the worker's credential.
	Projects []string
}

// Claim is one job handed to a worker.
type Claim struct {
	Job   *Job
	Lease Lease
	// Run is the job's run as far as its steps need it: id, project id, number, name,
	// trigger and env (not its status, counts or definition).
	Run *Run
	// OnceDone lists the steps marked once that succeeded in an earlier attempt.
	OnceDone []int
}

// Lease is a worker's hold on a job.
type Lease struct {
	Token     string
	ExpiresAt time.Time
}

// LeaseRef names a job and the lease token the caller holds for it.
type LeaseRef struct {
	JobID uuid.UUID
	Token string
}

// HeartbeatParams extend a lease.
type HeartbeatParams struct {
	LeaseRef
	TTL time.Duration
}

// HeartbeatResult answers a heartbeat.
type HeartbeatResult struct {
	ExpiresAt       time.Time
	CancelRequested bool
}

// UpdateStepParams report a step's status.
type UpdateStepParams struct {
	LeaseRef
	StepUpdate
}

// StepUpdate is one step's new status. FailureKind is for StepFailed only:
// FailureExit (the default) or FailureTimeout (the step ran past its timeout).
type StepUpdate struct {
	Index       int
	Status      StepStatus
	ExitCode    *int
	FailureKind FailureKind
}

// CompleteParams end a job attempt. Status is JobSuccess, JobFailed or JobCancelled; for
// JobFailed, FailureKind is FailureExit (default), FailureTimeout, FailureLost or
// FailureFlaky.
//
// Steps are step updates the worker had not sent yet when the job ended; they are
// applied, in order, in the same transaction, before the attempt ends, exactly as
// UpdateStep would apply them. A quick job so costs one write where it would cost three.
type CompleteParams struct {
	LeaseRef
	Status      JobStatus
	FailureKind FailureKind
	ExitCode    *int
	Steps       []StepUpdate
	// Outputs are what the job leaves the jobs that need it (pipeline.CheckOutputs must
	// pass, else ErrInvalid). They are kept when the attempt ends the job, replacing an
	// earlier attempt's; an attempt that will be retried keeps none.
	Outputs map[string]string
	// EnvironmentURL, when not nil, is the job's environment url as its steps left it
	// (Job.EnvironmentURL; pipeline.CheckEnvironmentURL must pass, else ErrInvalid; ""
	// is none). It is kept as the outputs are; nil leaves what is kept as it is.
	EnvironmentURL *string
}

// Maintenance is what the scheduler loops call. Each call is safe to run from several
// coordinator replicas at once: every transition is a compare-and-swap.
type Maintenance interface {
	// ReapExpiredLeases handles jobs whose lease expired: each goes back to the queue
	// (attempt + 1 at its next claim) when its retry policy retries lost attempts and
	// attempts are left, or when it has free redeliveries left (lost attempts that do not
	// count against max_attempts when the policy does not retry them); otherwise it fails
	// with failure kind lost. It returns how many jobs it changed.
	ReapExpiredLeases(ctx context.Context) (int, error)
	// PromoteRetries queues retrying jobs whose retry_after has come.
	PromoteRetries(ctx context.Context) (int, error)
	// RevokeTimedOut fails (failure kind timeout, subject to the retry policy) leased jobs
	// whose hard deadline has passed.
	RevokeTimedOut(ctx context.Context) (int, error)
}

// Workers keeps the registry of worker agents.
type Workers interface {
	// UpsertWorker registers a worker or refreshes its description and last-seen time.
	UpsertWorker(ctx context.Context, w *Worker) error
	// TouchWorker records that the worker was seen, with its current state.
	TouchWorker(ctx context.Context, id string, state WorkerState) error
	ListWorkers(ctx context.Context) ([]*Worker, error)
}

// Artifacts keeps artifact metadata; blobs live in the blob store.
type Artifacts interface {
	// PutArtifact records an artifact of the job's current attempt; the lease must be
	// current. A second put of the same (job, attempt, name) returns the first record.
	PutArtifact(ctx context.Context, l LeaseRef, a *Artifact) (*Artifact, error)
	// MarkArtifactStored records that the blob was uploaded. ErrForbidden when the
	// artifact's project does not own its blob (AddBlobOwner): content stored for another
	// project never counts for this one.
	MarkArtifactStored(ctx context.Context, id uuid.UUID) error
	GetArtifact(ctx context.Context, id uuid.UUID) (*Artifact, error)
	ListArtifacts(ctx context.Context, jobID uuid.UUID) ([]*Artifact, error)
	// ListRunArtifacts returns the artifacts of every job of the run, ordered by job,
	// attempt and name.
	ListRunArtifacts(ctx context.Context, runID uuid.UUID) ([]*Artifact, error)
	// DeleteExpiredArtifacts deletes the records of artifacts that expired at or before t
	// and returns how many. Their blobs stay until no record names them.
	DeleteExpiredArtifacts(ctx context.Context, t time.Time) (int, error)
	// BlobInUse reports whether any artifact record, cache entry, or log chunk kept in
	// the blob store (location LogBlobLocation(digest)), names the blob.
	BlobInUse(ctx context.Context, sha256 string) (bool, error)
	// AddBlobOwner records that the project has shown it holds the blob's content: the
	// blob store verified an upload of it made for the project. Deduplication keeps one
	// copy of a content for every project, and ownership is what lets a project use
	// that copy: MarkArtifactStored and PutCache refuse a digest the project does not
	// own. Adding an owner twice is no error.
	AddBlobOwner(ctx context.Context, projectID uuid.UUID, sha256 string) error
	// BlobOwned reports whether the project owns the blob.
	BlobOwned(ctx context.Context, projectID uuid.UUID, sha256 string) (bool, error)
	// DeleteBlobOwners forgets every owner of the blob; garbage collection calls it
	// before deleting the blob, so that the content, should it be stored again, counts
	// only for the projects that upload it again.
	DeleteBlobOwners(ctx context.Context, sha256 string) error
}

// LogIndex keeps job attempts' log lines as chunks in the database: the log storage of
// the scale-out mode, where every coordinator replica reads what any other wrote.
type LogIndex interface {
	// AppendLogChunk stores a chunk that continues an attempt's log: its FirstSeq must be
	// one past the attempt's last stored seq (1 for the first chunk). Any other chunk,
	// such as a re-send or one that would leave a gap, is ErrConflict and changes nothing;
	// the caller reads LastLogSeq and trims.
	AppendLogChunk(ctx context.Context, c *LogChunk) error
	// LastLogSeq returns the attempt's last stored seq (0 when it has none) and the bytes
	// its chunks hold.
	LastLogSeq(ctx context.Context, jobID uuid.UUID, attempt int) (seq, bytes int64, err error)
	// ListLogChunks returns, in order, up to max of the attempt's chunks that hold seqs
	// after afterSeq.
	ListLogChunks(ctx context.Context, jobID uuid.UUID, attempt int, afterSeq int64, max int) ([]*LogChunk, error)
	// ReplaceLogChunks swaps all of an attempt's chunks for cs in one transaction
	// (compaction).
	ReplaceLogChunks(ctx context.Context, jobID uuid.UUID, attempt int, cs []*LogChunk) error
	// DeleteLogChunksBefore deletes the chunks created before t and returns how many.
	DeleteLogChunksBefore(ctx context.Context, t time.Time) (int, error)
}

// Outbox holds notifications for at-least-once delivery.
type Outbox interface {
	EnqueueOutbox(ctx context.Context, topic string, payload []byte) error
	// ClaimOutbox returns up to max undelivered messages that are due and pushes their
	// next attempt back by retryIn, so concurrent deliverers do not take the same one.
	ClaimOutbox(ctx context.Context, max int, retryIn time.Duration) ([]*OutboxMessage, error)
	MarkDelivered(ctx context.Context, id uuid.UUID) error
	// SupersedeOutbox ends a claimed message without sending it: what it reports changed
	// before it was sent (a status a newer one replaces). It is done, as a delivered one
	// is, and listed as superseded (LastError OutboxSupersededNote).
	SupersedeOutbox(ctx context.Context, id uuid.UUID) error
	// FailOutbox records a failed attempt of a claimed message: its error, and either when
	// to try again or, with Dead, that it is dead-lettered and never claimed again.
	// ErrNotFound when id names no message.
	FailOutbox(ctx context.Context, p FailOutboxParams) error
	// GetOutbox returns one message; ErrNotFound when id names none.
	GetOutbox(ctx context.Context, id uuid.UUID) (*OutboxMessage, error)
	// ListOutbox lists messages newest first.
	ListOutbox(ctx context.Context, p ListOutboxParams) ([]*OutboxMessage, error)
	// RedeliverOutbox makes a message due now with its attempts, error and dead-letter
	// mark cleared, whatever its state (a delivered one is sent again). ErrNotFound when
	// id names none.
	RedeliverOutbox(ctx context.Context, id uuid.UUID) error
}

// FailOutboxParams describe a failed delivery attempt.
type FailOutboxParams struct {
	ID          uuid.UUID
	Error       string
	NextAttempt time.Time // when not Dead
	Dead        bool
}

// ListOutboxParams filter ListOutbox. Zero values do not filter.
type ListOutboxParams struct {
	State OutboxState
	Topic string
	Limit int // default 50, at most 500
}

// Webhooks keeps projects' outbound webhook subscriptions. Runs created while a project
// has subscriptions enqueue their events in the transaction that changes their state.
type Webhooks interface {
	// CreateWebhook stores a subscription; it fills in ID and CreatedAt. ErrNotFound when
	// ProjectID names no project.
	CreateWebhook(ctx context.Context, w *Webhook) error
	GetWebhook(ctx context.Context, id uuid.UUID) (*Webhook, error)
	// ListWebhooks lists a project's subscriptions oldest first.
	ListWebhooks(ctx context.Context, projectID uuid.UUID) ([]*Webhook, error)
	// DeleteWebhook deletes the project's subscription; ErrNotFound when it has none by id.
	DeleteWebhook(ctx context.Context, projectID, id uuid.UUID) error
	// SealWebhookSubscriptionSecret stores the subscription's secret sealed, in place of
	// what is there, only while what is there is still p.Old (a plain-text secret being
	// sealed, or a sealed one being rewrapped under a new key): ErrConflict when it
	// changed meanwhile, ErrNotFound when there is no such subscription.
	SealWebhookSubscriptionSecret(ctx context.Context, p SealWebhookSubscriptionSecretParams) error
}

// SealWebhookSubscriptionSecretParams name an outbound webhook subscription, the secret
// it must still hold (OldPlain, or OldSealed), and the sealed value to put in its place.
type SealWebhookSubscriptionSecretParams struct {
	ID        uuid.UUID
	OldPlain  string
	OldSealed SealedValue
	Sealed    SealedValue
}

// Notifier wakes claimers waiting for work.
type Notifier interface {
	// WaitForJobs returns a channel that receives when a job may have become queued (on
	// this replica or, for PostgreSQL, any replica) and a function to stop listening. The
	// channel has a buffer of one: a wake-up between two waits is not lost.
	WaitForJobs() (<-chan struct{}, func())
	// WaitForCancels is the same for leased jobs being asked to cancel (CancelRun,
	// CancelJob, a concurrency group cancelling its holder).
	WaitForCancels() (<-chan struct{}, func())
	// WaitForWrites is the same for any write this replica committed (a job's change
	// among them), and for the notices of queued jobs and cancels from other replicas:
	// what reads a run again when it may have changed waits on it. Other replicas'
	// writes are otherwise not told, so such a reader reads again now and then as well.
	WaitForWrites() (<-chan struct{}, func())
	// Publish sends a notice on topic to its subscribers on every replica. Notices are
	// hints that something changed: a subscriber may see one twice, and one that falls
	// behind loses notices rather than slowing the sender.
	Publish(ctx context.Context, topic, payload string) error
	// Subscribe returns a channel of topic's notices and a function to stop listening.
	Subscribe(topic string) (<-chan string, func())
}

// Stats answers what operators and autoscalers ask of the queue.
type Stats interface {
	// QueueStats counts queued jobs by lane and label set, leased and retrying jobs, and
	// gives the time the oldest queued job has been waiting since.
	QueueStats(ctx context.Context) (*QueueStats, error)
	// ConcurrencyHolders returns, of the project's concurrency groups named, the job that
	// holds each (assigned or running), without its Spec; a group no job holds is absent.
	ConcurrencyHolders(ctx context.Context, projectID uuid.UUID, groups []string) (map[string]*Job, error)
	// ProjectLoad returns the project's limit of concurrent jobs and how many of its jobs
	// are leased (assigned or running) now; ErrNotFound for an unknown project.
	ProjectLoad(ctx context.Context, projectID uuid.UUID) (*ProjectLoad, error)
}

// ProjectLoad is how close a project is to its limit of concurrent jobs.
type ProjectLoad struct {
	Name string
	// MaxConcurrentJobs is the project's limit, 0 for none.
	MaxConcurrentJobs int
	// Leased counts its assigned and running jobs.
	Leased int
}

// AtLimit reports whether the project may have no more jobs leased.
func (l *ProjectLoad) AtLimit() bool {
	return l != nil && l.MaxConcurrentJobs > 0 && l.Leased >= l.MaxConcurrentJobs
}

// QueueStats is a snapshot of the queue.
type QueueStats struct {
	Queued   []QueueDepth
	Assigned int
	Running  int
	Retrying int
	// Leased counts the assigned and running jobs by the label set they asked for
	// (Priority is not set).
	Leased []QueueDepth
	// Held counts, of the queued jobs (which Queued includes), those their project's
	// limit of concurrent jobs holds back: of a project at L concurrent jobs with N
	// leased, its queued jobs after the first L-N in claim order. No worker can take them
	// until the project's jobs end.
	Held []QueueDepth
	// Shapes counts the queued jobs (over every lane) by label set and the cpu and memory
	// they ask for, ordered by label set, cpu, memory: what a worker must have to take
	// them, so that a job waiting for a bigger worker than any there is can be told from
	// one waiting its turn.
	Shapes []QueueShape
	// OldestQueuedAt is when the longest-waiting queued job was queued; zero when none is.
	OldestQueuedAt time.Time
}

// QueueShape counts the queued jobs that ask for one label set and one amount of
// resources (zero for none). Held counts those of them a project's limit of concurrent
// jobs holds back, as QueueStats.Held does.
type QueueShape struct {
	Labels   []string
	MilliCPU int64
	Memory   int64
	Jobs     int
	Held     int
}

// QueueDepth counts the queued jobs of one lane that ask for one label set.
type QueueDepth struct {
	Priority pipeline.Priority
	Labels   []string
	Jobs     int
}

// Tokens keeps API tokens and worker credentials.
type Tokens interface {
	// CreateToken stores a token; ErrConflict when its hash is already taken. A token with
	// a ParentID fails with ErrNotFound when the parent does not exist and ErrConflict
	// when it was revoked, so a worker registering while its register token is revoked
	// never keeps a credential.
	CreateToken(ctx context.Context, t *Token) error
	// LookupToken finds the token whose secret hashes to hash; ErrNotFound when none does.
	// A revoked or expired token is returned as it is: Token.Valid tells.
	LookupToken(ctx context.Context, hash string) (*Token, error)
	// ListTokens lists every token oldest first, agent credentials only when p.Agents.
	ListTokens(ctx context.Context, p ListTokensParams) ([]*Token, error)
	// RevokeToken revokes a token and every credential issued under it, at the store's
	// now; revoking a revoked token changes nothing. ErrNotFound when id names none.
	RevokeToken(ctx context.Context, id uuid.UUID) error
	// TouchToken records that the token was used at.
	TouchToken(ctx context.Context, id uuid.UUID, at time.Time) error
}

// ListTokensParams filter ListTokens.
type ListTokensParams struct {
	// Agents includes the credentials workers got at registration.
	Agents bool
}

// Projects keeps projects connected to repositories, and the webhook deliveries they saw.
type Projects interface {
	// CreateProject stores a project; it fills in ID, CreatedAt and UpdatedAt. A name a
	// run already created on first use is taken over when that project is not connected
	// to a repository yet; a name that is connected is ErrConflict.
	CreateProject(ctx context.Context, p *Project) error
	// GetProjectByName returns the named project; ErrNotFound when none has the name.
	GetProjectByName(ctx context.Context, name string) (*Project, error)
	// ListProjects lists every project by name.
	ListProjects(ctx context.Context) ([]*Project, error)
	// UpdateProject replaces the settings of the project named p.Name (every field but ID,
	// Name and CreatedAt) and sets UpdatedAt; ErrNotFound when none has the name.
	UpdateProject(ctx context.Context, p *Project) error
	// SealWebhookSecret stores the project's webhook secret sealed, in place of what is
	// there, only while what is there is still p.Old (a plain-text secret being sealed,
	// or a sealed one being rewrapped under a new key): ErrConflict when it changed
	// meanwhile, ErrNotFound when there is no such project. UpdatedAt is unchanged.
	SealWebhookSecret(ctx context.Context, p SealWebhookSecretParams) error
	// DeleteProject deletes the named project, its deliveries, outbound webhook
	// subscriptions, registered workflows, schedule ticks and secrets. ErrNotFound when
	// none has the name; ErrConflict while runs belong to it, so no run loses its project.
	DeleteProject(ctx context.Context, name string) error
	// GetDelivery returns the delivery the project recorded under deliveryID;
	// ErrNotFound when it has none.
	GetDelivery(ctx context.Context, projectID uuid.UUID, deliveryID string) (*Delivery, error)
	// RecordDelivery records a delivery; it fills in CreatedAt. A delivery id the project
	// has already recorded keeps its first record, which is returned with created=false.
	RecordDelivery(ctx context.Context, d *Delivery) (first *Delivery, created bool, err error)
	// ClaimHookEvent names the delivery that reported the project's event (p.Event at
	// p.Ref and p.SHA) first within p.Window: p.DeliveryID when no other delivery claimed
	// it less than p.Window ago (a claim older than that is replaced), else the one that
	// did, with when. A resend of one event under new delivery ids is so told apart from a
	// new event, across replicas: concurrent claims of one event name one delivery.
	// Claims of the project older than p.Window are removed. ErrInvalid when a field is
	// missing or p.Window is not positive.
	ClaimHookEvent(ctx context.Context, p ClaimHookEventParams) (*HookEventClaim, error)
	// CreateFailedRun stores a run that failed before it had jobs, such as one whose
	// pipeline file is invalid: status failed, finished at once, with p.Errors (at least
	// one). Project, Trigger, Definition and IdempotencyKey mean what they mean to
	// CreateRun, including the replay of a known key (created=false).
	CreateFailedRun(ctx context.Context, p CreateFailedRunParams) (run *Run, created bool, err error)
}

// SealWebhookSecretParams name a project, the webhook secret it must still hold (OldPlain,
// or OldSealed), and the sealed value to put in its place.
type SealWebhookSecretParams struct {
	Project   string
	OldPlain  string
	OldSealed SealedValue
	Sealed    SealedValue
}

// CreateFailedRunParams describe a run that failed before it had jobs.
type CreateFailedRunParams struct {
	Project        string
	Name           string
	Trigger        Trigger
	IdempotencyKey string
	Definition     []byte
	Errors         []RunError
}
