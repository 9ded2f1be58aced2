package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/propagation"
)

// errLeaseLost is the coordinator saying the job is no longer this worker's.
var errLeaseLost = errors.New("lease lost")

// client speaks the worker protocol.
type client struct {
	base  string
	token string
	http  *http.Client
}

type apiError struct {
	Status int
	Code   string
	Msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Msg) }

// post sends body as JSON and decodes the answer into out. A 409 lease_lost answer is
// errLeaseLost; other error answers are *apiError.
func (c *client) post(ctx context.Context, path string, body, out any) error {
	resp, err := c.send(ctx, path, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return fmt.Errorf("read answer of %s: %w", path, err)
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode answer of %s: %w", path, err)
		}
	}
	return nil
}

// send posts body as JSON and returns a 200 answer for its caller to read and close.
func (c *client) send(ctx context.Context, path string, body any) (*http.Response, error) {
	b, err := json.Marshal(body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", path, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(b))
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
		return nil, fmt.Errorf("POST %s: %w", path, err)
	}
	if resp.StatusCode == http.StatusOK {
		return resp, nil
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, fmt.Errorf("read answer of %s: %w", path, err)
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
	return nil, &apiError{Status: resp.StatusCode, Code: e.Error.Code, Msg: strings.TrimSpace(e.Error.Message)}
}

// completeAndClaim posts a completion that carries a claim (feature complete.claim). It
// returns once the completion's line of the answer has arrived, with the claim still
// waiting: its answer is read by next. ctx bounds the request until the completion's
// line has arrived; the claim then lasts until next.
func (c *client) completeAndClaim(ctx context.Context, path string, body any) (*carriedClaim, error) {
	reqCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	unhook := context.AfterFunc(ctx, cancel)
	sent := time.Now()
	resp, err := c.send(reqCtx, path, body)
	if err != nil {
		unhook()
		cancel()
		return nil, err
	}
	dec := json.NewDecoder(io.LimitReader(resp.Body, 64<<20))
	var done json.RawMessage
	err = dec.Decode(&done)
	unhook()
	if err != nil {
		resp.Body.Close()
		cancel()
		return nil, fmt.Errorf("read answer of %s: %w", path, err)
	}
	return &carriedClaim{body: resp.Body, dec: dec, cancel: cancel, sent: sent}, nil
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
