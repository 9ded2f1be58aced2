package storetest

import (
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

var groupCancelTests = []test{
	{"CancelInProgress", testCancelInProgress},
	{"CancelSignals", testCancelSignals},
}

// testCancelInProgress: a job of a group with cancel_in_progress that becomes queued
// flags the job holding the group; once that one ends, the newcomer gets the group.
func testCancelInProgress(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const deploy = `
name: deploy
jobs:
  deploy:
    concurrency: {group: production, cancel_in_progress: true}
    steps: [{run: "true"}]
`
	b.create(deploy)
	holder := b.claimOne()
	res, err := b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: ref(holder), TTL: leaseTTL})
	if err != nil || res.CancelRequested {
		t.Fatalf("holder's heartbeat before a newcomer: %+v, %v; want no cancel", res, err)
	}
	_, jobs := b.create(deploy)
	res, err = b.s.Heartbeat(b.ctx, store.HeartbeatParams{LeaseRef: ref(holder), TTL: leaseTTL})
	if err != nil || !res.CancelRequested {
		t.Fatalf("holder's heartbeat after a newcomer was queued: %+v, %v; want cancel requested", res, err)
	}
	b.expectNoClaim(store.ClaimParams{})
	b.complete(holder, store.JobCancelled)
	next := b.claimOne()
	if next.Job.ID != jobs[0].ID {
		t.Fatalf("after the holder ended, claimed %s; want the newcomer", next.Job.ID)
	}

	// Without cancel_in_progress the newcomer waits and the holder is left alone.
	_, b2 := setup(t, h)
	const queueUp = "name: q\njobs:\n  deploy:\n    concurrency: {group: production}\n    steps: [{run: \"true\"}]\n"
	b2.create(queueUp)
	first := b2.claimOne()
	b2.create(queueUp)
	res, err = b2.s.Heartbeat(b2.ctx, store.HeartbeatParams{LeaseRef: ref(first), TTL: leaseTTL})
	if err != nil || res.CancelRequested {
		t.Errorf("holder of a queueing group: %+v, %v; want no cancel", res, err)
	}
}

// testCancelSignals: asking a leased job to cancel wakes control-channel waiters, and
// CancelRequested names the job to its worker only.
func testCancelSignals(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(singleJob)
	c := b.claimOne()
	if ids, err := b.s.CancelRequested(b.ctx, c.Job.WorkerID); err != nil || len(ids) != 0 {
		t.Fatalf("CancelRequested before any cancel = %v, %v", ids, err)
	}
	wake, stop := b.s.WaitForCancels()
	defer stop()
	if err := b.s.CancelRun(b.ctx, run.ID); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	select {
	case <-wake:
	case <-time.After(10 * time.Second):
		t.Fatal("WaitForCancels did not fire after a running job was asked to cancel")
	}
	ids, err := b.s.CancelRequested(b.ctx, c.Job.WorkerID)
	if err != nil || len(ids) != 1 || ids[0] != c.Job.ID {
		t.Errorf("CancelRequested(%s) = %v, %v; want [%s]", c.Job.WorkerID, ids, err, c.Job.ID)
	}
	if ids, _ := b.s.CancelRequested(b.ctx, "another-worker"); len(ids) != 0 {
		t.Errorf("CancelRequested of another worker = %v, want none", ids)
	}
}
