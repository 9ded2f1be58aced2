package storetest

import (
	"context"
	"sync"
	"testing"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
)

var openTests = []test{
	{"ConcurrentOpen", testConcurrentOpen},
}

// testConcurrentOpen: replicas starting at the same moment on an empty database all
// migrate it without error, and then share it: a run created through one is claimed
// through another.
func testConcurrentOpen(t *testing.T, h Harness) {
	dsn := h.NewDSN(t)
	ctx := t.Context()
	const replicas = 4
	stores := make([]store.Store, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range replicas {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			stores[i], errs[i] = h.Open(ctx, dsn, clock.NewFake(epoch))
		}()
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("replica %d: open: %v", i, err)
		}
		s := stores[i]
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
	run, _, _, err := stores[0].CreateRun(ctx, store.CreateRunParams{Plan: compile(t, singleJob)})
	if err != nil {
		t.Fatalf("CreateRun on replica 0: %v", err)
	}
	claims, err := stores[replicas-1].Claim(context.Background(), store.ClaimParams{WorkerID: "w", LeaseTTL: leaseTTL})
	if err != nil || len(claims) != 1 || claims[0].Job.RunID != run.ID {
		t.Fatalf("Claim on replica %d = %d jobs, %v; want the job of run %s", replicas-1, len(claims), err, run.ID)
	}
}
