package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/logs/logchunks"
)

// logStorages are the log storages every log test runs on: files (embedded mode) and
// chunks in the database (scale-out mode; here on SQLite, on PostgreSQL in the replicas
// test).
var logStorages = map[string]func(t *testing.T, cfg *api.Config) logs.Storage{
	"files": func(t *testing.T, cfg *api.Config) logs.Storage {
		fs, err := logs.OpenFileStorage(t.TempDir(), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = fs.Close() })
		return fs
	},
	"chunks": func(t *testing.T, cfg *api.Config) logs.Storage { return logchunks.New(cfg.Store) },
}

// setupLogs starts a server whose log service uses the named storage.
func setupLogs(t *testing.T, storage string, maxBytes int64) *bundle {
	return setupWith(t, func(cfg *api.Config) {
		svc := logs.NewService(logs.Config{Storage: logStorages[storage](t, cfg), Notifier: cfg.Store, MaxBytes: maxBytes})
		t.Cleanup(svc.Close)
		cfg.Logs = svc
		cfg.KeepAlive = 100 * time.Millisecond
	})
}

// leasedJob creates a one-job run and claims it, returning the job id and lease token.
func (b *bundle) leasedJob(t *testing.T) (id, token string) {
	t.Helper()
	b.post(t, "/api/v1/runs", `{"pipeline": "name: l\njobs:\n  a: {steps: [{run: echo a}]}\n"}`)
	got := b.claim(t, `{"worker_id": "w", "wait": "0s"}`)
	if len(got.Jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(got.Jobs))
	}
	return got.Jobs[0].ID, got.Jobs[0].Lease.Token
}

func batch(token string, first, last int64, text string) string {
	var lines []logs.Line
	for seq := first; seq <= last; seq++ {
		lines = append(lines, logs.Line{Seq: seq, TS: 1000 + seq, Stream: logs.Stdout, Text: fmt.Sprintf("%s %d", text, seq)})
	}
	b, _ := json.Marshal(map[string]any{"token": token, "lines": lines})
	return string(b)
}

func (b *bundle) appendLogs(t *testing.T, id, body string) int64 {
	t.Helper()
	r := b.post(t, "/api/v1/agent/jobs/"+id+"/logs", body)
	if r.status != http.StatusOK {
		t.Fatalf("append logs: %d %s", r.status, r.body)
	}
	var ans struct {
		NextSeq int64 `json:"next_seq"`
	}
	r.decode(t, &ans)
	return ans.NextSeq
}

func (b *bundle) readLines(t *testing.T, path string) []logs.Line {
	t.Helper()
	r := b.do(t, http.MethodGet, path, "", "", map[string]string{"Accept": "application/x-ndjson"})
	if r.status != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, r.status, r.body)
	}
	var out []logs.Line
	dec := json.NewDecoder(strings.NewReader(string(r.body)))
	for dec.More() {
		var l logs.Line
		if err := dec.Decode(&l); err != nil {
			t.Fatalf("decode %s: %v", r.body, err)
		}
		out = append(out, l)
	}
	return out
}

func seqs(lines []logs.Line) string {
	var b strings.Builder
	for i, l := range lines {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(l.Seq, 10))
	}
	return b.String()
}

// TestLogsAppendOnce: re-sent, overlapping and reordered batches store every line once
// and in order; a batch past the end stores nothing and says where to re-send from.
func TestLogsAppendOnce(t *testing.T) {
	t.Parallel()
	for name := range logStorages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupLogs(t, name, 0)
			id, token := b.leasedJob(t)
			steps := []struct {
				first, last int64
				want        int64
			}{
				{1, 3, 4}, {1, 3, 4}, {2, 5, 6}, // re-sent and overlapping
				{8, 9, 6},             // arrives before 6-7: refused, re-send from 6
				{6, 7, 8}, {8, 9, 10}, // the re-send
				{1, 9, 10},
			}
			for _, s := range steps {
				if got := b.appendLogs(t, id, batch(token, s.first, s.last, "line")); got != s.want {
					t.Errorf("append %d-%d: next_seq %d, want %d", s.first, s.last, got, s.want)
				}
			}
			lines := b.readLines(t, "/api/v1/jobs/"+id+"/logs")
			if got, want := seqs(lines), "1,2,3,4,5,6,7,8,9"; got != want {
				t.Fatalf("stored seqs %s, want %s", got, want)
			}
			if lines[4].Text != "line 5" || lines[4].TS != 1005 || lines[4].Stream != "stdout" {
				t.Errorf("line 5 = %+v", lines[4])
			}
			if got := seqs(b.readLines(t, "/api/v1/jobs/"+id+"/logs?after_seq=6&limit=2")); got != "7,8" {
				t.Errorf("after_seq=6&limit=2 gave %s, want 7,8", got)
			}
			plain := b.get(t, "/api/v1/jobs/"+id+"/logs?after_seq=7")
			if string(plain.body) != "line 8\nline 9\n" || !strings.HasPrefix(plain.header.Get("Content-Type"), "text/plain") {
				t.Errorf("text/plain answer %q (%s)", plain.body, plain.header.Get("Content-Type"))
			}

			// Only the lease holder may append, and bad batches are refused whole.
			expectError(t, b.post(t, "/api/v1/agent/jobs/"+id+"/logs", batch("stale", 10, 10, "x")), http.StatusConflict, "lease_lost")
			for _, bad := range []string{
				`{"token": "` + token + `", "lines": [{"seq": 0, "stream": "stdout", "text": "x"}]}`,
				`{"token": "` + token + `", "lines": [{"seq": 10, "stream": "tty", "text": "x"}]}`,
				`{"token": "` + token + `", "lines": [{"seq": 10, "stream": "stdout"}, {"seq": 12, "stream": "stdout"}]}`,
				`{"token": "` + token + `", "lines": "nope"}`,
			} {
				expectError(t, b.post(t, "/api/v1/agent/jobs/"+id+"/logs", bad), http.StatusBadRequest, "bad_request")
			}
			if got := seqs(b.readLines(t, "/api/v1/jobs/"+id+"/logs")); got != "1,2,3,4,5,6,7,8,9" {
				t.Errorf("after refused batches the log is %s", got)
			}
			for _, q := range []string{"after_seq=-1", "limit=0", "attempt=2", "q=(&regex=true", "regex=maybe&q=x"} {
				r := b.get(t, "/api/v1/jobs/"+id+"/logs?"+q)
				if r.status != http.StatusBadRequest && r.status != http.StatusNotFound {
					t.Errorf("?%s: status %d, want 400 or 404", q, r.status)
				}
			}
		})
	}
}

// TestLogsSearch: substring and regular expression search with line numbers, in one job
// and across a run.
func TestLogsSearch(t *testing.T) {
	t.Parallel()
	for name := range logStorages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupLogs(t, name, 0)
			id, token := b.leasedJob(t)
			body, _ := json.Marshal(map[string]any{"token": token, "lines": []logs.Line{
				{Seq: 1, Stream: "stdout", Text: "compiling"}, {Seq: 2, Stream: "stderr", Text: "warning: unused x"},
				{Seq: 3, Stream: "stdout", Text: "ok 12 tests"}, {Seq: 4, Stream: "stderr", Text: "WARNING: slow"},
			}})
			b.appendLogs(t, id, string(body))
			for q, want := range map[string]string{
				"q=warning":                      "2",
				"q=warning&ignore_case=true":     "2,4",
				"q=%5Eok+%5Cd%2B&regex=true":     "3",
				"q=w.*&regex=true&ignore_case=1": "2,4",
			} {
				if got := seqs(b.readLines(t, "/api/v1/jobs/"+id+"/logs?"+q)); got != want {
					t.Errorf("?%s matched lines %s, want %s", q, got, want)
				}
			}
			if r := b.get(t, "/api/v1/jobs/"+id+"/logs?q=warn&ignore_case=true"); string(r.body) != "2:warning: unused x\n4:WARNING: slow\n" {
				t.Errorf("plain search answer %q", r.body)
			}
			var run struct {
				RunID string `json:"run_id"`
			}
			b.get(t, "/api/v1/jobs/"+id).decode(t, &run)
			r := b.get(t, "/api/v1/runs/"+run.RunID+"/logs?q=tests")
			if string(r.body) != "a:3:ok 12 tests\n" {
				t.Errorf("run search answer %q (%d)", r.body, r.status)
			}
		})
	}
}

// TestLogsLimit: past the attempt's limit the rest is dropped, a system line says so,
// and the worker is told it may stop sending.
func TestLogsLimit(t *testing.T) {
	t.Parallel()
	b := setupLogs(t, "files", 1<<20)
	id, token := b.leasedJob(t)
	long := strings.Repeat("x", 1000)
	var truncated bool
	var seq int64 = 1
	for !truncated && seq < 5000 {
		var lines []logs.Line
		for range 100 {
			lines = append(lines, logs.Line{Seq: seq, Stream: "stdout", Text: long})
			seq++
		}
		body, _ := json.Marshal(map[string]any{"token": token, "lines": lines})
		r := b.post(t, "/api/v1/agent/jobs/"+id+"/logs", string(body))
		var ans struct {
			NextSeq   int64 `json:"next_seq"`
			Truncated bool  `json:"truncated"`
		}
		r.decode(t, &ans)
		if ans.NextSeq != seq {
			t.Fatalf("next_seq %d after sending up to %d", ans.NextSeq, seq-1)
		}
		truncated = ans.Truncated
	}
	if !truncated {
		t.Fatal("never truncated")
	}
	lines := b.readLines(t, "/api/v1/jobs/"+id+"/logs?limit=100000")
	last := lines[len(lines)-1]
	if last.Stream != "system" || !last.Truncated || !strings.Contains(last.Text, "1 MiB") {
		t.Errorf("last line %+v, want the system line saying the log was truncated at 1 MiB", last)
	}
	if n := len(lines); n < 900 || n > 1100 {
		t.Errorf("%d lines kept of ~1 KiB each under a 1 MiB limit", n)
	}
	body, _ := json.Marshal(map[string]any{"token": token, "lines": []logs.Line{{Seq: seq, Stream: "stdout", Text: "more"}}})
	b.post(t, "/api/v1/agent/jobs/"+id+"/logs", string(body))
	if got := b.readLines(t, "/api/v1/jobs/"+id+"/logs?limit=100000"); len(got) != len(lines) {
		t.Errorf("a line after the limit was stored: %d lines, had %d", len(got), len(lines))
	}
}

type sseEvent struct {
	id, event, data string
}

// sseStream opens a log stream and returns its events as they come.
func (b *bundle) sseStream(t *testing.T, ctx context.Context, path, lastID string) <-chan sseEvent {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.url+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" || res.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("stream: %d %v", res.StatusCode, res.Header)
	}
	out := make(chan sseEvent, 1024)
	go func() {
		defer close(out)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev != (sseEvent{}) {
					out <- ev
				}
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				out <- sseEvent{event: "comment"}
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.event = line[7:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return out
}

// nextLines reads line events until n arrived, skipping keep-alives.
func nextLines(t *testing.T, ch <-chan sseEvent, n int) []logs.Line {
	t.Helper()
	var out []logs.Line
	deadline := time.After(10 * time.Second)
	for len(out) < n {
		select {
		case ev, ok := <-ch:
			if !ok {
				t.Fatalf("stream closed after %d of %d lines", len(out), n)
			}
			if ev.event != "line" {
				continue
			}
			var l logs.Line
			if err := json.Unmarshal([]byte(ev.data), &l); err != nil {
				t.Fatal(err)
			}
			if ev.id != strconv.FormatInt(l.Seq, 10) {
				t.Errorf("event id %s for line %d", ev.id, l.Seq)
			}
			out = append(out, l)
		case <-deadline:
			t.Fatalf("got %d of %d lines", len(out), n)
		}
	}
	return out
}

// TestLogStream: a reader joining mid-job gets the history and then the live lines with
// no gap; one resuming with Last-Event-ID continues after it; both see the end event
// once the job completed, after every line; idle streams get keep-alives.
func TestLogStream(t *testing.T) {
	t.Parallel()
	for name := range logStorages {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupLogs(t, name, 0)
			id, token := b.leasedJob(t)
			b.appendLogs(t, id, batch(token, 1, 50, "early"))
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			stream := b.sseStream(t, ctx, "/api/v1/jobs/"+id+"/logs/stream", "")
			if got := seqs(nextLines(t, stream, 50)); got != seqs(b.readLines(t, "/api/v1/jobs/"+id+"/logs")) {
				t.Fatalf("history %s", got)
			}
			sawKeepAlive := false
			for !sawKeepAlive {
				select {
				case ev := <-stream:
					sawKeepAlive = ev.event == "comment"
				case <-time.After(10 * time.Second):
					t.Fatal("no keep-alive on an idle stream")
				}
			}
			for first := int64(51); first <= 250; first += 50 {
				b.appendLogs(t, id, batch(token, first, first+49, "live"))
			}
			live := nextLines(t, stream, 200)
			for i, l := range live {
				if l.Seq != int64(51+i) {
					t.Fatalf("live line %d has seq %d, want %d", i, l.Seq, 51+i)
				}
			}
			resumed := b.sseStream(t, ctx, "/api/v1/jobs/"+id+"/logs/stream", "240")
			if got := nextLines(t, resumed, 10); got[0].Seq != 241 || got[9].Seq != 250 {
				t.Errorf("resumed after 240 with %s", seqs(got))
			}
			b.appendLogs(t, id, batch(token, 251, 251, "last"))
			if r := b.post(t, "/api/v1/agent/jobs/"+id+"/complete", `{"token": "`+token+`", "status": "success"}`); r.status != http.StatusOK {
				t.Fatalf("complete: %d %s", r.status, r.body)
			}
			for _, ch := range []<-chan sseEvent{stream, resumed} {
				if l := nextLines(t, ch, 1); l[0].Seq != 251 {
					t.Errorf("line after 250 is %d", l[0].Seq)
				}
				for ev := range ch {
					if ev.event == "line" {
						t.Errorf("line after 251: %+v", ev)
					}
					if ev.event == "end" {
						if !strings.Contains(ev.data, `"status":"success"`) {
							t.Errorf("end event %s", ev.data)
						}
						break
					}
				}
			}
			// A stream of a finished job sends its lines and ends at once.
			after := b.sseStream(t, ctx, "/api/v1/jobs/"+id+"/logs/stream?after_seq=249", "")
			if got := seqs(nextLines(t, after, 2)); got != "250,251" {
				t.Errorf("finished job's stream from 249: %s", got)
			}
			if ev := <-after; ev.event != "end" {
				t.Errorf("after the last line: %+v, want the end event", ev)
			}
		})
	}
}

// TestLogsDownload: download=true answers every line of the attempt, past the default
// limit and the stream's page, as a plain-text file named for the job and attempt; a
// group's end line adds nothing; q and limit are refused with it.
func TestLogsDownload(t *testing.T) {
	t.Parallel()
	b := setupLogs(t, "files", 0)
	id, token := b.leasedJob(t)
	const total = 2500
	for first := int64(1); first <= total; first += 500 {
		b.appendLogs(t, id, batch(token, first, first+499, "line"))
	}
	end, _ := json.Marshal(map[string]any{"token": token, "lines": []logs.Line{
		{Seq: total + 1, Stream: logs.Stdout, Text: "Title", Group: logs.GroupStart},
		{Seq: total + 2, Stream: logs.Stdout, Group: logs.GroupEnd},
		{Seq: total + 3, Stream: logs.Stdout, Text: "last"}}})
	b.appendLogs(t, id, string(end))

	r := b.get(t, "/api/v1/jobs/"+id+"/logs?download=true")
	if r.status != http.StatusOK {
		t.Fatalf("download: %d %s", r.status, r.body)
	}
	if ct := r.header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if cd := r.header.Get("Content-Disposition"); cd != `attachment; filename="a-`+id[24:]+`-attempt-1.log"` {
		t.Errorf("Content-Disposition %q", cd)
	}
	got := strings.Split(strings.TrimSuffix(string(r.body), "\n"), "\n")
	if len(got) != total+2 || got[0] != "line 1" || got[total-1] != "line 2500" || got[total] != "Title" || got[total+1] != "last" {
		t.Fatalf("downloaded %d lines (first %q, last %q), want %d: every line once, the group's end left out", len(got), got[0], got[len(got)-1], total+2)
	}
	r = b.get(t, "/api/v1/jobs/"+id+"/logs?download=true&after_seq=2499")
	if string(r.body) != "line 2500\nTitle\nlast\n" {
		t.Errorf("download after 2499: %q", r.body)
	}
	for _, q := range []string{"download=yes", "download=true&q=line", "download=true&limit=5"} {
		if r := b.get(t, "/api/v1/jobs/"+id+"/logs?"+q); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "download") {
			t.Errorf("?%s: %d %s, want 400 naming download", q, r.status, r.body)
		}
	}
}
