package scheduler

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http/httptest"
	"net/url"
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

// TestCollectForgetsOwners: a blob collected takes the record of its owners with it, so
// that the content, stored again by another project, does not count for the first; a
// blob still in use keeps its owners; an upload staged and never committed goes once
// past the grace.
func TestCollectForgetsOwners(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	bs, err := blob.OpenDir(t.TempDir(), blob.Options{Secret: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	c := b.claimOne(t, "name: gc\njobs:\n  a: {steps: [{run: make}]}\n")
	project := c.Job.ProjectID
	const used, unused, staged = "named by an artifact", "named by nothing", "uploaded, never committed"
	for _, content := range []string{used, unused} {
		if err := bs.Put(b.ctx, digestOf(content), int64(len(content)), strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
		if err := b.s.AddBlobOwner(b.ctx, project, digestOf(content)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := b.s.PutArtifact(b.ctx, store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token},
		&store.Artifact{JobID: c.Job.ID, Name: "app", SHA256: digestOf(used), Size: int64(len(used))}); err != nil {
		t.Fatal(err)
	}
	up, err := bs.PresignUpload(b.ctx, project.String(), digestOf(staged), int64(len(staged)), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(bs.Handler())
	t.Cleanup(srv.Close)
	resp, err := blob.Send(b.ctx, srv.Client(), mustURL(t, srv.URL), up, strings.NewReader(staged), int64(len(staged)))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()

	got, err := CollectArtifacts(b.ctx, b.s, bs, time.Now().Add(48*time.Hour), 24*time.Hour)
	if err != nil || got.Blobs != 1 || got.Uploads != 1 {
		t.Fatalf("collect: %+v, %v; want one blob and one staged upload", got, err)
	}
	owned := func(content string) bool {
		ok, err := b.s.BlobOwned(b.ctx, project, digestOf(content))
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !owned(used) || owned(unused) {
		t.Errorf("after collection the project owns %q: %v, %q: %v; want only the one in use", used, owned(used), unused, owned(unused))
	}
	if err := bs.CommitUpload(b.ctx, project.String(), digestOf(staged), int64(len(staged))); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("commit of a collected upload: %v, want ErrNotFound", err)
	}
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
