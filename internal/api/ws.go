package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// WebSocket limits and timings.
const (
	// wsMaxSubs bounds the subscriptions one connection may hold at once.
	wsMaxSubs = 64
	// wsReadLimit bounds a client message; a larger one closes the connection.
	wsReadLimit = 64 << 10
	// wsLinesBytes is about the most line text one lines message carries.
	wsLinesBytes = 1 << 20
	// wsMaxID bounds a subscription id, which is echoed in every message of it.
	wsMaxID = 128
	// wsPingEvery is how often the server pings, so that proxies keep an idle
	// connection open and a vanished client is noticed.
	wsPingEvery = 30 * time.Second
	// wsWriteTimeout bounds one message write (and a ping's answer): a client that
	// reads nothing for this long loses its connection.
	wsWriteTimeout = 30 * time.Second
	// runPollEvery is how often a run subscription reads its run from the store.
	runPollEvery = 500 * time.Millisecond
)

// wsRoutes registers the WebSocket endpoint. Browsers cannot set headers on a
// WebSocket, so it alone also takes the token as ?access_token=.
func (s *Server) wsRoutes() {
	// Each subscription checks the caller's role on its job's or run's project.
	s.note("GET /api/v1/ws", users)
	s.mux.HandleFunc("GET /api/v1/ws", queryToken(s.guard(users, s.serveWS)))
}

// queryToken moves an access_token query parameter into the Authorization header when
// the request has none, and out of the URL so that nothing later logs it.
func queryToken(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if tok := q.Get("access_token"); tok != "" && r.Header.Get("Authorization") == "" {
			r = r.Clone(r.Context())
			r.Header.Set("Authorization", "Bearer "+tok)
			q.Del("access_token")
			r.URL.RawQuery = q.Encode()
		}
		h(w, r)
	}
}

// wsIn is any client message; which fields apply depends on type and topic.
type wsIn struct {
	Type     string `json:"type"`
	ID       string `json:"id"`
	Topic    string `json:"topic"`
	JobID    string `json:"job_id"`
	RunID    string `json:"run_id"`
	Attempt  *int   `json:"attempt"`
	AfterSeq *int64 `json:"after_seq"`
}

// wsOut is any server message.
type wsOut struct {
	Type    string      `json:"type"`
	ID      string      `json:"id"`
	Message string      `json:"message,omitempty"`
	JobID   string      `json:"job_id,omitempty"`
	Attempt int         `json:"attempt,omitempty"`
	Lines   []logs.Line `json:"lines,omitempty"`
	Status  string      `json:"status,omitempty"`
	// LatestAttempt, on end, is the job's attempt now: later than attempt when the job
	// is retried.
	LatestAttempt int       `json:"latest_attempt,omitempty"`
	Run           *runJSON  `json:"run,omitempty"`
	Jobs          []jobJSON `json:"jobs,omitempty"`
}

// wsConn is one client connection: its writer and its subscriptions.
type wsConn struct {
	s   *Server
	c   *websocket.Conn
	ctx context.Context // the connection's; cancelled when it closes
	// subCtx is the subscriptions' parent: ctx, also cancelled (with errTokenInvalid)
	// once the token is revoked or expires. Writes stay under ctx, so that ending the
	// subscriptions does not cut the connection before its close frame is sent.
	subCtx context.Context
	wg     sync.WaitGroup
	wmu    sync.Mutex // serialises writes, so a subscription's messages keep their order
	mu     sync.Mutex
	subs   map[string]*wsSub
}

type wsSub struct {
	ctx    context.Context
	cancel context.CancelFunc
}

// serveWS serves one WebSocket connection: a read loop that starts and stops
// subscriptions, each following its log or run on its own goroutine and pulling at
// most a page at a time, so a slow client only slows its own connection. Every
// goroutine has ended when it returns.
func (s *Server) serveWS(w http.ResponseWriter, r *http.Request) {
	stop, ok := s.conns.add()
	if !ok {
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the server is shutting down", nil)
		return
	}
	defer s.conns.done()
	// The default options check that the Origin, when sent, is this host: a page of
	// another site cannot use a browser's credentials here.
	c, err := websocket.Accept(w, r, nil)
	if err != nil {
		return // Accept answered the request
	}
	defer c.CloseNow()
	c.SetReadLimit(wsReadLimit)
	ctx, cancel := context.WithCancel(r.Context())
	go func() {
		select {
		case <-stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	// Subscriptions end when the token is revoked or expires, as a log stream does;
	// the connection then closes with a reason, so that a client does not reconnect
	// with the same token.
	subCtx, stopWatch := s.whileTokenValid(ctx)
	wc := &wsConn{s: s, c: c, ctx: ctx, subCtx: subCtx, subs: map[string]*wsSub{}}
	defer wc.wg.Wait()
	defer stopWatch()
	defer cancel()

	wc.wg.Add(2)
	go func() {
		defer wc.wg.Done()
		wc.ping()
	}()
	go func() {
		defer wc.wg.Done()
		<-subCtx.Done()
		if errors.Is(context.Cause(subCtx), errTokenInvalid) {
			_ = c.Close(websocket.StatusPolicyViolation, errTokenInvalid.Error())
		}
	}()
	for {
		typ, data, err := c.Read(ctx)
		if err != nil {
			if ctx.Err() == nil && websocket.CloseStatus(err) == -1 {
				s.log.DebugContext(ctx, "websocket read", "err", err)
			}
			return
		}
		if typ != websocket.MessageText {
			wc.send(nil, wsOut{Type: "error", Message: "messages are JSON text"})
			continue
		}
		var in wsIn
		if err := json.Unmarshal(data, &in); err != nil {
			wc.send(nil, wsOut{Type: "error", Message: "malformed message: " + err.Error()})
			continue
		}
		wc.handle(&in)
	}
}

// ping pings the client every wsPingEvery and closes the connection when a pong does
// not come back in time.
func (wc *wsConn) ping() {
	t := time.NewTicker(wsPingEvery)
	defer t.Stop()
	for {
		select {
		case <-wc.ctx.Done():
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(wc.ctx, wsWriteTimeout)
			err := wc.c.Ping(ctx)
			cancel()
			if err != nil {
				_ = wc.c.CloseNow()
				return
			}
		}
	}
}

// send writes a message; sub, when not nil, is the subscription it belongs to, and
// nothing is written once that subscription was stopped. The write is bounded by the
// connection's context and wsWriteTimeout, never by the subscription's: the library
// closes the whole connection when a write's context ends.
func (wc *wsConn) send(sub *wsSub, m wsOut) error {
	b, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode %s message: %w", m.Type, err)
	}
	wc.wmu.Lock()
	defer wc.wmu.Unlock()
	if sub != nil && sub.ctx.Err() != nil {
		return sub.ctx.Err()
	}
	ctx, cancel := context.WithTimeout(wc.ctx, wsWriteTimeout)
	defer cancel()
	return wc.c.Write(ctx, websocket.MessageText, b)
}

func (wc *wsConn) fail(id, format string, args ...any) {
	_ = wc.send(nil, wsOut{Type: "error", ID: id, Message: fmt.Sprintf(format, args...)})
}

// handle acts on one client message. Mistakes are answered with an error message and
// leave the connection open.
func (wc *wsConn) handle(in *wsIn) {
	switch in.Type {
	case "subscribe":
		wc.subscribe(in)
	case "unsubscribe":
		wc.mu.Lock()
		sub, ok := wc.subs[in.ID]
		delete(wc.subs, in.ID)
		wc.mu.Unlock()
		if !ok {
			wc.fail(in.ID, "no subscription %q", in.ID)
			return
		}
		sub.cancel()
		// Sent after the cancel, under the write lock: no message of the
		// subscription follows it.
		_ = wc.send(nil, wsOut{Type: "unsubscribed", ID: in.ID})
	default:
		wc.fail(in.ID, "unknown message type %q: want subscribe or unsubscribe", in.Type)
	}
}

func (wc *wsConn) subscribe(in *wsIn) {
	if in.ID == "" || len(in.ID) > wsMaxID {
		wc.fail(in.ID, "a subscription needs an id of 1 to %d bytes", wsMaxID)
		return
	}
	var run func(ctx context.Context, sub *wsSub)
	switch in.Topic {
	case "logs":
		run = wc.logTopic(in)
	case "run":
		run = wc.runTopic(in)
	default:
		wc.fail(in.ID, "unknown topic %q: want logs or run", in.Topic)
		return
	}
	if run == nil {
		return // the topic answered the error
	}
	wc.mu.Lock()
	if _, taken := wc.subs[in.ID]; taken || len(wc.subs) >= wsMaxSubs {
		wc.mu.Unlock()
		if taken {
			wc.fail(in.ID, "subscription %q already exists", in.ID)
		} else {
			wc.fail(in.ID, "at most %d subscriptions per connection", wsMaxSubs)
		}
		return
	}
	ctx, cancel := context.WithCancel(wc.subCtx)
	sub := &wsSub{ctx: ctx, cancel: cancel}
	wc.subs[in.ID] = sub
	wc.mu.Unlock()

	_ = wc.send(sub, wsOut{Type: "subscribed", ID: in.ID})
	wc.wg.Add(1)
	wc.s.metrics.WSSubscribers.Inc()
	go func() {
		defer wc.wg.Done()
		defer wc.s.metrics.WSSubscribers.Dec()
		defer func() {
			cancel()
			wc.mu.Lock()
			if wc.subs[in.ID] == sub {
				delete(wc.subs, in.ID)
			}
			wc.mu.Unlock()
		}()
		run(ctx, sub)
	}()
}

// mayRead checks, at each subscription, that the connection's token is still valid and
// may see the project: ErrNotFound when it may not, so that the answer is the one a
// missing job or run gets. The token and its memberships are read anew, as a connection
// outlives many requests: a token revoked or a member removed since subscribes to
// nothing more.
func (wc *wsConn) mayRead(projectID uuid.UUID, name string) error {
	c := callerFrom(wc.ctx)
	if c == nil {
		return nil
	}
	tk, err := wc.s.store.LookupToken(wc.ctx, c.tk.Hash)
	if err != nil {
		return err
	}
	if !tk.Valid(wc.s.clock.Now()) {
		return fmt.Errorf("token %s is no longer valid: %w", tk.ID, store.ErrNotFound)
	}
	ctx := context.WithValue(wc.ctx, callerKey{}, &caller{tk: tk})
	role, err := wc.s.roleOn(ctx, projectID, name)
	if err != nil {
		return err
	}
	if role == "" {
		return store.ErrNotFound
	}
	return nil
}

// lookupFailed answers a failed lookup of a subscription's job or run.
func (wc *wsConn) lookupFailed(id, what string, err error) {
	if errors.Is(err, store.ErrNotFound) {
		wc.fail(id, "%s: not found", what)
		return
	}
	wc.s.log.ErrorContext(wc.ctx, "websocket subscribe", "what", what, "err", err)
	wc.fail(id, "internal error")
}

// logTopic checks a logs subscription and returns what follows it, or nil after
// answering an error.
func (wc *wsConn) logTopic(in *wsIn) func(context.Context, *wsSub) {
	jobID, err := uuid.Parse(in.JobID)
	if err != nil {
		wc.fail(in.ID, "malformed job_id %q: want a UUID", in.JobID)
		return nil
	}
	attempt := 0
	if in.Attempt != nil {
		if attempt = *in.Attempt; attempt < 1 {
			wc.fail(in.ID, "attempt must be a whole number from 1, not %d", attempt)
			return nil
		}
	}
	var after int64
	if in.AfterSeq != nil {
		if after = *in.AfterSeq; after < 0 {
			wc.fail(in.ID, "after_seq must be a whole number, not %d", after)
			return nil
		}
	}
	job, err := wc.s.store.GetJob(wc.ctx, jobID)
	if err == nil {
		err = wc.mayRead(job.ProjectID, "")
	}
	if err != nil {
		wc.lookupFailed(in.ID, "job "+jobID.String(), err)
		return nil
	}
	key, rerr := logKey(job, attempt)
	if rerr != nil {
		wc.fail(in.ID, "%s", rerr.msg)
		return nil
	}
	ended := attemptEnded(job, key.Attempt)
	return func(ctx context.Context, sub *wsSub) {
		send := func(lines []logs.Line) error {
			// A page is split so that no message is much over wsLinesBytes, for
			// clients that bound their message size.
			for len(lines) > 0 {
				n, size := 0, 0
				for n < len(lines) && (n == 0 || size+len(lines[n].Text) <= wsLinesBytes) {
					size += len(lines[n].Text) + 64
					n++
				}
				m := wsOut{Type: "lines", ID: in.ID, JobID: in.JobID, Attempt: key.Attempt, Lines: lines[:n]}
				if err := wc.send(sub, m); err != nil {
					return err
				}
				lines = lines[n:]
			}
			return nil
		}
		if err := wc.s.followLog(ctx, key, ended, after, send, nil); err != nil {
			if ctx.Err() == nil {
				wc.fail(in.ID, "reading the log failed; subscribe again after the last seq received")
			}
			return
		}
		end := wsOut{Type: "end", ID: in.ID, JobID: in.JobID, Attempt: key.Attempt}
		if j, err := wc.s.store.GetJob(ctx, key.Job); err == nil {
			end.Status, end.LatestAttempt = string(j.Status), j.Attempt
		}
		_ = wc.send(sub, end)
	}
}

// runTopic checks a run subscription and returns what follows it, or nil after
// answering an error.
func (wc *wsConn) runTopic(in *wsIn) func(context.Context, *wsSub) {
	runID, err := uuid.Parse(in.RunID)
	if err != nil {
		wc.fail(in.ID, "malformed run_id %q: want a UUID", in.RunID)
		return nil
	}
	run, err := wc.s.store.GetRun(wc.ctx, runID)
	if err == nil {
		err = wc.mayRead(run.ProjectID, run.Project)
	}
	if err != nil {
		wc.lookupFailed(in.ID, "run "+runID.String(), err)
		return nil
	}
	return func(ctx context.Context, sub *wsSub) {
		if err := wc.s.followRun(ctx, runID, func(run runJSON, jobs []jobJSON) error {
			return wc.send(sub, wsOut{Type: "run", ID: in.ID, Run: &run, Jobs: jobs})
		}); err != nil && ctx.Err() == nil {
			wc.fail(in.ID, "reading the run failed; subscribe again")
		}
	}
}

// followRun sends the run and its jobs, then again whenever any of it changed, until ctx
// ends or a read or send fails. It polls the store every runPollEvery, which sees changes
// made on any replica, but reads only the jobs that changed since the last read (the run's
// change feed, Run.JobSeq), keeping the others from before.
func (s *Server) followRun(ctx context.Context, id uuid.UUID, send func(runJSON, []jobJSON) error) error {
	poll := time.NewTicker(runPollEvery)
	defer poll.Stop()
	var (
		last []byte
		jobs []*store.Job
		at   = map[uuid.UUID]int{} // job id -> its index in jobs
		seq  int64
	)
	for {
		run, err := s.store.GetRun(ctx, id)
		if err != nil {
			return fmt.Errorf("get run %s: %w", id, err)
		}
		changed, err := s.store.ListJobsChanged(ctx, id, seq)
		if err != nil {
			return fmt.Errorf("list jobs of run %s: %w", id, err)
		}
		grown := false
		for _, j := range changed {
			if i, ok := at[j.ID]; ok {
				jobs[i] = j
			} else {
				at[j.ID] = len(jobs)
				jobs = append(jobs, j)
				grown = seq > 0
			}
		}
		if grown {
			// A computed matrix was expanded: its instances take their place in the
			// run's order, and the jobs that need them name them, which changed no
			// status of theirs; the run is read whole again.
			if jobs, err = s.store.ListJobs(ctx, id); err != nil {
				return fmt.Errorf("list jobs of run %s: %w", id, err)
			}
			clear(at)
			for i, j := range jobs {
				at[j.ID] = i
			}
		}
		seq = run.JobSeq
		view := newRunJSON(run, nonNilJobs(jobs))
		for i, wt := range s.waiting(ctx, jobs, jobs) {
			view.Jobs[i].Waiting = wt
		}
		snap, err := json.Marshal(view)
		if err != nil {
			return fmt.Errorf("encode run %s: %w", id, err)
		}
		if string(snap) != string(last) {
			jv := view.Jobs
			view.Jobs = nil
			if err := send(view, jv); err != nil {
				return err
			}
			last = snap
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-poll.C:
		}
	}
}
