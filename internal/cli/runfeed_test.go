package cli

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// TestRunFeed: a follower reads the run whole once, then only by its change feed, and
// merges the jobs each answer lists into the ones it has; a job listed again unchanged
// moves nothing.
func TestRunFeed(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var queries []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		queries = append(queries, r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Query().Get("since") {
		case "":
			fmt.Fprint(w, `{"id": "r", "status": "running", "seq": 3, "jobs": [
				{"id": "a", "key": "a", "status": "running", "attempt": 1},
				{"id": "b", "key": "b", "status": "pending", "waiting": {"code": "needs", "message": "waiting for a"}}]}`)
		case "3":
			fmt.Fprint(w, `{"id": "r", "status": "running", "seq": 5, "jobs": [
				{"id": "a", "key": "a", "status": "success", "attempt": 1},
				{"id": "b", "key": "b", "status": "queued", "waiting": {"code": "backlog", "message": "queued"}}]}`)
		case "5":
			// A feed may list again a job that did not change (PostgreSQL's may).
			fmt.Fprint(w, `{"id": "r", "status": "running", "seq": 5, "jobs": [
				{"id": "a", "key": "a", "status": "success", "attempt": 1}]}`)
		default:
			http.Error(w, "unexpected since", http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	f := &runFeed{c: &apiClient{base: srv.URL, http: srv.Client()}, id: "r"}
	for i, want := range []struct {
		moved    bool
		statuses string
		changed  string // the indexes of the jobs the read brought
	}{{true, "running pending", "[0 1]"}, {true, "success queued", "[0 1]"}, {false, "success queued", "[0]"}} {
		moved, err := f.read(t.Context())
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		got := ""
		for _, j := range f.run.Jobs {
			got += " " + j.Status
		}
		if moved != want.moved || got != " "+want.statuses || len(f.run.Jobs) != 2 {
			t.Errorf("read %d: moved %v, jobs%s; want moved %v, jobs %s", i, moved, got, want.moved, want.statuses)
		}
		if changed := fmt.Sprint(f.takeChanged()); changed != want.changed {
			t.Errorf("read %d: changed %s, want %s", i, changed, want.changed)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"", "since=3", "since=5"}; fmt.Sprint(queries) != fmt.Sprint(want) {
		t.Errorf("queries %q, want %q", queries, want)
	}
}

// TestWholeEvery: a run is read whole often only while a job waits for a reason the
// follower tells.
func TestWholeEvery(t *testing.T) {
	t.Parallel()
	wait := func(code string) jobView {
		return jobView{Status: "queued", Waiting: &waitingView{Code: code, Message: code}}
	}
	tests := []struct {
		name string
		jobs []jobView
		want time.Duration
	}{
		{"nothing waits", []jobView{{Status: "running"}}, time.Duration(1<<63 - 1)},
		{"needs and backlog", []jobView{wait("needs"), wait("backlog")}, followWholeIdle},
		{"no worker", []jobView{wait("backlog"), wait("no_worker")}, followWhole},
	}
	for _, tc := range tests {
		if got := wholeEvery(runDetails{Jobs: tc.jobs}); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}

// TestRunFeedWaits: a read of the run's changes asks the coordinator to wait for one, no
// longer than the feed's longest wait or than until its next whole read, and the feed
// says whether the coordinator did wait: one that answers at once did not.
func TestRunFeedWaits(t *testing.T) {
	t.Parallel()
	for _, holds := range []bool{true, false} {
		var mu sync.Mutex
		var waits []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			if r.URL.Query().Get("since") == "" {
				fmt.Fprint(w, `{"id": "r", "status": "running", "seq": 3, "jobs": [
					{"id": "a", "key": "a", "status": "queued", "waiting": {"code": "no_worker", "message": "no worker"}}]}`)
				return
			}
			v := r.URL.Query().Get("wait")
			mu.Lock()
			waits = append(waits, v)
			mu.Unlock()
			if d, err := time.ParseDuration(v); err == nil && holds {
				select {
				case <-time.After(d):
				case <-r.Context().Done():
				}
			}
			fmt.Fprint(w, `{"id": "r", "status": "running", "seq": 3}`)
		}))
		f := &runFeed{c: &apiClient{base: srv.URL, http: srv.Client()}, id: "r", maxWait: followWait}
		for i, want := range []bool{false, holds} {
			if _, err := f.read(t.Context()); err != nil {
				t.Fatalf("holds %v: read %d: %v", holds, i, err)
			}
			if f.waited != want {
				t.Errorf("holds %v: read %d: waited %v, want %v", holds, i, f.waited, want)
			}
		}
		srv.Close()
		mu.Lock()
		if len(waits) != 1 {
			t.Fatalf("holds %v: %d reads of changes, want 1", holds, len(waits))
		}
		// A job waits for a reason the follower tells: the run is read whole every
		// followWhole, and a read of changes waits no longer than until then.
		if d, err := time.ParseDuration(waits[0]); err != nil || d <= 0 || d > followWhole {
			t.Errorf("holds %v: wait=%q, want a duration up to %s", holds, waits[0], followWhole)
		}
		mu.Unlock()
	}
}
