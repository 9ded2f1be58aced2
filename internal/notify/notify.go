package notify

import (
	"bytes"
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/forge"
	"github.com/gantry-ci/gantry/internal/outbound"
	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testjudge"
	"github.com/google/uuid"
)

// Defaults of Config.
const (
	DefaultMaxAttempts = 10
	DefaultBackoff     = time.Second
	DefaultMaxBackoff  = time.Hour
	DefaultHold        = 2 * time.Minute
	DefaultPollEvery   = time.Second
	DefaultBatch       = 16
	// DefaultTimeout bounds one delivery attempt, or half the Hold when that is shorter,
	// so no replica claims a message whose attempt is still in flight.
	DefaultTimeout = 30 * time.Second
)

// Headers of an outbound webhook.
const (
	HeaderSignature = "X-Gantry-Signature-256"
	HeaderDelivery  = "X-Gantry-Delivery"
	HeaderEvent     = "X-Gantry-Event"
)

// Store is what the dispatcher needs of the store.
type Store interface {
	ClaimOutbox(ctx context.Context, max int, retryIn time.Duration) ([]*store.OutboxMessage, error)
	MarkDelivered(ctx context.Context, id uuid.UUID) error
	SupersedeOutbox(ctx context.Context, id uuid.UUID) error
	FailOutbox(ctx context.Context, p store.FailOutboxParams) error
	GetProjectByName(ctx context.Context, name string) (*store.Project, error)
	GetWebhook(ctx context.Context, id uuid.UUID) (*store.Webhook, error)
	GetRun(ctx context.Context, id uuid.UUID) (*store.Run, error)
	GetJob(ctx context.Context, id uuid.UUID) (*store.Job, error)
	// The test results and quarantines a finished run's status is judged from.
	testjudge.Store
}

// Config configures a Dispatcher. Zero fields take the defaults.
type Config struct {
	Store  Store
	Logger *slog.Logger
	Clock  clock.Clock
	// PublicURL is where people reach the dashboard (http://host:port); run page links in
	// statuses and webhooks start with it.
	PublicURL string
	// Outbound says which addresses of the coordinator's own network webhooks and forge
	// calls may reach; the zero Policy allows none. Its client follows no redirect.
	Outbound outbound.Policy
	// MaxAttempts is how many attempts a message gets before it is dead-lettered.
	MaxAttempts int
	// Backoff is the cap of the first retry's wait; each attempt doubles it, up to
	// MaxBackoff. The wait is drawn uniformly below the cap (full jitter), or is the
	// Retry-After the receiver asked for when that is longer.
	Backoff, MaxBackoff time.Duration
	// Hold is how long a claimed message is hidden from other replicas while this one
	// delivers it; a dispatcher that dies mid-delivery leaves it to be retried after.
	Hold time.Duration
	// PollEvery is how often the outbox is checked for due messages when idle.
	PollEvery time.Duration
	// Batch is how many messages are claimed, and delivered concurrently, at a time.
	Batch int
	// Secrets opens webhook subscriptions' sealed secrets; nil when the coordinator has
	// no secrets key, which can sign only with secrets stored in plain text.
	Secrets *secret.Keyring
	// Changes reads the project's repository for the flip rule of the test verdicts a
	// finished run's status says (testjudge.Options); nil leaves that rule out.
	Changes testjudge.Changes
	// Jitter draws a wait in [0, max); nil draws uniformly. Tests pin it.
	Jitter func(max time.Duration) time.Duration
	// WorkflowRuns starts the runs of on: workflow_run that a run's activity calls for
	// (TopicWorkflowRun); nil leaves such messages to be retried by a dispatcher that has
	// it.
	WorkflowRuns WorkflowRuns
}

// WorkflowRuns starts the runs a run's activity calls for (scheduler.Cron). It must be
// safe to call again for one message: a delivery whose outcome was not recorded (the
// coordinator died) is made again.
type WorkflowRuns interface {
	StartWorkflowRuns(ctx context.Context, id uuid.UUID, m store.WorkflowRunMessage) error
}

// Dispatcher delivers outbox messages. Any number may run against one store: a claim
// hides its messages from the others for Hold.
type Dispatcher struct {
	cfg    Config
	log    *slog.Logger
	clock  clock.Clock
	client *http.Client
}

// New returns a Dispatcher for cfg.
func New(cfg Config) *Dispatcher {
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	cfg.Backoff = cmp.Or(cfg.Backoff, DefaultBackoff)
	cfg.MaxBackoff = max(cmp.Or(cfg.MaxBackoff, DefaultMaxBackoff), cfg.Backoff)
	cfg.Hold = cmp.Or(cfg.Hold, DefaultHold)
	cfg.PollEvery = cmp.Or(cfg.PollEvery, DefaultPollEvery)
	cfg.Batch = cmp.Or(cfg.Batch, DefaultBatch)
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	if cfg.Jitter == nil {
		cfg.Jitter = func(max time.Duration) time.Duration {
			if max <= 0 {
				return 0
			}
			return rand.N(max)
		}
	}
	d := &Dispatcher{cfg: cfg, log: cfg.Logger, clock: cfg.Clock, client: cfg.Outbound.Client(DefaultTimeout)}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.clock == nil {
		d.clock = clock.Real{}
	}
	return d
}

// Run delivers due messages until ctx is done.
func (d *Dispatcher) Run(ctx context.Context) {
	for {
		n, err := d.DeliverDue(ctx)
		if err != nil && ctx.Err() == nil {
			d.log.Warn("deliver outbox", "err", err)
		}
		if n == d.cfg.Batch && err == nil {
			continue // more may be due at once
		}
		select {
		case <-ctx.Done():
			return
		case <-d.clock.After(d.cfg.PollEvery):
		}
	}
}

// DeliverDue claims the due messages, up to Batch, tries each once, and records the
// outcome. It returns how many it claimed.
func (d *Dispatcher) DeliverDue(ctx context.Context) (int, error) {
	ms, err := d.cfg.Store.ClaimOutbox(ctx, d.cfg.Batch, d.cfg.Hold)
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ms))
	for i, m := range ms {
		wg.Go(func() { errs[i] = d.attempt(ctx, m) })
	}
	wg.Wait()
	return len(ms), errors.Join(errs...)
}

// attempt delivers one claimed message and records how it went.
func (d *Dispatcher) attempt(ctx context.Context, m *store.OutboxMessage) error {
	actx, cancel := context.WithTimeout(ctx, min(DefaultTimeout, d.cfg.Hold/2))
	err := d.deliver(actx, m)
	cancel()
	if ctx.Err() != nil {
		// Shutting down: the hold runs out and another attempt (here after a restart,
		// or on another replica) delivers it; this one's error says nothing about the
		// receiver.
		return nil
	}
	if errors.Is(err, errSuperseded) {
		if err := d.cfg.Store.SupersedeOutbox(ctx, m.ID); err != nil {
			return fmt.Errorf("mark message %s superseded: %w", m.ID, err)
		}
		return nil
	}
	if err == nil {
		if err := d.cfg.Store.MarkDelivered(ctx, m.ID); err != nil {
			return fmt.Errorf("mark message %s delivered: %w", m.ID, err)
		}
		return nil
	}
	retry, after := retryable(err)
	p := store.FailOutboxParams{ID: m.ID, Error: recordable(err.Error())}
	if !retry || m.Attempts >= d.cfg.MaxAttempts {
		p.Dead = true
		d.log.Warn("outbox message dead-lettered", "id", m.ID, "topic", m.Topic, "attempts", m.Attempts, "err", err)
	} else {
		p.NextAttempt = d.clock.Now().Add(max(d.backoff(m.Attempts), after))
		d.log.Info("outbox delivery failed; will retry", "id", m.ID, "topic", m.Topic, "attempts", m.Attempts,
			"next_attempt", p.NextAttempt, "err", err)
	}
	if err := d.cfg.Store.FailOutbox(ctx, p); err != nil {
		return fmt.Errorf("record failed delivery of message %s: %w", m.ID, err)
	}
	return nil
}

// backoff is the wait after the attempt-th failed attempt: full jitter below a cap that
// doubles with each attempt.
func (d *Dispatcher) backoff(attempt int) time.Duration {
	c := d.cfg.Backoff
	for i := 1; i < attempt && c < d.cfg.MaxBackoff; i++ {
		c *= 2
	}
	return d.cfg.Jitter(min(c, d.cfg.MaxBackoff))
}

// permanentError is a failure that retrying cannot fix.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

func permanent(format string, args ...any) error {
	return &permanentError{fmt.Errorf(format, args...)}
}

// retryableError is a failure the receiver may get over, after a wait it asked for.
type retryableError struct {
	err   error
	after time.Duration
}

func (e *retryableError) Error() string { return e.err.Error() }
func (e *retryableError) Unwrap() error { return e.err }

// retryable says whether err may go away, and how long the receiver asked to wait.
// Anything not known to be permanent is retried: a spent message is dead-lettered anyway.
func retryable(err error) (bool, time.Duration) {
	var pe *permanentError
	if errors.As(err, &pe) || errors.Is(err, outbound.ErrRefused) {
		// A refused destination stays refused until the admin allows it; then the
		// message can be redelivered.
		return false, 0
	}
	var re *retryableError
	if errors.As(err, &re) {
		return true, re.after
	}
	var se *forge.StatusError
	if errors.As(err, &se) {
		return forge.Retryable(err)
	}
	return true, 0
}

func (d *Dispatcher) deliver(ctx context.Context, m *store.OutboxMessage) error {
	switch m.Topic {
	case store.TopicStatus:
		return d.deliverStatus(ctx, m)
	case store.TopicWebhook:
		return d.deliverWebhook(ctx, m)
	case store.TopicWorkflowRun:
		return d.deliverWorkflowRun(ctx, m)
	}
	return permanent("unknown outbox topic %q", m.Topic)
}

// deliverWorkflowRun starts the runs of on: workflow_run that a run's activity calls for.
func (d *Dispatcher) deliverWorkflowRun(ctx context.Context, m *store.OutboxMessage) error {
	var w store.WorkflowRunMessage
	if err := json.Unmarshal(m.Payload, &w); err != nil {
		return permanent("decode workflow_run message: %w", err)
	}
	if d.cfg.WorkflowRuns == nil {
		return errors.New("this coordinator does not start runs of workflow_run")
	}
	return d.cfg.WorkflowRuns.StartWorkflowRuns(ctx, m.ID, w)
}

func (d *Dispatcher) runURL(path string) string { return d.cfg.PublicURL + path }

// errSuperseded says a status was not sent because its run or job is in another state
// by now: the message is done, and recorded as superseded rather than delivered.
var errSuperseded = errors.New("superseded")

func (d *Dispatcher) deliverStatus(ctx context.Context, m *store.OutboxMessage) error {
	var s store.StatusMessage
	if err := json.Unmarshal(m.Payload, &s); err != nil {
		return permanent("decode status message: %w", err)
	}
	// Statuses of one run (or job) race each other through retries and concurrent
	// batches; the forge keeps the last one it gets. Sending only the one that matches the
	// run (or job) now keeps a late "pending" from overwriting "success", and coalesces a
	// job's changes while the outbox is behind: only its latest state goes out.
	if s.JobID != uuid.Nil {
		job, err := d.cfg.Store.GetJob(ctx, s.JobID)
		if errors.Is(err, store.ErrNotFound) {
			return permanent("job %s no longer exists", s.JobID)
		}
		if err != nil {
			return fmt.Errorf("read job %s: %w", s.JobID, err)
		}
		if now, _ := job.Status.CommitState(); now != s.State {
			d.log.Debug("status superseded; not sent", "job", s.JobID, "state", s.State, "now", now)
			return errSuperseded
		}
	} else {
		run, err := d.cfg.Store.GetRun(ctx, s.RunID)
		if errors.Is(err, store.ErrNotFound) {
			return permanent("run %s no longer exists", s.RunID)
		}
		if err != nil {
			return fmt.Errorf("read run %s: %w", s.RunID, err)
		}
		if now := forgeState(run.Status); now != s.State {
			d.log.Debug("status superseded; not sent", "run", s.RunID, "state", s.State, "now", now)
			return errSuperseded
		}
		s.Description = d.withTests(ctx, run, s.Description)
	}
	p, err := d.cfg.Store.GetProjectByName(ctx, s.Project)
	if errors.Is(err, store.ErrNotFound) {
		return permanent("project %q no longer exists", s.Project)
	}
	if err != nil {
		return fmt.Errorf("read project %q: %w", s.Project, err)
	}
	if p.Provider == "" {
		return permanent("project %q is no longer connected to a forge", s.Project)
	}
	var token string
	if p.APITokenFile != "" {
		b, err := os.ReadFile(p.APITokenFile)
		if err != nil {
			// The operator may yet put the file in place: retried until dead.
			return fmt.Errorf("read the forge token of project %q: %w", s.Project, err)
		}
		token = strings.TrimSpace(string(b))
	}
	provider, err := forge.Lookup(p.Provider, forge.Config{BaseURL: p.APIBaseURL, Token: token, HTTPClient: d.client, Clock: d.clock})
	if err != nil {
		return permanent("project %q: %w", s.Project, err)
	}
	repo := cmp.Or(s.Repository, repoFullName(p.RepoURL))
	err = provider.ReportStatus(ctx, forge.Status{Repository: repo, SHA: s.SHA, State: forge.State(s.State),
		Context: s.Context, Description: s.Description, TargetURL: d.runURL(s.Path)})
	var se *forge.StatusError
	if err != nil && !errors.As(err, &se) {
		// Validation and configuration errors (no token, bad repository) do not mend.
		return &permanentError{err}
	}
	return err
}

// withTests adds to a finished run's status description what its failing tests are,
// judged as the run page judges them: "Run #42: Failed — 1 new failure, 2 known flaky".
// The verdicts are read when the status is sent, not when the run finished, so they
// include every result its workers reported. A run with no failing test, or whose
// tests cannot be read now, keeps its description as it is: the status matters more
// than the detail.
func (d *Dispatcher) withTests(ctx context.Context, run *store.Run, desc string) string {
	if !run.Status.Terminal() {
		return desc
	}
	sum, err := testjudge.Summarize(ctx, d.cfg.Store, run, nil, testjudge.Options{Changes: d.cfg.Changes, Log: d.log})
	if err != nil {
		d.log.Warn("status sent without its tests' verdicts", "run", run.ID, "err", err)
		return desc
	}
	if h := sum.Headline(); h != "" {
		return desc + " — " + h
	}
	return desc
}

// forgeState is a run status in the words of store.StatusMessage.State.
func forgeState(s store.RunStatus) string {
	switch s {
	case store.RunFailed:
		return string(forge.StateFailure)
	case store.RunPending, store.RunRunning, store.RunSuccess, store.RunCancelled:
		return string(s)
	}
	return string(forge.StateError)
}

// repoFullName makes owner/name (group/sub/name on GitLab) of a clone URL: https, ssh://
// or scp-like git@host:owner/name.git.
func repoFullName(remote string) string {
	path := remote
	if u, err := url.Parse(remote); err == nil && u.Host != "" {
		path = u.Path
	} else if _, after, ok := strings.Cut(remote, ":"); ok {
		path = after
	}
	return strings.TrimSuffix(strings.Trim(path, "/"), ".git")
}

// webhookBody is what a subscriber receives.
type webhookBody struct {
	Event    string            `json:"event"`
	Delivery uuid.UUID         `json:"delivery"`
	Project  string            `json:"project"`
	Run      webhookRun        `json:"run"`
	Job      *store.WebhookJob `json:"job,omitempty"`
}

type webhookRun struct {
	store.WebhookRun
	URL string `json:"url"`
}

// Sign returns the value of the X-Gantry-Signature-256 header for body.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func (d *Dispatcher) deliverWebhook(ctx context.Context, m *store.OutboxMessage) error {
	var w store.WebhookMessage
	if err := json.Unmarshal(m.Payload, &w); err != nil {
		return permanent("decode webhook message: %w", err)
	}
	hook, err := d.cfg.Store.GetWebhook(ctx, w.WebhookID)
	if errors.Is(err, store.ErrNotFound) {
		return permanent("webhook subscription %s was removed", w.WebhookID)
	}
	if err != nil {
		return fmt.Errorf("read webhook subscription %s: %w", w.WebhookID, err)
	}
	key, err := secret.WebhookSubscriptionSecret(d.cfg.Secrets, hook)
	if err != nil {
		// Not permanent: a replica with the key may deliver it, or this one once it has
		// the key.
		return fmt.Errorf("sign webhook: %w", err)
	}
	body, err := json.Marshal(webhookBody{Event: w.Event, Delivery: m.ID, Project: w.Project,
		Run: webhookRun{WebhookRun: w.Run, URL: d.runURL(w.Run.Path)}, Job: w.Job})
	if err != nil {
		return permanent("encode webhook: %w", err)
	}
	if err := d.cfg.Outbound.CheckURL(hook.URL); err != nil {
		return permanent("webhook %s: %s: %w", w.WebhookID, redact(hook.URL), err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, hook.URL, bytes.NewReader(body))
	if err != nil {
		return permanent("webhook %s: %w", w.WebhookID, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "Gantry-Webhook")
	req.Header.Set(HeaderEvent, w.Event)
	req.Header.Set(HeaderDelivery, m.ID.String())
	req.Header.Set(HeaderSignature, Sign(key, body))
	resp, err := d.client.Do(req)
	if err != nil {
		// The *url.Error would repeat the whole URL, query (often a token) and all.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("post webhook to %s: %w", redact(hook.URL), err)
	}
	defer resp.Body.Close()
	snippet, _ := io.ReadAll(io.LimitReader(resp.Body, MaxAnswerExcerpt))
	// Drained a little so the connection may be reused; never read without bound.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 == 2 {
		return nil
	}
	if resp.StatusCode/100 == 3 {
		// Following would send the body, signature and all, where the subscription
		// does not say.
		return permanent("post webhook to %s: HTTP %d: redirects are not followed; point the subscription at %s",
			redact(hook.URL), resp.StatusCode, cmp.Or(redact(resp.Header.Get("Location")), "where it redirects"))
	}
	err = fmt.Errorf("post webhook to %s: HTTP %d: %s", redact(hook.URL), resp.StatusCode, strings.TrimSpace(string(wholeRunes(snippet))))
	switch {
	case resp.StatusCode == http.StatusTooManyRequests, resp.StatusCode == http.StatusRequestTimeout,
		resp.StatusCode == http.StatusTooEarly, resp.StatusCode >= 500:
		return &retryableError{err: err, after: retryAfter(resp.Header.Get("Retry-After"), d.clock.Now())}
	}
	return &permanentError{err}
}

// retryAfter reads Retry-After as delay-seconds or an HTTP date; 0 when absent or past.
func retryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if n, err := strconv.Atoi(v); err == nil {
		return max(time.Duration(n)*time.Second, 0)
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0)
	}
	return 0
}

// MaxAnswerExcerpt is how much of a receiver's answer to a failed delivery is kept, at
// the start of the error the outbox records; MaxRecordedError bounds that error whole.
const (
	MaxAnswerExcerpt = 1 << 10
	MaxRecordedError = 2 << 10
)

// recordable is an error as the outbox records it: at most MaxRecordedError bytes of
// valid UTF-8 without control characters, whatever a receiver answered.
func recordable(msg string) string {
	msg = strings.ToValidUTF8(msg, "\uFFFD")
	msg = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, msg)
	if len(msg) <= MaxRecordedError {
		return msg
	}
	const more = " [cut]"
	cut := MaxRecordedError - len(more)
	for cut > 0 && !utf8.RuneStart(msg[cut]) {
		cut--
	}
	return msg[:cut] + more
}

// wholeRunes drops a UTF-8 sequence cut short at the end of b, as an excerpt's may be.
func wholeRunes(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// redact keeps a webhook URL's credentials and query (often a token) out of errors,
// which the outbox shows to admins.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "the webhook URL"
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}
