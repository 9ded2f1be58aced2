package tracing

import (
	"context"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantry-ci/gantry/internal/store"
)

// traced is a store.Store that records a span per call of the store it wraps, as a child
// of the span in the call's context. The embedded interface supplies the calls that do no
// I/O (the wake-up channels, Close).
type traced struct {
	store.Store
}

// InstrumentStore returns st recording a span, "store <Method>", for every method that
// does I/O, but only under a span being recorded (an API request's): calls outside a
// trace, such as the scheduler's periodic passes, cost one context lookup and make no
// span.
func InstrumentStore(st store.Store) store.Store {
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
	return Tracer().Start(ctx, "store "+method, trace.WithSpanKind(trace.SpanKindClient))
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

func (s *traced) ListRuns(ctx context.Context, p store.ListRunsParams) ([]*store.Run, error) {
	ctx, span := s.start(ctx, "ListRuns")
	r, err := s.Store.ListRuns(ctx, p)
	end(span, err)
	return r, err
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
