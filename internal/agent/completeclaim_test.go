package agent

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

// countingAPI is a real coordinator API that counts the claims it is sent: on their
// own, and carried by completions.
type countingAPI struct {
	*bundle
	claims, carried atomic.Int64
	// carriedOpen is told each time a completion that carries a claim arrives.
	carriedOpen chan struct{}
}

func setupCounting(t *testing.T, leaseTTL time.Duration) *countingAPI {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &countingAPI{carriedOpen: make(chan struct{}, 100)}
	h := api.New(api.Config{Store: st, HeartbeatEvery: 200 * time.Millisecond, LeaseTTL: leaseTTL,
		Blobs: newBlobs(t, t.TempDir())}).Handler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/api/v1/agent/claim":
			c.claims.Add(1)
		case strings.HasSuffix(r.URL.Path, "/complete"):
			raw, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(raw))
			if bytes.Contains(raw, []byte(`"claim":`)) {
				c.carried.Add(1)
				c.carriedOpen <- struct{}{}
			}
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		_ = st.Close()
	})
	c.bundle = &bundle{st: st, url: srv.URL}
	return c
}

// TestCompletionCarriesClaim runs jobs on a worker of one slot: after the first, each
// job comes with the completion of the one before, not with a claim of its own.
func TestCompletionCarriesClaim(t *testing.T) {
	t.Parallel()
	c := setupCounting(t, 5*time.Second)
	const n = 5
	var runs []uuid.UUID
	for range n {
		runs = append(runs, c.submit(t, "jobs:\n  a: {steps: [{run: 'true'}]}\n"))
	}
	c.start(t, 1)
	for _, id := range runs {
		c.wantSuccess(t, id)
	}
	if got := c.carried.Load(); got < n {
		t.Errorf("%d completions carried a claim, want all %d", got, n)
	}
	// The first job needs a claim of its own; the others were queued before it ended.
	if got := c.claims.Load(); got != 1 {
		t.Errorf("%d claims of their own for %d queued jobs, want 1", got, n)
	}
}

// TestDrainEndsCarriedClaim drains a worker whose last completion's claim is waiting:
// the worker gives the claim up and stops, rather than when the claim's wait (30 s with
// this lease TTL) runs out.
func TestDrainEndsCarriedClaim(t *testing.T) {
	t.Parallel()
	c := setupCounting(t, 2*time.Minute)
	cfg := Config{Name: "test", Labels: []string{"linux"}, MaxJobs: 1, Server: c.url, WorkDir: t.TempDir(),
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
	drain, stop := context.WithCancel(context.Background())
	defer stop()
	a := New(cfg)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := a.Run(drain, drain); err != nil {
			t.Errorf("agent: %v", err)
		}
	}()
	c.wantSuccess(t, c.submit(t, "jobs:\n  a: {steps: [{run: 'true'}]}\n"))
	select {
	case <-c.carriedOpen:
	case <-time.After(30 * time.Second):
		t.Fatal("the completion carried no claim")
	}
	stop()
	ended := make(chan struct{})
	go func() { wg.Wait(); close(ended) }()
	select {
	case <-ended:
	case <-time.After(20 * time.Second):
		t.Fatal("the drained worker still waits on its completion's claim")
	}
}
