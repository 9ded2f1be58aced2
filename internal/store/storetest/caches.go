package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var cacheTests = []test{
	{"PutFirstWins", testCachePutFirstWins},
	{"Find", testCacheFind},
	{"FindTouches", testCacheFindTouches},
	{"ListDelete", testCacheListDelete},
	{"EvictByAge", testCacheEvictByAge},
	{"EvictBySize", testCacheEvictBySize},
	{"BlobInUse", testCacheBlobInUse},
	{"Invalid", testCacheInvalid},
	{"Scopes", testCacheScopes},
	{"ScopesApart", testCacheScopesApart},
	{"PutOnlyOwned", testCachePutOnlyOwned},
}

func digestOf(c byte) string { return strings.Repeat(string(c), 64) }

// putCache saves an entry in the project's scope, failing the test unless it is new.
func (b *bundle) putCache(project uuid.UUID, scope, key string, digest byte, size int64) *store.CacheEntry {
	b.t.Helper()
	if err := b.s.AddBlobOwner(b.ctx, project, digestOf(digest)); err != nil {
		b.t.Fatalf("AddBlobOwner: %v", err)
	}
	c, created, err := b.s.PutCache(b.ctx, &store.CacheEntry{ProjectID: project, Scope: scope, Key: key, SHA256: digestOf(digest), Size: size})
	if err != nil || !created {
		b.t.Fatalf("PutCache(%s, %s): created %v, %v", scope, key, created, err)
	}
	return c
}

func (b *bundle) cacheProject(name string) uuid.UUID {
	b.t.Helper()
	b.project(name)
	return b.projectID(name)
}

// testCachePutOnlyOwned: an entry is saved only for an archive its project owns; that
// another project owns the digest does not count, and a refused put saves nothing.
func testCachePutOnlyOwned(t *testing.T, h Harness) {
	_, b := setup(t, h)
	alpha, beta := b.cacheProject("alpha"), b.cacheProject("beta")
	if err := b.s.AddBlobOwner(b.ctx, beta, digestOf('s')); err != nil {
		t.Fatal(err)
	}
	entry := &store.CacheEntry{ProjectID: alpha, Scope: "main", Key: "deps", SHA256: digestOf('s'), Size: 6}
	_, _, err := b.s.PutCache(b.ctx, entry)
	wantErr(t, "PutCache of a blob only another project owns", err, store.ErrForbidden)
	if _, err := b.s.FindCache(b.ctx, store.FindCacheParams{ProjectID: alpha, Scopes: []string{"main"}, Key: "deps"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after the refusal FindCache = %v, want ErrNotFound", err)
	}
	if err := b.s.AddBlobOwner(b.ctx, alpha, digestOf('s')); err != nil {
		t.Fatal(err)
	}
	if _, created, err := b.s.PutCache(b.ctx, entry); err != nil || !created {
		t.Fatalf("PutCache once alpha owns the blob: created %v, %v", created, err)
	}
	// An entry there already is the answer, whoever owns the digest offered.
	got, created, err := b.s.PutCache(b.ctx, &store.CacheEntry{ProjectID: alpha, Scope: "main", Key: "deps", SHA256: digestOf('u'), Size: 1})
	if err != nil || created || got.SHA256 != digestOf('s') {
		t.Errorf("PutCache of a saved key with an unowned blob: %+v, created %v, %v; want the saved entry", got, created, err)
	}
}

func testCachePutFirstWins(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := b.cacheProject("app")
	first := b.putCache(p, "main", "go-1", 'a', 10)
	if first.ID == uuid.Nil || !first.CreatedAt.Equal(epoch) || !first.LastUsedAt.Equal(epoch) || first.SHA256 != digestOf('a') || first.Size != 10 {
		t.Errorf("stored entry: %+v", first)
	}
	b.clk.Advance(time.Second)
	again, created, err := b.s.PutCache(b.ctx, &store.CacheEntry{ProjectID: p, Scope: "main", Key: "go-1", SHA256: digestOf('b'), Size: 20})
	if err != nil || created {
		t.Fatalf("second put: created %v, %v", created, err)
	}
	if again.ID != first.ID || again.SHA256 != digestOf('a') || again.Size != 10 {
		t.Errorf("second put changed the entry: %+v", again)
	}
	// The same key in another scope or project is another entry.
	b.putCache(p, "feature", "go-1", 'b', 20)
	b.putCache(b.cacheProject("other"), "main", "go-1", 'c', 30)
	if cs, err := b.s.ListCaches(b.ctx, p); err != nil || len(cs) != 2 {
		t.Fatalf("ListCaches: %d entries, %v; want 2", len(cs), err)
	}
}

func testCacheFind(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := b.cacheProject("app")
	b.putCache(p, "main", "go-old", 'a', 1)
	b.clk.Advance(time.Second)
	b.putCache(p, "main", "go-new", 'b', 1)
	b.clk.Advance(time.Second)
	b.putCache(p, "main", "GO-upper", 'c', 1)
	b.putCache(p, "main", "node-x", 'd', 1)
	b.putCache(p, "feature", "go-feature", 'e', 1)
	b.putCache(p, "main", "100%_x", 'f', 1)
	main := []string{"main"}
	featureThenMain := []string{"feature", "main"}
	tests := []struct {
		name        string
		scopes      []string
		key         string
		restoreKeys []string
		want        string // key found; "" for none
		wantScope   string
	}{
		{"exact", main, "go-old", []string{"go-"}, "go-old", "main"},
		{"prefix takes the newest", main, "go-none", []string{"go-"}, "go-new", "main"},
		{"restore keys in order", main, "x", []string{"rust-", "node-", "go-"}, "node-x", "main"},
		{"prefix is case-sensitive", main, "x", []string{"go-up"}, "", ""},
		{"prefix holds LIKE wildcards literally", main, "x", []string{"100%_"}, "100%_x", "main"},
		{"no wildcard meaning", main, "x", []string{"1_0"}, "", ""},
		{"own scope first, even by prefix", featureThenMain, "go-new", []string{"go-"}, "go-feature", "feature"},
		{"fallback to the default branch", []string{"other", "main"}, "go-old", nil, "go-old", "main"},
		{"fallback by prefix", []string{"other", "main"}, "go-x", []string{"go-"}, "go-new", "main"},
		{"another scope is never read", []string{"other"}, "go-old", []string{"go-"}, "", ""},
		{"no restore key, no exact", main, "go-", nil, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := b.s.FindCache(b.ctx, store.FindCacheParams{ProjectID: p, Scopes: tt.scopes, Key: tt.key, RestoreKeys: tt.restoreKeys})
			if tt.want == "" {
				if !errors.Is(err, store.ErrNotFound) {
					t.Errorf("found %+v, %v; want ErrNotFound", c, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("FindCache: %v", err)
			}
			if c.Key != tt.want || c.Scope != tt.wantScope {
				t.Errorf("found %s in %s, want %s in %s", c.Key, c.Scope, tt.want, tt.wantScope)
			}
		})
	}
	// Another project's entries are not found.
	if _, err := b.s.FindCache(b.ctx, store.FindCacheParams{ProjectID: b.cacheProject("other"), Scopes: main, Key: "go-old"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("another project's entry: %v", err)
	}
}

func testCacheFindTouches(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := b.cacheProject("app")
	b.putCache(p, "main", "a", 'a', 1)
	b.clk.Advance(time.Hour)
	c, err := b.s.FindCache(b.ctx, store.FindCacheParams{ProjectID: p, Scopes: []string{"main"}, Key: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if !c.LastUsedAt.Equal(epoch.Add(time.Hour)) || !c.CreatedAt.Equal(epoch) {
		t.Errorf("found entry: created %s, last used %s", c.CreatedAt, c.LastUsedAt)
	}
	cs, err := b.s.ListCaches(b.ctx, p)
	if err != nil || len(cs) != 1 || !cs[0].LastUsedAt.Equal(epoch.Add(time.Hour)) {
		t.Fatalf("after a restore, ListCaches: %+v, %v", cs, err)
	}
}

func testCacheListDelete(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := b.cacheProject("app")
	other := b.cacheProject("other")
	b.putCache(p, "main", "a", 'a', 1)
	b.clk.Advance(time.Second)
	b.putCache(p, "feature", "a", 'b', 1)
	b.clk.Advance(time.Second)
	bEntry := b.putCache(p, "main", "b", 'c', 1)
	b.clk.Advance(time.Second)
	b.putCache(p, "main", "c", 'd', 1)
	b.putCache(other, "main", "a", 'e', 1)
	cs, err := b.s.ListCaches(b.ctx, p)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range cs {
		got = append(got, c.Scope+"/"+c.Key)
	}
	if want := []string{"main/c", "main/b", "feature/a", "main/a"}; !slices.Equal(got, want) {
		t.Errorf("ListCaches = %v, want %v (most recently used first)", got, want)
	}
	steps := []struct {
		name string
		p    store.DeleteCachesParams
		n    int
	}{
		{"by key and scope", store.DeleteCachesParams{ProjectID: p, Key: "a", Scope: "feature"}, 1},
		{"by id", store.DeleteCachesParams{ProjectID: p, ID: bEntry.ID}, 1},
		{"by id of another project", store.DeleteCachesParams{ProjectID: other, ID: bEntry.ID}, 0},
		{"by key", store.DeleteCachesParams{ProjectID: p, Key: "a"}, 1},
		{"all", store.DeleteCachesParams{ProjectID: p}, 1},
	}
	for _, s := range steps {
		if n, err := b.s.DeleteCaches(b.ctx, s.p); err != nil || n != s.n {
			t.Errorf("%s: deleted %d, %v; want %d", s.name, n, err, s.n)
		}
	}
	if cs, _ := b.s.ListCaches(b.ctx, p); len(cs) != 0 {
		t.Errorf("left %d entries", len(cs))
	}
	if cs, _ := b.s.ListCaches(b.ctx, other); len(cs) != 1 {
		t.Errorf("the other project has %d entries, want 1", len(cs))
	}
}

func testCacheEvictByAge(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := b.cacheProject("app")
	b.putCache(p, "main", "old", 'a', 1)
	b.putCache(p, "main", "used", 'b', 1)
	b.clk.Advance(48 * time.Hour)
	b.putCache(p, "main", "new", 'c', 1)
	if _, err := b.s.FindCache(b.ctx, store.FindCacheParams{ProjectID: p, Scopes: []string{"main"}, Key: "used"}); err != nil {
		t.Fatal(err)
	}
	n, err := b.s.EvictCaches(b.ctx, store.EvictCachesParams{UnusedSince: b.clk.Now().Add(-24 * time.Hour)})
	if err != nil || n != 1 {
		t.Fatalf("EvictCaches: %d, %v; want 1", n, err)
	}
	cs, _ := b.s.ListCaches(b.ctx, p)
	if len(cs) != 2 || slices.ContainsFunc(cs, func(c *store.CacheEntry) bool { return c.Key == "old" }) {
		t.Errorf("left %+v; want used and new", cs)
	}
	if n, err := b.s.EvictCaches(b.ctx, store.EvictCachesParams{}); err != nil || n != 0 {
		t.Errorf("EvictCaches with no bound: %d, %v", n, err)
	}
}

func testCacheEvictBySize(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := b.cacheProject("app")
	small := b.cacheProject("small")
	for i, k := range []string{"a", "b", "c", "d"} {
		b.putCache(p, "main", k, byte('a'+i), 40)
		b.clk.Advance(time.Minute)
	}
	b.putCache(small, "main", "x", 'x', 90)
	// a is used last, so it stays; b goes first.
	if _, err := b.s.FindCache(b.ctx, store.FindCacheParams{ProjectID: p, Scopes: []string{"main"}, Key: "a"}); err != nil {
		t.Fatal(err)
	}
	n, err := b.s.EvictCaches(b.ctx, store.EvictCachesParams{MaxBytes: 100})
	if err != nil || n != 2 {
		t.Fatalf("EvictCaches: %d, %v; want 2", n, err)
	}
	cs, _ := b.s.ListCaches(b.ctx, p)
	var got []string
	for _, c := range cs {
		got = append(got, c.Key)
	}
	if want := []string{"a", "d"}; !slices.Equal(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	if cs, _ := b.s.ListCaches(b.ctx, small); len(cs) != 1 {
		t.Errorf("a project within the budget lost entries: %d left", len(cs))
	}
}

func testCacheBlobInUse(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := b.cacheProject("app")
	e := b.putCache(p, "main", "a", 'a', 1)
	if used, err := b.s.BlobInUse(b.ctx, digestOf('a')); err != nil || !used {
		t.Errorf("BlobInUse of a cache's blob: %v, %v", used, err)
	}
	if _, err := b.s.DeleteCaches(b.ctx, store.DeleteCachesParams{ProjectID: p, ID: e.ID}); err != nil {
		t.Fatal(err)
	}
	if used, err := b.s.BlobInUse(b.ctx, digestOf('a')); err != nil || used {
		t.Errorf("BlobInUse after the entry was deleted: %v, %v", used, err)
	}
}

func testCacheInvalid(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := b.cacheProject("app")
	for _, c := range []store.CacheEntry{
		{Scope: "main", Key: "k", SHA256: digestOf('a')},
		{ProjectID: p, Scope: "main", SHA256: digestOf('a')},
		{ProjectID: p, Scope: "main", Key: "k", SHA256: "short"},
		{ProjectID: p, Scope: "main", Key: "k", SHA256: digestOf('a'), Size: -1},
	} {
		if _, _, err := b.s.PutCache(b.ctx, &c); !errors.Is(err, store.ErrInvalid) {
			t.Errorf("PutCache(%+v): %v, want ErrInvalid", c, err)
		}
	}
	if cs, _ := b.s.ListCaches(b.ctx, p); len(cs) != 0 {
		t.Errorf("stored %d entries", len(cs))
	}
}

// testCacheScopes is pure, but part of the contract every driver's caller relies on.
func testCacheScopes(t *testing.T, _ Harness) {
	tests := []struct {
		tr    store.Trigger
		def   string
		write string
		read  []string
	}{
		{store.Trigger{Branch: "main", Verified: store.RefFromWebhook}, "main", "main", []string{"main"}},
		{store.Trigger{Branch: "feature", Verified: store.RefFromWebhook}, "", "feature", []string{"feature", "main"}},
		{store.Trigger{Branch: "feature", Verified: store.RefFromRepository}, "trunk", "feature", []string{"feature", "trunk"}},
		{store.Trigger{Branch: "release", PRNumber: 7, Verified: store.RefFromWebhook}, "main", "pr/7", []string{"pr/7", "release", "main"}},
		{store.Trigger{Tag: "v1", Verified: store.RefFromWebhook}, "main", "tag/v1", []string{"tag/v1", "main"}},
		{store.Trigger{Verified: store.RefFromAdmin}, "main", "main", []string{"main"}},
		// A ref nobody verified never writes where verified runs read, and reads no
		// branch but the default.
		{store.Trigger{Branch: "main"}, "main", "unverified/main", []string{"unverified/main", "main"}},
		{store.Trigger{Branch: "feature"}, "", "unverified/feature", []string{"unverified/feature", "main"}},
		{store.Trigger{Tag: "v1", Verified: "forged"}, "main", "unverified/tag/v1", []string{"unverified/tag/v1", "main"}},
		{store.Trigger{}, "trunk", "unverified/trunk", []string{"unverified/trunk", "trunk"}},
	}
	for _, tt := range tests {
		w, r := store.CacheScopes(tt.tr, tt.def)
		if w != tt.write || !slices.Equal(r, tt.read) {
			t.Errorf("CacheScopes(%+v, %q) = %q, %q; want %q, %q", tt.tr, tt.def, w, r, tt.write, tt.read)
		}
	}
}

// testCacheScopesApart: no two refs write to one scope, whatever their names, so a
// branch named like a pull request or a tag writes where neither reads, and no pull
// request writes where a branch (the default one above all) reads.
func testCacheScopesApart(t *testing.T, _ Harness) {
	tests := []struct {
		tr          store.Trigger
		write       string
		read        []string
		description string
	}{
		{store.Trigger{Branch: "pr/7", Verified: store.RefFromWebhook}, "branch/pr/7", []string{"branch/pr/7", "main"}, "a branch named as pull request 7"},
		{store.Trigger{Branch: "tag/v1", Verified: store.RefFromWebhook}, "branch/tag/v1", []string{"branch/tag/v1", "main"}, "a branch named as tag v1"},
		{store.Trigger{Branch: "unverified/main", Verified: store.RefFromWebhook}, "branch/unverified/main", []string{"branch/unverified/main", "main"}, "a branch named as unverified main"},
		{store.Trigger{Branch: "branch/x", Verified: store.RefFromWebhook}, "branch/branch/x", []string{"branch/branch/x", "main"}, "a branch named with the prefix itself"},
		{store.Trigger{Branch: "pr/3", PRNumber: 7, Verified: store.RefFromWebhook}, "pr/7", []string{"pr/7", "branch/pr/3", "main"}, "a pull request into a branch named pr/3"},
	}
	for _, tt := range tests {
		w, r := store.CacheScopes(tt.tr, "main")
		if w != tt.write || !slices.Equal(r, tt.read) {
			t.Errorf("%s: CacheScopes = %q, %q; want %q, %q", tt.description, w, r, tt.write, tt.read)
		}
	}

	var triggers []store.Trigger
	for _, v := range []store.RefSource{store.RefFromWebhook, ""} {
		for _, b := range []string{"main", "feature", "pr/7", "tag/v1", "unverified/main", "branch/main", "branch/pr/7"} {
			triggers = append(triggers, store.Trigger{Branch: b, Verified: v})
		}
		for _, tag := range []string{"v1", "main", "pr/7"} {
			triggers = append(triggers, store.Trigger{Tag: tag, Verified: v})
		}
		for _, pr := range []int{3, 7} {
			triggers = append(triggers, store.Trigger{Branch: "main", PRNumber: pr, Verified: v})
		}
	}
	writers := map[string]store.Trigger{}
	for _, tr := range triggers {
		w, _ := store.CacheScopes(tr, "main")
		if other, ok := writers[w]; ok {
			t.Errorf("%s and %s both write scope %q", refOf(other), refOf(tr), w)
		}
		writers[w] = tr
	}
	// What a verified run of the default branch reads, no pull request writes.
	_, mainReads := store.CacheScopes(store.Trigger{Branch: "main", Verified: store.RefFromWebhook}, "main")
	for _, tr := range triggers {
		if w, _ := store.CacheScopes(tr, "main"); tr.PRNumber > 0 && slices.Contains(mainReads, w) {
			t.Errorf("%s writes scope %q, which the default branch reads", refOf(tr), w)
		}
	}
}

// refOf says which ref a trigger is of, and how it was verified.
func refOf(tr store.Trigger) string {
	ref := "branch " + tr.Branch
	switch {
	case tr.PRNumber > 0:
		ref = fmt.Sprintf("pull request %d into %s", tr.PRNumber, tr.Branch)
	case tr.Tag != "":
		ref = "tag " + tr.Tag
	}
	return fmt.Sprintf("%s (verified: %q)", ref, tr.Verified)
}
