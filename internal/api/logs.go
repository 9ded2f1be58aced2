package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// DefaultKeepAlive is how often an idle log stream sends a comment, so that proxies and
// load balancers do not close it.
const DefaultKeepAlive = 15 * time.Second

// Log paging: how many lines one read answers unless asked, and at most.
const (
	defaultLogLimit = 10_000
	maxLogLimit     = 100_000
	// streamPage is how many lines the stream reads at a time.
	streamPage = 1000
	// DefaultEndCheck is how often an idle stream asks the store whether its attempt
	// ended, for ends this replica was not told about (a lease reaped, another replica).
	DefaultEndCheck = 2 * time.Second
	// DefaultTokenCheck is how often an open stream or WebSocket reads its token again:
	// it outlives the request's check, and must not outlive the token's revocation by more.
	DefaultTokenCheck = 5 * time.Second
)

func (s *Server) logRoutes() {
	s.handle("POST /api/v1/agent/jobs/{id}/logs", agentAccess, s.appendLogs)
	s.handle("GET /api/v1/jobs/{id}/logs", on(thingJob, store.RoleViewer), s.jobLogs)
	s.handle("GET /api/v1/jobs/{id}/logs/stream", on(thingJob, store.RoleViewer), s.streamLogs)
	s.handle("GET /api/v1/runs/{id}/logs", on(thingRun, store.RoleViewer), s.runLogs)
}

type appendLogsRequest struct {
	Token string      `json:"token"`
	Lines []logs.Line `json:"lines"`
}

func (r *appendLogsRequest) token() string { return r.Token }

type appendLogsResponse struct {
	// NextSeq is the seq the coordinator expects next: every line below it is stored.
	NextSeq int64 `json:"next_seq"`
	// Truncated says the attempt reached its log limit; later lines are dropped.
	Truncated bool `json:"truncated,omitempty"`
}

// appendLogs stores a batch of a running job's log lines. Lines already stored are
// skipped, so a re-sent batch never duplicates one; a batch that starts past the log's
// end stores nothing, and next_seq says where to re-send from.
func (s *Server) appendLogs(w http.ResponseWriter, r *http.Request) {
	var req appendLogsRequest
	ref, ok := s.leaseRequest(w, r, &req)
	if !ok {
		return
	}
	next, truncated, ok := s.appendLeaseLog(w, r, ref, req.Lines, "append logs")
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, appendLogsResponse{NextSeq: next, Truncated: truncated})
}

// appendLeaseLog stores lines of the attempt the lease ref holds, skipping those
// already stored, and returns the seq the log expects next and whether it reached its
// limit; on an error it has answered and returns false.
func (s *Server) appendLeaseLog(w http.ResponseWriter, r *http.Request, ref store.LeaseRef, lines []logs.Line, action string) (int64, bool, bool) {
	// One indexed row, checked on every batch: only the store knows of a lease lost to the
	// reaper, a timeout or a cancel.
	attempt, err := s.store.LeaseAttempt(r.Context(), ref)
	if err != nil {
		s.agentError(w, r, action, err)
		return 0, false, false
	}
	next, truncated, err := s.logs.Append(r.Context(), logs.Key{Job: ref.JobID, Attempt: attempt}, lines)
	if err != nil && !errors.Is(err, logs.ErrGap) {
		s.storeError(w, r, action, err)
		return 0, false, false
	}
	return next, truncated, true
}

// logQuery is what the log readers take from the query string.
type logQuery struct {
	after   int64
	limit   int
	attempt int // 0: the job's current attempt
	match   logs.Matcher
	// download asks for the whole log as a plain-text file: no limit, a file name.
	download bool
	limitSet bool
}

func parseLogQuery(r *http.Request) (logQuery, *requestError) {
	q := r.URL.Query()
	out := logQuery{limit: defaultLogLimit}
	if v := q.Get("after_seq"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return out, badRequest("after_seq must be a whole number, not %q", v)
		}
		out.after = n
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxLogLimit {
			return out, badRequest("limit must be a whole number from 1 to %d, not %q", maxLogLimit, v)
		}
		out.limit = n
		out.limitSet = true
	}
	download, rerr := boolParam(q.Get("download"), "download")
	if rerr != nil {
		return out, rerr
	}
	out.download = download
	if v := q.Get("attempt"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return out, badRequest("attempt must be a whole number from 1, not %q", v)
		}
		out.attempt = n
	}
	if text := q.Get("q"); text != "" {
		regex, rerr := boolParam(q.Get("regex"), "regex")
		if rerr != nil {
			return out, rerr
		}
		fold, rerr := boolParam(q.Get("ignore_case"), "ignore_case")
		if rerr != nil {
			return out, rerr
		}
		m, err := logs.NewMatcher(text, regex, fold)
		if err != nil {
			return out, badRequest("q: %v", errors.Unwrap(err))
		}
		out.match = m
	}
	return out, nil
}

func boolParam(v, name string) (bool, *requestError) {
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, badRequest("%s must be true or false, not %q", name, v)
	}
	return b, nil
}

// logKey picks the attempt a reader asks for: the one named, or the job's latest (1
// before the job was first claimed).
func logKey(job *store.Job, attempt int) (logs.Key, *requestError) {
	latest := max(job.Attempt, 1)
	if attempt == 0 {
		attempt = latest
	}
	if attempt > latest {
		return logs.Key{}, &requestError{status: http.StatusNotFound, code: codeNotFound,
			msg: fmt.Sprintf("job %s has no attempt %d (latest is %d)", job.ID, attempt, latest)}
	}
	return logs.Key{Job: job.ID, Attempt: attempt}, nil
}

// logRequest reads the id in the path and the log query of a log read; on a bad one it
// has answered and returns false.
func logRequest(w http.ResponseWriter, r *http.Request) (uuid.UUID, logQuery, bool) {
	id, rerr := pathID(r)
	if rerr == nil {
		var lq logQuery
		if lq, rerr = parseLogQuery(r); rerr == nil {
			return id, lq, true
		}
	}
	writeRequestError(w, rerr)
	return uuid.UUID{}, logQuery{}, false
}

func wantsNDJSON(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "application/x-ndjson")
}

// jobLogs answers a job attempt's lines after after_seq, as text or NDJSON; with q, only
// the lines that match, each with its line number (seq).
func (s *Server) jobLogs(w http.ResponseWriter, r *http.Request) {
	id, lq, ok := logRequest(w, r)
	if !ok {
		return
	}
	job, err := s.store.GetJob(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "read logs", err)
		return
	}
	key, rerr := logKey(job, lq.attempt)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if lq.download {
		s.downloadLog(w, r, job, key, lq)
		return
	}
	var lines []logs.Line
	if lq.match != nil {
		lines, err = s.logs.Search(r.Context(), key, lq.match, lq.after, lq.limit)
	} else {
		lines, err = s.logs.Read(r.Context(), key, lq.after, lq.limit)
	}
	if err != nil {
		s.storeError(w, r, "read logs", err)
		return
	}
	w.Header().Set("X-Gantry-Attempt", strconv.Itoa(key.Attempt))
	if len(lines) > 0 {
		w.Header().Set("X-Gantry-Last-Seq", strconv.FormatInt(lines[len(lines)-1].Seq, 10))
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if wantsNDJSON(r) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(bw)
		for i := range lines {
			_ = enc.Encode(&lines[i])
		}
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, l := range lines {
			if lq.match != nil {
				bw.WriteString(strconv.FormatInt(l.Seq, 10))
				bw.WriteByte(':')
			}
			bw.WriteString(l.Text)
			bw.WriteByte('\n')
		}
	}
	_ = bw.Flush()
}

// downloadLog answers an attempt's whole log (after after_seq) as a plain-text file, a
// line of text per line, read from the store a page at a time so that no log is held
// whole in memory.
func (s *Server) downloadLog(w http.ResponseWriter, r *http.Request, job *store.Job, key logs.Key, lq logQuery) {
	if lq.match != nil || lq.limitSet {
		writeError(w, http.StatusBadRequest, codeBadRequest, "download=true answers the whole log: it takes no q and no limit", nil)
		return
	}
	lines, err := s.logs.Read(r.Context(), key, lq.after, streamPage)
	if err != nil {
		s.storeError(w, r, "read logs", err)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="%s"`, logFileName(job, key.Attempt)))
	h.Set("X-Gantry-Attempt", strconv.Itoa(key.Attempt))
	bw := bufio.NewWriterSize(w, 64<<10)
	for len(lines) > 0 {
		for _, l := range lines {
			if l.Group == logs.GroupEnd {
				continue // it has no text: the fold's end shows nothing
			}
			bw.WriteString(l.Text)
			bw.WriteByte('\n')
		}
		if len(lines) < streamPage {
			break
		}
		if lines, err = s.logs.Read(r.Context(), key, lines[len(lines)-1].Seq, streamPage); err != nil {
			// The status is sent: the cut shows as a last line, and in the server's log.
			s.log.WarnContext(r.Context(), "download log", "job", key.Job, "attempt", key.Attempt, "err", err)
			bw.WriteString("[gantry: the rest of the log could not be read]\n")
			break
		}
	}
	_ = bw.Flush()
}

// logFileName is a download's file name: the job's key (only letters, digits, '.', '-'
// and '_' kept), the random end of its id and the attempt.
func logFileName(job *store.Job, attempt int) string {
	name := strings.Map(func(r rune) rune {
		if r < 128 && (r == '.' || r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return r
		}
		return '_'
	}, job.Key)
	return fmt.Sprintf("%s-%s-attempt-%d.log", name, job.ID.String()[24:], attempt)
}

// runLine is a line of a run-wide log read: which job it is from, and the line.
type runLine struct {
	JobID   string `json:"job_id"`
	Job     string `json:"job"`
	Attempt int    `json:"attempt"`
	logs.Line
}

// runLogs answers the lines of every job of a run (each job's latest attempt, in plan
// order), or with q only those that match: a search across the run.
func (s *Server) runLogs(w http.ResponseWriter, r *http.Request) {
	id, lq, ok := logRequest(w, r)
	if !ok {
		return
	}
	if lq.attempt != 0 || lq.after != 0 {
		writeError(w, http.StatusBadRequest, codeBadRequest, "attempt and after_seq apply to one job's log, not a run's", nil)
		return
	}
	if _, err := s.store.GetRun(r.Context(), id); err != nil {
		s.storeError(w, r, "read run logs", err)
		return
	}
	jobs, err := s.store.ListJobs(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "read run logs", err)
		return
	}
	var out []runLine
	for _, j := range jobs {
		if j.Attempt == 0 || len(out) >= lq.limit {
			continue
		}
		key := logs.Key{Job: j.ID, Attempt: j.Attempt}
		var lines []logs.Line
		if lq.match != nil {
			lines, err = s.logs.Search(r.Context(), key, lq.match, 0, lq.limit-len(out))
		} else {
			lines, err = s.logs.Read(r.Context(), key, 0, lq.limit-len(out))
		}
		if err != nil {
			s.storeError(w, r, "read run logs", err)
			return
		}
		for _, l := range lines {
			out = append(out, runLine{JobID: j.ID.String(), Job: j.Key, Attempt: j.Attempt, Line: l})
		}
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	if wantsNDJSON(r) {
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(bw)
		for i := range out {
			_ = enc.Encode(&out[i])
		}
	} else {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		for _, l := range out {
			fmt.Fprintf(bw, "%s:%d:%s\n", l.Job, l.Seq, l.Text)
		}
	}
	_ = bw.Flush()
}

// attemptEnded reports whether the store says the attempt is over: the job moved on to
// a later attempt, finished, or went back to the queue after it.
func attemptEnded(job *store.Job, attempt int) bool {
	if job.Attempt > attempt || job.Status.Terminal() {
		return true
	}
	if job.Attempt == attempt {
		switch job.Status {
		case store.JobQueued, store.JobRetrying, store.JobPending, store.JobWaitingApproval:
			return true
		}
	}
	return false
}

// streamLogs follows a job attempt's log as Server-Sent Events: every line is an event
// whose id is its seq, so a client that reconnects with Last-Event-ID resumes with no
// gap and no repeat. Comments keep idle connections open through proxies, and the
// stream ends with an "end" event once the attempt has ended and every line was sent.
func (s *Server) streamLogs(w http.ResponseWriter, r *http.Request) {
	id, lq, ok := logRequest(w, r)
	if !ok {
		return
	}
	if v := r.Header.Get("Last-Event-ID"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			writeError(w, http.StatusBadRequest, codeBadRequest, "Last-Event-ID must be a line's seq, not "+strconv.Quote(v), nil)
			return
		}
		lq.after = n
	}
	job, err := s.store.GetJob(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "stream logs", err)
		return
	}
	key, rerr := logKey(job, lq.attempt)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Gantry-Attempt", strconv.Itoa(key.Attempt))
	w.WriteHeader(http.StatusOK)
	s.metrics.SSESubscribers.Inc()
	defer s.metrics.SSESubscribers.Dec()
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString("retry: 2000\n\n")
	if err := flush(bw, rc); err != nil {
		return
	}
	var num []byte
	send := func(lines []logs.Line) error {
		for i := range lines {
			b, _ := json.Marshal(&lines[i])
			num = strconv.AppendInt(num[:0], lines[i].Seq, 10)
			bw.WriteString("id: ")
			bw.Write(num)
			bw.WriteString("\nevent: line\ndata: ")
			bw.Write(b)
			bw.WriteString("\n\n")
		}
		return flush(bw, rc)
	}
	idle := func() error {
		bw.WriteString(": keep-alive\n\n")
		return flush(bw, rc)
	}
	// A server that drains ends the stream without its end event: the client opens it
	// again, on this server once it is back or on another replica.
	ctx, undrain := s.untilDrained(r.Context())
	defer undrain()
	ctx, stop := s.whileTokenValid(ctx)
	defer stop()
	if err := s.followLog(ctx, key, attemptEnded(job, key.Attempt), lq.after, send, idle); err != nil {
		if errors.Is(context.Cause(ctx), errTokenInvalid) {
			// Said once, so a client knows not to reconnect with the same token.
			bw.WriteString("event: error\ndata: ")
			b, _ := json.Marshal(errorBody{Error: errorJSON{Code: codeUnauthorized, Message: errTokenInvalid.Error(), Details: []errorDetail{}}})
			bw.Write(b)
			bw.WriteString("\n\n")
			_ = flush(bw, rc)
		}
		return
	}
	s.writeEnd(r.Context(), bw, rc, key)
}

// errTokenInvalid is the cause that ends a stream whose token was revoked or expired
// while it was open.
var errTokenInvalid = errors.New("the token was revoked or has expired")

// whileTokenValid returns a context that is cancelled with errTokenInvalid once the
// request's token is revoked or expires, read again every tokenCheck; stop ends the
// watch. A read that fails for another reason keeps the stream (the next one decides).
// With auth off there is no token, and ctx is returned as it is.
func (s *Server) whileTokenValid(parent context.Context) (ctx context.Context, stop func()) {
	tk := tokenFrom(parent)
	if tk == nil {
		return parent, func() {}
	}
	ctx, cancel := context.WithCancelCause(parent)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.tokenCheck)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			cur, err := s.store.LookupToken(ctx, tk.Hash)
			switch {
			case errors.Is(err, store.ErrNotFound), err == nil && !cur.Valid(s.clock.Now()):
				cancel(errTokenInvalid)
				return
			case err != nil && ctx.Err() == nil:
				s.log.WarnContext(ctx, "read a stream's token again", "err", err)
			}
		}
	}()
	return ctx, func() {
		cancel(nil)
		<-done
	}
}

// followLog pulls key's lines after after, a page at a time, and hands each page to
// send: in order, with no gap and no repeat, holding no more than that one page, so a
// slow reader slows only itself. It returns nil once the attempt has ended (ended says
// it already had) and every line was sent, and otherwise the error that stopped it: the
// context's, a failed read (logged here) or send's. idle, when not nil, is called
// every keep-alive interval in which no line came.
func (s *Server) followLog(ctx context.Context, key logs.Key, ended bool, after int64,
	send func([]logs.Line) error, idle func() error) error {
	hub := s.logs.Hub()
	defer hub.Watch(key)()
	var keepAlive <-chan time.Time
	if idle != nil {
		t := time.NewTicker(s.keepAlive)
		defer t.Stop()
		keepAlive = t.C
	}
	endCheck := time.NewTicker(s.endCheck)
	defer endCheck.Stop()
	for {
		changed := hub.Changed(key)
		ended = ended || hub.Ended(key)
		lines, err := s.logs.Read(ctx, key, after, streamPage)
		if err != nil {
			if ctx.Err() == nil {
				s.log.WarnContext(ctx, "follow log", "job", key.Job, "attempt", key.Attempt, "err", err)
			}
			return fmt.Errorf("read log %s: %w", key, err)
		}
		if len(lines) > 0 {
			if err := send(lines); err != nil {
				return err
			}
			after = lines[len(lines)-1].Seq
			if len(lines) == streamPage {
				continue
			}
		}
		if ended && len(lines) == 0 {
			return nil
		}
		if ended {
			continue // read until nothing is left, then end
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		case <-keepAlive:
			if err := idle(); err != nil {
				return err
			}
		case <-endCheck.C:
			if j, err := s.store.GetJob(ctx, key.Job); err == nil && attemptEnded(j, key.Attempt) {
				ended = true
			}
		}
	}
}

func (s *Server) writeEnd(ctx context.Context, bw *bufio.Writer, rc *http.ResponseController, key logs.Key) {
	// status is the job's now: the attempt's own result when it was the last one,
	// "retrying" or "queued" when another attempt follows.
	end := map[string]any{"attempt": key.Attempt}
	if j, err := s.store.GetJob(ctx, key.Job); err == nil {
		end["status"] = j.Status
		end["latest_attempt"] = j.Attempt
	}
	b, _ := json.Marshal(end)
	fmt.Fprintf(bw, "event: end\ndata: %s\n\n", b)
	_ = flush(bw, rc)
}

func flush(bw *bufio.Writer, rc *http.ResponseController) error {
	if err := bw.Flush(); err != nil {
		return err
	}
	return rc.Flush()
}

// endLog tells the log service an attempt ended, once its completion is stored.
func (s *Server) endLog(ctx context.Context, job uuid.UUID, attempt int) {
	if err := s.logs.End(context.WithoutCancel(ctx), logs.Key{Job: job, Attempt: attempt}); err != nil {
		s.log.WarnContext(ctx, "finish log", "job", job, "attempt", attempt, "err", err)
	}
}
