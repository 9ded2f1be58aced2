// Package forgetest is the one suite every forge provider passes: webhook verification,
// delivery ids, parsing into forge.Event, ignored and malformed events, and commit statuses
// sent to a recording httptest server that checks them against the forge's documented API.
//
// It is used only by tests; a behaviour not exercised here is not part of the contract.
package forgetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/forge"
)

// The event cases every provider must have, unless its Case says why the forge lacks one.
const (
	EventPush          = "push"
	EventTag           = "tag"
	EventDelete        = "delete"
	EventPROpened      = "pr-opened"
	EventPRSynchronize = "pr-synchronize"
	EventPRReopened    = "pr-reopened"
	EventPing          = "ping"
)

// Required lists the event case names Run insists on.
var Required = []string{EventPush, EventTag, EventDelete, EventPROpened, EventPRSynchronize, EventPRReopened, EventPing}

// Case describes one provider to the suite.
type Case struct {
	// New builds the provider under test.
	New func(cfg forge.Config) forge.Provider
	// Name is a name the registry knows the provider by (an alias is fine); Run checks
	// forge.Lookup builds the same provider.
	Name string
	// Sign adds to h the headers that authenticate body under secret, as the forge does.
	Sign func(h http.Header, body, secret []byte)
	// SignsBody is false for a forge that sends a shared token rather than a signature of
	// the body (GitLab): a changed body then still verifies, and the suite checks that it does,
	// so the weakness stays visible.
	SignsBody bool
	// DeliveryHeaders are the headers a delivery id may arrive in, most preferred first.
	DeliveryHeaders []string
	// Events are the webhooks to parse; their names must cover Required.
	Events []EventCase
	// Lacks names, for a Required case the forge has no such event for, why.
	Lacks map[string]string
	// Ignored are events the provider must answer with forge.ErrIgnored.
	Ignored []IgnoredCase
	// MalformedHeader is the event header of a push, sent with bodies that are not one.
	MalformedHeader http.Header
	// Status says what the forge's status API expects.
	Status StatusCase
}

// EventCase is one webhook and the Event it must parse into. Run fills Want.Provider and
// Want.DeliveryID itself.
type EventCase struct {
	Name   string
	Header http.Header // the event headers, without signature or delivery id
	Body   []byte
	Want   forge.Event
}

// IgnoredCase is a webhook Gantry does not act on, and the event name the error must carry.
type IgnoredCase struct {
	Header http.Header
	Body   []byte
	Event  string
}

// StatusCase describes the forge's commit status API.
type StatusCase struct {
	// BasePath is appended to the test server's URL to make Config.BaseURL, to prove a path
	// prefix (GitHub Enterprise's /api/v3) is kept.
	BasePath   string
	Repository string
	SHA        string
	// Path is the escaped request path the forge documents for Repository and SHA, after
	// BasePath.
	Path string
	// Header holds the headers the forge requires when the token is Token.
	Header http.Header
	// States is the forge's word for each Gantry state.
	States map[forge.State]string
	// StateField and ContextField name the body fields for the state and the context.
	StateField, ContextField string
	// TokenOptional is set when the provider may call without a token.
	TokenOptional bool
}

// Token is the API token the suite configures.
const Token = "gantry-test-token"

// secret is the webhook secret the suite signs with.
var secret = []byte("it's a secret to everybody")

// Run runs the suite against c.
func Run(t *testing.T, c Case) {
	t.Helper()
	byName := map[string]EventCase{}
	for _, ec := range c.Events {
		byName[ec.Name] = ec
	}
	for _, name := range Required {
		_, has := byName[name]
		why, lacks := c.Lacks[name]
		switch {
		case !has && (!lacks || why == ""):
			t.Errorf("case %q is missing: add it to Events, or say in Lacks why the forge has none", name)
		case has && lacks:
			t.Errorf("case %q is both in Events and in Lacks", name)
		}
	}
	tests := []struct {
		name string
		fn   func(t *testing.T, c Case)
	}{
		{"Lookup", testLookup},
		{"VerifyGood", testVerifyGood},
		{"VerifyBad", testVerifyBad},
		{"DeliveryID", testDeliveryID},
		{"Parse", testParse},
		{"Ignored", testIgnored},
		{"Malformed", testMalformed},
		{"StatusRequest", testStatusRequest},
		{"JobStatuses", testJobStatuses},
		{"StatusErrors", testStatusErrors},
		{"StatusInvalid", testStatusInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, c)
		})
	}
}

// cloneHeader copies h; unlike Header.Clone it never returns nil, so callers can add to it.
func cloneHeader(h http.Header) http.Header {
	out := http.Header{}
	for k, v := range h {
		out[k] = append([]string(nil), v...)
	}
	return out
}

func request(h http.Header, body []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/api/v1/hooks/x/project", bytes.NewReader(body))
	for k, v := range h {
		r.Header[k] = append([]string(nil), v...)
	}
	r.Header.Set("Content-Type", "application/json")
	return r
}

func testLookup(t *testing.T, c Case) {
	p, err := forge.Lookup(c.Name, forge.Config{})
	if err != nil {
		t.Fatalf("Lookup(%q): %v", c.Name, err)
	}
	want := c.New(forge.Config{})
	if reflect.TypeOf(p) != reflect.TypeOf(want) || p.Name() != want.Name() {
		t.Errorf("Lookup(%q) = %T named %q, want %T named %q", c.Name, p, p.Name(), want, want.Name())
	}
}

func testVerifyGood(t *testing.T, c Case) {
	p := c.New(forge.Config{})
	for _, ec := range c.Events {
		h := cloneHeader(ec.Header)
		c.Sign(h, ec.Body, secret)
		if err := p.Verify(request(h, ec.Body), ec.Body, secret); err != nil {
			t.Errorf("%s: a correctly signed webhook was refused: %v", ec.Name, err)
		}
	}
}

// signatureHeaders returns the headers Sign adds, so the suite can damage them without
// knowing the forge.
func signatureHeaders(c Case, body, key []byte) http.Header {
	h := http.Header{}
	c.Sign(h, body, key)
	return h
}

func testVerifyBad(t *testing.T, c Case) {
	p := c.New(forge.Config{})
	ec := c.Events[0]
	body := ec.Body
	sig := signatureHeaders(c, body, secret)
	if len(sig) == 0 {
		t.Fatal("Sign added no header")
	}
	with := func(extra http.Header) http.Header {
		h := cloneHeader(ec.Header)
		for k, v := range extra {
			h[k] = v
		}
		return h
	}
	flipped := bytes.Clone(body)
	flipped[len(flipped)/2] ^= 0x01

	damaged := http.Header{}
	for k, v := range sig {
		s := v[0]
		last := s[len(s)-1]
		repl := byte('0')
		if last == '0' {
			repl = '1'
		}
		damaged[k] = []string{s[:len(s)-1] + string(repl)}
	}
	truncated := http.Header{}
	for k, v := range sig {
		truncated[k] = []string{v[0][:len(v[0])/2]}
	}
	emptyValues := http.Header{}
	for k := range sig {
		emptyValues[k] = []string{""}
	}

	cases := []struct {
		name   string
		header http.Header
		body   []byte
		secret []byte
	}{
		{"missing", with(nil), body, secret},
		{"empty header", with(emptyValues), body, secret},
		{"wrong secret", with(signatureHeaders(c, body, []byte("not the secret"))), body, secret},
		{"damaged", with(damaged), body, secret},
		{"truncated", with(truncated), body, secret},
		{"empty secret", with(signatureHeaders(c, body, nil)), body, nil},
		{"empty secret, signed with another", with(sig), body, nil},
	}
	if c.SignsBody {
		cases = append(cases, struct {
			name   string
			header http.Header
			body   []byte
			secret []byte
		}{"body byte flipped", with(sig), flipped, secret})
	}
	for _, tc := range cases {
		err := p.Verify(request(tc.header, tc.body), tc.body, tc.secret)
		if !errors.Is(err, forge.ErrBadSignature) {
			t.Errorf("%s: Verify = %v, want ErrBadSignature", tc.name, err)
			continue
		}
		var se *forge.SignatureError
		if !errors.As(err, &se) || se.Reason == "" {
			t.Errorf("%s: Verify = %v, want a *SignatureError with a reason", tc.name, err)
		}
		if strings.Contains(err.Error(), string(secret)) {
			t.Errorf("%s: the error %q shows the secret", tc.name, err)
		}
	}
	if !c.SignsBody {
		// A token does not cover the body: say so by test, not only in a comment.
		if err := p.Verify(request(with(sig), flipped), flipped, secret); err != nil {
			t.Errorf("a token-authenticated forge refused a changed body: %v", err)
		}
	}
}

func testDeliveryID(t *testing.T, c Case) {
	p := c.New(forge.Config{})
	ec := c.Events[0]
	if len(c.DeliveryHeaders) == 0 {
		t.Fatal("Case has no DeliveryHeaders")
	}
	for i, hdr := range c.DeliveryHeaders {
		h := cloneHeader(ec.Header)
		id := fmt.Sprintf("delivery-%d-4f1c2b", i)
		h.Set(hdr, id)
		r := request(h, ec.Body)
		if got := p.DeliveryID(r); got != id {
			t.Errorf("DeliveryID with only %s = %q, want %q", hdr, got, id)
		}
		ev, err := p.Parse(r, ec.Body)
		if err != nil {
			t.Fatalf("Parse %s: %v", ec.Name, err)
		}
		if ev.DeliveryID != id {
			t.Errorf("Event.DeliveryID with only %s = %q, want %q", hdr, ev.DeliveryID, id)
		}
	}
	h := cloneHeader(ec.Header)
	for i := len(c.DeliveryHeaders) - 1; i >= 0; i-- {
		h.Set(c.DeliveryHeaders[i], "id-from-"+c.DeliveryHeaders[i])
	}
	if got, want := p.DeliveryID(request(h, ec.Body)), "id-from-"+c.DeliveryHeaders[0]; got != want {
		t.Errorf("DeliveryID with every header = %q, want the preferred %q", got, want)
	}
	if got := p.DeliveryID(request(ec.Header, ec.Body)); got != "" {
		t.Errorf("DeliveryID without a header = %q, want empty", got)
	}
}

func testParse(t *testing.T, c Case) {
	p := c.New(forge.Config{})
	for _, ec := range c.Events {
		t.Run(ec.Name, func(t *testing.T) {
			h := cloneHeader(ec.Header)
			id := "delivery-" + ec.Name
			h.Set(c.DeliveryHeaders[0], id)
			c.Sign(h, ec.Body, secret)
			r := request(h, ec.Body)
			if err := p.Verify(r, ec.Body, secret); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			got, err := p.Parse(r, ec.Body)
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			want := ec.Want
			want.Provider, want.DeliveryID = p.Name(), id
			if !reflect.DeepEqual(*got, want) {
				t.Errorf("Parse:\n got %s\nwant %s", dump(*got), dump(want))
			}
			checkInvariants(t, got)
			// Callers keep events as JSON (an inbox, a run's trigger): nothing may be lost.
			b, err := json.Marshal(got)
			if err != nil {
				t.Fatalf("marshal event: %v", err)
			}
			var back forge.Event
			if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, *got) {
				t.Errorf("event changed through JSON (%v):\n got %s\nfrom %s", err, dump(back), dump(*got))
			}
		})
	}
}

// checkInvariants holds for every event of every forge, whatever the case expects.
func checkInvariants(t *testing.T, ev *forge.Event) {
	t.Helper()
	switch ev.Kind {
	case forge.KindPush:
		if !strings.HasPrefix(ev.Ref, "refs/heads/") || ev.Branch == "" || ev.Tag != "" {
			t.Errorf("push event: ref %q branch %q tag %q", ev.Ref, ev.Branch, ev.Tag)
		}
	case forge.KindTag:
		if !strings.HasPrefix(ev.Ref, "refs/tags/") || ev.Tag == "" || ev.Branch != "" {
			t.Errorf("tag event: ref %q branch %q tag %q", ev.Ref, ev.Branch, ev.Tag)
		}
	case forge.KindPullRequest:
		if ev.PullRequest == nil || ev.PullRequest.Number <= 0 || ev.SHA == "" || ev.Branch == "" {
			t.Errorf("pull request event without its number, sha or base branch: %s", dump(*ev))
		}
		if !ev.ChangedPathsIncomplete {
			t.Error("pull request event claims a complete path list; no forge sends one")
		}
	case forge.KindPing:
	default:
		t.Errorf("unknown kind %q", ev.Kind)
	}
	if ev.Deleted && ev.SHA != "" {
		t.Errorf("deleted ref with sha %q: nothing may be built", ev.SHA)
	}
	if !ev.Deleted && ev.Kind != forge.KindPing && ev.SHA == "" {
		t.Error("event without a sha")
	}
}

func dump(ev forge.Event) string {
	b, _ := json.MarshalIndent(ev, "     ", "  ")
	return string(b)
}

func testIgnored(t *testing.T, c Case) {
	p := c.New(forge.Config{})
	if len(c.Ignored) == 0 {
		t.Fatal("Case has no Ignored events")
	}
	for _, ic := range c.Ignored {
		ev, err := p.Parse(request(ic.Header, ic.Body), ic.Body)
		if !errors.Is(err, forge.ErrIgnored) {
			t.Errorf("%s: Parse = %v, %v; want ErrIgnored", ic.Event, ev, err)
			continue
		}
		var ie *forge.IgnoredError
		if !errors.As(err, &ie) || ie.Event != ic.Event {
			t.Errorf("%s: Parse error %#v does not name the event", ic.Event, err)
		}
		if !strings.Contains(err.Error(), ic.Event) {
			t.Errorf("%s: error %q does not name the event", ic.Event, err)
		}
		if errors.Is(err, forge.ErrMalformed) {
			t.Errorf("%s: an ignored event is also malformed: %v", ic.Event, err)
		}
	}
}

func testMalformed(t *testing.T, c Case) {
	p := c.New(forge.Config{})
	push := c.Events[0].Body
	bodies := map[string][]byte{
		"empty":     nil,
		"not json":  []byte("ref=refs/heads/main"),
		"truncated": push[:len(push)/2],
		"array":     []byte(`[]`),
		"null":      []byte(`null`),
		"no fields": []byte(`{}`),
		"bad sha":   bytes.ReplaceAll(push, []byte(c.Events[0].Want.SHA), []byte("not-a-sha; rm -rf /")),
		"bad ref":   bytes.ReplaceAll(push, []byte(`"`+c.Events[0].Want.Ref+`"`), []byte(`"refs/heads/--upload-pack=evil"`)),
		"wrong type": bytes.ReplaceAll(push, []byte(`"`+c.Events[0].Want.Ref+`"`),
			[]byte(`{"not":"a string"}`)),
	}
	for name, body := range bodies {
		ev, err := p.Parse(request(c.MalformedHeader, body), body)
		if !errors.Is(err, forge.ErrMalformed) {
			t.Errorf("%s: Parse = %v, %v; want ErrMalformed", name, ev, err)
			continue
		}
		var pe *forge.PayloadError
		if !errors.As(err, &pe) || pe.Provider != p.Name() {
			t.Errorf("%s: error %#v is not a *PayloadError from %s", name, err, p.Name())
		}
		if errors.Is(err, forge.ErrIgnored) {
			t.Errorf("%s: a malformed event is also ignored: %v", name, err)
		}
	}
}

// recorded is one request the fake forge received.
type recorded struct {
	method, path string
	header       http.Header
	body         []byte
}

// fakeForge is an httptest server that records requests and answers with what the test
// set.
type fakeForge struct {
	*httptest.Server
	mu     sync.Mutex
	got    []recorded
	status int
	header http.Header
	answer string
}

func newFakeForge(t *testing.T) *fakeForge {
	f := &fakeForge{status: http.StatusCreated, header: http.Header{}}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.got = append(f.got, recorded{r.Method, r.URL.EscapedPath(), r.Header.Clone(), body})
		status, answer := f.status, f.answer
		for k, v := range f.header {
			w.Header()[k] = v
		}
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(f.Close)
	return f
}

func (f *fakeForge) answerWith(status int, header http.Header, answer string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.header, f.answer = status, header, answer
}

func (f *fakeForge) requests() []recorded {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]recorded(nil), f.got...)
}

func status(c Case, st forge.State) forge.Status {
	return forge.Status{
		Repository:  c.Status.Repository,
		SHA:         c.Status.SHA,
		State:       st,
		Context:     "gantry/web-app",
		Description: "Run 42 " + string(st),
		TargetURL:   "https://ci.example.com/runs/42",
	}
}

func testStatusRequest(t *testing.T, c Case) {
	f := newFakeForge(t)
	p := c.New(forge.Config{BaseURL: f.URL + c.Status.BasePath, Token: Token, HTTPClient: f.Client()})
	ctx := context.Background()
	for _, st := range forge.States {
		if err := p.ReportStatus(ctx, status(c, st)); err != nil {
			t.Fatalf("ReportStatus %s: %v", st, err)
		}
	}
	got := f.requests()
	if len(got) != len(forge.States) {
		t.Fatalf("the forge got %d requests, want %d", len(got), len(forge.States))
	}
	for i, st := range forge.States {
		r := got[i]
		if r.method != http.MethodPost {
			t.Errorf("%s: method %s, want POST", st, r.method)
		}
		if want := c.Status.BasePath + c.Status.Path; r.path != want {
			t.Errorf("%s: path %s, want %s", st, r.path, want)
		}
		for k := range c.Status.Header {
			if g, w := r.header.Get(k), c.Status.Header.Get(k); g != w {
				t.Errorf("%s: header %s = %q, want %q", st, k, g, w)
			}
		}
		if ct := r.header.Get("Content-Type"); ct != "application/json" {
			t.Errorf("%s: Content-Type %q, want application/json", st, ct)
		}
		if r.header.Get("User-Agent") == "" {
			t.Errorf("%s: no User-Agent (GitHub refuses such calls)", st)
		}
		var body map[string]any
		if err := json.Unmarshal(r.body, &body); err != nil {
			t.Fatalf("%s: body %q is not a JSON object: %v", st, r.body, err)
		}
		want := status(c, st)
		if g, w := body[c.Status.StateField], c.Status.States[st]; g != w || w == "" {
			t.Errorf("%s: %s = %v, want %q", st, c.Status.StateField, g, w)
		}
		if g := body[c.Status.ContextField]; g != want.Context {
			t.Errorf("%s: %s = %v, want %q", st, c.Status.ContextField, g, want.Context)
		}
		if g := body["description"]; g != want.Description {
			t.Errorf("%s: description = %v, want %q", st, g, want.Description)
		}
		if g := body["target_url"]; g != want.TargetURL {
			t.Errorf("%s: target_url = %v, want %q", st, g, want.TargetURL)
		}
		for k, v := range body {
			if _, ok := v.(string); !ok {
				t.Errorf("%s: field %s = %v is not a string", st, k, v)
			}
		}
	}
}

// testJobStatuses: each job of a run is its own status context beside the run's, named
// gantry/<pipeline>/<job display name> whatever the name holds (spaces, slashes, a matrix's
// parentheses), each with its own state and target URL, sent as given.
func testJobStatuses(t *testing.T, c Case) {
	f := newFakeForge(t)
	p := c.New(forge.Config{BaseURL: f.URL + c.Status.BasePath, Token: Token, HTTPClient: f.Client()})
	sent := []forge.Status{
		{Context: "gantry/web-app", State: forge.StateRunning, TargetURL: "https://ci.example.com/runs/42"},
		{Context: "gantry/web-app/lint", State: forge.StateSuccess, TargetURL: "https://ci.example.com/jobs/1"},
		{Context: "gantry/web-app/unit (go 1.26, shard 2/3)", State: forge.StateFailure, TargetURL: "https://ci.example.com/jobs/2"},
		{Context: "gantry/web-app/deploy to prod", State: forge.StateSkipped, TargetURL: "https://ci.example.com/jobs/3"},
		{Context: "gantry/web-app/build", State: forge.StateCancelled, TargetURL: "https://ci.example.com/jobs/4"},
	}
	for i := range sent {
		sent[i].Repository, sent[i].SHA, sent[i].Description = c.Status.Repository, c.Status.SHA, "job "+string(sent[i].State)
		if err := p.ReportStatus(context.Background(), sent[i]); err != nil {
			t.Fatalf("ReportStatus %s: %v", sent[i].Context, err)
		}
	}
	got := f.requests()
	if len(got) != len(sent) {
		t.Fatalf("the forge got %d requests, want %d", len(got), len(sent))
	}
	for i, want := range sent {
		var body map[string]any
		if err := json.Unmarshal(got[i].body, &body); err != nil {
			t.Fatalf("%s: body %q: %v", want.Context, got[i].body, err)
		}
		if g := body[c.Status.ContextField]; g != want.Context {
			t.Errorf("%s: %s = %v", want.Context, c.Status.ContextField, g)
		}
		if g, w := body[c.Status.StateField], c.Status.States[want.State]; g != w || w == "" {
			t.Errorf("%s: %s = %v, want %q", want.Context, c.Status.StateField, g, w)
		}
		if g := body["target_url"]; g != want.TargetURL {
			t.Errorf("%s: target_url = %v, want %q", want.Context, g, want.TargetURL)
		}
		if path := c.Status.BasePath + c.Status.Path; got[i].path != path {
			t.Errorf("%s: path %s, want %s", want.Context, got[i].path, path)
		}
	}
}

func testStatusErrors(t *testing.T, c Case) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	type want struct {
		code       int
		retryable  bool
		retryAfter time.Duration
	}
	cases := []struct {
		name   string
		status int
		header http.Header
		want   want
	}{
		{"server error", 500, nil, want{500, true, 0}},
		{"bad gateway with Retry-After seconds", 502, http.Header{"Retry-After": {"7"}}, want{502, true, 7 * time.Second}},
		{"too many requests with a date", 429, http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, want{429, true, 90 * time.Second}},
		{"unavailable with a bad Retry-After", 503, http.Header{"Retry-After": {"soon"}}, want{503, true, 0}},
		{"rate limited 403", 403, http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {fmt.Sprint(now.Add(time.Minute).Unix())}}, want{403, true, time.Minute}},
		{"forbidden", 403, nil, want{403, false, 0}},
		{"unauthorized", 401, nil, want{401, false, 0}},
		{"not found", 404, nil, want{404, false, 0}},
		{"unprocessable", 422, http.Header{"Retry-After": {"5"}}, want{422, false, 0}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeForge(t)
			f.answerWith(tc.status, tc.header, `{"message":"the forge says no"}`)
			p := c.New(forge.Config{BaseURL: f.URL + c.Status.BasePath, Token: Token, HTTPClient: f.Client(), Clock: clock.NewFake(now)})
			err := p.ReportStatus(context.Background(), status(c, forge.StateSuccess))
			var se *forge.StatusError
			if !errors.As(err, &se) {
				t.Fatalf("ReportStatus = %v, want a *StatusError", err)
			}
			if se.StatusCode != tc.want.code || se.Retryable != tc.want.retryable || se.RetryAfter != tc.want.retryAfter {
				t.Errorf("StatusError code %d retryable %v after %s, want %d %v %s",
					se.StatusCode, se.Retryable, se.RetryAfter, tc.want.code, tc.want.retryable, tc.want.retryAfter)
			}
			if r, after := forge.Retryable(err); r != tc.want.retryable || after != tc.want.retryAfter {
				t.Errorf("Retryable = %v, %s", r, after)
			}
			if !strings.Contains(err.Error(), "the forge says no") || !strings.Contains(err.Error(), fmt.Sprint(tc.status)) {
				t.Errorf("error %q does not carry the forge's answer", err)
			}
		})
	}
	t.Run("no answer", func(t *testing.T) {
		t.Parallel()
		f := newFakeForge(t)
		f.Close()
		p := c.New(forge.Config{BaseURL: f.URL + c.Status.BasePath, Token: Token, HTTPClient: f.Client()})
		err := p.ReportStatus(context.Background(), status(c, forge.StateSuccess))
		if r, _ := forge.Retryable(err); err == nil || !r {
			t.Errorf("ReportStatus to a closed server = %v, want a retryable error", err)
		}
	})
	t.Run("caller gave up", func(t *testing.T) {
		t.Parallel()
		f := newFakeForge(t)
		p := c.New(forge.Config{BaseURL: f.URL + c.Status.BasePath, Token: Token, HTTPClient: f.Client()})
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		err := p.ReportStatus(ctx, status(c, forge.StateSuccess))
		if !errors.Is(err, context.Canceled) {
			t.Errorf("ReportStatus with a cancelled context = %v, want context.Canceled", err)
		}
		if r, _ := forge.Retryable(err); r {
			t.Errorf("a call its caller cancelled is called retryable: %v", err)
		}
	})
}

func testStatusInvalid(t *testing.T, c Case) {
	f := newFakeForge(t)
	good := status(c, forge.StateSuccess)
	cases := map[string]func(s *forge.Status){
		"no repository": func(s *forge.Status) { s.Repository = "" },
		"short sha":     func(s *forge.Status) { s.SHA = s.SHA[:7] },
		"sha with path": func(s *forge.Status) { s.SHA = "../../../user/keys" },
		"unknown state": func(s *forge.Status) { s.State = "neutral" },
		"no context":    func(s *forge.Status) { s.Context = "" },
	}
	p := c.New(forge.Config{BaseURL: f.URL + c.Status.BasePath, Token: Token, HTTPClient: f.Client()})
	for name, mutate := range cases {
		s := good
		mutate(&s)
		err := p.ReportStatus(context.Background(), s)
		if err == nil {
			t.Errorf("%s: ReportStatus accepted %+v", name, s)
		}
		if r, _ := forge.Retryable(err); r {
			t.Errorf("%s: an invalid status is called retryable: %v", name, err)
		}
	}
	if !c.Status.TokenOptional {
		p := c.New(forge.Config{BaseURL: f.URL + c.Status.BasePath, HTTPClient: f.Client()})
		err := p.ReportStatus(context.Background(), good)
		if r, _ := forge.Retryable(err); err == nil || r {
			t.Errorf("ReportStatus without a token = %v, want a final error", err)
		}
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("invalid statuses reached the forge %d times", n)
	}
}
