package sqlstore

import "testing"

// TestBatchStateForgetsOnQueue checks the claim shortcut within a batch: a search that
// found nothing is skipped again only until an operation of the batch queues a job.
func TestBatchStateForgetsOnQueue(t *testing.T) {
	t.Parallel()
	b := &batchState{}
	t1 := &tx{batch: b}
	if b.searchedEmpty("linux") {
		t.Fatal("a search never made counts as empty")
	}
	b.foundNothing("linux")
	if !b.searchedEmpty("linux") || b.searchedEmpty("linux,gpu") {
		t.Fatal("the empty search is not remembered for exactly its key")
	}
	t1.markQueued()
	if !t1.queued {
		t.Error("markQueued did not mark the operation")
	}
	if b.searchedEmpty("linux") {
		t.Fatal("an empty search is still trusted after a job was queued")
	}
	b.foundNothing("linux")
	if !b.searchedEmpty("linux") {
		t.Fatal("a new empty search after the queue is not remembered")
	}
}
