// Package tracestore is the store decorator of Gantry's tracing: a span per store call
// made under a recorded trace. It is the coordinator's; the tracing package itself links
// no store, so a worker links none through it.
package tracestore

import (
	"context"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
	"github.com/gantry-ci/gantry/internal/tracing"
)

// traced is a store.Store that records a span per call of the store it wraps, as a child
// of the span in the call's context. The embedded interface supplies the calls that do no
// I/O (the wake-up channels, Close).
type traced struct {
	store.Store
}

// Instrument returns st recording a span, "store <Method>", for every method that
// does I/O, but only under a span being recorded (an API request's): calls outside a
// trace, such as the scheduler's periodic passes, cost one context lookup and make no
// span.
func Instrument(st store.Store) store.Store {
	if _, ok := st.(*traced); ok {
		return st
	}
	return &traced{Store: st}
}

// start starts the span of a call to method, when ctx is in a recorded trace.
func (s *traced) start(ctx context.Context, method string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, parent
	}
	// The tracer is looked up per span, not kept: the global provider may change after
	// the store is wrapped (a test installing one).
	return tracing.Tracer().Start(ctx, "store "+method, trace.WithSpanKind(trace.SpanKindClient))
}

// end ends a call's span, marking an error. A span not recording (no trace) is left alone.
func end(span trace.Span, err error) {
	if !span.IsRecording() {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

func (s *traced) CreateRun(ctx context.Context, p store.CreateRunParams) (*store.Run, []*store.Job, bool, error) {
	ctx, span := s.start(ctx, "CreateRun")
	run, jobs, created, err := s.Store.CreateRun(ctx, p)
	end(span, err)
	return run, jobs, created, err
}

func (s *traced) GetRun(ctx context.Context, id uuid.UUID) (*store.Run, error) {
	ctx, span := s.start(ctx, "GetRun")
	r, err := s.Store.GetRun(ctx, id)
	end(span, err)
	return r, err
}

func (s *traced) RunDefinition(ctx context.Context, id uuid.UUID) ([]byte, error) {
	ctx, span := s.start(ctx, "RunDefinition")
	def, err := s.Store.RunDefinition(ctx, id)
	end(span, err)
	return def, err
}

func (s *traced) GetRunByNumber(ctx context.Context, project string, number int) (*store.Run, error) {
	ctx, span := s.start(ctx, "GetRunByNumber")
	r, err := s.Store.GetRunByNumber(ctx, project, number)
	end(span, err)
	return r, err
}

func (s *traced) ListRuns(ctx context.Context, p store.ListRunsParams) ([]*store.Run, error) {
	ctx, span := s.start(ctx, "ListRuns")
	r, err := s.Store.ListRuns(ctx, p)
	end(span, err)
	return r, err
}

func (s *traced) CountRuns(ctx context.Context, p store.ListRunsParams, upTo int) (int, error) {
	ctx, span := s.start(ctx, "CountRuns")
	n, err := s.Store.CountRuns(ctx, p, upTo)
	end(span, err)
	return n, err
}

func (s *traced) DigestRuns(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*store.RunDigest, error) {
	ctx, span := s.start(ctx, "DigestRuns")
	d, err := s.Store.DigestRuns(ctx, ids)
	end(span, err)
	return d, err
}

func (s *traced) GetJob(ctx context.Context, id uuid.UUID) (*store.Job, error) {
	ctx, span := s.start(ctx, "GetJob")
	j, err := s.Store.GetJob(ctx, id)
	end(span, err)
	return j, err
}

func (s *traced) ListJobs(ctx context.Context, runID uuid.UUID) ([]*store.Job, error) {
	ctx, span := s.start(ctx, "ListJobs")
	j, err := s.Store.ListJobs(ctx, runID)
	end(span, err)
	return j, err
}

func (s *traced) ListJobsChanged(ctx context.Context, runID uuid.UUID, since int64) ([]*store.Job, error) {
	ctx, span := s.start(ctx, "ListJobsChanged")
	j, err := s.Store.ListJobsChanged(ctx, runID, since)
	end(span, err)
	return j, err
}

func (s *traced) ListSteps(ctx context.Context, jobID uuid.UUID) ([]*store.Step, error) {
	ctx, span := s.start(ctx, "ListSteps")
	st, err := s.Store.ListSteps(ctx, jobID)
	end(span, err)
	return st, err
}

func (s *traced) CancelRun(ctx context.Context, id uuid.UUID) error {
	ctx, span := s.start(ctx, "CancelRun")
	err := s.Store.CancelRun(ctx, id)
	end(span, err)
	return err
}

func (s *traced) CancelJob(ctx context.Context, id uuid.UUID) error {
	ctx, span := s.start(ctx, "CancelJob")
	err := s.Store.CancelJob(ctx, id)
	end(span, err)
	return err
}

func (s *traced) RetryRun(ctx context.Context, id uuid.UUID) error {
	ctx, span := s.start(ctx, "RetryRun")
	err := s.Store.RetryRun(ctx, id)
	end(span, err)
	return err
}

func (s *traced) RetryJob(ctx context.Context, id uuid.UUID) error {
	ctx, span := s.start(ctx, "RetryJob")
	err := s.Store.RetryJob(ctx, id)
	end(span, err)
	return err
}

func (s *traced) Rerun(ctx context.Context, p store.RerunParams) ([]uuid.UUID, error) {
	ctx, span := s.start(ctx, "Rerun")
	r0, err := s.Store.Rerun(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) ListJobAttempts(ctx context.Context, jobID uuid.UUID) ([]*store.JobAttempt, error) {
	ctx, span := s.start(ctx, "ListJobAttempts")
	r0, err := s.Store.ListJobAttempts(ctx, jobID)
	end(span, err)
	return r0, err
}

func (s *traced) ListWaitingApproval(ctx context.Context, p store.ListWaitingApprovalParams) ([]*store.Job, error) {
	ctx, span := s.start(ctx, "ListWaitingApproval")
	r0, err := s.Store.ListWaitingApproval(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) Claim(ctx context.Context, p store.ClaimParams) ([]*store.Claim, error) {
	ctx, span := s.start(ctx, "Claim")
	c, err := s.Store.Claim(ctx, p)
	end(span, err)
	return c, err
}

func (s *traced) StartJob(ctx context.Context, l store.LeaseRef) error {
	ctx, span := s.start(ctx, "StartJob")
	err := s.Store.StartJob(ctx, l)
	end(span, err)
	return err
}

func (s *traced) SetJobName(ctx context.Context, l store.LeaseRef, name string) error {
	ctx, span := s.start(ctx, "SetJobName")
	err := s.Store.SetJobName(ctx, l, name)
	end(span, err)
	return err
}

func (s *traced) LeaseAttempt(ctx context.Context, l store.LeaseRef) (int, error) {
	ctx, span := s.start(ctx, "LeaseAttempt")
	n, err := s.Store.LeaseAttempt(ctx, l)
	end(span, err)
	return n, err
}

func (s *traced) Heartbeat(ctx context.Context, p store.HeartbeatParams) (store.HeartbeatResult, error) {
	ctx, span := s.start(ctx, "Heartbeat")
	r, err := s.Store.Heartbeat(ctx, p)
	end(span, err)
	return r, err
}

func (s *traced) UpdateStep(ctx context.Context, p store.UpdateStepParams) error {
	ctx, span := s.start(ctx, "UpdateStep")
	err := s.Store.UpdateStep(ctx, p)
	end(span, err)
	return err
}

func (s *traced) CompleteJob(ctx context.Context, p store.CompleteParams) (*store.Job, error) {
	ctx, span := s.start(ctx, "CompleteJob")
	j, err := s.Store.CompleteJob(ctx, p)
	end(span, err)
	return j, err
}

func (s *traced) ReapExpiredLeases(ctx context.Context) (int, error) {
	ctx, span := s.start(ctx, "ReapExpiredLeases")
	n, err := s.Store.ReapExpiredLeases(ctx)
	end(span, err)
	return n, err
}

func (s *traced) PromoteRetries(ctx context.Context) (int, error) {
	ctx, span := s.start(ctx, "PromoteRetries")
	n, err := s.Store.PromoteRetries(ctx)
	end(span, err)
	return n, err
}

func (s *traced) RevokeTimedOut(ctx context.Context) (int, error) {
	ctx, span := s.start(ctx, "RevokeTimedOut")
	n, err := s.Store.RevokeTimedOut(ctx)
	end(span, err)
	return n, err
}

func (s *traced) UpsertWorker(ctx context.Context, w *store.Worker) error {
	ctx, span := s.start(ctx, "UpsertWorker")
	err := s.Store.UpsertWorker(ctx, w)
	end(span, err)
	return err
}

func (s *traced) TouchWorker(ctx context.Context, id string, state store.WorkerState) error {
	ctx, span := s.start(ctx, "TouchWorker")
	err := s.Store.TouchWorker(ctx, id, state)
	end(span, err)
	return err
}

func (s *traced) ListWorkers(ctx context.Context) ([]*store.Worker, error) {
	ctx, span := s.start(ctx, "ListWorkers")
	w, err := s.Store.ListWorkers(ctx)
	end(span, err)
	return w, err
}

func (s *traced) PutArtifact(ctx context.Context, l store.LeaseRef, a *store.Artifact) (*store.Artifact, error) {
	ctx, span := s.start(ctx, "PutArtifact")
	out, err := s.Store.PutArtifact(ctx, l, a)
	end(span, err)
	return out, err
}

func (s *traced) MarkArtifactStored(ctx context.Context, id uuid.UUID) error {
	ctx, span := s.start(ctx, "MarkArtifactStored")
	err := s.Store.MarkArtifactStored(ctx, id)
	end(span, err)
	return err
}

func (s *traced) GetArtifact(ctx context.Context, id uuid.UUID) (*store.Artifact, error) {
	ctx, span := s.start(ctx, "GetArtifact")
	a, err := s.Store.GetArtifact(ctx, id)
	end(span, err)
	return a, err
}

func (s *traced) ListArtifacts(ctx context.Context, jobID uuid.UUID) ([]*store.Artifact, error) {
	ctx, span := s.start(ctx, "ListArtifacts")
	a, err := s.Store.ListArtifacts(ctx, jobID)
	end(span, err)
	return a, err
}

func (s *traced) ListRunArtifacts(ctx context.Context, runID uuid.UUID) ([]*store.Artifact, error) {
	ctx, span := s.start(ctx, "ListRunArtifacts")
	a, err := s.Store.ListRunArtifacts(ctx, runID)
	end(span, err)
	return a, err
}

func (s *traced) DeleteExpiredArtifacts(ctx context.Context, before time.Time) (int, error) {
	ctx, span := s.start(ctx, "DeleteExpiredArtifacts")
	n, err := s.Store.DeleteExpiredArtifacts(ctx, before)
	end(span, err)
	return n, err
}

func (s *traced) BlobInUse(ctx context.Context, sha256 string) (bool, error) {
	ctx, span := s.start(ctx, "BlobInUse")
	ok, err := s.Store.BlobInUse(ctx, sha256)
	end(span, err)
	return ok, err
}

func (s *traced) AddBlobOwner(ctx context.Context, projectID uuid.UUID, sha256 string) error {
	ctx, span := s.start(ctx, "AddBlobOwner")
	err := s.Store.AddBlobOwner(ctx, projectID, sha256)
	end(span, err)
	return err
}

func (s *traced) BlobOwned(ctx context.Context, projectID uuid.UUID, sha256 string) (bool, error) {
	ctx, span := s.start(ctx, "BlobOwned")
	ok, err := s.Store.BlobOwned(ctx, projectID, sha256)
	end(span, err)
	return ok, err
}

func (s *traced) DeleteBlobOwners(ctx context.Context, sha256 string) error {
	ctx, span := s.start(ctx, "DeleteBlobOwners")
	err := s.Store.DeleteBlobOwners(ctx, sha256)
	end(span, err)
	return err
}

func (s *traced) AppendLogChunk(ctx context.Context, c *store.LogChunk) error {
	ctx, span := s.start(ctx, "AppendLogChunk")
	err := s.Store.AppendLogChunk(ctx, c)
	end(span, err)
	return err
}

func (s *traced) LastLogSeq(ctx context.Context, jobID uuid.UUID, attempt int) (int64, int64, error) {
	ctx, span := s.start(ctx, "LastLogSeq")
	seq, bytes, err := s.Store.LastLogSeq(ctx, jobID, attempt)
	end(span, err)
	return seq, bytes, err
}

func (s *traced) ListLogChunks(ctx context.Context, jobID uuid.UUID, attempt int, afterSeq int64, max int) ([]*store.LogChunk, error) {
	ctx, span := s.start(ctx, "ListLogChunks")
	cs, err := s.Store.ListLogChunks(ctx, jobID, attempt, afterSeq, max)
	end(span, err)
	return cs, err
}

func (s *traced) ReplaceLogChunks(ctx context.Context, jobID uuid.UUID, attempt int, cs []*store.LogChunk) error {
	ctx, span := s.start(ctx, "ReplaceLogChunks")
	err := s.Store.ReplaceLogChunks(ctx, jobID, attempt, cs)
	end(span, err)
	return err
}

func (s *traced) DeleteLogChunksBefore(ctx context.Context, before time.Time) (int, error) {
	ctx, span := s.start(ctx, "DeleteLogChunksBefore")
	n, err := s.Store.DeleteLogChunksBefore(ctx, before)
	end(span, err)
	return n, err
}

func (s *traced) EnqueueOutbox(ctx context.Context, topic string, payload []byte) error {
	ctx, span := s.start(ctx, "EnqueueOutbox")
	err := s.Store.EnqueueOutbox(ctx, topic, payload)
	end(span, err)
	return err
}

func (s *traced) ClaimOutbox(ctx context.Context, max int, retryIn time.Duration) ([]*store.OutboxMessage, error) {
	ctx, span := s.start(ctx, "ClaimOutbox")
	ms, err := s.Store.ClaimOutbox(ctx, max, retryIn)
	end(span, err)
	return ms, err
}

func (s *traced) SupersedeOutbox(ctx context.Context, id uuid.UUID) error {
	ctx, span := s.start(ctx, "SupersedeOutbox")
	err := s.Store.SupersedeOutbox(ctx, id)
	end(span, err)
	return err
}

func (s *traced) MarkDelivered(ctx context.Context, id uuid.UUID) error {
	ctx, span := s.start(ctx, "MarkDelivered")
	err := s.Store.MarkDelivered(ctx, id)
	end(span, err)
	return err
}

func (s *traced) Publish(ctx context.Context, topic, payload string) error {
	ctx, span := s.start(ctx, "Publish")
	err := s.Store.Publish(ctx, topic, payload)
	end(span, err)
	return err
}

func (s *traced) QueueStats(ctx context.Context) (*store.QueueStats, error) {
	ctx, span := s.start(ctx, "QueueStats")
	q, err := s.Store.QueueStats(ctx)
	end(span, err)
	return q, err
}

func (s *traced) ConcurrencyHolders(ctx context.Context, projectID uuid.UUID, groups []string) (map[string]*store.Job, error) {
	ctx, span := s.start(ctx, "ConcurrencyHolders")
	m, err := s.Store.ConcurrencyHolders(ctx, projectID, groups)
	end(span, err)
	return m, err
}

func (s *traced) CreateToken(ctx context.Context, tk *store.Token) error {
	ctx, span := s.start(ctx, "CreateToken")
	err := s.Store.CreateToken(ctx, tk)
	end(span, err)
	return err
}

func (s *traced) LookupToken(ctx context.Context, hash string) (*store.Token, error) {
	ctx, span := s.start(ctx, "LookupToken")
	tk, err := s.Store.LookupToken(ctx, hash)
	end(span, err)
	return tk, err
}

func (s *traced) CancelRequested(ctx context.Context, workerID string) ([]uuid.UUID, error) {
	ctx, span := s.start(ctx, "CancelRequested")
	ids, err := s.Store.CancelRequested(ctx, workerID)
	end(span, err)
	return ids, err
}

// The calls below are the rarer ones (projects, secrets, webhooks, workflows, members,
// caches, approvals, audit, outbox administration), traced the same way.

func (s *traced) AppendAudit(ctx context.Context, e *store.AuditEntry) error {
	ctx, span := s.start(ctx, "AppendAudit")
	err := s.Store.AppendAudit(ctx, e)
	end(span, err)
	return err
}

func (s *traced) CreateFailedRun(ctx context.Context, p store.CreateFailedRunParams) (*store.Run, bool, error) {
	ctx, span := s.start(ctx, "CreateFailedRun")
	r0, r1, err := s.Store.CreateFailedRun(ctx, p)
	end(span, err)
	return r0, r1, err
}

func (s *traced) CreateProject(ctx context.Context, p *store.Project) error {
	ctx, span := s.start(ctx, "CreateProject")
	err := s.Store.CreateProject(ctx, p)
	end(span, err)
	return err
}

func (s *traced) CreateWebhook(ctx context.Context, w *store.Webhook) error {
	ctx, span := s.start(ctx, "CreateWebhook")
	err := s.Store.CreateWebhook(ctx, w)
	end(span, err)
	return err
}

func (s *traced) CreateWorkflow(ctx context.Context, w *store.Workflow) error {
	ctx, span := s.start(ctx, "CreateWorkflow")
	err := s.Store.CreateWorkflow(ctx, w)
	end(span, err)
	return err
}

func (s *traced) DecideJob(ctx context.Context, p store.DecideJobParams) (*store.Job, error) {
	ctx, span := s.start(ctx, "DecideJob")
	r0, err := s.Store.DecideJob(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) DeleteCaches(ctx context.Context, p store.DeleteCachesParams) (int, error) {
	ctx, span := s.start(ctx, "DeleteCaches")
	r0, err := s.Store.DeleteCaches(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) DeleteEnvironment(ctx context.Context, projectID uuid.UUID, name string) error {
	ctx, span := s.start(ctx, "DeleteEnvironment")
	err := s.Store.DeleteEnvironment(ctx, projectID, name)
	end(span, err)
	return err
}

func (s *traced) DeleteMember(ctx context.Context, projectID uuid.UUID, principal string) error {
	ctx, span := s.start(ctx, "DeleteMember")
	err := s.Store.DeleteMember(ctx, projectID, principal)
	end(span, err)
	return err
}

func (s *traced) DeleteProject(ctx context.Context, name string) error {
	ctx, span := s.start(ctx, "DeleteProject")
	err := s.Store.DeleteProject(ctx, name)
	end(span, err)
	return err
}

func (s *traced) DeleteSecret(ctx context.Context, k store.SecretKey) error {
	ctx, span := s.start(ctx, "DeleteSecret")
	err := s.Store.DeleteSecret(ctx, k)
	end(span, err)
	return err
}

func (s *traced) DeleteWebhook(ctx context.Context, projectID, id uuid.UUID) error {
	ctx, span := s.start(ctx, "DeleteWebhook")
	err := s.Store.DeleteWebhook(ctx, projectID, id)
	end(span, err)
	return err
}

func (s *traced) DeleteWorkflow(ctx context.Context, id uuid.UUID) error {
	ctx, span := s.start(ctx, "DeleteWorkflow")
	err := s.Store.DeleteWorkflow(ctx, id)
	end(span, err)
	return err
}

func (s *traced) EvictCaches(ctx context.Context, p store.EvictCachesParams) (int, error) {
	ctx, span := s.start(ctx, "EvictCaches")
	r0, err := s.Store.EvictCaches(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) ExpireApprovals(ctx context.Context) (int, error) {
	ctx, span := s.start(ctx, "ExpireApprovals")
	r0, err := s.Store.ExpireApprovals(ctx)
	end(span, err)
	return r0, err
}

func (s *traced) FailOutbox(ctx context.Context, p store.FailOutboxParams) error {
	ctx, span := s.start(ctx, "FailOutbox")
	err := s.Store.FailOutbox(ctx, p)
	end(span, err)
	return err
}

func (s *traced) FindCache(ctx context.Context, p store.FindCacheParams) (*store.CacheEntry, error) {
	ctx, span := s.start(ctx, "FindCache")
	r0, err := s.Store.FindCache(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) GetDelivery(ctx context.Context, projectID uuid.UUID, deliveryID string) (*store.Delivery, error) {
	ctx, span := s.start(ctx, "GetDelivery")
	r0, err := s.Store.GetDelivery(ctx, projectID, deliveryID)
	end(span, err)
	return r0, err
}

func (s *traced) GetEnvironment(ctx context.Context, projectID uuid.UUID, name string) (*store.Environment, error) {
	ctx, span := s.start(ctx, "GetEnvironment")
	r0, err := s.Store.GetEnvironment(ctx, projectID, name)
	end(span, err)
	return r0, err
}

func (s *traced) GetOutbox(ctx context.Context, id uuid.UUID) (*store.OutboxMessage, error) {
	ctx, span := s.start(ctx, "GetOutbox")
	r0, err := s.Store.GetOutbox(ctx, id)
	end(span, err)
	return r0, err
}

func (s *traced) GetProjectByName(ctx context.Context, name string) (*store.Project, error) {
	ctx, span := s.start(ctx, "GetProjectByName")
	r0, err := s.Store.GetProjectByName(ctx, name)
	end(span, err)
	return r0, err
}

func (s *traced) GetSecret(ctx context.Context, k store.SecretKey) (*store.Secret, error) {
	ctx, span := s.start(ctx, "GetSecret")
	r0, err := s.Store.GetSecret(ctx, k)
	end(span, err)
	return r0, err
}

func (s *traced) GetWebhook(ctx context.Context, id uuid.UUID) (*store.Webhook, error) {
	ctx, span := s.start(ctx, "GetWebhook")
	r0, err := s.Store.GetWebhook(ctx, id)
	end(span, err)
	return r0, err
}

func (s *traced) GetWorkflow(ctx context.Context, id uuid.UUID) (*store.Workflow, error) {
	ctx, span := s.start(ctx, "GetWorkflow")
	r0, err := s.Store.GetWorkflow(ctx, id)
	end(span, err)
	return r0, err
}

func (s *traced) ListApprovals(ctx context.Context, jobID uuid.UUID) ([]*store.Approval, error) {
	ctx, span := s.start(ctx, "ListApprovals")
	r0, err := s.Store.ListApprovals(ctx, jobID)
	end(span, err)
	return r0, err
}

func (s *traced) ListAudit(ctx context.Context, p store.ListAuditParams) ([]*store.AuditEntry, error) {
	ctx, span := s.start(ctx, "ListAudit")
	r0, err := s.Store.ListAudit(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) ListCaches(ctx context.Context, projectID uuid.UUID) ([]*store.CacheEntry, error) {
	ctx, span := s.start(ctx, "ListCaches")
	r0, err := s.Store.ListCaches(ctx, projectID)
	end(span, err)
	return r0, err
}

func (s *traced) ListEnvironments(ctx context.Context, projectID uuid.UUID) ([]*store.Environment, error) {
	ctx, span := s.start(ctx, "ListEnvironments")
	r0, err := s.Store.ListEnvironments(ctx, projectID)
	end(span, err)
	return r0, err
}

func (s *traced) ListMembers(ctx context.Context, projectID uuid.UUID) ([]*store.Member, error) {
	ctx, span := s.start(ctx, "ListMembers")
	r0, err := s.Store.ListMembers(ctx, projectID)
	end(span, err)
	return r0, err
}

func (s *traced) ListOutbox(ctx context.Context, p store.ListOutboxParams) ([]*store.OutboxMessage, error) {
	ctx, span := s.start(ctx, "ListOutbox")
	r0, err := s.Store.ListOutbox(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) ListProjects(ctx context.Context) ([]*store.Project, error) {
	ctx, span := s.start(ctx, "ListProjects")
	r0, err := s.Store.ListProjects(ctx)
	end(span, err)
	return r0, err
}

func (s *traced) ListSecrets(ctx context.Context, project string) ([]*store.Secret, error) {
	ctx, span := s.start(ctx, "ListSecrets")
	r0, err := s.Store.ListSecrets(ctx, project)
	end(span, err)
	return r0, err
}

func (s *traced) ListTokens(ctx context.Context, p store.ListTokensParams) ([]*store.Token, error) {
	ctx, span := s.start(ctx, "ListTokens")
	r0, err := s.Store.ListTokens(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) ListWebhooks(ctx context.Context, projectID uuid.UUID) ([]*store.Webhook, error) {
	ctx, span := s.start(ctx, "ListWebhooks")
	r0, err := s.Store.ListWebhooks(ctx, projectID)
	end(span, err)
	return r0, err
}

func (s *traced) ListWorkflows(ctx context.Context, p store.ListWorkflowsParams) ([]*store.Workflow, error) {
	ctx, span := s.start(ctx, "ListWorkflows")
	r0, err := s.Store.ListWorkflows(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) Memberships(ctx context.Context, principal string) ([]*store.Member, error) {
	ctx, span := s.start(ctx, "Memberships")
	r0, err := s.Store.Memberships(ctx, principal)
	end(span, err)
	return r0, err
}

func (s *traced) NeedsOf(ctx context.Context, jobID uuid.UUID) (map[string]store.NeedResult, error) {
	ctx, span := s.start(ctx, "NeedsOf")
	r0, err := s.Store.NeedsOf(ctx, jobID)
	end(span, err)
	return r0, err
}

func (s *traced) ProjectLoad(ctx context.Context, projectID uuid.UUID) (*store.ProjectLoad, error) {
	ctx, span := s.start(ctx, "ProjectLoad")
	r0, err := s.Store.ProjectLoad(ctx, projectID)
	end(span, err)
	return r0, err
}

func (s *traced) PutCache(ctx context.Context, c *store.CacheEntry) (*store.CacheEntry, bool, error) {
	ctx, span := s.start(ctx, "PutCache")
	r0, r1, err := s.Store.PutCache(ctx, c)
	end(span, err)
	return r0, r1, err
}

func (s *traced) PutEnvironment(ctx context.Context, e *store.Environment) error {
	ctx, span := s.start(ctx, "PutEnvironment")
	err := s.Store.PutEnvironment(ctx, e)
	end(span, err)
	return err
}

func (s *traced) PutMember(ctx context.Context, m *store.Member) error {
	ctx, span := s.start(ctx, "PutMember")
	err := s.Store.PutMember(ctx, m)
	end(span, err)
	return err
}

func (s *traced) PutSecret(ctx context.Context, sc *store.Secret) (bool, error) {
	ctx, span := s.start(ctx, "PutSecret")
	r0, err := s.Store.PutSecret(ctx, sc)
	end(span, err)
	return r0, err
}

func (s *traced) AddAnnotations(ctx context.Context, p store.AddAnnotationsParams) (int, error) {
	ctx, span := s.start(ctx, "AddAnnotations")
	r0, err := s.Store.AddAnnotations(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) ListAnnotations(ctx context.Context, p store.ListAnnotationsParams) ([]*store.Annotation, error) {
	ctx, span := s.start(ctx, "ListAnnotations")
	r0, err := s.Store.ListAnnotations(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) PutSummary(ctx context.Context, p store.PutSummaryParams) error {
	ctx, span := s.start(ctx, "PutSummary")
	err := s.Store.PutSummary(ctx, p)
	end(span, err)
	return err
}

func (s *traced) ListSummaries(ctx context.Context, p store.ListSummariesParams) ([]*store.SummaryPart, error) {
	ctx, span := s.start(ctx, "ListSummaries")
	r0, err := s.Store.ListSummaries(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) DeleteSummariesBefore(ctx context.Context, before time.Time) (int, error) {
	ctx, span := s.start(ctx, "DeleteSummariesBefore")
	r0, err := s.Store.DeleteSummariesBefore(ctx, before)
	end(span, err)
	return r0, err
}

func (s *traced) ClaimHookEvent(ctx context.Context, p store.ClaimHookEventParams) (*store.HookEventClaim, error) {
	ctx, span := s.start(ctx, "ClaimHookEvent")
	r0, err := s.Store.ClaimHookEvent(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) RecordDelivery(ctx context.Context, d *store.Delivery) (*store.Delivery, bool, error) {
	ctx, span := s.start(ctx, "RecordDelivery")
	r0, r1, err := s.Store.RecordDelivery(ctx, d)
	end(span, err)
	return r0, r1, err
}

func (s *traced) RedeliverOutbox(ctx context.Context, id uuid.UUID) error {
	ctx, span := s.start(ctx, "RedeliverOutbox")
	err := s.Store.RedeliverOutbox(ctx, id)
	end(span, err)
	return err
}

func (s *traced) ReleaseClaims(ctx context.Context, leases []store.LeaseRef) (int, error) {
	ctx, span := s.start(ctx, "ReleaseClaims")
	r0, err := s.Store.ReleaseClaims(ctx, leases)
	end(span, err)
	return r0, err
}

func (s *traced) RevokeToken(ctx context.Context, id uuid.UUID) error {
	ctx, span := s.start(ctx, "RevokeToken")
	err := s.Store.RevokeToken(ctx, id)
	end(span, err)
	return err
}

func (s *traced) RewrapSecret(ctx context.Context, k store.SecretKey, oldKeyID string, oldWrapped []byte, newKeyID string, newWrapped []byte) error {
	ctx, span := s.start(ctx, "RewrapSecret")
	err := s.Store.RewrapSecret(ctx, k, oldKeyID, oldWrapped, newKeyID, newWrapped)
	end(span, err)
	return err
}

func (s *traced) ScheduleTicks(ctx context.Context, projectID uuid.UUID) (map[string]time.Time, error) {
	ctx, span := s.start(ctx, "ScheduleTicks")
	r0, err := s.Store.ScheduleTicks(ctx, projectID)
	end(span, err)
	return r0, err
}

func (s *traced) SealWebhookSecret(ctx context.Context, p store.SealWebhookSecretParams) error {
	ctx, span := s.start(ctx, "SealWebhookSecret")
	err := s.Store.SealWebhookSecret(ctx, p)
	end(span, err)
	return err
}

func (s *traced) SealWebhookSubscriptionSecret(ctx context.Context, p store.SealWebhookSubscriptionSecretParams) error {
	ctx, span := s.start(ctx, "SealWebhookSubscriptionSecret")
	err := s.Store.SealWebhookSubscriptionSecret(ctx, p)
	end(span, err)
	return err
}

func (s *traced) SealedSecrets(ctx context.Context, notKeyID string) ([]*store.Secret, error) {
	ctx, span := s.start(ctx, "SealedSecrets")
	r0, err := s.Store.SealedSecrets(ctx, notKeyID)
	end(span, err)
	return r0, err
}

func (s *traced) SecretsForForks(ctx context.Context, project string) (bool, error) {
	ctx, span := s.start(ctx, "SecretsForForks")
	r0, err := s.Store.SecretsForForks(ctx, project)
	end(span, err)
	return r0, err
}

func (s *traced) SetSecretsForForks(ctx context.Context, project string, allow bool) error {
	ctx, span := s.start(ctx, "SetSecretsForForks")
	err := s.Store.SetSecretsForForks(ctx, project, allow)
	end(span, err)
	return err
}

func (s *traced) SetWorkflowRunListeners(ctx context.Context, p store.SetWorkflowRunListenersParams) error {
	ctx, span := s.start(ctx, "SetWorkflowRunListeners")
	err := s.Store.SetWorkflowRunListeners(ctx, p)
	end(span, err)
	return err
}

func (s *traced) ListWorkflowRunListeners(ctx context.Context, projectID uuid.UUID, source string) ([]store.WorkflowRunListen, error) {
	ctx, span := s.start(ctx, "ListWorkflowRunListeners")
	r0, err := s.Store.ListWorkflowRunListeners(ctx, projectID, source)
	end(span, err)
	return r0, err
}

func (s *traced) SkipTick(ctx context.Context, projectID uuid.UUID, tick store.ScheduleTick) (bool, error) {
	ctx, span := s.start(ctx, "SkipTick")
	r0, err := s.Store.SkipTick(ctx, projectID, tick)
	end(span, err)
	return r0, err
}

func (s *traced) TouchToken(ctx context.Context, id uuid.UUID, at time.Time) error {
	ctx, span := s.start(ctx, "TouchToken")
	err := s.Store.TouchToken(ctx, id, at)
	end(span, err)
	return err
}

func (s *traced) UpdateProject(ctx context.Context, p *store.Project) error {
	ctx, span := s.start(ctx, "UpdateProject")
	err := s.Store.UpdateProject(ctx, p)
	end(span, err)
	return err
}

func (s *traced) UpdateWorkflow(ctx context.Context, p store.UpdateWorkflowParams) (*store.Workflow, error) {
	ctx, span := s.start(ctx, "UpdateWorkflow")
	r0, err := s.Store.UpdateWorkflow(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) PutVariable(ctx context.Context, v *store.Variable) (bool, error) {
	ctx, span := s.start(ctx, "PutVariable")
	r0, err := s.Store.PutVariable(ctx, v)
	end(span, err)
	return r0, err
}

func (s *traced) GetVariable(ctx context.Context, k store.VariableKey) (*store.Variable, error) {
	ctx, span := s.start(ctx, "GetVariable")
	r0, err := s.Store.GetVariable(ctx, k)
	end(span, err)
	return r0, err
}

func (s *traced) ListVariables(ctx context.Context, project string) ([]*store.Variable, error) {
	ctx, span := s.start(ctx, "ListVariables")
	r0, err := s.Store.ListVariables(ctx, project)
	end(span, err)
	return r0, err
}

func (s *traced) DeleteVariable(ctx context.Context, k store.VariableKey) error {
	ctx, span := s.start(ctx, "DeleteVariable")
	err := s.Store.DeleteVariable(ctx, k)
	end(span, err)
	return err
}

func (s *traced) AddTestResults(ctx context.Context, p store.AddTestResultsParams) (int, error) {
	ctx, span := s.start(ctx, "AddTestResults")
	r0, err := s.Store.AddTestResults(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) ListTestResults(ctx context.Context, p store.ListTestResultsParams) ([]*store.TestResult, error) {
	ctx, span := s.start(ctx, "ListTestResults")
	r0, err := s.Store.ListTestResults(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) CountTestResults(ctx context.Context, p store.ListTestResultsParams) (map[testreport.Status]int, error) {
	ctx, span := s.start(ctx, "CountTestResults")
	r0, err := s.Store.CountTestResults(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) TestHistory(ctx context.Context, p store.TestHistoryParams) ([]*store.TestResult, error) {
	ctx, span := s.start(ctx, "TestHistory")
	r0, err := s.Store.TestHistory(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) TestEvidence(ctx context.Context, p store.TestEvidenceParams) (map[testreport.TestID]*store.TestEvidence, error) {
	ctx, span := s.start(ctx, "TestEvidence")
	r0, err := s.Store.TestEvidence(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) FlakyTests(ctx context.Context, p store.FlakyTestsParams) ([]*store.FlakyTest, error) {
	ctx, span := s.start(ctx, "FlakyTests")
	r0, err := s.Store.FlakyTests(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) DeleteTestResultsBefore(ctx context.Context, before time.Time) (int, error) {
	ctx, span := s.start(ctx, "DeleteTestResultsBefore")
	r0, err := s.Store.DeleteTestResultsBefore(ctx, before)
	end(span, err)
	return r0, err
}

func (s *traced) PutQuarantine(ctx context.Context, p store.PutQuarantineParams) (*store.Quarantine, error) {
	ctx, span := s.start(ctx, "PutQuarantine")
	r0, err := s.Store.PutQuarantine(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) ListQuarantines(ctx context.Context, p store.ListQuarantinesParams) ([]*store.Quarantine, error) {
	ctx, span := s.start(ctx, "ListQuarantines")
	r0, err := s.Store.ListQuarantines(ctx, p)
	end(span, err)
	return r0, err
}

func (s *traced) DeleteQuarantine(ctx context.Context, project string, test testreport.TestID) error {
	ctx, span := s.start(ctx, "DeleteQuarantine")
	err := s.Store.DeleteQuarantine(ctx, project, test)
	end(span, err)
	return err
}

func (s *traced) AddQuarantine(ctx context.Context, p store.PutQuarantineParams) (*store.Quarantine, bool, error) {
	ctx, span := s.start(ctx, "AddQuarantine")
	r0, r1, err := s.Store.AddQuarantine(ctx, p)
	end(span, err)
	return r0, r1, err
}

func (s *traced) PutQuarantineRule(ctx context.Context, r *store.QuarantineRule) error {
	ctx, span := s.start(ctx, "PutQuarantineRule")
	err := s.Store.PutQuarantineRule(ctx, r)
	end(span, err)
	return err
}

func (s *traced) GetQuarantineRule(ctx context.Context, project string) (*store.QuarantineRule, error) {
	ctx, span := s.start(ctx, "GetQuarantineRule")
	r0, err := s.Store.GetQuarantineRule(ctx, project)
	end(span, err)
	return r0, err
}

func (s *traced) DeleteQuarantineRule(ctx context.Context, project string) error {
	ctx, span := s.start(ctx, "DeleteQuarantineRule")
	err := s.Store.DeleteQuarantineRule(ctx, project)
	end(span, err)
	return err
}
