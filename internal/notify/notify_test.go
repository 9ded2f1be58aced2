package notify_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/notify"
	"github.com/gantry-ci/gantry/internal/outbound"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
)

const sha = "0123456789abcdef0123456789abcdef01234567"

// recorder is an httptest receiver (a forge's status API or a webhook subscriber) that
// answers the requests it gets with the next of its answers, the last one for ever after.
type recorder struct {
	mu      sync.Mutex
	reqs    []recorded
	answers []answer
}

type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

type answer struct {
	status     int
	retryAfter string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.reqs = append(r.reqs, recorded{req.Method, req.URL.Path, req.Header.Clone(), body})
	a := r.answers[min(len(r.reqs), len(r.answers))-1]
	r.mu.Unlock()
	if a.retryAfter != "" {
		w.Header().Set("Retry-After", a.retryAfter)
	}
	w.WriteHeader(a.status)
	_, _ = io.WriteString(w, `{"message":"`+http.StatusText(a.status)+`"}`)
}

func (r *recorder) requests() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]recorded(nil), r.reqs...)
}

func serve(t *testing.T, answers ...answer) (*recorder, *httptest.Server) {
	rec := &recorder{answers: answers}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	return rec, srv
}

type bundle struct {
	t   *testing.T
	st  store.Store
	clk *clock.Fake
	d   *notify.Dispatcher
}

// setup opens a SQLite store on a fake clock and a dispatcher whose jitter always takes
// the whole cap, so waits are exact, and that may reach loopback, where the httptest
// receivers are.
func setup(t *testing.T, maxAttempts int) *bundle {
	t.Helper()
	return setupAllowing(t, maxAttempts, "127.0.0.0/8,::1")
}

// setupAllowing is setup with allow as the dispatcher's outbound allow-list.
func setupAllowing(t *testing.T, maxAttempts int, allow string) *bundle {
	t.Helper()
	policy, err := outbound.Parse(allow)
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{Clock: clk})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	d := notify.New(notify.Config{Store: st, Clock: clk, PublicURL: "https://ci.example.com/", MaxAttempts: maxAttempts,
		Backoff: time.Second, MaxBackoff: time.Minute, Jitter: func(max time.Duration) time.Duration { return max }, Outbound: policy})
	return &bundle{t: t, st: st, clk: clk, d: d}
}

// deliver runs one pass and returns how many messages it claimed.
func (b *bundle) deliver() int {
	b.t.Helper()
	n, err := b.d.DeliverDue(b.t.Context())
	if err != nil {
		b.t.Fatalf("DeliverDue: %v", err)
	}
	return n
}

func (b *bundle) createRun(project string, yaml string) *store.Run {
	b.t.Helper()
	plan, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
	if err != nil {
		b.t.Fatalf("compile: %v", err)
	}
	run, _, _, err := b.st.CreateRun(b.t.Context(), store.CreateRunParams{Project: project, Plan: plan, Definition: []byte(yaml),
		Trigger: store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: sha, Event: "push", Repository: "acme/web",
			Verified: store.RefFromWebhook}})
	if err != nil {
		b.t.Fatalf("CreateRun: %v", err)
	}
	return run
}

// finish claims and completes every queued job with status.
func (b *bundle) finish(status store.JobStatus) {
	b.t.Helper()
	for {
		cs, err := b.st.Claim(b.t.Context(), store.ClaimParams{WorkerID: "w", Max: 8, LeaseTTL: time.Minute, TimeoutGrace: time.Minute})
		if err != nil {
			b.t.Fatalf("Claim: %v", err)
		}
		if len(cs) == 0 {
			return
		}
		for _, c := range cs {
			if _, err := b.st.CompleteJob(b.t.Context(), store.CompleteParams{LeaseRef: store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token},
				Status: status}); err != nil {
				b.t.Fatalf("CompleteJob: %v", err)
			}
		}
	}
}

func (b *bundle) outbox(state store.OutboxState) []*store.OutboxMessage {
	b.t.Helper()
	ms, err := b.st.ListOutbox(b.t.Context(), store.ListOutboxParams{State: state})
	if err != nil {
		b.t.Fatalf("ListOutbox: %v", err)
	}
	return ms
}

const oneJob = "name: ci\njobs:\n  build:\n    steps: [{run: 'true'}]\n"

// TestStatusRetriedUntilAccepted: the forge fails with a 500, then a 429 asking for 30 s,
// then accepts; the dispatcher waits its backoff, then what the forge asked, and sends
// the status exactly once more after each failure, in GitHub's documented shape.
func TestStatusRetriedUntilAccepted(t *testing.T) {
	t.Parallel()
	b := setup(t, 10)
	forgeRec, forgeSrv := serve(t, answer{status: 500}, answer{status: 429, retryAfter: "30"}, answer{status: 201})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("ghp_secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.st.CreateProject(t.Context(), &store.Project{Name: "web", RepoURL: "https://github.com/acme/web.git", Provider: "github",
		APIBaseURL: forgeSrv.URL, APITokenFile: tokenFile, CommitStatuses: store.CommitStatusesRun}); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	run := b.createRun("web", oneJob)
	b.finish(store.JobSuccess)
	// pending and running are superseded by success: only the run's state now is sent.
	if n := b.deliver(); n != 3 {
		t.Fatalf("first pass claimed %d messages, want 3 (pending, running, success)", n)
	}
	if got := len(forgeRec.requests()); got != 1 {
		t.Fatalf("forge got %d requests after the first pass, want 1 (the superseded ones are not sent)", got)
	}
	if got := len(b.outbox(store.OutboxFailed)); got != 1 {
		t.Fatalf("%d failed messages after the 500, want 1", got)
	}
	// Those not sent are superseded, not delivered.
	if sup, del := len(b.outbox(store.OutboxSuperseded)), len(b.outbox(store.OutboxDelivered)); sup != 2 || del != 0 {
		t.Fatalf("%d superseded and %d delivered messages after the first pass, want 2 and 0", sup, del)
	}
	// The first retry waits the whole first backoff (1 s), not less.
	b.clk.Advance(999 * time.Millisecond)
	if n := b.deliver(); n != 0 {
		t.Fatalf("a message was claimed %d before its backoff ran out", n)
	}
	b.clk.Advance(time.Millisecond)
	if n := b.deliver(); n != 1 {
		t.Fatalf("second attempt claimed %d messages, want 1", n)
	}
	// The 429 asked for 30 s, longer than the second backoff (2 s): 30 s it is.
	b.clk.Advance(29 * time.Second)
	if n := b.deliver(); n != 0 {
		t.Fatal("the status was retried before the forge's Retry-After")
	}
	b.clk.Advance(time.Second)
	if n := b.deliver(); n != 1 {
		t.Fatalf("third attempt claimed %d messages, want 1", n)
	}
	b.clk.Advance(24 * time.Hour)
	if n := b.deliver(); n != 0 {
		t.Fatalf("a delivered status was claimed again (%d)", n)
	}
	reqs := forgeRec.requests()
	if len(reqs) != 3 {
		t.Fatalf("forge got %d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		if r.method != http.MethodPost || r.path != "/repos/acme/web/statuses/"+sha {
			t.Errorf("request %d: %s %s", i, r.method, r.path)
		}
		if got := r.header.Get("Authorization"); got != "Bearer ghp_secret" {
			t.Errorf("request %d Authorization = %q", i, got)
		}
		var body map[string]string
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("request %d body %s: %v", i, r.body, err)
		}
		want := map[string]string{"state": "success", "context": "gantry/ci", "description": "Run #1: Passed",
			"target_url": "https://ci.example.com/runs/" + run.ID.String()}
		for k, v := range want {
			if body[k] != v {
				t.Errorf("request %d %s = %q, want %q", i, k, body[k], v)
			}
		}
	}
	delivered := b.outbox(store.OutboxDelivered)
	if len(delivered) != 1 || len(b.outbox(store.OutboxSuperseded)) != 2 || len(b.outbox(store.OutboxPending)) != 0 {
		t.Fatalf("%d delivered, %d superseded and %d pending messages, want 1, 2 and 0", len(delivered),
			len(b.outbox(store.OutboxSuperseded)), len(b.outbox(store.OutboxPending)))
	}
	for _, m := range delivered {
		if m.Topic == store.TopicStatus && strings.Contains(string(m.Payload), `"state":"success"`) && m.Attempts != 3 {
			t.Errorf("the success status took %d attempts, want 3", m.Attempts)
		}
	}
}

// TestJobStatusesCoalesced: each job of a run is reported under its own context beside
// the run's, linking to the job's page; statuses a job (or the run) has moved past by the
// time the dispatcher gets to them are not sent, so a run that finished before a pass
// costs the forge one call per context.
func TestJobStatusesCoalesced(t *testing.T) {
	t.Parallel()
	b := setup(t, 10)
	forgeRec, forgeSrv := serve(t, answer{status: 201})
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("glpat-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := b.st.CreateProject(t.Context(), &store.Project{Name: "web", RepoURL: "https://gitlab.example.com/acme/web.git",
		Provider: "gitlab", APIBaseURL: forgeSrv.URL, APITokenFile: tokenFile}); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	run := b.createRun("web", "name: ci\njobs:\n  lint:\n    steps: [{run: 'true'}]\n  test:\n    needs: [lint]\n    steps: [{run: 'true'}]\n"+
		"  deploy:\n    needs: [test]\n    if: branch == 'release'\n    steps: [{run: 'true'}]\n")
	b.finish(store.JobSuccess)
	for b.deliver() > 0 {
	}
	got := map[string]map[string]string{}
	for _, r := range forgeRec.requests() {
		var body map[string]string
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("body %s: %v", r.body, err)
		}
		if _, dup := got[body["name"]]; dup {
			t.Errorf("context %s reported twice", body["name"])
		}
		got[body["name"]] = body
	}
	jobs, err := b.st.ListJobs(t.Context(), run.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"gantry/ci": "success", "gantry/ci/lint": "success", "gantry/ci/test": "success", "gantry/ci/deploy": "skipped"}
	if len(got) != len(want) {
		t.Errorf("forge got contexts %v, want %v", got, want)
	}
	for ctx, state := range want {
		if got[ctx]["state"] != state {
			t.Errorf("%s: state %q, want %q", ctx, got[ctx]["state"], state)
		}
	}
	for _, j := range jobs {
		if u := got["gantry/ci/"+j.Key]["target_url"]; u != "https://ci.example.com/jobs/"+j.ID.String() {
			t.Errorf("%s: target_url %q", j.Key, u)
		}
	}
	if n := len(b.outbox(store.OutboxPending)); n != 0 {
		t.Errorf("%d messages still pending", n)
	}
	for _, m := range b.outbox(store.OutboxDead) {
		t.Errorf("dead message %s: %s", m.Payload, m.LastError)
	}
}

// TestDeadLetterAfterMaxAttempts: a receiver that keeps failing gets MaxAttempts tries,
// with a doubling backoff, and then the message is dead with the last error; a permanent
// error (4xx) dead-letters at once.
func TestDeadLetterAfterMaxAttempts(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	down, downSrv := serve(t, answer{status: 503})
	gone, goneSrv := serve(t, answer{status: 410})
	b.createRun("hooks", oneJob)
	p, err := b.st.GetProjectByName(t.Context(), "hooks")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range []string{downSrv.URL + "/hook?token=abc", goneSrv.URL} {
		if err := b.st.CreateWebhook(t.Context(), &store.Webhook{ProjectID: p.ID, URL: u, Secret: "k",
			Events: []string{store.WebhookRunFinished}}); err != nil {
			t.Fatalf("CreateWebhook: %v", err)
		}
	}
	// Subscriptions apply to runs created after them.
	b.finish(store.JobSuccess)
	if got := len(b.outbox("")); got != 0 {
		t.Fatalf("a run made before the subscriptions enqueued %d messages", got)
	}
	run := b.createRun("hooks", oneJob)
	b.finish(store.JobFailed)
	if n := b.deliver(); n != 2 {
		t.Fatalf("claimed %d, want 2", n)
	}
	for _, wait := range []time.Duration{time.Second, 2 * time.Second} {
		b.clk.Advance(wait)
		if n := b.deliver(); n != 1 {
			t.Fatalf("after %s claimed %d, want 1", wait, n)
		}
	}
	b.clk.Advance(time.Hour)
	if n := b.deliver(); n != 0 {
		t.Fatalf("a dead message was claimed (%d)", n)
	}
	if got := len(down.requests()); got != 3 {
		t.Errorf("the failing subscriber got %d requests, want 3 (MaxAttempts)", got)
	}
	if got := len(gone.requests()); got != 1 {
		t.Errorf("the 410 subscriber got %d requests, want 1", got)
	}
	dead := b.outbox(store.OutboxDead)
	if len(dead) != 2 {
		t.Fatalf("%d dead messages, want 2", len(dead))
	}
	for _, m := range dead {
		if !strings.Contains(m.LastError, "HTTP 503") && !strings.Contains(m.LastError, "HTTP 410") {
			t.Errorf("dead message error %q names no status", m.LastError)
		}
		if strings.Contains(m.LastError, "token=abc") {
			t.Errorf("dead message error %q shows the URL's query", m.LastError)
		}
		if !strings.Contains(string(m.Payload), run.ID.String()) {
			t.Errorf("dead message %s is not the second run's", m.Payload)
		}
	}
	// Redelivered by hand, a dead message gets a fresh set of attempts.
	if err := b.st.RedeliverOutbox(t.Context(), dead[0].ID); err != nil {
		t.Fatal(err)
	}
	if n := b.deliver(); n != 1 {
		t.Fatalf("a redelivered message was not claimed (%d)", n)
	}
}

// TestWebhookSigned: run.finished and job.finished reach the subscriber signed with
// HMAC-SHA256 of the exact body, with a delivery id that is the outbox message's.
func TestWebhookSigned(t *testing.T) {
	t.Parallel()
	b := setup(t, 10)
	rec, srv := serve(t, answer{status: 204})
	b.createRun("hooks", oneJob) // makes the project
	b.finish(store.JobSuccess)
	p, err := b.st.GetProjectByName(t.Context(), "hooks")
	if err != nil {
		t.Fatal(err)
	}
	const secret = "whsec-123"
	if err := b.st.CreateWebhook(t.Context(), &store.Webhook{ProjectID: p.ID, URL: srv.URL + "/in", Secret: secret,
		Events: []string{store.WebhookRunFinished, store.WebhookJobFinished}}); err != nil {
		t.Fatal(err)
	}
	run := b.createRun("hooks", oneJob)
	b.finish(store.JobSuccess)
	if n := b.deliver(); n != 2 {
		t.Fatalf("claimed %d, want 2 (job.finished, run.finished)", n)
	}
	ids := map[string]bool{}
	for _, m := range b.outbox(store.OutboxDelivered) {
		ids[m.ID.String()] = true
	}
	events := map[string]bool{}
	for _, r := range rec.requests() {
		if r.method != http.MethodPost || r.path != "/in" || r.header.Get("Content-Type") != "application/json" {
			t.Errorf("request %s %s %s", r.method, r.path, r.header.Get("Content-Type"))
		}
		if got, want := r.header.Get(notify.HeaderSignature), notify.Sign([]byte(secret), r.body); got != want || !strings.HasPrefix(got, "sha256=") {
			t.Errorf("signature %q, want %q", got, want)
		}
		var body struct {
			Event, Delivery, Project string
			Run                      struct {
				ID, Status, SHA, URL string
				Number               int
			}
			Job *struct{ Key, Status string }
		}
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("body %s: %v", r.body, err)
		}
		if d := r.header.Get(notify.HeaderDelivery); d != body.Delivery || !ids[d] {
			t.Errorf("delivery header %q, body %q: not a delivered message's id", d, body.Delivery)
		}
		if r.header.Get(notify.HeaderEvent) != body.Event {
			t.Errorf("event header %q, body %q", r.header.Get(notify.HeaderEvent), body.Event)
		}
		if body.Project != "hooks" || body.Run.ID != run.ID.String() || body.Run.Number != 2 || body.Run.Status != "success" || body.Run.SHA != sha ||
			body.Run.URL != "https://ci.example.com/runs/"+run.ID.String() {
			t.Errorf("body %s", r.body)
		}
		if (body.Event == store.WebhookJobFinished) != (body.Job != nil && body.Job.Key == "build" && body.Job.Status == "success") {
			t.Errorf("%s body job = %+v", body.Event, body.Job)
		}
		events[body.Event] = true
	}
	if len(events) != 2 {
		t.Errorf("events received %v, want run.finished and job.finished", events)
	}
	// A tampered body does not verify.
	if notify.Sign([]byte(secret), []byte(`{}`)) == notify.Sign([]byte("other"), []byte(`{}`)) {
		t.Error("Sign ignores the secret")
	}
}

// TestWebhookSignedWithSealedSecret: a subscription whose secret is sealed is signed with
// the secret itself by a dispatcher that holds the key; one without the key fails the
// attempt, to be retried (by a replica with the key), rather than sign with nothing.
func TestWebhookSignedWithSealedSecret(t *testing.T) {
	t.Parallel()
	b := setup(t, 10)
	rec, srv := serve(t, answer{status: 204})
	b.createRun("sealed", oneJob) // makes the project
	b.finish(store.JobSuccess)
	p, err := b.st.GetProjectByName(t.Context(), "sealed")
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, secret.KeySize)
	if _, err := rand.Read(raw); err != nil {
		t.Fatal(err)
	}
	keys, err := secret.NewKeyring(raw)
	if err != nil {
		t.Fatal(err)
	}
	const plain = "whsec-sealed-456"
	hook := &store.Webhook{ProjectID: p.ID, URL: srv.URL + "/in", Secret: plain, Events: []string{store.WebhookRunFinished}}
	if err := keys.SealWebhookSubscriptionSecret(hook); err != nil {
		t.Fatal(err)
	}
	if err := b.st.CreateWebhook(t.Context(), hook); err != nil {
		t.Fatal(err)
	}
	b.createRun("sealed", oneJob)
	b.finish(store.JobSuccess)

	if n := b.deliver(); n != 1 {
		t.Fatalf("claimed %d, want the run.finished message", n)
	}
	if len(rec.requests()) != 0 {
		t.Fatal("a dispatcher without the key sent the webhook")
	}
	pending := b.outbox(store.OutboxPending)
	if len(pending) != 1 || !strings.Contains(pending[0].LastError, "no secrets key") {
		t.Fatalf("after an attempt without the key the outbox holds %+v, want the message pending, saying why", pending)
	}

	loopback, _ := outbound.Parse("127.0.0.0/8")
	keyed := notify.New(notify.Config{Store: b.st, Clock: b.clk, PublicURL: "https://ci.example.com/", Secrets: keys,
		Jitter: func(max time.Duration) time.Duration { return max }, Outbound: loopback})
	b.clk.Advance(time.Hour)
	if n, err := keyed.DeliverDue(t.Context()); err != nil || n != 1 {
		t.Fatalf("DeliverDue with the key = %d, %v; want the message", n, err)
	}
	reqs := rec.requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	if got, want := reqs[0].header.Get(notify.HeaderSignature), notify.Sign([]byte(plain), reqs[0].body); got != want {
		t.Errorf("signature %q, want %q (the sealed secret's plain text)", got, want)
	}
	if d := b.outbox(store.OutboxDelivered); len(d) != 1 {
		t.Errorf("delivered %d messages, want 1", len(d))
	}
}

// TestRunStopsWithContext: the loop delivers as messages come due and returns when its
// context ends.
func TestRunStopsWithContext(t *testing.T) {
	t.Parallel()
	b := setup(t, 10)
	rec, srv := serve(t, answer{status: 200})
	b.createRun("hooks", oneJob)
	b.finish(store.JobSuccess)
	p, _ := b.st.GetProjectByName(t.Context(), "hooks")
	if err := b.st.CreateWebhook(t.Context(), &store.Webhook{ProjectID: p.ID, URL: srv.URL, Secret: "k",
		Events: []string{store.WebhookRunFinished}}); err != nil {
		t.Fatal(err)
	}
	b.createRun("hooks", oneJob)
	b.finish(store.JobSuccess)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.d.Run(ctx)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(rec.requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the loop delivered nothing")
		}
		b.clk.Advance(time.Second)
		runtime.Gosched()
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
