package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// logLine is one line of a job's log as the API sends it.
type logLine struct {
	Seq       int64  `json:"seq"`
	TS        int64  `json:"ts"`
	Stream    string `json:"stream"`
	Text      string `json:"text"`
	Truncated bool   `json:"truncated,omitempty"`
	// Group, Level and Annotation mark the lines of workflow commands (docs/logs.md).
	Group      string          `json:"group,omitempty"`
	Level      string          `json:"level,omitempty"`
	Annotation json.RawMessage `json:"annotation,omitempty"`
}

// display is how a terminal shows l, and false for a line it leaves out: a fold's title
// as "▸ TITLE" (its end is not shown), a command's message after its level.
func (l logLine) display() (string, bool) {
	switch l.Group {
	case "start":
		return "▸ " + l.Text, true
	case "end":
		return "", false
	}
	if l.Level != "" {
		return l.Level + ": " + l.Text, true
	}
	return l.Text, true
}

// logEnd is the end event of a log stream: the attempt is over and every line was sent.
// Status is the job's status now: "retrying" or "queued" when another attempt follows.
type logEnd struct {
	Attempt       int    `json:"attempt"`
	LatestAttempt int    `json:"latest_attempt"`
	Status        string `json:"status"`
}

// streamGiveUp is how long a log stream keeps reconnecting without receiving anything
// before it reports the server unreachable.
const streamGiveUp = time.Minute

// streamLog follows one attempt of a job's log over Server-Sent Events and calls line
// for every line after seq after, in order and each once. attempt 0 follows the job's
// latest attempt (pinned at the first connection, so that a reconnect cannot switch
// attempts). A dropped or silent connection is opened again with Last-Event-ID set to
// the last seq received, so nothing is lost or repeated. It returns the end event once
// the attempt has ended and every line was sent.
func (c *apiClient) streamLog(ctx context.Context, job string, attempt int, after int64, line func(logLine)) (logEnd, error) {
	wait := c.retryEvery
	lastProgress := time.Now()
	for {
		end, n, err := c.streamOnce(ctx, job, &attempt, &after, line)
		if err == nil {
			return end, nil
		}
		if ctx.Err() != nil {
			return logEnd{}, ctx.Err()
		}
		if refused(err) {
			return logEnd{}, fmt.Errorf("follow the log of job %s: %w", job, err)
		}
		if n > 0 {
			lastProgress, wait = time.Now(), c.retryEvery
		}
		if time.Since(lastProgress) > streamGiveUp {
			return logEnd{}, fmt.Errorf("follow the log of job %s: %w", job, err)
		}
		select {
		case <-ctx.Done():
			return logEnd{}, ctx.Err()
		case <-time.After(wait):
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// refused says whether the coordinator answered err's request with a refusal (4xx,
// but 429) that asking again cannot change.
func refused(err error) bool {
	var se *serverError
	return errors.As(err, &se) && se.Status >= 400 && se.Status < 500 && se.Status != http.StatusTooManyRequests
}

// errStreamCut says a stream closed before its end event.
var errStreamCut = errors.New("the log stream closed before the job's end")

// streamOnce is one connection of streamLog. It returns how many events it received, and
// an error when the connection ended without the end event.
func (c *apiClient) streamOnce(ctx context.Context, job string, attempt *int, after *int64, line func(logLine)) (logEnd, int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	q := url.Values{}
	if *attempt > 0 {
		q.Set("attempt", strconv.Itoa(*attempt))
	}
	h := http.Header{"Accept": {"text/event-stream"}}
	if *after > 0 {
		h.Set("Last-Event-ID", strconv.FormatInt(*after, 10))
	}
	path := "/api/v1/jobs/" + job + "/logs/stream"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	// A connection that says nothing, not even the keep-alive, is dead.
	idle := time.AfterFunc(c.streamIdle, cancel)
	defer idle.Stop()
	resp, err := c.send(ctx, http.MethodGet, path, nil, h)
	if err != nil {
		return logEnd{}, 0, err
	}
	defer resp.Body.Close()
	if *attempt == 0 {
		if n, err := strconv.Atoi(resp.Header.Get("X-Gantry-Attempt")); err == nil && n > 0 {
			*attempt = n
		}
	}

	sc := bufio.NewScanner(resp.Body)
	// A line's text is at most 64 KiB, which JSON escaping can make several times longer.
	sc.Buffer(make([]byte, 4<<10), 8<<20)
	var event string
	var data strings.Builder
	events := 0
	for sc.Scan() {
		idle.Reset(c.streamIdle)
		text := sc.Text()
		if text != "" {
			field, value, _ := strings.Cut(text, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "event":
				event = value
			case "data":
				if data.Len() > 0 {
					data.WriteByte('\n')
				}
				data.WriteString(value)
			}
			continue
		}
		// A blank line dispatches the event.
		switch event {
		case "line":
			var l logLine
			if err := json.Unmarshal([]byte(data.String()), &l); err != nil {
				return logEnd{}, events, fmt.Errorf("read log line: %w", err)
			}
			events++
			if l.Seq > *after {
				line(l)
				*after = l.Seq
			}
		case "end":
			var e logEnd
			if err := json.Unmarshal([]byte(data.String()), &e); err != nil {
				return logEnd{}, events, fmt.Errorf("read log end: %w", err)
			}
			return e, events + 1, nil
		}
		event = ""
		data.Reset()
	}
	if err := sc.Err(); err != nil {
		return logEnd{}, events, fmt.Errorf("read the log stream: %w", err)
	}
	return logEnd{}, events, errStreamCut
}
