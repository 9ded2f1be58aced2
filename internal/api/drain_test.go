package api_test

import (
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/clock"
)

// TestDrainEndsWaits: once the server drains, every request that waits answers at once
// with what it has (a claim with no job, a control poll with nothing to cancel, a read
// of a run with no change) and a log stream ends without its end event, so that a
// graceful shutdown does not wait out their waits. The claims' and control's waits run
// on a fake clock that never moves: only the drain can end them.
func TestDrainEndsWaits(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	st := openStore(t, clk)
	srv := api.New(api.Config{Store: st, Logger: testLogger(t), Clock: clk})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(hs.Close)
	b := &bundle{store: st, clock: clk, url: hs.URL}
	var created runView
	b.post(t, "/api/v1/runs", diamond).decode(t, &created)
	// a and b are claimed; c waits for them, so a third claim has nothing to take.
	got := b.claim(t, `{"worker_id": "w1", "max": 2, "wait": "0s"}`)
	if len(got.Jobs) != 2 {
		t.Fatalf("claimed %d jobs, want 2", len(got.Jobs))
	}
	full, _ := b.runSince(t, created.ID, "")

	type answer struct {
		what, body string
		status     int
		err        error
	}
	answers := make(chan answer, 4)
	ask := func(what, method, path, body string) {
		req, err := http.NewRequestWithContext(t.Context(), method, hs.URL+path, strings.NewReader(body))
		if err != nil {
			answers <- answer{what: what, err: err}
			return
		}
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			answers <- answer{what: what, err: err}
			return
		}
		defer res.Body.Close()
		data, err := io.ReadAll(res.Body)
		answers <- answer{what: what, body: string(data), status: res.StatusCode, err: err}
	}
	go ask("claim", http.MethodPost, "/api/v1/agent/claim", `{"worker_id": "w2", "max": 1, "wait": "1m"}`)
	go ask("control", http.MethodPost, "/api/v1/agent/control", `{"worker_id": "w1", "wait": "1m", "state": "busy"}`)
	go ask("run", http.MethodGet, "/api/v1/runs/"+created.ID+"?since="+strconv.FormatInt(full.Seq, 10)+"&wait=1m", "")
	go ask("stream", http.MethodGet, "/api/v1/jobs/"+got.Jobs[0].ID+"/logs/stream", "")
	srv.Drain()

	want := map[string]func(a answer) bool{
		"claim":   func(a answer) bool { return a.status == http.StatusOK && strings.Contains(a.body, `"jobs":[]`) },
		"control": func(a answer) bool { return a.status == http.StatusOK && strings.Contains(a.body, `"cancel":[]`) },
		"run": func(a answer) bool {
			return a.status == http.StatusOK && !strings.Contains(a.body, `"jobs"`) && strings.Contains(a.body, `"id":"`+created.ID+`"`)
		},
		"stream": func(a answer) bool { return a.status == http.StatusOK && !strings.Contains(a.body, "event: end") },
	}
	deadline := time.After(20 * time.Second)
	for range want {
		select {
		case a := <-answers:
			if a.err != nil || !want[a.what](a) {
				t.Errorf("%s after the drain: status %d, %v, %q", a.what, a.status, a.err, a.body)
			}
			delete(want, a.what)
		case <-deadline:
			t.Fatalf("still waiting 20s after the drain: %v", slices.Sorted(maps.Keys(want)))
		}
	}
}
