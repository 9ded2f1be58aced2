package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

// sinceRun is a run as GET /api/v1/runs/{id}?since= answers it.
type sinceRun struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	Seq    int64  `json:"seq"`
	Jobs   []struct {
		ID     string `json:"id"`
		Key    string `json:"key"`
		Status string `json:"status"`
	} `json:"jobs"`
}

func (b *bundle) runSince(t *testing.T, id, query string) (sinceRun, []string) {
	t.Helper()
	r := b.get(t, "/api/v1/runs/"+id+query)
	if r.status != http.StatusOK {
		t.Fatalf("GET run%s: %d %s", query, r.status, r.body)
	}
	var v sinceRun
	r.decode(t, &v)
	var keys []string
	for _, j := range v.Jobs {
		keys = append(keys, j.Key+"="+j.Status)
	}
	return v, keys
}

// TestGetRunSince follows a run by its change feed: each answer lists only the jobs that
// changed after the seq given, and its own seq is the next cursor.
func TestGetRunSince(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var created runView
	b.post(t, "/api/v1/runs", diamond).decode(t, &created)

	full, all := b.runSince(t, created.ID, "")
	if full.Seq < 1 || !slices.Equal(all, []string{"a=queued", "b=queued", "c=pending"}) {
		t.Fatalf("full read: seq %d, jobs %v", full.Seq, all)
	}
	if _, keys := b.runSince(t, created.ID, "?since=0"); !slices.Equal(keys, all) {
		t.Fatalf("since=0 lists %v, want every job %v", keys, all)
	}
	same, keys := b.runSince(t, created.ID, fmt.Sprintf("?since=%d", full.Seq))
	if len(keys) != 0 || same.Seq != full.Seq || same.Status != full.Status {
		t.Fatalf("nothing changed: seq %d (was %d), status %s, jobs %v; want no jobs", same.Seq, full.Seq, same.Status, keys)
	}

	got := b.claim(t, `{"worker_id": "w1", "max": 1, "wait": "0s"}`)
	if len(got.Jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(got.Jobs))
	}
	claimed, keys := b.runSince(t, created.ID, fmt.Sprintf("?since=%d", full.Seq))
	if claimed.Seq <= full.Seq || !slices.Equal(keys, []string{got.Jobs[0].Key + "=assigned"}) {
		t.Fatalf("after a claim: seq %d (was %d), jobs %v; want only %s assigned", claimed.Seq, full.Seq, keys, got.Jobs[0].Key)
	}

	for _, bad := range []string{"-1", "x", "1.5"} {
		if r := b.get(t, "/api/v1/runs/"+created.ID+"?since="+bad); r.status != http.StatusBadRequest {
			t.Errorf("since=%s: status %d, want 400", bad, r.status)
		}
	}
}

// TestGetRunSinceWait: with ?wait= a read of a run's changes answers when a job changes,
// and only after the wait when none does; a finished run answers at once.
func TestGetRunSinceWait(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var created runView
	b.post(t, "/api/v1/runs", diamond).decode(t, &created)
	full, _ := b.runSince(t, created.ID, "")
	query := fmt.Sprintf("?since=%d", full.Seq)

	began := time.Now()
	same, keys := b.runSince(t, created.ID, query+"&wait=300ms")
	if waited := time.Since(began); waited < 300*time.Millisecond || len(keys) != 0 || same.Seq != full.Seq {
		t.Fatalf("nothing changed: answered after %v with seq %d (was %d), jobs %v; want no jobs after 300ms", waited, same.Seq, full.Seq, keys)
	}

	type answer struct {
		run sinceRun
		err error
	}
	answered := make(chan answer, 1)
	go func() {
		var a answer
		res, err := http.Get(b.url + "/api/v1/runs/" + created.ID + query + "&wait=1m")
		if err == nil {
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				err = fmt.Errorf("status %d", res.StatusCode)
			} else {
				err = json.NewDecoder(res.Body).Decode(&a.run)
			}
		}
		a.err = err
		answered <- a
	}()
	got := b.claim(t, `{"worker_id": "w1", "max": 1, "wait": "0s"}`)
	if len(got.Jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(got.Jobs))
	}
	select {
	case a := <-answered:
		if a.err != nil {
			t.Fatalf("waiting read: %v", a.err)
		}
		if len(a.run.Jobs) != 1 || a.run.Jobs[0].Key != got.Jobs[0].Key || a.run.Jobs[0].Status != "assigned" || a.run.Seq <= full.Seq {
			t.Fatalf("waiting read after a claim: seq %d (was %d), jobs %+v; want only %s assigned", a.run.Seq, full.Seq, a.run.Jobs, got.Jobs[0].Key)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a waiting read did not answer a claim of the run's job within 30s")
	}

	if r := b.post(t, "/api/v1/runs/"+created.ID+"/cancel", ""); r.status >= 300 {
		t.Fatalf("cancel: %d %s", r.status, r.body)
	}
	b.complete(t, got.Jobs[0].ID, got.Jobs[0].Lease.Token)
	ended, _ := b.runSince(t, created.ID, "")
	if ended.Status != "cancelled" {
		t.Fatalf("run %s after its cancel, want cancelled", ended.Status)
	}
	began = time.Now()
	if again, keys := b.runSince(t, created.ID, fmt.Sprintf("?since=%d&wait=1m", ended.Seq)); again.Status != ended.Status || len(keys) != 0 || time.Since(began) > 30*time.Second {
		t.Fatalf("a finished run (%s): answered %s, jobs %v, after %v; want at once", ended.Status, again.Status, keys, time.Since(began))
	}

	for _, bad := range []string{"?wait=1s", "?since=1&wait=x", "?since=1&wait=-1s", "?since=1&wait=2m"} {
		if r := b.get(t, "/api/v1/runs/"+created.ID+bad); r.status != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", bad, r.status)
		}
	}
}
