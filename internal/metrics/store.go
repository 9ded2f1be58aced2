package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
)

// Store operations, the op label of the store metrics: one per store method that does
// I/O.
const (
	opCreateRun = iota
	opGetRun
	opListRuns
	opGetJob
	opListJobs
	opListSteps
	opCancelRun
	opCancelJob
	opRetryRun
	opRetryJob
	opClaim
	opStartJob
	opLeaseAttempt
	opHeartbeat
	opUpdateStep
	opCompleteJob
	opReapExpiredLeases
	opPromoteRetries
	opRevokeTimedOut
	opUpsertWorker
	opTouchWorker
	opListWorkers
	opPutArtifact
	opMarkArtifactStored
	opGetArtifact
	opListArtifacts
	opListRunArtifacts
	opDeleteExpiredArtifacts
	opBlobInUse
	opAddBlobOwner
	opBlobOwned
	opDeleteBlobOwners
	opAppendLogChunk
	opLastLogSeq
	opListLogChunks
	opReplaceLogChunks
	opDeleteLogChunksBefore
	opEnqueueOutbox
	opClaimOutbox
	opMarkDelivered
	opPublish
	opQueueStats
	opCreateToken
	opLookupToken
	opCancelRequested
	opConcurrencyHolders
	opListJobsChanged
	opAppendAudit
	opCreateFailedRun
	opCreateProject
	opCreateWebhook
	opCreateWorkflow
	opDecideJob
	opDeleteCaches
	opDeleteEnvironment
	opDeleteMember
	opDeleteProject
	opDeleteSecret
	opDeleteWebhook
	opDeleteWorkflow
	opEvictCaches
	opExpireApprovals
	opFailOutbox
	opFindCache
	opGetDelivery
	opGetEnvironment
	opGetOutbox
	opGetProjectByName
	opGetSecret
	opGetWebhook
	opGetWorkflow
	opListApprovals
	opListAudit
	opListCaches
	opListEnvironments
	opListMembers
	opListOutbox
	opListProjects
	opListSecrets
	opListTokens
	opListWebhooks
	opListWorkflows
	opMemberships
	opNeedsOf
	opProjectLoad
	opPutCache
	opPutEnvironment
	opPutMember
	opPutSecret
	opRecordDelivery
	opRedeliverOutbox
	opReleaseClaims
	opRevokeToken
	opRewrapSecret
	opScheduleTicks
	opSealWebhookSecret
	opSealWebhookSubscriptionSecret
	opSealedSecrets
	opSecretsForForks
	opSetSecretsForForks
	opSkipTick
	opTouchToken
	opUpdateProject
	opUpdateWorkflow
	opClaimHookEvent
	opAddAnnotations
	opListAnnotations
	opPutVariable
	opGetVariable
	opListVariables
	opDeleteVariable
	opPutSummary
	opListSummaries
	opDeleteSummariesBefore
	opCountRuns
	opDigestRuns
	opRerun
	opListJobAttempts
	opListWaitingApproval
	opGetRunByNumber
	opSupersedeOutbox
	opAddTestResults
	opListTestResults
	opCountTestResults
	opTestHistory
	opTestEvidence
	opFlakyTests
	opDeleteTestResultsBefore
	opPutQuarantine
	opListQuarantines
	opDeleteQuarantine
	opAddQuarantine
	opPutQuarantineRule
	opGetQuarantineRule
	opDeleteQuarantineRule
	opSetJobName
	opSetWorkflowRunListeners
	opListWorkflowRunListeners
	opRunDefinition
	numOps
)

var opNames = [numOps]string{
	"CreateRun", "GetRun", "ListRuns", "GetJob", "ListJobs", "ListSteps", "CancelRun", "CancelJob", "RetryRun", "RetryJob",
	"Claim", "StartJob", "LeaseAttempt", "Heartbeat", "UpdateStep", "CompleteJob",
	"ReapExpiredLeases", "PromoteRetries", "RevokeTimedOut",
	"UpsertWorker", "TouchWorker", "ListWorkers",
	"PutArtifact", "MarkArtifactStored", "GetArtifact", "ListArtifacts", "ListRunArtifacts", "DeleteExpiredArtifacts", "BlobInUse",
	"AddBlobOwner", "BlobOwned", "DeleteBlobOwners",
	"AppendLogChunk", "LastLogSeq", "ListLogChunks", "ReplaceLogChunks", "DeleteLogChunksBefore",
	"EnqueueOutbox", "ClaimOutbox", "MarkDelivered", "Publish", "QueueStats", "CreateToken", "LookupToken", "CancelRequested",
	"ConcurrencyHolders", "ListJobsChanged",
	"AppendAudit", "CreateFailedRun", "CreateProject", "CreateWebhook", "CreateWorkflow", "DecideJob",
	"DeleteCaches", "DeleteEnvironment", "DeleteMember", "DeleteProject", "DeleteSecret", "DeleteWebhook",
	"DeleteWorkflow", "EvictCaches", "ExpireApprovals", "FailOutbox", "FindCache", "GetDelivery",
	"GetEnvironment", "GetOutbox", "GetProjectByName", "GetSecret", "GetWebhook", "GetWorkflow",
	"ListApprovals", "ListAudit", "ListCaches", "ListEnvironments", "ListMembers", "ListOutbox", "ListProjects",
	"ListSecrets", "ListTokens", "ListWebhooks", "ListWorkflows", "Memberships", "NeedsOf", "ProjectLoad",
	"PutCache", "PutEnvironment", "PutMember", "PutSecret", "RecordDelivery", "RedeliverOutbox",
	"ReleaseClaims", "RevokeToken", "RewrapSecret", "ScheduleTicks", "SealWebhookSecret",
	"SealWebhookSubscriptionSecret", "SealedSecrets", "SecretsForForks", "SetSecretsForForks", "SkipTick",
	"TouchToken", "UpdateProject", "UpdateWorkflow", "ClaimHookEvent",
	"AddAnnotations", "ListAnnotations",
	"PutVariable", "GetVariable", "ListVariables", "DeleteVariable",
	"PutSummary", "ListSummaries", "DeleteSummariesBefore",
	"CountRuns", "DigestRuns",
	"Rerun", "ListJobAttempts", "ListWaitingApproval",
	"GetRunByNumber",
	"SupersedeOutbox",
	"AddTestResults", "ListTestResults", "CountTestResults", "TestHistory", "TestEvidence", "FlakyTests", "DeleteTestResultsBefore",
	"PutQuarantine", "ListQuarantines", "DeleteQuarantine", "AddQuarantine",
	"PutQuarantineRule", "GetQuarantineRule", "DeleteQuarantineRule",
	"SetJobName",
	"SetWorkflowRunListeners", "ListWorkflowRunListeners",
	"RunDefinition",
}

// instrumented is a store.Store that times every call of the store it wraps. The
// embedded interface supplies the calls that do no I/O (the wake-up channels, Close).
type instrumented struct {
	store.Store
	m   *Coordinator
	dur [numOps]prometheus.Observer
}

// InstrumentStore returns st timed into m's store metrics: every method that does I/O
// observes gantry_store_operation_duration_seconds{op} and, when it fails,
// gantry_store_operation_errors_total{op,kind}. A store already instrumented for m is
// returned as it is.
func InstrumentStore(st store.Store, m *Coordinator) store.Store {
	if in, ok := st.(*instrumented); ok && in.m == m {
		return st
	}
	in := &instrumented{Store: st, m: m}
	for i, name := range opNames {
		in.dur[i] = m.storeDuration.WithLabelValues(name)
	}
	return in
}

// errKind sorts a store error into the errors metric's kind label.
func errKind(err error) string {
	switch {
	case errors.Is(err, store.ErrNotFound):
		return "not_found"
	case errors.Is(err, store.ErrLeaseLost):
		return "lease_lost"
	case errors.Is(err, store.ErrConflict):
		return "conflict"
	case errors.Is(err, store.ErrInvalid):
		return "invalid"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "other"
}

// done observes a call of op that started at start.
func (s *instrumented) done(op int, start time.Time, err error) {
	s.dur[op].Observe(time.Since(start).Seconds())
	if err != nil {
		s.m.storeErrors.WithLabelValues(opNames[op], errKind(err)).Inc()
	}
}

func (s *instrumented) CreateRun(ctx context.Context, p store.CreateRunParams) (*store.Run, []*store.Job, bool, error) {
	t := time.Now()
	run, jobs, created, err := s.Store.CreateRun(ctx, p)
	s.done(opCreateRun, t, err)
	return run, jobs, created, err
}

func (s *instrumented) GetRun(ctx context.Context, id uuid.UUID) (*store.Run, error) {
	t := time.Now()
	r, err := s.Store.GetRun(ctx, id)
	s.done(opGetRun, t, err)
	return r, err
}

func (s *instrumented) RunDefinition(ctx context.Context, id uuid.UUID) ([]byte, error) {
	t := time.Now()
	def, err := s.Store.RunDefinition(ctx, id)
	s.done(opRunDefinition, t, err)
	return def, err
}

func (s *instrumented) GetRunByNumber(ctx context.Context, project string, number int) (*store.Run, error) {
	t := time.Now()
	r, err := s.Store.GetRunByNumber(ctx, project, number)
	s.done(opGetRunByNumber, t, err)
	return r, err
}

func (s *instrumented) ListRuns(ctx context.Context, p store.ListRunsParams) ([]*store.Run, error) {
	t := time.Now()
	r, err := s.Store.ListRuns(ctx, p)
	s.done(opListRuns, t, err)
	return r, err
}

func (s *instrumented) CountRuns(ctx context.Context, p store.ListRunsParams, upTo int) (int, error) {
	t := time.Now()
	n, err := s.Store.CountRuns(ctx, p, upTo)
	s.done(opCountRuns, t, err)
	return n, err
}

func (s *instrumented) DigestRuns(ctx context.Context, ids []uuid.UUID) (map[uuid.UUID]*store.RunDigest, error) {
	t := time.Now()
	d, err := s.Store.DigestRuns(ctx, ids)
	s.done(opDigestRuns, t, err)
	return d, err
}

func (s *instrumented) GetJob(ctx context.Context, id uuid.UUID) (*store.Job, error) {
	t := time.Now()
	j, err := s.Store.GetJob(ctx, id)
	s.done(opGetJob, t, err)
	return j, err
}

func (s *instrumented) ListJobs(ctx context.Context, runID uuid.UUID) ([]*store.Job, error) {
	t := time.Now()
	j, err := s.Store.ListJobs(ctx, runID)
	s.done(opListJobs, t, err)
	return j, err
}

func (s *instrumented) ListJobsChanged(ctx context.Context, runID uuid.UUID, since int64) ([]*store.Job, error) {
	t := time.Now()
	j, err := s.Store.ListJobsChanged(ctx, runID, since)
	s.done(opListJobsChanged, t, err)
	return j, err
}

func (s *instrumented) ListSteps(ctx context.Context, jobID uuid.UUID) ([]*store.Step, error) {
	t := time.Now()
	st, err := s.Store.ListSteps(ctx, jobID)
	s.done(opListSteps, t, err)
	return st, err
}

func (s *instrumented) CancelRun(ctx context.Context, id uuid.UUID) error {
	t := time.Now()
	err := s.Store.CancelRun(ctx, id)
	s.done(opCancelRun, t, err)
	return err
}

func (s *instrumented) CancelJob(ctx context.Context, id uuid.UUID) error {
	t := time.Now()
	err := s.Store.CancelJob(ctx, id)
	s.done(opCancelJob, t, err)
	return err
}

func (s *instrumented) RetryRun(ctx context.Context, id uuid.UUID) error {
	t := time.Now()
	err := s.Store.RetryRun(ctx, id)
	s.done(opRetryRun, t, err)
	return err
}

func (s *instrumented) RetryJob(ctx context.Context, id uuid.UUID) error {
	t := time.Now()
	err := s.Store.RetryJob(ctx, id)
	s.done(opRetryJob, t, err)
	return err
}

func (s *instrumented) Rerun(ctx context.Context, p store.RerunParams) ([]uuid.UUID, error) {
	t := time.Now()
	r0, err := s.Store.Rerun(ctx, p)
	s.done(opRerun, t, err)
	return r0, err
}

func (s *instrumented) ListJobAttempts(ctx context.Context, jobID uuid.UUID) ([]*store.JobAttempt, error) {
	t := time.Now()
	r0, err := s.Store.ListJobAttempts(ctx, jobID)
	s.done(opListJobAttempts, t, err)
	return r0, err
}

func (s *instrumented) ListWaitingApproval(ctx context.Context, p store.ListWaitingApprovalParams) ([]*store.Job, error) {
	t := time.Now()
	r0, err := s.Store.ListWaitingApproval(ctx, p)
	s.done(opListWaitingApproval, t, err)
	return r0, err
}

func (s *instrumented) Claim(ctx context.Context, p store.ClaimParams) ([]*store.Claim, error) {
	t := time.Now()
	c, err := s.Store.Claim(ctx, p)
	s.done(opClaim, t, err)
	return c, err
}

func (s *instrumented) StartJob(ctx context.Context, l store.LeaseRef) error {
	t := time.Now()
	err := s.Store.StartJob(ctx, l)
	s.done(opStartJob, t, err)
	return err
}

func (s *instrumented) SetJobName(ctx context.Context, l store.LeaseRef, name string) error {
	t := time.Now()
	err := s.Store.SetJobName(ctx, l, name)
	s.done(opSetJobName, t, err)
	return err
}

func (s *instrumented) LeaseAttempt(ctx context.Context, l store.LeaseRef) (int, error) {
	t := time.Now()
	n, err := s.Store.LeaseAttempt(ctx, l)
	s.done(opLeaseAttempt, t, err)
	return n, err
}

func (s *instrumented) Heartbeat(ctx context.Context, p store.HeartbeatParams) (store.HeartbeatResult, error) {
	t := time.Now()
	r, err := s.Store.Heartbeat(ctx, p)
	s.done(opHeartbeat, t, err)
	return r, err
}

func (s *instrumented) UpdateStep(ctx context.Context, p store.UpdateStepParams) error {
	t := time.Now()
	err := s.Store.UpdateStep(ctx, p)
	s.done(opUpdateStep, t, err)
	return err
}

func (s *instrumented) CompleteJob(ctx context.Context, p store.CompleteParams) (*store.Job, error) {
	t := time.Now()
	j, err := s.Store.CompleteJob(ctx, p)
	s.done(opCompleteJob, t, err)
	return j, err
}

func (s *instrumented) ReapExpiredLeases(ctx context.Context) (int, error) {
	t := time.Now()
	n, err := s.Store.ReapExpiredLeases(ctx)
	s.done(opReapExpiredLeases, t, err)
	return n, err
}

func (s *instrumented) PromoteRetries(ctx context.Context) (int, error) {
	t := time.Now()
	n, err := s.Store.PromoteRetries(ctx)
	s.done(opPromoteRetries, t, err)
	return n, err
}

func (s *instrumented) RevokeTimedOut(ctx context.Context) (int, error) {
	t := time.Now()
	n, err := s.Store.RevokeTimedOut(ctx)
	s.done(opRevokeTimedOut, t, err)
	return n, err
}

func (s *instrumented) UpsertWorker(ctx context.Context, w *store.Worker) error {
	t := time.Now()
	err := s.Store.UpsertWorker(ctx, w)
	s.done(opUpsertWorker, t, err)
	return err
}

func (s *instrumented) TouchWorker(ctx context.Context, id string, state store.WorkerState) error {
	t := time.Now()
	err := s.Store.TouchWorker(ctx, id, state)
	s.done(opTouchWorker, t, err)
	return err
}

func (s *instrumented) ListWorkers(ctx context.Context) ([]*store.Worker, error) {
	t := time.Now()
	w, err := s.Store.ListWorkers(ctx)
	s.done(opListWorkers, t, err)
	return w, err
}

func (s *instrumented) PutArtifact(ctx context.Context, l store.LeaseRef, a *store.Artifact) (*store.Artifact, error) {
	t := time.Now()
	out, err := s.Store.PutArtifact(ctx, l, a)
	s.done(opPutArtifact, t, err)
	return out, err
}

func (s *instrumented) MarkArtifactStored(ctx context.Context, id uuid.UUID) error {
	t := time.Now()
	err := s.Store.MarkArtifactStored(ctx, id)
	s.done(opMarkArtifactStored, t, err)
	return err
}

func (s *instrumented) GetArtifact(ctx context.Context, id uuid.UUID) (*store.Artifact, error) {
	t := time.Now()
	a, err := s.Store.GetArtifact(ctx, id)
	s.done(opGetArtifact, t, err)
	return a, err
}

func (s *instrumented) ListArtifacts(ctx context.Context, jobID uuid.UUID) ([]*store.Artifact, error) {
	t := time.Now()
	a, err := s.Store.ListArtifacts(ctx, jobID)
	s.done(opListArtifacts, t, err)
	return a, err
}

func (s *instrumented) ListRunArtifacts(ctx context.Context, runID uuid.UUID) ([]*store.Artifact, error) {
	t := time.Now()
	a, err := s.Store.ListRunArtifacts(ctx, runID)
	s.done(opListRunArtifacts, t, err)
	return a, err
}

func (s *instrumented) DeleteExpiredArtifacts(ctx context.Context, before time.Time) (int, error) {
	t := time.Now()
	n, err := s.Store.DeleteExpiredArtifacts(ctx, before)
	s.done(opDeleteExpiredArtifacts, t, err)
	return n, err
}

func (s *instrumented) BlobInUse(ctx context.Context, sha256 string) (bool, error) {
	t := time.Now()
	ok, err := s.Store.BlobInUse(ctx, sha256)
	s.done(opBlobInUse, t, err)
	return ok, err
}

func (s *instrumented) AddBlobOwner(ctx context.Context, projectID uuid.UUID, sha256 string) error {
	t := time.Now()
	err := s.Store.AddBlobOwner(ctx, projectID, sha256)
	s.done(opAddBlobOwner, t, err)
	return err
}

func (s *instrumented) BlobOwned(ctx context.Context, projectID uuid.UUID, sha256 string) (bool, error) {
	t := time.Now()
	ok, err := s.Store.BlobOwned(ctx, projectID, sha256)
	s.done(opBlobOwned, t, err)
	return ok, err
}

func (s *instrumented) DeleteBlobOwners(ctx context.Context, sha256 string) error {
	t := time.Now()
	err := s.Store.DeleteBlobOwners(ctx, sha256)
	s.done(opDeleteBlobOwners, t, err)
	return err
}

func (s *instrumented) AppendLogChunk(ctx context.Context, c *store.LogChunk) error {
	t := time.Now()
	err := s.Store.AppendLogChunk(ctx, c)
	s.done(opAppendLogChunk, t, err)
	return err
}

func (s *instrumented) LastLogSeq(ctx context.Context, jobID uuid.UUID, attempt int) (int64, int64, error) {
	t := time.Now()
	seq, bytes, err := s.Store.LastLogSeq(ctx, jobID, attempt)
	s.done(opLastLogSeq, t, err)
	return seq, bytes, err
}

func (s *instrumented) ListLogChunks(ctx context.Context, jobID uuid.UUID, attempt int, afterSeq int64, max int) ([]*store.LogChunk, error) {
	t := time.Now()
	cs, err := s.Store.ListLogChunks(ctx, jobID, attempt, afterSeq, max)
	s.done(opListLogChunks, t, err)
	return cs, err
}

func (s *instrumented) ReplaceLogChunks(ctx context.Context, jobID uuid.UUID, attempt int, cs []*store.LogChunk) error {
	t := time.Now()
	err := s.Store.ReplaceLogChunks(ctx, jobID, attempt, cs)
	s.done(opReplaceLogChunks, t, err)
	return err
}

func (s *instrumented) DeleteLogChunksBefore(ctx context.Context, before time.Time) (int, error) {
	t := time.Now()
	n, err := s.Store.DeleteLogChunksBefore(ctx, before)
	s.done(opDeleteLogChunksBefore, t, err)
	return n, err
}

func (s *instrumented) EnqueueOutbox(ctx context.Context, topic string, payload []byte) error {
	t := time.Now()
	err := s.Store.EnqueueOutbox(ctx, topic, payload)
	s.done(opEnqueueOutbox, t, err)
	return err
}

func (s *instrumented) ClaimOutbox(ctx context.Context, max int, retryIn time.Duration) ([]*store.OutboxMessage, error) {
	t := time.Now()
	ms, err := s.Store.ClaimOutbox(ctx, max, retryIn)
	s.done(opClaimOutbox, t, err)
	return ms, err
}

func (s *instrumented) MarkDelivered(ctx context.Context, id uuid.UUID) error {
	t := time.Now()
	err := s.Store.MarkDelivered(ctx, id)
	s.done(opMarkDelivered, t, err)
	return err
}

func (s *instrumented) SupersedeOutbox(ctx context.Context, id uuid.UUID) error {
	t := time.Now()
	err := s.Store.SupersedeOutbox(ctx, id)
	s.done(opSupersedeOutbox, t, err)
	return err
}

func (s *instrumented) Publish(ctx context.Context, topic, payload string) error {
	t := time.Now()
	err := s.Store.Publish(ctx, topic, payload)
	s.done(opPublish, t, err)
	return err
}

func (s *instrumented) QueueStats(ctx context.Context) (*store.QueueStats, error) {
	t := time.Now()
	q, err := s.Store.QueueStats(ctx)
	s.done(opQueueStats, t, err)
	return q, err
}

func (s *instrumented) ConcurrencyHolders(ctx context.Context, projectID uuid.UUID, groups []string) (map[string]*store.Job, error) {
	t := time.Now()
	m, err := s.Store.ConcurrencyHolders(ctx, projectID, groups)
	s.done(opConcurrencyHolders, t, err)
	return m, err
}

func (s *instrumented) CreateToken(ctx context.Context, tk *store.Token) error {
	t := time.Now()
	err := s.Store.CreateToken(ctx, tk)
	s.done(opCreateToken, t, err)
	return err
}

func (s *instrumented) LookupToken(ctx context.Context, hash string) (*store.Token, error) {
	t := time.Now()
	tk, err := s.Store.LookupToken(ctx, hash)
	s.done(opLookupToken, t, err)
	return tk, err
}

func (s *instrumented) CancelRequested(ctx context.Context, workerID string) ([]uuid.UUID, error) {
	t := time.Now()
	ids, err := s.Store.CancelRequested(ctx, workerID)
	s.done(opCancelRequested, t, err)
	return ids, err
}

// The calls below are the rarer ones (projects, secrets, webhooks, workflows, members,
// caches, approvals, audit, outbox administration), timed the same way.

func (s *instrumented) AppendAudit(ctx context.Context, e *store.AuditEntry) error {
	t := time.Now()
	err := s.Store.AppendAudit(ctx, e)
	s.done(opAppendAudit, t, err)
	return err
}

func (s *instrumented) CreateFailedRun(ctx context.Context, p store.CreateFailedRunParams) (*store.Run, bool, error) {
	t := time.Now()
	r0, r1, err := s.Store.CreateFailedRun(ctx, p)
	s.done(opCreateFailedRun, t, err)
	return r0, r1, err
}

func (s *instrumented) CreateProject(ctx context.Context, p *store.Project) error {
	t := time.Now()
	err := s.Store.CreateProject(ctx, p)
	s.done(opCreateProject, t, err)
	return err
}

func (s *instrumented) CreateWebhook(ctx context.Context, w *store.Webhook) error {
	t := time.Now()
	err := s.Store.CreateWebhook(ctx, w)
	s.done(opCreateWebhook, t, err)
	return err
}

func (s *instrumented) CreateWorkflow(ctx context.Context, w *store.Workflow) error {
	t := time.Now()
	err := s.Store.CreateWorkflow(ctx, w)
	s.done(opCreateWorkflow, t, err)
	return err
}

func (s *instrumented) DecideJob(ctx context.Context, p store.DecideJobParams) (*store.Job, error) {
	t := time.Now()
	r0, err := s.Store.DecideJob(ctx, p)
	s.done(opDecideJob, t, err)
	return r0, err
}

func (s *instrumented) DeleteCaches(ctx context.Context, p store.DeleteCachesParams) (int, error) {
	t := time.Now()
	r0, err := s.Store.DeleteCaches(ctx, p)
	s.done(opDeleteCaches, t, err)
	return r0, err
}

func (s *instrumented) DeleteEnvironment(ctx context.Context, projectID uuid.UUID, name string) error {
	t := time.Now()
	err := s.Store.DeleteEnvironment(ctx, projectID, name)
	s.done(opDeleteEnvironment, t, err)
	return err
}

func (s *instrumented) DeleteMember(ctx context.Context, projectID uuid.UUID, principal string) error {
	t := time.Now()
	err := s.Store.DeleteMember(ctx, projectID, principal)
	s.done(opDeleteMember, t, err)
	return err
}

func (s *instrumented) DeleteProject(ctx context.Context, name string) error {
	t := time.Now()
	err := s.Store.DeleteProject(ctx, name)
	s.done(opDeleteProject, t, err)
	return err
}

func (s *instrumented) DeleteSecret(ctx context.Context, k store.SecretKey) error {
	t := time.Now()
	err := s.Store.DeleteSecret(ctx, k)
	s.done(opDeleteSecret, t, err)
	return err
}

func (s *instrumented) DeleteWebhook(ctx context.Context, projectID, id uuid.UUID) error {
	t := time.Now()
	err := s.Store.DeleteWebhook(ctx, projectID, id)
	s.done(opDeleteWebhook, t, err)
	return err
}

func (s *instrumented) DeleteWorkflow(ctx context.Context, id uuid.UUID) error {
	t := time.Now()
	err := s.Store.DeleteWorkflow(ctx, id)
	s.done(opDeleteWorkflow, t, err)
	return err
}

func (s *instrumented) EvictCaches(ctx context.Context, p store.EvictCachesParams) (int, error) {
	t := time.Now()
	r0, err := s.Store.EvictCaches(ctx, p)
	s.done(opEvictCaches, t, err)
	return r0, err
}

func (s *instrumented) ExpireApprovals(ctx context.Context) (int, error) {
	t := time.Now()
	r0, err := s.Store.ExpireApprovals(ctx)
	s.done(opExpireApprovals, t, err)
	return r0, err
}

func (s *instrumented) FailOutbox(ctx context.Context, p store.FailOutboxParams) error {
	t := time.Now()
	err := s.Store.FailOutbox(ctx, p)
	s.done(opFailOutbox, t, err)
	return err
}

func (s *instrumented) FindCache(ctx context.Context, p store.FindCacheParams) (*store.CacheEntry, error) {
	t := time.Now()
	r0, err := s.Store.FindCache(ctx, p)
	s.done(opFindCache, t, err)
	return r0, err
}

func (s *instrumented) GetDelivery(ctx context.Context, projectID uuid.UUID, deliveryID string) (*store.Delivery, error) {
	t := time.Now()
	r0, err := s.Store.GetDelivery(ctx, projectID, deliveryID)
	s.done(opGetDelivery, t, err)
	return r0, err
}

func (s *instrumented) GetEnvironment(ctx context.Context, projectID uuid.UUID, name string) (*store.Environment, error) {
	t := time.Now()
	r0, err := s.Store.GetEnvironment(ctx, projectID, name)
	s.done(opGetEnvironment, t, err)
	return r0, err
}

func (s *instrumented) GetOutbox(ctx context.Context, id uuid.UUID) (*store.OutboxMessage, error) {
	t := time.Now()
	r0, err := s.Store.GetOutbox(ctx, id)
	s.done(opGetOutbox, t, err)
	return r0, err
}

func (s *instrumented) GetProjectByName(ctx context.Context, name string) (*store.Project, error) {
	t := time.Now()
	r0, err := s.Store.GetProjectByName(ctx, name)
	s.done(opGetProjectByName, t, err)
	return r0, err
}

func (s *instrumented) GetSecret(ctx context.Context, k store.SecretKey) (*store.Secret, error) {
	t := time.Now()
	r0, err := s.Store.GetSecret(ctx, k)
	s.done(opGetSecret, t, err)
	return r0, err
}

func (s *instrumented) GetWebhook(ctx context.Context, id uuid.UUID) (*store.Webhook, error) {
	t := time.Now()
	r0, err := s.Store.GetWebhook(ctx, id)
	s.done(opGetWebhook, t, err)
	return r0, err
}

func (s *instrumented) GetWorkflow(ctx context.Context, id uuid.UUID) (*store.Workflow, error) {
	t := time.Now()
	r0, err := s.Store.GetWorkflow(ctx, id)
	s.done(opGetWorkflow, t, err)
	return r0, err
}

func (s *instrumented) ListApprovals(ctx context.Context, jobID uuid.UUID) ([]*store.Approval, error) {
	t := time.Now()
	r0, err := s.Store.ListApprovals(ctx, jobID)
	s.done(opListApprovals, t, err)
	return r0, err
}

func (s *instrumented) ListAudit(ctx context.Context, p store.ListAuditParams) ([]*store.AuditEntry, error) {
	t := time.Now()
	r0, err := s.Store.ListAudit(ctx, p)
	s.done(opListAudit, t, err)
	return r0, err
}

func (s *instrumented) ListCaches(ctx context.Context, projectID uuid.UUID) ([]*store.CacheEntry, error) {
	t := time.Now()
	r0, err := s.Store.ListCaches(ctx, projectID)
	s.done(opListCaches, t, err)
	return r0, err
}

func (s *instrumented) ListEnvironments(ctx context.Context, projectID uuid.UUID) ([]*store.Environment, error) {
	t := time.Now()
	r0, err := s.Store.ListEnvironments(ctx, projectID)
	s.done(opListEnvironments, t, err)
	return r0, err
}

func (s *instrumented) ListMembers(ctx context.Context, projectID uuid.UUID) ([]*store.Member, error) {
	t := time.Now()
	r0, err := s.Store.ListMembers(ctx, projectID)
	s.done(opListMembers, t, err)
	return r0, err
}

func (s *instrumented) ListOutbox(ctx context.Context, p store.ListOutboxParams) ([]*store.OutboxMessage, error) {
	t := time.Now()
	r0, err := s.Store.ListOutbox(ctx, p)
	s.done(opListOutbox, t, err)
	return r0, err
}

func (s *instrumented) ListProjects(ctx context.Context) ([]*store.Project, error) {
	t := time.Now()
	r0, err := s.Store.ListProjects(ctx)
	s.done(opListProjects, t, err)
	return r0, err
}

func (s *instrumented) ListSecrets(ctx context.Context, project string) ([]*store.Secret, error) {
	t := time.Now()
	r0, err := s.Store.ListSecrets(ctx, project)
	s.done(opListSecrets, t, err)
	return r0, err
}

func (s *instrumented) ListTokens(ctx context.Context, p store.ListTokensParams) ([]*store.Token, error) {
	t := time.Now()
	r0, err := s.Store.ListTokens(ctx, p)
	s.done(opListTokens, t, err)
	return r0, err
}

func (s *instrumented) ListWebhooks(ctx context.Context, projectID uuid.UUID) ([]*store.Webhook, error) {
	t := time.Now()
	r0, err := s.Store.ListWebhooks(ctx, projectID)
	s.done(opListWebhooks, t, err)
	return r0, err
}

func (s *instrumented) ListWorkflows(ctx context.Context, p store.ListWorkflowsParams) ([]*store.Workflow, error) {
	t := time.Now()
	r0, err := s.Store.ListWorkflows(ctx, p)
	s.done(opListWorkflows, t, err)
	return r0, err
}

func (s *instrumented) Memberships(ctx context.Context, principal string) ([]*store.Member, error) {
	t := time.Now()
	r0, err := s.Store.Memberships(ctx, principal)
	s.done(opMemberships, t, err)
	return r0, err
}

func (s *instrumented) NeedsOf(ctx context.Context, jobID uuid.UUID) (map[string]store.NeedResult, error) {
	t := time.Now()
	r0, err := s.Store.NeedsOf(ctx, jobID)
	s.done(opNeedsOf, t, err)
	return r0, err
}

func (s *instrumented) ProjectLoad(ctx context.Context, projectID uuid.UUID) (*store.ProjectLoad, error) {
	t := time.Now()
	r0, err := s.Store.ProjectLoad(ctx, projectID)
	s.done(opProjectLoad, t, err)
	return r0, err
}

func (s *instrumented) PutCache(ctx context.Context, c *store.CacheEntry) (*store.CacheEntry, bool, error) {
	t := time.Now()
	r0, r1, err := s.Store.PutCache(ctx, c)
	s.done(opPutCache, t, err)
	return r0, r1, err
}

func (s *instrumented) PutEnvironment(ctx context.Context, e *store.Environment) error {
	t := time.Now()
	err := s.Store.PutEnvironment(ctx, e)
	s.done(opPutEnvironment, t, err)
	return err
}

func (s *instrumented) PutMember(ctx context.Context, m *store.Member) error {
	t := time.Now()
	err := s.Store.PutMember(ctx, m)
	s.done(opPutMember, t, err)
	return err
}

func (s *instrumented) PutSecret(ctx context.Context, sc *store.Secret) (bool, error) {
	t := time.Now()
	r0, err := s.Store.PutSecret(ctx, sc)
	s.done(opPutSecret, t, err)
	return r0, err
}

func (s *instrumented) AddAnnotations(ctx context.Context, p store.AddAnnotationsParams) (int, error) {
	t := time.Now()
	r0, err := s.Store.AddAnnotations(ctx, p)
	s.done(opAddAnnotations, t, err)
	return r0, err
}

func (s *instrumented) ListAnnotations(ctx context.Context, p store.ListAnnotationsParams) ([]*store.Annotation, error) {
	t := time.Now()
	r0, err := s.Store.ListAnnotations(ctx, p)
	s.done(opListAnnotations, t, err)
	return r0, err
}

func (s *instrumented) PutSummary(ctx context.Context, p store.PutSummaryParams) error {
	t := time.Now()
	err := s.Store.PutSummary(ctx, p)
	s.done(opPutSummary, t, err)
	return err
}

func (s *instrumented) ListSummaries(ctx context.Context, p store.ListSummariesParams) ([]*store.SummaryPart, error) {
	t := time.Now()
	r0, err := s.Store.ListSummaries(ctx, p)
	s.done(opListSummaries, t, err)
	return r0, err
}

func (s *instrumented) DeleteSummariesBefore(ctx context.Context, before time.Time) (int, error) {
	t := time.Now()
	r0, err := s.Store.DeleteSummariesBefore(ctx, before)
	s.done(opDeleteSummariesBefore, t, err)
	return r0, err
}

func (s *instrumented) ClaimHookEvent(ctx context.Context, p store.ClaimHookEventParams) (*store.HookEventClaim, error) {
	t := time.Now()
	r0, err := s.Store.ClaimHookEvent(ctx, p)
	s.done(opClaimHookEvent, t, err)
	return r0, err
}

func (s *instrumented) RecordDelivery(ctx context.Context, d *store.Delivery) (*store.Delivery, bool, error) {
	t := time.Now()
	r0, r1, err := s.Store.RecordDelivery(ctx, d)
	s.done(opRecordDelivery, t, err)
	return r0, r1, err
}

func (s *instrumented) RedeliverOutbox(ctx context.Context, id uuid.UUID) error {
	t := time.Now()
	err := s.Store.RedeliverOutbox(ctx, id)
	s.done(opRedeliverOutbox, t, err)
	return err
}

func (s *instrumented) ReleaseClaims(ctx context.Context, leases []store.LeaseRef) (int, error) {
	t := time.Now()
	r0, err := s.Store.ReleaseClaims(ctx, leases)
	s.done(opReleaseClaims, t, err)
	return r0, err
}

func (s *instrumented) RevokeToken(ctx context.Context, id uuid.UUID) error {
	t := time.Now()
	err := s.Store.RevokeToken(ctx, id)
	s.done(opRevokeToken, t, err)
	return err
}

func (s *instrumented) RewrapSecret(ctx context.Context, k store.SecretKey, oldKeyID string, oldWrapped []byte, newKeyID string, newWrapped []byte) error {
	t := time.Now()
	err := s.Store.RewrapSecret(ctx, k, oldKeyID, oldWrapped, newKeyID, newWrapped)
	s.done(opRewrapSecret, t, err)
	return err
}

func (s *instrumented) ScheduleTicks(ctx context.Context, projectID uuid.UUID) (map[string]time.Time, error) {
	t := time.Now()
	r0, err := s.Store.ScheduleTicks(ctx, projectID)
	s.done(opScheduleTicks, t, err)
	return r0, err
}

func (s *instrumented) SealWebhookSecret(ctx context.Context, p store.SealWebhookSecretParams) error {
	t := time.Now()
	err := s.Store.SealWebhookSecret(ctx, p)
	s.done(opSealWebhookSecret, t, err)
	return err
}

func (s *instrumented) SealWebhookSubscriptionSecret(ctx context.Context, p store.SealWebhookSubscriptionSecretParams) error {
	t := time.Now()
	err := s.Store.SealWebhookSubscriptionSecret(ctx, p)
	s.done(opSealWebhookSubscriptionSecret, t, err)
	return err
}

func (s *instrumented) SealedSecrets(ctx context.Context, notKeyID string) ([]*store.Secret, error) {
	t := time.Now()
	r0, err := s.Store.SealedSecrets(ctx, notKeyID)
	s.done(opSealedSecrets, t, err)
	return r0, err
}

func (s *instrumented) SecretsForForks(ctx context.Context, project string) (bool, error) {
	t := time.Now()
	r0, err := s.Store.SecretsForForks(ctx, project)
	s.done(opSecretsForForks, t, err)
	return r0, err
}

func (s *instrumented) SetSecretsForForks(ctx context.Context, project string, allow bool) error {
	t := time.Now()
	err := s.Store.SetSecretsForForks(ctx, project, allow)
	s.done(opSetSecretsForForks, t, err)
	return err
}

func (s *instrumented) SetWorkflowRunListeners(ctx context.Context, p store.SetWorkflowRunListenersParams) error {
	t := time.Now()
	err := s.Store.SetWorkflowRunListeners(ctx, p)
	s.done(opSetWorkflowRunListeners, t, err)
	return err
}

func (s *instrumented) ListWorkflowRunListeners(ctx context.Context, projectID uuid.UUID, source string) ([]store.WorkflowRunListen, error) {
	t := time.Now()
	r0, err := s.Store.ListWorkflowRunListeners(ctx, projectID, source)
	s.done(opListWorkflowRunListeners, t, err)
	return r0, err
}

func (s *instrumented) SkipTick(ctx context.Context, projectID uuid.UUID, tick store.ScheduleTick) (bool, error) {
	t := time.Now()
	r0, err := s.Store.SkipTick(ctx, projectID, tick)
	s.done(opSkipTick, t, err)
	return r0, err
}

func (s *instrumented) TouchToken(ctx context.Context, id uuid.UUID, at time.Time) error {
	t := time.Now()
	err := s.Store.TouchToken(ctx, id, at)
	s.done(opTouchToken, t, err)
	return err
}

func (s *instrumented) UpdateProject(ctx context.Context, p *store.Project) error {
	t := time.Now()
	err := s.Store.UpdateProject(ctx, p)
	s.done(opUpdateProject, t, err)
	return err
}

func (s *instrumented) UpdateWorkflow(ctx context.Context, p store.UpdateWorkflowParams) (*store.Workflow, error) {
	t := time.Now()
	r0, err := s.Store.UpdateWorkflow(ctx, p)
	s.done(opUpdateWorkflow, t, err)
	return r0, err
}

func (s *instrumented) PutVariable(ctx context.Context, v *store.Variable) (bool, error) {
	t := time.Now()
	r0, err := s.Store.PutVariable(ctx, v)
	s.done(opPutVariable, t, err)
	return r0, err
}

func (s *instrumented) GetVariable(ctx context.Context, k store.VariableKey) (*store.Variable, error) {
	t := time.Now()
	r0, err := s.Store.GetVariable(ctx, k)
	s.done(opGetVariable, t, err)
	return r0, err
}

func (s *instrumented) ListVariables(ctx context.Context, project string) ([]*store.Variable, error) {
	t := time.Now()
	r0, err := s.Store.ListVariables(ctx, project)
	s.done(opListVariables, t, err)
	return r0, err
}

func (s *instrumented) DeleteVariable(ctx context.Context, k store.VariableKey) error {
	t := time.Now()
	err := s.Store.DeleteVariable(ctx, k)
	s.done(opDeleteVariable, t, err)
	return err
}

func (s *instrumented) AddTestResults(ctx context.Context, p store.AddTestResultsParams) (int, error) {
	t := time.Now()
	r0, err := s.Store.AddTestResults(ctx, p)
	s.done(opAddTestResults, t, err)
	return r0, err
}

func (s *instrumented) ListTestResults(ctx context.Context, p store.ListTestResultsParams) ([]*store.TestResult, error) {
	t := time.Now()
	r0, err := s.Store.ListTestResults(ctx, p)
	s.done(opListTestResults, t, err)
	return r0, err
}

func (s *instrumented) CountTestResults(ctx context.Context, p store.ListTestResultsParams) (map[testreport.Status]int, error) {
	t := time.Now()
	r0, err := s.Store.CountTestResults(ctx, p)
	s.done(opCountTestResults, t, err)
	return r0, err
}

func (s *instrumented) TestHistory(ctx context.Context, p store.TestHistoryParams) ([]*store.TestResult, error) {
	t := time.Now()
	r0, err := s.Store.TestHistory(ctx, p)
	s.done(opTestHistory, t, err)
	return r0, err
}

func (s *instrumented) TestEvidence(ctx context.Context, p store.TestEvidenceParams) (map[testreport.TestID]*store.TestEvidence, error) {
	t := time.Now()
	r0, err := s.Store.TestEvidence(ctx, p)
	s.done(opTestEvidence, t, err)
	return r0, err
}

func (s *instrumented) FlakyTests(ctx context.Context, p store.FlakyTestsParams) ([]*store.FlakyTest, error) {
	t := time.Now()
	r0, err := s.Store.FlakyTests(ctx, p)
	s.done(opFlakyTests, t, err)
	return r0, err
}

func (s *instrumented) DeleteTestResultsBefore(ctx context.Context, before time.Time) (int, error) {
	t := time.Now()
	r0, err := s.Store.DeleteTestResultsBefore(ctx, before)
	s.done(opDeleteTestResultsBefore, t, err)
	return r0, err
}

func (s *instrumented) PutQuarantine(ctx context.Context, p store.PutQuarantineParams) (*store.Quarantine, error) {
	t := time.Now()
	r0, err := s.Store.PutQuarantine(ctx, p)
	s.done(opPutQuarantine, t, err)
	return r0, err
}

func (s *instrumented) ListQuarantines(ctx context.Context, p store.ListQuarantinesParams) ([]*store.Quarantine, error) {
	t := time.Now()
	r0, err := s.Store.ListQuarantines(ctx, p)
	s.done(opListQuarantines, t, err)
	return r0, err
}

func (s *instrumented) DeleteQuarantine(ctx context.Context, project string, test testreport.TestID) error {
	t := time.Now()
	err := s.Store.DeleteQuarantine(ctx, project, test)
	s.done(opDeleteQuarantine, t, err)
	return err
}

func (s *instrumented) AddQuarantine(ctx context.Context, p store.PutQuarantineParams) (*store.Quarantine, bool, error) {
	t := time.Now()
	r0, r1, err := s.Store.AddQuarantine(ctx, p)
	s.done(opAddQuarantine, t, err)
	return r0, r1, err
}

func (s *instrumented) PutQuarantineRule(ctx context.Context, r *store.QuarantineRule) error {
	t := time.Now()
	err := s.Store.PutQuarantineRule(ctx, r)
	s.done(opPutQuarantineRule, t, err)
	return err
}

func (s *instrumented) GetQuarantineRule(ctx context.Context, project string) (*store.QuarantineRule, error) {
	t := time.Now()
	r0, err := s.Store.GetQuarantineRule(ctx, project)
	s.done(opGetQuarantineRule, t, err)
	return r0, err
}

func (s *instrumented) DeleteQuarantineRule(ctx context.Context, project string) error {
	t := time.Now()
	err := s.Store.DeleteQuarantineRule(ctx, project)
	s.done(opDeleteQuarantineRule, t, err)
	return err
}
