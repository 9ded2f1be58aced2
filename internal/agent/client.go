package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/pipeline"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// errLeaseLost is the coordinator saying the job is no longer this worker's.
var errLeaseLost = errors.New("lease lost")

// client speaks the worker protocol to a coordinator, or to any of several replicas of
// one: they share the store, so any of them takes the worker's credential and leases.
// Every request goes to the replica in use, the last that answered; one that cannot be
// reached (its connection refused, reset or timed out, or a proxy in front of it
// answering 502, 503 or 504) is tried at once on the next, and the replica that
// answers is the one used from then on. Only when none answers does the caller see
// the error and back off.
type client struct {
	servers []string // base URLs, in the order they are tried
	cur     atomic.Int64
	token   string
	http    *http.Client
	log     *slog.Logger
}

func newClient(servers []string, token string, hc *http.Client, log *slog.Logger) *client {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = strings.TrimRight(s, "/")
	}
	return &client{servers: out, token: token, http: hc, log: log}
}

// base is the base URL of the replica in use.
func (c *client) base() string { return c.servers[c.cur.Load()] }

type apiError struct {
	Status int
	Code   string
	Msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Msg) }

// unreachableError is a request that did not reach a coordinator, or whose answer did
// not come back from it: another replica may answer it.
type unreachableError struct {
	server string
	err    error
}

func (e *unreachableError) Error() string { return fmt.Sprintf("%s: %v", e.server, e.err) }
func (e *unreachableError) Unwrap() error { return e.err }

// try makes attempt against the replica in use and, while it finds one unreachable,
// against each next one, at most once each. A replica that answers, even with a
// refusal, becomes the one in use. When the caller's deadline ends an attempt, the
// replica is taken for hung and the next request starts at the next one; a request
// the caller cancelled says nothing about its replica.
func (c *client) try(ctx context.Context, attempt func(server string) error) error {
	first := c.cur.Load()
	n := int64(len(c.servers))
	var err error
	for i := range n {
		at := (first + i) % n
		err = attempt(c.servers[at])
		var ue *unreachableError
		if !errors.As(err, &ue) {
			c.use(first, at)
			return err
		}
		if ctx.Err() != nil {
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				c.use(first, (at+1)%n)
			}
			return err
		}
	}
	return err
}

// use makes the replica at index to the one in use, unless another request moved away
// from from meanwhile.
func (c *client) use(from, to int64) {
	if from != to && c.cur.CompareAndSwap(from, to) {
		c.log.Warn("coordinator unreachable; using another", "from", c.servers[from], "to", c.servers[to])
	}
}

// post sends body as JSON and decodes the answer into out. A 409 lease_lost answer is
// errLeaseLost; other error answers are *apiError.
func (c *client) post(ctx context.Context, path string, body, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("encode %s: %w", path, err)
	}
	return c.try(ctx, func(server string) error {
		resp, err := c.sendTo(ctx, server, path, b)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			// The replica went away in the middle of its answer.
			return &unreachableError{server: server, err: fmt.Errorf("read answer of %s: %w", path, err)}
		}
		if out != nil {
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("decode answer of %s: %w", path, err)
			}
		}
		return nil
	})
}

// sendTo posts b to path on server and returns a 200 answer for its caller to read and
// close.
func (c *client) sendTo(ctx context.Context, server, path string, b []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, server+path, bytes.NewReader(b))
	if err != nil {
		return nil, fmt.Errorf("request %s: %w", path, err)
	}
	req.Header.Set("Content-Type", "application/json")
	// The job's reports carry its span, so the coordinator's spans for them join the run's
	// trace. Without tracing the global propagator injects nothing.
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(req.Header))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, &unreachableError{server: server, err: fmt.Errorf("POST %s: %w", path, err)}
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, &unreachableError{server: server, err: fmt.Errorf("read answer of %s: %w", path, err)}
	}
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(data, &e)
	if resp.StatusCode == http.StatusConflict && e.Error.Code == "lease_lost" {
		return nil, errLeaseLost
	}
	ae := &apiError{Status: resp.StatusCode, Code: e.Error.Code, Msg: strings.TrimSpace(e.Error.Message)}
	switch resp.StatusCode {
	case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		// A proxy or load balancer in front of the replica could not reach it.
		return nil, &unreachableError{server: server, err: ae}
	}
	return nil, ae
}

// completeAndClaim posts a completion that carries a claim (feature complete.claim). It
// returns once the completion's line of the answer has arrived, with the claim still
// waiting: its answer is read by next. ctx bounds the request until the completion's
// line has arrived; the claim then lasts until next.
func (c *client) completeAndClaim(ctx context.Context, path string, body any) (*carriedClaim, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", path, err)
	}
	var cc *carriedClaim
	err = c.try(ctx, func(server string) error {
		reqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		unhook := context.AfterFunc(ctx, cancel)
		sent := time.Now()
		resp, err := c.sendTo(reqCtx, server, path, b)
		if err != nil {
			unhook()
			cancel()
			return err
		}
		dec := json.NewDecoder(io.LimitReader(resp.Body, 64<<20))
		var done json.RawMessage
		err = dec.Decode(&done)
		unhook()
		if err != nil {
			resp.Body.Close()
			cancel()
			return &unreachableError{server: server, err: fmt.Errorf("read answer of %s: %w", path, err)}
		}
		cc = &carriedClaim{body: resp.Body, dec: dec, cancel: cancel, sent: sent}
		return nil
	})
	return cc, err
}

// carriedClaim is the claim a completion carried, its answer still to come.
type carriedClaim struct {
	body   io.Closer
	dec    *json.Decoder
	cancel context.CancelFunc
	sent   time.Time
}

// next waits for the claim's answer and returns its jobs. When stop ends first the
// request is given up, and the coordinator hands back whatever it had claimed.
func (cc *carriedClaim) next(stop context.Context) ([]claimedJob, error) {
	defer cc.cancel()
	defer cc.body.Close()
	unhook := context.AfterFunc(stop, cc.cancel)
	defer unhook()
	var ans struct {
		Jobs  []claimedJob `json:"jobs"`
		Error *struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := cc.dec.Decode(&ans); err != nil {
		return nil, fmt.Errorf("read the claim a completion carried: %w", err)
	}
	if ans.Error != nil {
		return nil, fmt.Errorf("the claim a completion carried: %s: %s", ans.Error.Code, ans.Error.Message)
	}
	for i := range ans.Jobs {
		ans.Jobs[i].sent = cc.sent
	}
	return ans.Jobs, nil
}

type registerAnswer struct {
	WorkerID       string   `json:"worker_id"`
	LeaseTTL       string   `json:"lease_ttl"`
	HeartbeatEvery string   `json:"heartbeat_every"`
	Credential     string   `json:"credential"`
	Features       []string `json:"features"`
}

type claimedJob struct {
	ID      string `json:"id"`
	RunID   string `json:"run_id"`
	Key     string `json:"key"`
	Attempt int    `json:"attempt"`
	Lease   struct {
		Token          string `json:"token"`
		HeartbeatEvery string `json:"heartbeat_every"`
		CancelGrace    string `json:"cancel_grace"`
		// TTL is what each renewal grants; TTLMillis how long this lease lasts from
		// when the coordinator received the claim (zero from a coordinator that does
		// not say).
		TTL       string `json:"ttl"`
		TTLMillis int64  `json:"ttl_ms"`
	} `json:"lease"`
	RunEnv   map[string]string `json:"run_env"`
	OnceDone []int             `json:"once_done"`
	Spec     *pipeline.Job     `json:"spec"`
	// Trigger is what started the run: the commit to check out and GANTRY_SHA and kin.
	Trigger jobTrigger `json:"trigger"`
	// RunNumber is the run's number in its project (GANTRY_RUN_NUMBER,
	// GITHUB_RUN_NUMBER); zero from a coordinator older than run numbers.
	RunNumber int64 `json:"run_number"`
	// Traceparent names the run's root span; the job's span is its child.
	Traceparent string `json:"traceparent"`
	// Secrets, SecretEnv and SecretsError are the job's secrets (see secrets.go).
	Secrets      map[string]string `json:"secrets"`
	SecretEnv    []string          `json:"secret_env"`
	SecretsError string            `json:"secrets_error"`
	// RepoCredentials is the credential of the run's private repository (checkout.go).
	RepoCredentials *repoCredentials `json:"repo_credentials"`
	// RepoCredentialsWithheld says why a job of a run from a fork has no credential for a
	// repository that has one; its checkout then uses a mirror of its own (checkout.go).
	RepoCredentialsWithheld string `json:"repo_credentials_withheld"`
	// Needs are what the jobs this one needs left, for its steps' if: (sent only for a
	// job that reads them).
	Needs map[string]claimedNeed `json:"needs"`
	// Notices are what the coordinator tells the job's log first, as system lines.
	Notices []string `json:"notices"`
	// services are how the steps reach the job's services, once started (GANTRY_SERVICE_*
	// variables); jobContext is GitHub's job context beside job.status (job.services,
	// job.container). Neither comes from the coordinator.
	services   []executor.RunningService
	jobContext map[string]any
	// sent is when the claim that handed out the job was sent, by the worker's
	// monotonic clock: the lease's TTLMillis counts from no earlier.
	sent time.Time
}

type claimedNeed struct {
	Result  string            `json:"result"`
	Outputs map[string]string `json:"outputs"`
}

func duration(s string, fallback time.Duration) time.Duration {
	if d, err := time.ParseDuration(s); err == nil && d > 0 {
		return d
	}
	return fallback
}
