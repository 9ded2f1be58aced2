package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestLogsCommand reads and follows a job's log on a real server and worker.
func TestLogsCommand(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	run := submitRun(t, base, "jobs:\n  count:\n    steps:\n      - run: for i in $(seq 1 40); do echo \"n $i\"; sleep 0.01; done\n"+
		"  broken:\n    steps:\n      - run: echo bad; exit 1\n")
	job, broken := run.Jobs[0].ID, run.Jobs[1].ID

	// Started at once, so it follows the job from before it runs to its end.
	follow := runCLI(t, invocation{args: []string{"logs", "-f", job, "--server", base}})
	if follow.code != exitOK {
		t.Fatalf("logs -f: exit %d: %s", follow.code, follow.stderr)
	}
	for i := 1; i <= 40; i++ {
		if n := countLines(follow.stdout, fmt.Sprintf("n %d", i)); n != 1 {
			t.Errorf("logs -f shows line %d %d times, want once", i, n)
		}
	}

	all := runCLI(t, invocation{args: []string{"logs", job, "--server", base}})
	if all.code != exitOK || all.stdout != follow.stdout {
		t.Errorf("logs: exit %d, output differs from logs -f:\n%s\nwant\n%s", all.code, all.stdout, follow.stdout)
	}

	after := runCLI(t, invocation{args: []string{"logs", job, "--after-seq", "38", "--attempt", "1", "--json", "--server", base}})
	var lines []logLine
	for l := range strings.SplitSeq(strings.TrimSpace(after.stdout), "\n") {
		var line logLine
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("logs --json line %q: %v", l, err)
		}
		lines = append(lines, line)
	}
	if after.code != exitOK || len(lines) == 0 || lines[0].Seq != 39 {
		t.Errorf("logs --after-seq 38 --json: exit %d, lines %+v", after.code, lines)
	}

	failed := runCLI(t, invocation{args: []string{"logs", "-f", broken, "--server", base}})
	if failed.code != exitFailure || !strings.Contains(failed.stdout, "bad\n") {
		t.Errorf("logs -f of a failing job: exit %d, want 1\n%s%s", failed.code, failed.stdout, failed.stderr)
	}

	missing := runCLI(t, invocation{args: []string{"logs", "0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b", "--server", base}})
	if missing.code != exitFailure || !strings.Contains(missing.stderr, "404 not_found") {
		t.Errorf("logs of an unknown job: exit %d, stderr %q", missing.code, missing.stderr)
	}
}

// TestStreamLogResumes: a stream that drops mid-way is opened again with Last-Event-ID,
// and every line arrives once.
func TestStreamLogResumes(t *testing.T) {
	t.Parallel()
	var conns atomic.Int32
	var mu sync.Mutex
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := conns.Add(1)
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("X-Gantry-Attempt", "3")
		if r.URL.Query().Get("attempt") != "" && r.URL.Query().Get("attempt") != "3" {
			t.Errorf("reconnect asked for attempt %q, want the pinned 3", r.URL.Query().Get("attempt"))
		}
		from := int64(0)
		fmt.Sscan(r.Header.Get("Last-Event-ID"), &from)
		fmt.Fprint(w, "retry: 2000\n\n: keep-alive\n\n")
		switch n {
		case 1:
			// Two lines, then a line torn in half by the connection dropping.
			for seq := from + 1; seq <= 2; seq++ {
				fmt.Fprintf(w, "id: %d\nevent: line\ndata: {\"seq\":%d,\"stream\":\"stdout\",\"text\":\"line %d\"}\n\n", seq, seq, seq)
			}
			fmt.Fprint(w, "id: 3\nevent: line\ndata: {\"seq\":3,")
		case 2:
			// A server that answers the same line again must not make it show twice.
			for seq := from; seq <= 4; seq++ {
				fmt.Fprintf(w, "id: %d\nevent: line\ndata: {\"seq\":%d,\"stream\":\"stdout\",\"text\":\"line %d\"}\n\n", seq, seq, seq)
			}
			// Then it goes silent: the idle timeout must notice.
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			fmt.Fprintf(w, "id: 5\nevent: line\ndata: {\"seq\":5,\"stream\":\"stdout\",\"text\":\"line 5\"}\n\n")
			fmt.Fprint(w, "event: end\ndata: {\"attempt\":3,\"latest_attempt\":3,\"status\":\"success\"}\n\n")
		}
	}))
	defer srv.Close()
	c := &apiClient{base: srv.URL, http: srv.Client(), streamIdle: 200 * time.Millisecond, retryEvery: time.Millisecond}
	var got []string
	end, err := c.streamLog(t.Context(), "job", 0, 0, func(l logLine) { got = append(got, l.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if want := "line 1,line 2,line 3,line 4,line 5"; strings.Join(got, ",") != want {
		t.Errorf("lines %q, want %s", got, want)
	}
	if end.Status != "success" || end.Attempt != 3 {
		t.Errorf("end = %+v", end)
	}
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(lastIDs, ",") != ",2,4" {
		t.Errorf("Last-Event-ID of each connection = %q, want none, 2, 4", lastIDs)
	}
}
