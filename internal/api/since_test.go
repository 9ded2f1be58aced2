package api_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
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
