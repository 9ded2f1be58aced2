package metrics

import (
	"context"
	"errors"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gantry-ci/gantry/internal/store"
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
	numOps
)

var opNames = [numOps]string{
	"CreateRun", "GetRun", "ListRuns", "GetJob", "ListJobs", "ListSteps", "CancelRun", "CancelJob", "RetryRun", "RetryJob",
	"Claim", "StartJob", "LeaseAttempt", "Heartbeat", "UpdateStep", "CompleteJob",
	"ReapExpiredLeases", "PromoteRetries", "RevokeTimedOut",
	"UpsertWorker", "TouchWorker", "ListWorkers",
	"PutArtifact", "MarkArtifactStored", "GetArtifact", "ListArtifacts", "ListRunArtifacts", "DeleteExpiredArtifacts", "BlobInUse",
	"AppendLogChunk", "LastLogSeq", "ListLogChunks", "ReplaceLogChunks", "DeleteLogChunksBefore",
	"EnqueueOutbox", "ClaimOutbox", "MarkDelivered", "Publish", "QueueStats", "CreateToken", "LookupToken", "CancelRequested",
	"ConcurrencyHolders", "ListJobsChanged",
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

func (s *instrumented) ListRuns(ctx context.Context, p store.ListRunsParams) ([]*store.Run, error) {
	t := time.Now()
	r, err := s.Store.ListRuns(ctx, p)
	s.done(opListRuns, t, err)
	return r, err
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
