package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// wsBundle is a server whose WebSocket handlers are counted while they run: a handler
// returns only after every goroutine of its connection ended.
type wsBundle struct {
	*bundle
	active atomic.Int64
}

func setupWS(t *testing.T, storage string, auth bool) *wsBundle {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	cfg := api.Config{Store: st, Logger: testLogger(t), Clock: clk, Auth: auth}
	svc := logs.NewService(logs.Config{Storage: logStorages[storage](t, &cfg), Notifier: st})
	t.Cleanup(svc.Close)
	cfg.Logs = svc
	wb := &wsBundle{}
	h := api.New(cfg).Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/ws" {
			wb.active.Add(1)
			defer wb.active.Add(-1)
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	wb.bundle = &bundle{store: st, clock: clk, url: srv.URL}
	return wb
}

type wsMsg struct {
	Type          string      `json:"type"`
	ID            string      `json:"id"`
	Message       string      `json:"message"`
	JobID         string      `json:"job_id"`
	Attempt       int         `json:"attempt"`
	Lines         []logs.Line `json:"lines"`
	Status        string      `json:"status"`
	LatestAttempt int         `json:"latest_attempt"`
	Run           *struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	} `json:"run"`
	Jobs []struct {
		ID      string `json:"id"`
		Key     string `json:"key"`
		Status  string `json:"status"`
		Attempt int    `json:"attempt"`
	} `json:"jobs"`
}

type wsClient struct {
	c    *websocket.Conn
	msgs chan wsMsg // closed when the connection is
}

func wsURL(b *bundle, query string) string {
	return "ws" + strings.TrimPrefix(b.url, "http") + "/api/v1/ws" + query
}

// dialWS connects and reads every message into a channel as it comes.
func dialWS(t *testing.T, b *bundle, query string, header http.Header) *wsClient {
	t.Helper()
	c, res, err := websocket.Dial(t.Context(), wsURL(b, query), &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Fatalf("dial: %v (status %d)", err, status)
	}
	t.Cleanup(func() { _ = c.CloseNow() })
	c.SetReadLimit(16 << 20) // a page of lines is one message
	wc := &wsClient{c: c, msgs: make(chan wsMsg, 4096)}
	go func() {
		defer close(wc.msgs)
		for {
			_, data, err := c.Read(context.Background())
			if err != nil {
				return
			}
			var m wsMsg
			if err := json.Unmarshal(data, &m); err != nil {
				panic(fmt.Sprintf("server sent %s: %v", data, err))
			}
			wc.msgs <- m
		}
	}()
	return wc
}

func (wc *wsClient) send(t *testing.T, v any) {
	t.Helper()
	b, ok := v.(string)
	if !ok {
		raw, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		b = string(raw)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := wc.c.Write(ctx, websocket.MessageText, []byte(b)); err != nil {
		t.Fatalf("send %s: %v", b, err)
	}
}

// next returns the next message.
func (wc *wsClient) next(t *testing.T) wsMsg {
	t.Helper()
	select {
	case m, ok := <-wc.msgs:
		if !ok {
			t.Fatal("connection closed")
		}
		return m
	case <-time.After(10 * time.Second):
		t.Fatal("no message in 10s")
	}
	return wsMsg{}
}

// expect returns the next message and checks its type and subscription id.
func (wc *wsClient) expect(t *testing.T, typ, id string) wsMsg {
	t.Helper()
	m := wc.next(t)
	if m.Type != typ || m.ID != id {
		t.Fatalf("got %+v, want a %s message for %q", m, typ, id)
	}
	return m
}

// subscription collects one log subscription's messages while they arrive mixed with
// others', checking that the lines continue with no gap and no repeat.
type subscription struct {
	id     string
	next   int64 // the seq the next line must have
	ended  *wsMsg
	closed bool // unsubscribed: no message may come
}

func (s *subscription) take(t *testing.T, m wsMsg) {
	t.Helper()
	if m.ID != s.id {
		return
	}
	if s.closed {
		t.Fatalf("%s: %+v after unsubscribing", s.id, m)
	}
	if s.ended != nil {
		t.Fatalf("%s: %+v after the end", s.id, m)
	}
	switch m.Type {
	case "lines":
		for _, l := range m.Lines {
			if l.Seq != s.next {
				t.Fatalf("%s: line %d, want %d", s.id, l.Seq, s.next)
			}
			s.next++
		}
	case "end":
		s.ended = &m
	default:
		t.Fatalf("%s: unexpected %+v", s.id, m)
	}
}

// readUntil reads messages into subs until done says to stop.
func (wc *wsClient) readUntil(t *testing.T, subs []*subscription, done func() bool) {
	t.Helper()
	for !done() {
		m := wc.next(t)
		for _, s := range subs {
			s.take(t, m)
		}
	}
}

func (b *bundle) complete(t *testing.T, id, token string) {
	t.Helper()
	if r := b.post(t, "/api/v1/agent/jobs/"+id+"/complete", `{"token": "`+token+`", "status": "success"}`); r.status != http.StatusOK {
		t.Fatalf("complete: %d %s", r.status, r.body)
	}
}

// TestWSLogs: a log subscription made mid-job gets the history and then the live lines,
// with no gap and no repeat, and an end message once the job completed and every line
// was sent; one with after_seq starts after it; one on a finished job ends at once.
func TestWSLogs(t *testing.T) {
	t.Parallel()
	for name := range logStorages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupWS(t, name, false)
			id, token := b.leasedJob(t)
			b.appendLogs(t, id, batch(token, 1, 1500, "early")) // more than a page
			wc := dialWS(t, b.bundle, "", nil)
			wc.send(t, map[string]any{"type": "subscribe", "id": "all", "topic": "logs", "job_id": id})
			wc.expect(t, "subscribed", "all")
			all := &subscription{id: "all", next: 1}
			wc.readUntil(t, []*subscription{all}, func() bool { return all.next == 1501 })

			wc.send(t, map[string]any{"type": "subscribe", "id": "tail", "topic": "logs", "job_id": id, "attempt": 1, "after_seq": 40})
			wc.expect(t, "subscribed", "tail")
			tail := &subscription{id: "tail", next: 41}
			subs := []*subscription{all, tail}
			wc.readUntil(t, subs, func() bool { return tail.next == 1501 })

			for first := int64(1501); first < 2551; first += 50 {
				b.appendLogs(t, id, batch(token, first, first+49, "live"))
			}
			wc.readUntil(t, subs, func() bool { return all.next == 2551 && tail.next == 2551 })
			b.appendLogs(t, id, batch(token, 2551, 2551, "last"))
			b.complete(t, id, token)
			wc.readUntil(t, subs, func() bool { return all.ended != nil && tail.ended != nil })
			for _, s := range subs {
				if s.next != 2552 || s.ended.Status != "success" || s.ended.Attempt != 1 || s.ended.JobID != id {
					t.Errorf("%s: ended %+v after line %d", s.id, s.ended, s.next-1)
				}
			}

			// The job has finished: a new subscription gets what is left and ends.
			wc.send(t, map[string]any{"type": "subscribe", "id": "done", "topic": "logs", "job_id": id, "after_seq": 2549})
			wc.expect(t, "subscribed", "done")
			done := &subscription{id: "done", next: 2550}
			wc.readUntil(t, []*subscription{done}, func() bool { return done.ended != nil })
			if done.next != 2552 {
				t.Errorf("finished job's subscription from 2549 ended after %d", done.next-1)
			}
			// An ended subscription's id is free again.
			wc.send(t, map[string]any{"type": "subscribe", "id": "all", "topic": "logs", "job_id": id, "after_seq": 2551})
			wc.expect(t, "subscribed", "all")
			wc.expect(t, "end", "all")
		})
	}
}

// TestWSRun: a run subscription gets the run and its jobs at once, and again when a job
// completes.
func TestWSRun(t *testing.T) {
	t.Parallel()
	b := setupWS(t, "files", false)
	id, token := b.leasedJob(t)
	var job struct {
		RunID string `json:"run_id"`
	}
	b.get(t, "/api/v1/jobs/"+id).decode(t, &job)
	wc := dialWS(t, b.bundle, "", nil)
	wc.send(t, map[string]any{"type": "subscribe", "id": "r", "topic": "run", "run_id": job.RunID})
	wc.expect(t, "subscribed", "r")
	m := wc.expect(t, "run", "r")
	if m.Run == nil || m.Run.ID != job.RunID || m.Run.Status != "running" || len(m.Jobs) != 1 ||
		m.Jobs[0].ID != id || m.Jobs[0].Key != "a" || m.Jobs[0].Attempt != 1 || m.Jobs[0].Status == "success" {
		t.Fatalf("snapshot %+v", m)
	}
	b.complete(t, id, token)
	for m.Run.Status != "success" {
		m = wc.expect(t, "run", "r")
	}
	if m.Jobs[0].Status != "success" {
		t.Errorf("run succeeded with its job %+v", m.Jobs[0])
	}
}

// TestWSUnsubscribeAndErrors: mistakes are answered with an error and the connection
// stays open; after an unsubscribe the subscription sends nothing more.
func TestWSUnsubscribeAndErrors(t *testing.T) {
	t.Parallel()
	b := setupWS(t, "files", false)
	id, token := b.leasedJob(t)
	var job struct {
		RunID string `json:"run_id"`
	}
	b.get(t, "/api/v1/jobs/"+id).decode(t, &job)
	wc := dialWS(t, b.bundle, "", nil)

	unknown := uuid.NewString()
	for _, tc := range []struct {
		msg, id, says string
	}{
		{`{"type": "subscribe",`, "", "malformed"},
		{`{"type": "hello", "id": "x"}`, "x", "unknown message type"},
		{`{"type": "subscribe", "topic": "logs", "job_id": "` + id + `"}`, "", "id"},
		{`{"type": "subscribe", "id": "x", "topic": "weather"}`, "x", "unknown topic"},
		{`{"type": "subscribe", "id": "x", "topic": "logs", "job_id": "nope"}`, "x", "malformed job_id"},
		{`{"type": "subscribe", "id": "x", "topic": "logs", "job_id": "` + unknown + `"}`, "x", "not found"},
		{`{"type": "subscribe", "id": "x", "topic": "logs", "job_id": "` + id + `", "attempt": 0}`, "x", "attempt"},
		{`{"type": "subscribe", "id": "x", "topic": "logs", "job_id": "` + id + `", "attempt": 2}`, "x", "no attempt 2"},
		{`{"type": "subscribe", "id": "x", "topic": "logs", "job_id": "` + id + `", "after_seq": -1}`, "x", "after_seq"},
		{`{"type": "subscribe", "id": "x", "topic": "run", "run_id": "` + unknown + `"}`, "x", "not found"},
		{`{"type": "unsubscribe", "id": "x"}`, "x", "no subscription"},
	} {
		wc.send(t, tc.msg)
		if m := wc.expect(t, "error", tc.id); !strings.Contains(m.Message, tc.says) {
			t.Errorf("%s: error %q, want it to say %q", tc.msg, m.Message, tc.says)
		}
	}
	if err := wc.c.Write(t.Context(), websocket.MessageBinary, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	wc.expect(t, "error", "")

	// Still open: subscribe, then unsubscribe mid-stream.
	b.appendLogs(t, id, batch(token, 1, 10, "x"))
	wc.send(t, map[string]any{"type": "subscribe", "id": "gone", "topic": "logs", "job_id": id})
	wc.expect(t, "subscribed", "gone")
	if m := wc.expect(t, "lines", "gone"); len(m.Lines) != 10 {
		t.Fatalf("history %+v", m)
	}
	wc.send(t, map[string]any{"type": "subscribe", "id": "gone", "topic": "run", "run_id": job.RunID})
	if m := wc.expect(t, "error", "gone"); !strings.Contains(m.Message, "already exists") {
		t.Errorf("reused id: %q", m.Message)
	}
	wc.send(t, map[string]any{"type": "unsubscribe", "id": "gone"})
	wc.expect(t, "unsubscribed", "gone")
	wc.send(t, map[string]any{"type": "subscribe", "id": "stays", "topic": "logs", "job_id": id, "after_seq": 10})
	wc.expect(t, "subscribed", "stays")
	b.appendLogs(t, id, batch(token, 11, 20, "x"))
	stays := &subscription{id: "stays", next: 11}
	gone := &subscription{id: "gone", closed: true}
	subs := []*subscription{stays, gone}
	wc.readUntil(t, subs, func() bool { return stays.next == 21 })
	b.complete(t, id, token)
	wc.readUntil(t, subs, func() bool { return stays.ended != nil })
}

// TestWSLimit: a connection holds at most 64 subscriptions.
func TestWSLimit(t *testing.T) {
	t.Parallel()
	b := setupWS(t, "files", false)
	run := b.createRun(t, "p", "refs/heads/main")
	wc := dialWS(t, b.bundle, "", nil)
	for i := range 64 {
		sub := fmt.Sprint("r", i)
		wc.send(t, map[string]any{"type": "subscribe", "id": sub, "topic": "run", "run_id": run.ID})
		wc.expect(t, "subscribed", sub)
		wc.expect(t, "run", sub)
	}
	wc.send(t, map[string]any{"type": "subscribe", "id": "one-too-many", "topic": "run", "run_id": run.ID})
	if m := wc.expect(t, "error", "one-too-many"); !strings.Contains(m.Message, "at most 64") {
		t.Errorf("65th subscription: %q", m.Message)
	}
	wc.send(t, map[string]any{"type": "unsubscribe", "id": "r0"})
	wc.expect(t, "unsubscribed", "r0")
	wc.send(t, map[string]any{"type": "subscribe", "id": "room-again", "topic": "run", "run_id": run.ID})
	wc.expect(t, "subscribed", "room-again")
}

// TestWSAuth: with auth on the endpoint takes a read token in the Authorization header or,
// for browsers, as ?access_token=; a page from another origin is refused.
func TestWSAuth(t *testing.T) {
	t.Parallel()
	b := setupWS(t, "files", true)
	read := issue(t, b.store, store.RoleRead)
	register := issue(t, b.store, store.RoleRegister)
	for _, tc := range []struct {
		name   string
		query  string
		header http.Header
		status int
	}{
		{"no token", "", nil, http.StatusUnauthorized},
		{"unknown token", "?access_token=gtk_nope", nil, http.StatusUnauthorized},
		{"register token", "?access_token=" + register, nil, http.StatusForbidden},
		{"other origin", "?access_token=" + read, http.Header{"Origin": {"https://evil.example"}}, http.StatusForbidden},
		{"header", "", http.Header{"Authorization": {"Bearer " + read}}, http.StatusSwitchingProtocols},
		{"query", "?access_token=" + read, nil, http.StatusSwitchingProtocols},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, res, err := websocket.Dial(t.Context(), wsURL(b.bundle, tc.query), &websocket.DialOptions{HTTPHeader: tc.header})
			if res == nil {
				t.Fatalf("dial: %v", err)
			}
			if res.StatusCode != tc.status {
				t.Fatalf("status %d (%v), want %d", res.StatusCode, err, tc.status)
			}
			if c != nil {
				wc := &wsClient{c: c}
				wc.send(t, `{"type": "subscribe", "id": "x", "topic": "logs", "job_id": "`+uuid.NewString()+`"}`)
				_, data, err := c.Read(t.Context())
				if err != nil || !strings.Contains(string(data), "not found") {
					t.Errorf("answer %s %v", data, err)
				}
				_ = c.Close(websocket.StatusNormalClosure, "")
			}
		})
	}
}

// TestWSCloseStopsGoroutines: when the client goes, cleanly or not, every goroutine of
// its connection ends. Not parallel, so that the process's goroutine count means
// something.
func TestWSCloseStopsGoroutines(t *testing.T) {
	b := setupWS(t, "files", false)
	id, token := b.leasedJob(t)
	b.appendLogs(t, id, batch(token, 1, 10, "x"))
	var job struct {
		RunID string `json:"run_id"`
	}
	b.get(t, "/api/v1/jobs/"+id).decode(t, &job)
	// Goroutines of earlier tests (closing connections) may still be ending: count
	// once the number holds still.
	before := settledGoroutines()

	for _, clean := range []bool{true, false} {
		wc := dialWS(t, b.bundle, "", nil)
		for i := range 10 {
			wc.send(t, map[string]any{"type": "subscribe", "id": fmt.Sprint("l", i), "topic": "logs", "job_id": id})
			wc.send(t, map[string]any{"type": "subscribe", "id": fmt.Sprint("r", i), "topic": "run", "run_id": job.RunID})
		}
		for seen := map[string]bool{}; len(seen) < 20; {
			if m := wc.next(t); m.Type == "lines" || m.Type == "run" {
				seen[m.ID] = true
			}
		}
		if n := b.active.Load(); n != 1 {
			t.Fatalf("%d WebSocket handlers running, want 1", n)
		}
		if during := runtime.NumGoroutine(); during < before+20 {
			t.Errorf("%d goroutines with 20 subscriptions, %d before", during, before)
		}
		if clean {
			_ = wc.c.Close(websocket.StatusNormalClosure, "bye")
		} else {
			_ = wc.c.CloseNow()
		}
		waitFor(t, "the handler to return", func() bool { return b.active.Load() == 0 })
		waitFor(t, "the goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
	}
}

// settledGoroutines returns the number of goroutines once it has not changed for 50 ms,
// or after 2 s.
func settledGoroutines() int {
	n, since := runtime.NumGoroutine(), time.Now()
	for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline) && time.Since(since) < 50*time.Millisecond; {
		time.Sleep(5 * time.Millisecond)
		if m := runtime.NumGoroutine(); m != n {
			n, since = m, time.Now()
		}
	}
	return n
}

// waitFor polls cond until it holds, failing after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWSLinesSplit: a page of long lines is sent as several messages of about 1 MiB, in
// order.
func TestWSLinesSplit(t *testing.T) {
	t.Parallel()
	b := setupWS(t, "files", false)
	id, token := b.leasedJob(t)
	long := strings.Repeat("x", 10<<10)
	for first := int64(1); first <= 300; first += 50 {
		var lines []logs.Line
		for seq := first; seq < first+50; seq++ {
			lines = append(lines, logs.Line{Seq: seq, Stream: logs.Stdout, Text: long})
		}
		body, _ := json.Marshal(map[string]any{"token": token, "lines": lines})
		b.appendLogs(t, id, string(body))
	}
	wc := dialWS(t, b.bundle, "", nil)
	wc.send(t, map[string]any{"type": "subscribe", "id": "l", "topic": "logs", "job_id": id})
	wc.expect(t, "subscribed", "l")
	sub := &subscription{id: "l", next: 1}
	for sub.next <= 300 {
		m := wc.next(t)
		if n := len(m.Lines); n == 0 || n*len(long) > 1<<20+len(long) {
			t.Fatalf("a lines message with %d lines of 10 KiB", n)
		}
		sub.take(t, m)
	}
}

// TestCloseEndsWebSockets: Server.Close ends the open WebSocket connections and waits for
// them, so nothing of theirs reads the store once Close has returned; a connection asked
// for after Close is refused.
func TestCloseEndsWebSockets(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	b, srv := accessServer(t, storeOpeners[0].open(t, clk), clk)
	admin := issueToken(t, b.store, store.RoleAdmin)
	var run runView
	accessCall(t, b, http.MethodPost, "/api/v1/runs", mustJSON(t, map[string]any{"pipeline": isolationPipeline, "project": "web"}), admin).decode(t, &run)
	ws := dialWS(t, b, "?access_token="+admin, nil)
	ws.send(t, map[string]any{"type": "subscribe", "id": "run", "topic": "run", "run_id": run.ID})
	ws.expect(t, "subscribed", "run")

	closed := make(chan struct{})
	go func() {
		srv.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not return with a WebSocket open")
	}
	deadline := time.After(30 * time.Second)
	for open := true; open; {
		select {
		case _, open = <-ws.msgs:
		case <-deadline:
			t.Fatal("the WebSocket is still open after Close")
		}
	}
	if _, res, err := websocket.Dial(t.Context(), wsURL(b, "?access_token="+admin), nil); err == nil || res == nil || res.StatusCode != http.StatusServiceUnavailable {
		status := 0
		if res != nil {
			status = res.StatusCode
		}
		t.Errorf("a WebSocket after Close: err %v, status %d, want 503", err, status)
	}
}
