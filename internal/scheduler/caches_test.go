package scheduler

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestEvictCaches: entries unused past the age and those over a project's size go, and
// with them, once past the blob grace, the archives nothing else names; an archive an
// entry still names stays.
func TestEvictCaches(t *testing.T) {
	t.Parallel()
	_, b := setup(t)
	bs, err := blob.OpenDir(t.TempDir(), blob.Options{Secret: []byte(strings.Repeat("k", 32))})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.s.CreateProject(b.ctx, &store.Project{Name: "app"}); err != nil {
		t.Fatal(err)
	}
	p, err := b.s.GetProjectByName(b.ctx, "app")
	if err != nil {
		t.Fatal(err)
	}
	put := func(key, content string) {
		t.Helper()
		if err := bs.Put(b.ctx, digestOf(content), int64(len(content)), strings.NewReader(content)); err != nil {
			t.Fatal(err)
		}
		if err := b.s.AddBlobOwner(b.ctx, p.ID, digestOf(content)); err != nil {
			t.Fatal(err)
		}
		if _, _, err := b.s.PutCache(b.ctx, &store.CacheEntry{ProjectID: p.ID, Scope: "main", Key: key, SHA256: digestOf(content), Size: int64(len(content))}); err != nil {
			t.Fatal(err)
		}
	}
	put("stale", "stale archive")
	b.clk.Advance(10 * 24 * time.Hour)
	put("big", strings.Repeat("b", 100))
	b.clk.Advance(time.Hour)
	put("small", "small archive")
	stored := func(content string) bool {
		_, err := bs.Stat(b.ctx, digestOf(content))
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			t.Fatal(err)
		}
		return err == nil
	}

	if n, err := EvictCaches(b.ctx, b.s, CachePolicy{}, b.clk.Now()); err != nil || n != 0 {
		t.Fatalf("no policy: evicted %d, %v", n, err)
	}
	n, err := EvictCaches(b.ctx, b.s, CachePolicy{MaxBytes: 50, MaxAge: DefaultCacheMaxAge}, b.clk.Now())
	if err != nil || n != 2 {
		t.Fatalf("evicted %d, %v; want stale (by age) and big (by size)", n, err)
	}
	cs, err := b.s.ListCaches(b.ctx, p.ID)
	if err != nil || len(cs) != 1 || cs[0].Key != "small" {
		t.Fatalf("left %+v, %v; want small", cs, err)
	}
	got, err := CollectArtifacts(b.ctx, b.s, bs, time.Now().Add(48*time.Hour), BlobGrace)
	if err != nil || got.Blobs != 2 {
		t.Fatalf("collected %+v, %v; want the two evicted archives", got, err)
	}
	if stored("stale archive") || stored(strings.Repeat("b", 100)) || !stored("small archive") {
		t.Error("after collection, want only the small archive stored")
	}
}
