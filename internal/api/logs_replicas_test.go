package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/logs/logchunks"
	"github.com/gantry-ci/gantry/internal/store/postgres"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// TestLogReplicas runs two coordinators on one PostgreSQL database, each with its own
// log service over chunks in the database: the lines a job appends through replica A
// reach a stream opened on replica B as they come, with no gap, and so does the end of
// the job completed through A. Lines appended through B in between (a worker whose
// requests a load balancer spreads) are no different.
func TestLogReplicas(t *testing.T) {
	t.Parallel()
	dsn := testdb.Postgres(t)
	replica := func() *bundle {
		st, err := postgres.Open(context.Background(), dsn, postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		svc := logs.NewService(logs.Config{Storage: logchunks.New(st), Notifier: st})
		t.Cleanup(svc.Close)
		// No timer may stand in for the notices: the streams neither recheck the store
		// nor send keep-alives during the test, so lines reach B only because A's append
		// was announced over NOTIFY.
		srv := httptest.NewServer(api.New(api.Config{Store: st, Logger: testLogger(t), Clock: clock.Real{}, Logs: svc,
			EndCheck: time.Hour, KeepAlive: time.Hour}).Handler())
		t.Cleanup(srv.Close)
		return &bundle{store: st, url: srv.URL}
	}
	a, b := replica(), replica()
	id, token := a.leasedJob(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()

	onB := b.sseStream(t, ctx, "/api/v1/jobs/"+id+"/logs/stream", "")
	onA := a.sseStream(t, ctx, "/api/v1/jobs/"+id+"/logs/stream", "")
	// send appends first..last through r as a worker would: from where the coordinator
	// says the log ends, until it has the batch.
	send := func(r *bundle, first, last int64) {
		t.Helper()
		for tries := 0; first <= last; tries++ {
			if tries == 5 {
				t.Fatalf("append up to %d: still asked to re-send from %d", last, first)
			}
			next := r.appendLogs(t, id, batch(token, first, last, "line"))
			if next < first && tries > 0 {
				t.Fatalf("append %d-%d: next_seq went back to %d", first, last, next)
			}
			first = next
		}
	}
	const per = 50
	seq := int64(0)
	for round := range 20 {
		// Mostly through A; every fourth batch through B, re-sending a few lines.
		r := a
		from := seq + 1
		if round%4 == 3 {
			r, from = b, max(seq-5, 1)
		}
		send(r, from, seq+per)
		live := nextLines(t, onB, per)
		for i, l := range live {
			if l.Seq != seq+1+int64(i) {
				t.Fatalf("round %d: line %d on B has seq %d, want %d", round, i, l.Seq, seq+1+int64(i))
			}
		}
		seq += per
	}
	if r := a.post(t, "/api/v1/agent/jobs/"+id+"/complete", `{"token": "`+token+`", "status": "success"}`); r.status != http.StatusOK {
		t.Fatalf("complete on A: %d %s", r.status, r.body)
	}
	for name, ch := range map[string]<-chan sseEvent{"B": onB} {
		select {
		case ev, ok := <-firstNonComment(ch):
			if !ok || ev.event != "end" {
				t.Fatalf("stream on %s after the last line: %+v (open %v), want the end event", name, ev, ok)
			}
		case <-ctx.Done():
			t.Fatalf("no end event on %s", name)
		}
	}
	if err := <-followStream(onA, seq); err != nil {
		t.Errorf("second stream: %v", err)
	}
	if got := b.readLines(t, "/api/v1/jobs/"+id+"/logs?limit=100000"); len(got) != int(seq) || got[len(got)-1].Seq != seq {
		t.Errorf("B reads %d lines, want %d", len(got), seq)
	}
}

// firstNonComment forwards the first event of ch that is not a keep-alive.
func firstNonComment(ch <-chan sseEvent) <-chan sseEvent {
	out := make(chan sseEvent, 1)
	go func() {
		defer close(out)
		for ev := range ch {
			if ev.event != "comment" {
				out <- ev
				return
			}
		}
	}()
	return out
}
