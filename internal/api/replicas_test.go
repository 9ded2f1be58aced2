package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store/postgres"
	"github.com/gantry-ci/gantry/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// TestReplicasShareWork runs two coordinators on one PostgreSQL database: a claim waiting
// on replica A is woken by a run submitted to replica B, and what one replica did is what
// the other reads.
func TestReplicasShareWork(t *testing.T) {
	t.Parallel()
	url := testdb.Postgres(t)
	replica := func() *bundle {
		st, err := postgres.Open(context.Background(), url, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		srv := httptest.NewServer(api.New(api.Config{Store: st, Logger: testLogger(t), Clock: clock.Real{}}).Handler())
		t.Cleanup(srv.Close)
		return &bundle{store: st, url: srv.URL}
	}
	a, b := replica(), replica()

	answered := make(chan claimView, 1)
	go func() { answered <- a.claim(t, `{"worker_id": "w", "wait": "30s"}`) }()
	deadline := time.After(20 * time.Second)
	var got claimView
wait:
	for {
		// A submit that lands before A's claim starts waiting is claimed at once; one
		// that lands after must wake it through NOTIFY.
		b.post(t, "/api/v1/runs", diamond)
		select {
		case got = <-answered:
			break wait
		case <-time.After(100 * time.Millisecond):
		case <-deadline:
			t.Fatal("a claim waiting on replica A was not woken by a submit on replica B")
		}
	}
	if len(got.Jobs) != 1 {
		t.Fatalf("claim on A returned %d jobs, want 1", len(got.Jobs))
	}
	j := got.Jobs[0]
	// The lease taken on A is honoured on B.
	if r := b.post(t, "/api/v1/agent/jobs/"+j.ID+"/complete", `{"token": "`+j.Lease.Token+`", "status": "success"}`); r.status != http.StatusOK {
		t.Fatalf("complete on B of a job claimed on A: %d %s", r.status, r.body)
	}
	var job struct {
		Status string `json:"status"`
	}
	a.get(t, "/api/v1/jobs/"+j.ID).decode(t, &job)
	if job.Status != "success" {
		t.Errorf("job as A sees it after B completed it: %s", job.Status)
	}
}
