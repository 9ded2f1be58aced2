package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/store"
)

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestCollectArtifacts: expired artifacts go; a blob goes once no artifact names it and
// it is older than the grace, and not before.
func TestCollectArtifacts(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	bs, err := blob.OpenDir(t.TempDir(), blob.Options{Secret: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	c := b.claimOne(t, "name: gc\njobs:\n  a: {steps: [{run: make}]}\n")
	ref := store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token}
	for name, content := range map[string]string{"expiring": "old build", "kept": "release", "orphan": "nobody's"} {
		if err := bs.Put(b.ctx, digestOf(content), int64(len(content)), strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
		var expires time.Time
		switch name {
		case "orphan":
			continue
		case "expiring":
			expires = epoch.Add(time.Hour)
		}
		if _, err := b.s.PutArtifact(b.ctx, ref, &store.Artifact{JobID: c.Job.ID, Name: name, SHA256: digestOf(content), Size: int64(len(content)), ExpiresAt: expires}); err != nil {
			t.Fatal(err)
		}
	}
	// A finished log kept in the blob store: its chunk names its blob.
	const logPiece = `{"seq":1,"text":"done"}`
	if err := bs.Put(b.ctx, digestOf(logPiece), int64(len(logPiece)), strings.NewReader(logPiece)); err != nil {
		t.Fatal(err)
	}
	if err := b.s.AppendLogChunk(b.ctx, &store.LogChunk{JobID: c.Job.ID, Attempt: 1, FirstSeq: 1, LastSeq: 1, Bytes: int64(len(logPiece)),
		Location: store.LogBlobLocation(digestOf(logPiece))}); err != nil {
		t.Fatal(err)
	}
	stored := func(content string) bool {
		_, err := bs.Stat(b.ctx, digestOf(content))
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	// Blobs are young by the wall clock: with a grace longer than their age none goes,
	// and the artifact that has not expired yet stays.
	got, err := CollectArtifacts(b.ctx, b.s, bs, epoch.Add(30*time.Minute), 24*time.Hour)
	if err != nil || got != (Collected{}) {
		t.Fatalf("before the expiry: %+v, %v; want nothing collected", got, err)
	}
	got, err = CollectArtifacts(b.ctx, b.s, bs, epoch.Add(time.Hour), 365*24*time.Hour)
	if err != nil || got.Artifacts != 1 || got.Blobs != 0 {
		t.Fatalf("at the expiry with a long grace: %+v, %v; want one artifact and no blob", got, err)
	}
	if !stored("old build") || !stored("nobody's") {
		t.Error("a blob went before its grace")
	}
	// Once past the grace, the blobs no artifact names go; the kept one stays.
	got, err = CollectArtifacts(b.ctx, b.s, bs, time.Now().Add(48*time.Hour), 24*time.Hour)
	if err != nil || got.Artifacts != 0 || got.Blobs != 2 || got.Bytes != int64(len("old build")+len("nobody's")) {
		t.Fatalf("past the grace: %+v, %v; want two blobs", got, err)
	}
	if stored("old build") || stored("nobody's") || !stored("release") || !stored(logPiece) {
		t.Errorf("after collection: old build %v, orphan %v, release %v, log %v; want only release and the log",
			stored("old build"), stored("nobody's"), stored("release"), stored(logPiece))
	}
}
