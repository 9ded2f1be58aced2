package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/tracing"
	"github.com/google/uuid"
)

// Agent protocol defaults (DESIGN.md §5).
const (
	DefaultLeaseTTL       = 45 * time.Second
	DefaultHeartbeatEvery = 10 * time.Second
	// DefaultTimeoutGrace is how long after a job's own timeout the coordinator revokes its
	// lease, so that the worker's timeout, which kills the processes, acts first.
	DefaultTimeoutGrace = 30 * time.Second
	// DefaultCancelGrace is the time between SIGTERM and SIGKILL for jobs that do not set
	// their own cancel_grace.
	DefaultCancelGrace = 10 * time.Second
	defaultClaimWait   = 30 * time.Second
	maxClaimWait       = 60 * time.Second
	maxClaimJobs       = 64
	// maxClaimsPerWorker bounds the claims one worker may hold open at once on a
	// replica: a worker needs one, a few cover reconnects, and more is a runaway client
	// tying up connections.
	maxClaimsPerWorker = 4
	// releaseTimeout bounds handing back the jobs of a claim whose answer was lost.
	releaseTimeout = 10 * time.Second
)

// DefaultReapGrace is the reap grace for a lease TTL when none is set: an eighth of it.
// With the worker's own margin (also an eighth, see docs/reliability.md) it leaves a
// quarter of the TTL between the worker fencing itself and the job's next attempt.
func DefaultReapGrace(leaseTTL time.Duration) time.Duration { return leaseTTL / 8 }

// claimSlots counts the claims each worker holds open.
type claimSlots struct {
	mu   sync.Mutex
	open map[string]int
}

func (c *claimSlots) take(worker string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == nil {
		c.open = map[string]int{}
	}
	if c.open[worker] >= maxClaimsPerWorker {
		return false
	}
	c.open[worker]++
	return true
}

func (c *claimSlots) release(worker string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open[worker]--; c.open[worker] <= 0 {
		delete(c.open, worker)
	}
}

// agentRoutes registers the endpoints workers call. With auth on, a worker registers
// with a register token and gets its own credential back, which every later call
// carries. Every job-scoped call also carries the lease token it was given; a token that
// is not the job's current one is answered 409 with code lease_lost, and changes nothing.
func (s *Server) agentRoutes() {
	s.handle("POST /api/v1/agent/register", registrars, s.registerWorker)
	s.handle("POST /api/v1/agent/claim", agentAccess, s.claim)
	s.handle("POST /api/v1/agent/jobs/{id}/start", agentAccess, s.startJob)
	s.handle("POST /api/v1/agent/jobs/{id}/heartbeat", agentAccess, s.heartbeat)
	s.handle("POST /api/v1/agent/jobs/{id}/steps/{index}", agentAccess, s.updateStep)
	s.handle("POST /api/v1/agent/jobs/{id}/complete", agentAccess, s.completeJob)
	s.handle("POST /api/v1/agent/control", agentAccess, s.control)
}

const codeLeaseLost = "lease_lost"

// decodeJSON reads a strict JSON object body into v: unknown fields and trailing data are
// errors.
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any) *requestError {
	return decodeJSONUpTo(w, r, v, s.maxBody)
}

// decodeJSONUpTo is decodeJSON of a body of at most limit bytes.
func decodeJSONUpTo(w http.ResponseWriter, r *http.Request, v any, limit int64) *requestError {
	body, rerr := readBodyMax(w, r, limit)
	if rerr != nil {
		return rerr
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return badRequest("decode request: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("decode request: unexpected data after the JSON object")
	}
	return nil
}

// agentError answers a store error of a job-scoped call; a stale lease is its own code so
// that a worker can tell "stop working on this job" from other conflicts.
func (s *Server) agentError(w http.ResponseWriter, r *http.Request, action string, err error) {
	if errors.Is(err, store.ErrLeaseLost) {
		s.metrics.LeaseLost.Inc()
		writeError(w, http.StatusConflict, codeLeaseLost, err.Error(), nil)
		return
	}
	s.storeError(w, r, action, err)
}

type registerRequest struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Labels   []string `json:"labels"`
	MilliCPU int64    `json:"milli_cpu"`
	Memory   int64    `json:"memory"`
	MaxJobs  int      `json:"max_jobs"`
	Version  string   `json:"version"`
}

type registerResponse struct {
	WorkerID       string `json:"worker_id"`
	LeaseTTL       string `json:"lease_ttl"`
	HeartbeatEvery string `json:"heartbeat_every"`
	// Credential is the worker's own bearer token for every later call; only with auth.
	Credential string `json:"credential,omitempty"`
	// Features name what this coordinator accepts beyond the first protocol, so a newer
	// worker uses it only where it is understood: "complete.steps", step reports
	// carried by a completion; "claim.start", claims that start their jobs;
	// "complete.claim", a completion that carries the worker's next claim;
	// "complete.logs", a completion that carries the attempt's last log lines;
	// "logs.commands", log lines with group, level and annotation (workflow commands);
	// "summaries", step summaries (POST /api/v1/agent/jobs/{id}/summary); "tests", test
	// results (POST /api/v1/agent/jobs/{id}/tests).
	Features []string `json:"features"`
}

// agentFeatures is the register answer's features.
var agentFeatures = []string{"complete.steps", "claim.start", "complete.claim", "complete.logs", "logs.commands", "summaries", "tests"}

func (s *Server) registerWorker(w http.ResponseWriter, r *http.Request) {
	var req registerRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if req.Name == "" || len(req.Name) > 200 {
		writeError(w, http.StatusBadRequest, codeBadRequest, "name is required (at most 200 bytes)", nil)
		return
	}
	if req.MilliCPU < 0 || req.Memory < 0 || req.MaxJobs < 0 || req.MaxJobs > 1024 {
		writeError(w, http.StatusBadRequest, codeBadRequest, "milli_cpu, memory and max_jobs (at most 1024) must not be negative", nil)
		return
	}
	if req.MaxJobs == 0 {
		req.MaxJobs = 1
	}
	if !labelsInScope(w, r, req.Labels) {
		return
	}
	if req.ID != "" && s.auth {
		// With credentials at stake, an id chosen by the caller could be another
		// worker's, and registering would hand out that worker's credential.
		writeError(w, http.StatusBadRequest, codeBadRequest, "id may not be chosen when authentication is on", nil)
		return
	}
	if req.ID == "" {
		req.ID = store.NewID().String()
	}
	wk := &store.Worker{ID: req.ID, Name: req.Name, Labels: req.Labels, MilliCPU: req.MilliCPU, Memory: req.Memory,
		MaxJobs: req.MaxJobs, State: store.WorkerIdle, Version: req.Version}
	if err := s.store.UpsertWorker(r.Context(), wk); err != nil {
		s.storeError(w, r, "register worker", err)
		return
	}
	resp := registerResponse{WorkerID: req.ID, LeaseTTL: s.leaseTTL.String(), HeartbeatEvery: s.heartbeatEvery.String(),
		Features: agentFeatures}
	if s.auth {
		// The credential inherits the register token's scope and expiry, and names it as
		// its parent, so revoking the register token cuts off every worker it enrolled.
		reg := tokenFrom(r.Context())
		secret, err := IssueScopedToken(r.Context(), s.store, &store.Token{Name: "worker " + req.Name, Role: store.RoleAgent,
			WorkerID: req.ID, Labels: reg.Labels, Projects: reg.Projects, ExpiresAt: reg.ExpiresAt, ParentID: reg.ID})
		if errors.Is(err, store.ErrConflict) {
			writeError(w, http.StatusUnauthorized, codeUnauthorized, "the token was revoked", nil)
			return
		}
		if err != nil {
			s.storeError(w, r, "issue worker credential", err)
			return
		}
		resp.Credential = secret
	}
	writeJSON(w, http.StatusOK, resp)
}

type claimRequest struct {
	WorkerID   string   `json:"worker_id"`
	Labels     []string `json:"labels"`
	FreeCPU    int64    `json:"free_milli_cpu"`
	FreeMemory int64    `json:"free_memory"`
	Max        int      `json:"max"`
	// Wait is how long to hold the request open when no job is ready, as a duration
	// ("30s"); default 30s, at most 60s, "0s" answers at once.
	Wait string `json:"wait"`
	// Start starts the jobs handed out: they are running at once and need no start
	// report (feature claim.start).
	Start bool `json:"start"`
}

type leaseJSON struct {
	Token          string `json:"token"`
	ExpiresAt      string `json:"expires_at"`
	HeartbeatEvery string `json:"heartbeat_every"`
	TTL            string `json:"ttl"`
	// TTLMillis is how long the lease lasts counted from when the coordinator received
	// the request that granted it: the TTL, plus, for a claim, the time the claim waited
	// for a job. A worker counts it from when it sent that request, which is earlier, so
	// by its own clock the lease never lasts longer than the coordinator grants
	// (docs/reliability.md).
	TTLMillis int64 `json:"ttl_ms"`
	// CancelGrace is how long the worker waits between SIGTERM and SIGKILL: the job's
	// own cancel_grace, or the coordinator's default.
	CancelGrace string `json:"cancel_grace"`
}

type claimedJSON struct {
	ID       uuid.UUID         `json:"id"`
	RunID    uuid.UUID         `json:"run_id"`
	Key      string            `json:"key"`
	Attempt  int               `json:"attempt"`
	Lease    leaseJSON         `json:"lease"`
	Trigger  store.Trigger     `json:"trigger"`
	RunEnv   map[string]string `json:"run_env"`
	OnceDone []int             `json:"once_done"`
	Deadline string            `json:"deadline"`
	Spec     *pipeline.Job     `json:"spec"`
	// RunNumber is the run's number in its project (GANTRY_RUN_NUMBER, GITHUB_RUN_NUMBER).
	RunNumber int `json:"run_number,omitempty"`
	// Traceparent names the run's root span (W3C trace context), derived from the run
	// id, so the worker's spans join the run's trace.
	Traceparent string `json:"traceparent"`
	// QueuedAt is when the job became ready to claim, to the microsecond, so a worker can
	// tell how long it waited.
	QueuedAt string `json:"queued_at"`
	// Secrets are the values of the secrets the job's env refers to, by name; SecretEnv
	// names the run env variables whose values are secret. The worker masks all of them.
	// SecretsError, when set, is why the job cannot have its secrets: the worker fails it
	// before its first step.
	Secrets      map[string]string `json:"secrets,omitempty"`
	SecretEnv    []string          `json:"secret_env,omitempty"`
	SecretsError string            `json:"secrets_error,omitempty"`
	// RepoCredentials is the credential of the project's private repository, for the
	// checkout; SecretsError says why when the job needs one and cannot have it.
	RepoCredentials *repoCredentialsJSON `json:"repo_credentials,omitempty"`
	// RepoCredentialsWithheld, when set, says why a job of a run from a fork has no
	// repository credential: a checkout that needs one fails saying so.
	RepoCredentialsWithheld string `json:"repo_credentials_withheld,omitempty"`
	// Needs are what the jobs this one needs left it, by their definition names: sent
	// only for a job that reads them (its steps' if: and ${{ needs.X.outputs.Y }}, which
	// are already put into Spec).
	Needs map[string]needJSON `json:"needs,omitempty"`
	// Notices are what the coordinator has to tell the job's log before its first step
	// (its environment is not defined, see deliverNotices); the worker writes each as a
	// system line.
	Notices []string `json:"notices,omitempty"`
}

type needJSON struct {
	Result  string            `json:"result"`
	Outputs map[string]string `json:"outputs,omitempty"`
}

// claim hands the worker the best jobs it can run, waiting up to the asked time for one to
// become ready. It never polls the store on a timer: it waits on the store's signal that
// jobs were queued and claims again when it fires.
func (s *Server) claim(w http.ResponseWriter, r *http.Request) {
	received := s.clock.Now()
	var req claimRequest
	if !s.workerRequest(w, r, &req) {
		return
	}
	params, wait, ok := s.claimParams(w, r, &req)
	if !ok {
		return
	}
	if !s.claims.take(req.WorkerID) {
		writeError(w, http.StatusTooManyRequests, codeTooManyRequests,
			fmt.Sprintf("worker %s already has %d claims open", req.WorkerID, maxClaimsPerWorker), nil)
		return
	}
	defer s.claims.release(req.WorkerID)
	claims, out, err := s.awaitClaims(r, &req, params, wait, received, nil)
	if err != nil {
		s.storeError(w, r, "claim", err)
		return
	}
	if out == nil {
		// The wait ended with the request: nobody reads an answer.
		return
	}
	s.handOut(w, r, claims, out, func(body []byte) error {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, err := w.Write(body)
		return err
	})
}

// claimParams checks a claim request the worker's own request already named it in, and
// returns what the store is asked and how long the claim may wait. It answers a bad
// request itself and returns false.
func (s *Server) claimParams(w http.ResponseWriter, r *http.Request, req *claimRequest) (store.ClaimParams, time.Duration, bool) {
	if req.Max <= 0 {
		req.Max = 1
	}
	if req.Max > maxClaimJobs {
		writeError(w, http.StatusBadRequest, codeBadRequest, "max is at most "+strconv.Itoa(maxClaimJobs), nil)
		return store.ClaimParams{}, 0, false
	}
	wait, ok := parseWait(w, req.Wait)
	if !ok {
		return store.ClaimParams{}, 0, false
	}
	// A claim held open longer than half a lease could outlive a partition's start by
	// more than the time its worker's jobs take to come back to the queue, and be handed
	// one of them, its answer written into a connection nobody reads any more.
	wait = min(wait, s.leaseTTL/2)
	if !labelsInScope(w, r, req.Labels) {
		return store.ClaimParams{}, 0, false
	}
	params := store.ClaimParams{WorkerID: req.WorkerID, Labels: req.Labels, FreeMilliCPU: req.FreeCPU, FreeMemory: req.FreeMemory,
		Max: req.Max, LeaseTTL: s.leaseTTL + s.reapGrace, TimeoutGrace: s.timeoutGrace, Start: req.Start}
	if tk := tokenFrom(r.Context()); tk != nil {
		params.Projects = tk.Projects
	}
	return params, wait, true
}

// awaitClaims claims jobs, waiting up to wait for one to be queued, and returns them with
// their answers. An empty answer means the wait ran out; a nil one that the request
// ended first. waiting, when set, is called once before the claim first waits.
func (s *Server) awaitClaims(r *http.Request, req *claimRequest, params store.ClaimParams, wait time.Duration,
	received time.Time, waiting func()) ([]*store.Claim, []claimedJSON, error) {
	// Listen before the first claim, so a job queued between the claim and the wait is
	// not missed.
	wake, stop := s.store.WaitForJobs()
	defer stop()
	timeout := s.clock.After(wait)
	for {
		// Taken before the store's: the lease the claim writes lasts at least this much
		// longer than the TTL.
		waited := s.clock.Now().Sub(received)
		claims, err := s.store.Claim(r.Context(), params)
		if err != nil {
			return nil, nil, err
		}
		if len(claims) > 0 || wait == 0 {
			out := make([]claimedJSON, len(claims))
			for i, c := range claims {
				out[i] = s.claimedJSON(c, waited)
				s.deliverNeeds(r, c, &out[i])
				s.deliverSecrets(r, c, &out[i])
				s.deliverNotices(r, c, &out[i])
				if s.auth {
					s.tokens.setOwner(c.Lease.Token, req.WorkerID)
				}
			}
			return claims, out, nil
		}
		if waiting != nil {
			waiting()
			waiting = nil
		}
		select {
		case <-wake:
		case <-timeout:
			return nil, []claimedJSON{}, nil
		case <-s.drained.Done():
			return nil, []claimedJSON{}, nil // as if the wait ran out: the server stops
		case <-r.Context().Done():
			return nil, nil, nil
		}
	}
}

// handOut writes a claim's answer with write. When the answer cannot reach the worker —
// the request ended (the worker went away mid long-poll) before it was written, or
// writing it failed — the jobs go back to the queue at once instead of waiting for their
// leases to expire, and it returns false. An answer the worker's connection took but the
// worker never read still waits for its lease: nothing here can tell.
func (s *Server) handOut(w http.ResponseWriter, r *http.Request, claims []*store.Claim, out []claimedJSON,
	write func([]byte) error) bool {
	err := r.Context().Err()
	if err == nil {
		var body []byte
		body, err = json.Marshal(claimAnswer{Jobs: out})
		if err == nil {
			if err = write(append(body, '\n')); err == nil {
				err = http.NewResponseController(w).Flush()
			}
		}
	}
	if err == nil {
		now := s.clock.Now()
		for _, c := range claims {
			s.metrics.JobClaimed(c.Job, now)
		}
		return true
	}
	if len(claims) == 0 {
		return true
	}
	refs := make([]store.LeaseRef, len(claims))
	for i, c := range claims {
		refs[i] = store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token}
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), releaseTimeout)
	defer cancel()
	n, rerr := s.store.ReleaseClaims(ctx, refs)
	if rerr != nil {
		s.log.ErrorContext(ctx, "hand back the jobs of a claim whose answer was lost; they wait for their leases to expire",
			"worker", claims[0].Job.WorkerID, "jobs", len(claims), "err", rerr)
		return false
	}
	s.log.InfoContext(ctx, "claim answer lost; jobs handed back", "worker", claims[0].Job.WorkerID, "jobs", n, "cause", err)
	return false
}

// claimAnswer is a claim's answer; Error, only in the claim a completion carries, says
// why no claim was made after the completion.
type claimAnswer struct {
	Jobs  []claimedJSON `json:"jobs"`
	Error *errorJSON    `json:"error,omitempty"`
}

func (s *Server) claimedJSON(c *store.Claim, waited time.Duration) claimedJSON {
	out := claimedJSON{
		ID: c.Job.ID, RunID: c.Job.RunID, Key: c.Job.Key, Attempt: c.Job.Attempt,
		// The store's lease includes the reap grace; the worker's ends without it.
		Lease: leaseJSON{Token: c.Lease.Token, ExpiresAt: formatTime(c.Lease.ExpiresAt.Add(-s.reapGrace)),
			HeartbeatEvery: s.heartbeatEvery.String(), TTL: s.leaseTTL.String(), TTLMillis: (s.leaseTTL + waited).Milliseconds(),
			CancelGrace: s.cancelGrace.String()},
		OnceDone: c.OnceDone, Deadline: formatTime(c.Job.Deadline), Spec: c.Job.Spec,
		Traceparent: tracing.Traceparent(c.Job.RunID),
		QueuedAt:    formatMicros(c.Job.QueuedAt),
	}
	if out.OnceDone == nil {
		out.OnceDone = []int{}
	}
	if c.Job.Spec != nil && c.Job.Spec.CancelGrace > 0 {
		out.Lease.CancelGrace = time.Duration(c.Job.Spec.CancelGrace).String()
	}
	if c.Run != nil {
		out.Trigger, out.RunEnv = jobTrigger(c.Run.Trigger, c.Job.Spec), c.Run.Env
		out.RunNumber = c.Run.Number
	}
	return out
}

// jobTrigger is the run's trigger as one of its jobs sees it: Vars are what the job
// reads as vars.NAME, its environment's over the run's, and no other environment's
// variables are sent.
func jobTrigger(tr store.Trigger, spec *pipeline.Job) store.Trigger {
	env := ""
	if spec != nil && spec.Environment != nil {
		env = spec.Environment.Name
	}
	if vars := tr.JobVars(env); vars != nil {
		tr.Vars = &vars
	}
	tr.EnvironmentVars = nil
	return tr
}

// deliverNeeds puts what a claimed job's needs left into its spec and answer, for a
// job that reads it, and evaluates its name: when that reads them. When they cannot be
// read the worker fails the job before its first step, saying so.
func (s *Server) deliverNeeds(r *http.Request, c *store.Claim, out *claimedJSON) {
	if c.Job.Spec == nil || (!c.Job.Spec.ReadsNeeds && c.Job.Spec.NameTemplate == "") {
		return
	}
	needs, err := s.store.NeedsOf(r.Context(), c.Job.ID)
	if err != nil {
		s.log.ErrorContext(r.Context(), "read what a claimed job's needs left", "job", c.Job.ID, "err", err)
		out.SecretsError = "the coordinator could not read the outputs of the jobs this one needs; retry the job"
		return
	}
	results := make(map[string]string, len(needs))
	outputs := make(map[string]map[string]string, len(needs))
	out.Needs = make(map[string]needJSON, len(needs))
	for name, n := range needs {
		results[name], outputs[name] = n.Result, n.Outputs
		out.Needs[name] = needJSON{Result: n.Result, Outputs: n.Outputs}
	}
	spec, err := c.Job.Spec.WithNeeds(outputs)
	if err != nil {
		// The worker fails the job before its first step, saying why.
		out.SecretsError = "what the jobs this one needs left cannot be put in: " + err.Error()
		return
	}
	out.Spec = spec
	s.nameClaimed(r, c, out, results, outputs)
}

// nameClaimed evaluates the name: of a claimed job that reads what its needs left, as
// GitHub does when the job starts, and keeps it, so that the run shows it from now on.
// A name that cannot be evaluated fails the job before its first step, as on GitHub; one
// that cannot be kept leaves the name shown as written.
func (s *Server) nameClaimed(r *http.Request, c *store.Claim, out *claimedJSON, results map[string]string, outputs map[string]map[string]string) {
	name, err := c.Job.Spec.ClaimedName(results, outputs)
	if err != nil {
		out.SecretsError = "the job's name: could not be evaluated: " + err.Error()
		return
	}
	if name == "" {
		return
	}
	if err := s.store.SetJobName(r.Context(), store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token}, name); err != nil {
		s.log.WarnContext(r.Context(), "keep a claimed job's name; it stays shown as written", "job", c.Job.ID, "err", err)
		return
	}
	c.Job.EvaluatedName = name
}

type tokenRequest struct {
	Token string `json:"token"`
}

// leaseBody is a job-scoped request: it carries the lease token.
type leaseBody interface{ token() string }

func (r *tokenRequest) token() string    { return r.Token }
func (r *stepRequest) token() string     { return r.Token }
func (r *completeRequest) token() string { return r.Token }

// leaseRequest decodes a job-scoped request and names the lease it claims to hold.
func (s *Server) leaseRequest(w http.ResponseWriter, r *http.Request, req leaseBody) (store.LeaseRef, bool) {
	if rerr := s.decodeJSON(w, r, req); rerr != nil {
		writeRequestError(w, rerr)
		return store.LeaseRef{}, false
	}
	return s.leaseRef(w, r, req.token())
}

func (s *Server) leaseRef(w http.ResponseWriter, r *http.Request, token string) (store.LeaseRef, bool) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return store.LeaseRef{}, false
	}
	if token == "" {
		writeError(w, http.StatusBadRequest, codeBadRequest, "token is required", nil)
		return store.LeaseRef{}, false
	}
	ref := store.LeaseRef{JobID: id, Token: token}
	return ref, s.holdsLease(w, r, ref)
}

func (s *Server) startJob(w http.ResponseWriter, r *http.Request) {
	var req tokenRequest
	ref, ok := s.leaseRequest(w, r, &req)
	if !ok {
		return
	}
	if err := s.store.StartJob(r.Context(), ref); err != nil {
		s.agentError(w, r, "start job", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": string(store.JobRunning)})
}

type heartbeatResponse struct {
	ExpiresAt string `json:"expires_at"`
	// TTLMillis is how long the renewed lease lasts from when the coordinator received
	// the heartbeat (leaseJSON.TTLMillis).
	TTLMillis       int64 `json:"ttl_ms"`
	CancelRequested bool  `json:"cancel_requested"`
}

// heartbeat renews a lease. The store keeps it for the TTL plus the reap grace, so that
// the job is taken back only after the worker, which counts the TTL alone and from
// before it sent the heartbeat, stopped the job (docs/reliability.md).
func (s *Server) heartbeat(w http.ResponseWriter, r *http.Request) {
	received := s.clock.Now()
	var req tokenRequest
	ref, ok := s.leaseRequest(w, r, &req)
	if !ok {
		return
	}
	held := s.clock.Now().Sub(received)
	res, err := s.store.Heartbeat(r.Context(), store.HeartbeatParams{LeaseRef: ref, TTL: s.leaseTTL + s.reapGrace})
	if err != nil {
		s.agentError(w, r, "heartbeat", err)
		return
	}
	s.metrics.Heartbeats.Inc()
	writeJSON(w, http.StatusOK, heartbeatResponse{ExpiresAt: formatTime(res.ExpiresAt.Add(-s.reapGrace)),
		TTLMillis: (s.leaseTTL + held).Milliseconds(), CancelRequested: res.CancelRequested})
}

type stepRequest struct {
	Token    string `json:"token"`
	Status   string `json:"status"`
	ExitCode *int   `json:"exit_code"`
	// FailureKind is "timeout" for a failed step that ran past its timeout.
	FailureKind string `json:"failure_kind"`
}

func (s *Server) updateStep(w http.ResponseWriter, r *http.Request) {
	var req stepRequest
	ref, ok := s.leaseRequest(w, r, &req)
	if !ok {
		return
	}
	index, err := strconv.Atoi(r.PathValue("index"))
	if err != nil || index < 0 {
		writeError(w, http.StatusBadRequest, codeBadRequest, "step index must be a whole number", nil)
		return
	}
	err = s.store.UpdateStep(r.Context(), store.UpdateStepParams{LeaseRef: ref, StepUpdate: store.StepUpdate{Index: index, Status: store.StepStatus(req.Status), ExitCode: req.ExitCode,
		FailureKind: store.FailureKind(req.FailureKind)}})
	if err != nil {
		s.agentError(w, r, "update step", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": req.Status})
}

type completeRequest struct {
	Token       string `json:"token"`
	Status      string `json:"status"`
	FailureKind string `json:"failure_kind"`
	ExitCode    *int   `json:"exit_code"`
	// Steps are step reports the worker had not sent when the job ended, applied in
	// order with the completion, so a quick job's last reports cost no requests of
	// their own.
	Steps []completeStep `json:"steps"`
	// Outputs are what the job leaves the jobs that need it (pipeline.CheckOutputs).
	Outputs map[string]string `json:"outputs"`
	// EnvironmentURL is the job's environment url as its steps left it, for a url that
	// reads them (pipeline.Environment.URLTemplate; pipeline.CheckEnvironmentURL); absent
	// for any other job.
	EnvironmentURL *string `json:"environment_url"`
	// NoTests says the worker read no test reports for the job (its spec names none): its
	// project's quarantine rule has nothing new to count, and is not evaluated. Older
	// workers leave it out, and their completions are evaluated as before.
	NoTests bool `json:"no_tests"`
	// Log is the attempt's last log lines, which the worker had not sent when the job
	// ended (feature complete.logs): stored as the logs endpoint stores a batch, before
	// the job is complete, so that a quick job's lines cost no request of their own.
	Log *completeLog `json:"log"`
	// Claim, when set, is a claim the worker makes with the slot the job frees (feature
	// complete.claim): once the job is complete the request goes on as the claim would,
	// and the answer is two lines, the completion's and the claim's.
	Claim *claimRequest `json:"claim"`
}

type completeLog struct {
	Lines []logs.Line `json:"lines"`
}

type completeStep struct {
	Index       int    `json:"index"`
	Status      string `json:"status"`
	ExitCode    *int   `json:"exit_code"`
	FailureKind string `json:"failure_kind"`
}

// maxCompleteSteps bounds the step reports one completion carries: a worker sends at
// most a few per step, and a job's steps are few.
const maxCompleteSteps = 1000

func (s *Server) completeJob(w http.ResponseWriter, r *http.Request) {
	received := s.clock.Now()
	var req completeRequest
	ref, ok := s.leaseRequest(w, r, &req)
	if !ok {
		return
	}
	if len(req.Steps) > maxCompleteSteps {
		writeError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("at most %d step reports", maxCompleteSteps), nil)
		return
	}
	steps := make([]store.StepUpdate, len(req.Steps))
	for i, st := range req.Steps {
		if st.Index < 0 {
			writeError(w, http.StatusBadRequest, codeBadRequest, "step index must be a whole number", nil)
			return
		}
		steps[i] = store.StepUpdate{Index: st.Index, Status: store.StepStatus(st.Status), ExitCode: st.ExitCode,
			FailureKind: store.FailureKind(st.FailureKind)}
	}
	if err := pipeline.CheckOutputs(req.Outputs); err != nil {
		writeError(w, http.StatusBadRequest, codeBadRequest, "outputs: "+err.Error(), nil)
		return
	}
	if req.EnvironmentURL != nil {
		if err := pipeline.CheckEnvironmentURL(*req.EnvironmentURL); err != nil {
			writeError(w, http.StatusBadRequest, codeBadRequest, "environment_url: "+err.Error(), nil)
			return
		}
	}
	// A claim carried by the completion is checked before anything changes: a bad one
	// refuses the whole request.
	var (
		params store.ClaimParams
		wait   time.Duration
	)
	if req.Claim != nil {
		if req.Claim.WorkerID == "" {
			writeError(w, http.StatusBadRequest, codeBadRequest, "claim: worker_id is required", nil)
			return
		}
		if !sameWorker(w, r, req.Claim.WorkerID) {
			return
		}
		if params, wait, ok = s.claimParams(w, r, req.Claim); !ok {
			return
		}
	}
	if req.Log != nil && len(req.Log.Lines) > 0 {
		// Stored first, as a batch of the logs endpoint: a reader who sees the job end
		// has seen its lines. A completion sent again skips the lines already stored.
		if _, _, ok := s.appendLeaseLog(w, r, ref, req.Log.Lines, "complete job"); !ok {
			return
		}
	}
	job, err := s.store.CompleteJob(r.Context(), store.CompleteParams{LeaseRef: ref, Status: store.JobStatus(req.Status),
		FailureKind: store.FailureKind(req.FailureKind), ExitCode: req.ExitCode, Steps: steps, Outputs: req.Outputs,
		EnvironmentURL: req.EnvironmentURL})
	if err != nil {
		s.agentError(w, r, "complete job", err)
		return
	}
	s.metrics.JobFinished(job, s.clock.Now())
	s.endLog(r.Context(), job.ID, job.Attempt)
	if !req.NoTests {
		s.rules.completed(job)
	}
	done := completeResponse{ID: job.ID.String(), Status: string(job.Status), Attempt: job.Attempt,
		FailureKind: string(job.FailureKind), RetryAfter: formatTime(job.RetryAfter)}
	if req.Claim == nil {
		writeJSON(w, http.StatusOK, done)
		return
	}
	body, err := json.Marshal(done)
	if err != nil {
		writeError(w, http.StatusInternalServerError, codeInternal, "encode response", nil)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write(append(body, '\n')); err != nil {
		return
	}
	s.claimAfterComplete(w, r, req.Claim, params, wait, received)
}

// claimAfterComplete makes the claim a completion carried and writes its answer as the
// answer's second line. A claim that cannot be made says why in that line's error; the
// worker then claims as it would have without it.
func (s *Server) claimAfterComplete(w http.ResponseWriter, r *http.Request, req *claimRequest, params store.ClaimParams,
	wait time.Duration, received time.Time) {
	write := func(body []byte) error {
		_, err := w.Write(body)
		return err
	}
	refuse := func(code, msg string) {
		body, _ := json.Marshal(claimAnswer{Jobs: []claimedJSON{}, Error: &errorJSON{Code: code, Message: msg, Details: []errorDetail{}}})
		_ = write(append(body, '\n'))
	}
	if !s.claims.take(req.WorkerID) {
		refuse(codeTooManyRequests, fmt.Sprintf("worker %s already has %d claims open", req.WorkerID, maxClaimsPerWorker))
		return
	}
	defer s.claims.release(req.WorkerID)
	// The completion's line goes out before the claim waits, so that a worker whose
	// connection breaks meanwhile knows its job was reported; a claim answered at once
	// goes out with it, in one write.
	flush := func() { _ = http.NewResponseController(w).Flush() }
	claims, out, err := s.awaitClaims(r, req, params, wait, received, flush)
	if err != nil {
		if r.Context().Err() == nil {
			s.log.ErrorContext(r.Context(), "store call failed", "action", "claim after completion", "err", err)
			refuse(codeInternal, "claim: internal error")
		}
		return
	}
	if out == nil {
		return
	}
	s.handOut(w, r, claims, out, write)
}

type completeResponse struct {
	ID          string `json:"id"`
	Status      string `json:"status"`
	Attempt     int    `json:"attempt"`
	FailureKind string `json:"failure_kind,omitempty"`
	// RetryAfter is set when the failure will be retried: the job is retrying until then.
	RetryAfter string `json:"retry_after,omitempty"`
}

type controlRequest struct {
	WorkerID string `json:"worker_id"`
	// Wait is how long to hold the request open when nothing is to be cancelled; default
	// 30s, at most 60s.
	Wait string `json:"wait"`
	// State is what the worker is doing: idle, busy or draining (default idle). Each
	// control request marks the worker seen in that state.
	State store.WorkerState `json:"state"`
}

// control is the worker's control channel: it answers, as soon as there is any, the jobs
// the worker holds that were asked to cancel, so a cancel reaches a running process at
// once instead of at the next heartbeat. The worker keeps one open at all times.
func (s *Server) control(w http.ResponseWriter, r *http.Request) {
	var req controlRequest
	if !s.workerRequest(w, r, &req) {
		return
	}
	wait, ok := parseWait(w, req.Wait)
	if !ok {
		return
	}
	switch req.State {
	case "":
		req.State = store.WorkerIdle
	case store.WorkerIdle, store.WorkerBusy, store.WorkerDraining:
	default:
		writeError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("state %q: want idle, busy or draining", req.State), nil)
		return
	}
	s.seen.touch(r.Context(), s, req.WorkerID, req.State)
	wake, stop := s.store.WaitForCancels()
	defer stop()
	timeout := s.clock.After(wait)
	for {
		ids, err := s.store.CancelRequested(r.Context(), req.WorkerID)
		if err != nil {
			s.storeError(w, r, "list cancelled jobs", err)
			return
		}
		if len(ids) > 0 || wait == 0 {
			out := make([]string, len(ids))
			for i, id := range ids {
				out[i] = id.String()
			}
			writeJSON(w, http.StatusOK, map[string][]string{"cancel": out})
			return
		}
		select {
		case <-wake:
		case <-timeout:
			writeJSON(w, http.StatusOK, map[string][]string{"cancel": {}})
			return
		case <-s.drained.Done():
			writeJSON(w, http.StatusOK, map[string][]string{"cancel": {}}) // the server stops
			return
		case <-r.Context().Done():
			return
		}
	}
}

// parseWait reads a long-poll's wait: default 30s, at most 60s, 0s answers at once.
func parseWait(w http.ResponseWriter, raw string) (time.Duration, bool) {
	if raw == "" {
		return defaultClaimWait, true
	}
	d, err := time.ParseDuration(raw)
	if err != nil || d < 0 || d > maxClaimWait {
		writeError(w, http.StatusBadRequest, codeBadRequest, "wait must be a duration from 0s to "+maxClaimWait.String(), nil)
		return 0, false
	}
	return d, true
}

// workerBody is a request a worker makes about itself.
type workerBody interface{ worker() string }

func (r *claimRequest) worker() string   { return r.WorkerID }
func (r *controlRequest) worker() string { return r.WorkerID }

// workerRequest decodes a worker's request about itself and checks that it names a
// worker, and its own one when a worker credential authenticated it.
func (s *Server) workerRequest(w http.ResponseWriter, r *http.Request, req workerBody) bool {
	if rerr := s.decodeJSON(w, r, req); rerr != nil {
		writeRequestError(w, rerr)
		return false
	}
	if req.worker() == "" {
		writeError(w, http.StatusBadRequest, codeBadRequest, "worker_id is required", nil)
		return false
	}
	return sameWorker(w, r, req.worker())
}

// lastSeen spares the store a write per control request: a worker is marked seen when
// its state changed or a heartbeat interval passed since the last mark.
type lastSeen struct {
	mu   sync.Mutex
	last map[string]seenMark
}

type seenMark struct {
	at    time.Time
	state store.WorkerState
}

func (l *lastSeen) touch(ctx context.Context, s *Server, worker string, state store.WorkerState) {
	now := s.clock.Now()
	l.mu.Lock()
	if l.last == nil {
		l.last = map[string]seenMark{}
	}
	m, ok := l.last[worker]
	due := !ok || m.state != state || now.Sub(m.at) >= s.heartbeatEvery
	if due {
		l.last[worker] = seenMark{at: now, state: state}
	}
	l.mu.Unlock()
	if !due {
		return
	}
	if err := s.store.TouchWorker(ctx, worker, state); err != nil && !errors.Is(err, store.ErrNotFound) {
		s.log.WarnContext(ctx, "mark worker seen", "worker", worker, "err", err)
	}
}
