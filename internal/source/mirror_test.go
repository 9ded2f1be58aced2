package source_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/gantry-ci/gantry/internal/source"
)

func TestReadFileAtExactCommit(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	r := newRemote(t, t.TempDir(), "app")
	old := r.commit("first", map[string]string{".gantry.yml": "version: old\n", "dir/a.txt": "a\n"})
	r.push("refs/heads/main", false)
	m := openMirror(t, t.TempDir(), r.fileURL(), source.Credentials{})

	// First fetch: the mirror is empty until the commit is asked for.
	got, err := m.ReadFile(ctx, old, ".gantry.yml")
	if err != nil {
		t.Fatalf("ReadFile at first commit: %v", err)
	}
	if string(got) != "version: old\n" {
		t.Fatalf("ReadFile = %q", got)
	}

	newer := r.commit("second", map[string]string{".gantry.yml": "version: new\n", "added.txt": "x\n"})
	r.push("refs/heads/main", false)
	if got, err := m.ReadFile(ctx, newer, ".gantry.yml"); err != nil || string(got) != "version: new\n" {
		t.Fatalf("ReadFile at new commit = %q, %v", got, err)
	}
	// The older commit still reads its own content, never the branch's.
	if got, err := m.ReadFile(ctx, old, "/.gantry.yml"); err != nil || string(got) != "version: old\n" {
		t.Fatalf("ReadFile at old commit after a push = %q, %v", got, err)
	}
	if _, err := m.ReadFile(ctx, old, "added.txt"); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("ReadFile of a file added later, at the old commit: err = %v, want ErrNotFound", err)
	}
	if _, err := m.ReadFile(ctx, newer, "missing.yml"); !errors.Is(err, source.ErrNotFound) {
		t.Fatalf("ReadFile of a missing file: err = %v, want ErrNotFound", err)
	}
	if _, err := m.ReadFile(ctx, newer, "dir"); !errors.Is(err, source.ErrNotFound) || !strings.Contains(err.Error(), "tree") {
		t.Fatalf("ReadFile of a directory: err = %v, want ErrNotFound naming a tree", err)
	}
	if got, err := m.ReadFile(ctx, newer, "dir/../dir/a.txt"); err != nil || string(got) != "a\n" {
		t.Fatalf("ReadFile of a cleaned path = %q, %v", got, err)
	}
	for _, bad := range []struct{ sha, path string }{
		{"main", ".gantry.yml"},            // a branch is never read by mistake for a commit
		{newer[:12], ".gantry.yml"},        // nor an abbreviation
		{newer, "../outside"},              // nor a path outside the tree
		{newer, ""},                        // nor nothing
		{newer, "a\nb"},                    // nor a path that would break git's batch protocol
		{strings.Repeat("g", 40), "x.yml"}, // nor what is not hex
	} {
		if _, err := m.ReadFile(ctx, bad.sha, bad.path); !errors.Is(err, source.ErrInvalid) {
			t.Errorf("ReadFile(%q, %q): err = %v, want ErrInvalid", bad.sha, bad.path, err)
		}
	}
}

func TestReadFileSizeCap(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	r := newRemote(t, t.TempDir(), "big")
	sha := r.commit("big", map[string]string{"big.bin": strings.Repeat("x", 3000), "small": "ok"})
	r.push("refs/heads/main", false)
	m, err := source.Open(ctx, source.Config{Dir: t.TempDir(), URL: r.fileURL(), MaxFileSize: 2048, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if _, err := m.ReadFile(ctx, sha, "big.bin"); !errors.Is(err, source.ErrTooLarge) {
		t.Fatalf("ReadFile over the cap: err = %v, want ErrTooLarge", err)
	}
	if got, err := m.ReadFile(ctx, sha, "small"); err != nil || string(got) != "ok" {
		t.Fatalf("ReadFile under the cap = %q, %v", got, err)
	}
}

func TestIncrementalFetchOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	root := t.TempDir()
	r := newRemote(t, root, "svc")
	files := map[string]string{}
	for i := range 200 {
		files[filepath.Join("pkg", string(rune('a'+i%26)), strings.Repeat("f", 1+i/26)+".go")] = strings.Repeat("line\n", i+1)
	}
	first := r.commit("many files", files)
	r.push("refs/heads/main", false)
	srv := newGitServer(t, root, "", "")
	m := openMirror(t, t.TempDir(), srv.url("svc"), source.Credentials{})

	if err := m.EnsureCommit(ctx, first); err != nil {
		t.Fatalf("first EnsureCommit: %v", err)
	}
	before := objectCount(t, m.Dir())
	if before < 200 {
		t.Fatalf("mirror holds %d objects after the first fetch, want the 200 files' and more", before)
	}
	fetches := srv.advertisements.Load()
	// A commit the mirror has costs no network round trip.
	if err := m.EnsureCommit(ctx, first); err != nil {
		t.Fatal(err)
	}
	if got := srv.advertisements.Load(); got != fetches {
		t.Fatalf("EnsureCommit of a commit the mirror has fetched (%d -> %d requests)", fetches, got)
	}

	second := r.commit("one change", map[string]string{"pkg/a/f.go": "changed\n"})
	r.push("refs/heads/main", false)
	if err := m.EnsureCommit(ctx, second); err != nil {
		t.Fatalf("EnsureCommit of the new push: %v", err)
	}
	// One commit, the root tree, pkg/, pkg/a/ and one blob: only what is new came over. The
	// mirror keeps a fetch as a pack, and completing the thin pack it got copies in the few
	// objects the new ones are deltas against; the whole repository would be over 200.
	if added := objectCount(t, m.Dir()) - before; added < 1 || added > 10 {
		t.Fatalf("incremental fetch added %d objects, want the new commit's 5 and a few delta bases at most", added)
	}
	if got, err := m.ReadFile(ctx, second, "pkg/a/f.go"); err != nil || string(got) != "changed\n" {
		t.Fatalf("ReadFile after the incremental fetch = %q, %v", got, err)
	}
}

func TestForcePush(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	root := t.TempDir()
	r := newRemote(t, root, "fp")
	base := r.commit("base", map[string]string{"a": "1", "b": "1"})
	gone := r.commit("to be rewritten", map[string]string{"a": "2"})
	r.push("refs/heads/main", false)
	cache := t.TempDir()
	m := openMirror(t, cache, r.fileURL(), source.Credentials{})
	if err := m.EnsureCommit(ctx, gone); err != nil {
		t.Fatal(err)
	}

	gitCmd(t, r.env, r.work, "reset", "--quiet", "--hard", base)
	rewritten := r.commit("rewritten", map[string]string{"b": "3"})
	r.push("refs/heads/main", true)
	// The remote forgets the old commit entirely.
	gitCmd(t, r.env, r.bare, "reflog", "expire", "--expire=now", "--all")
	gitCmd(t, r.env, r.bare, "gc", "--quiet", "--prune=now")

	ref, err := m.ResolveRef(ctx, "main")
	if err != nil || ref.SHA != rewritten || ref.Name != "refs/heads/main" {
		t.Fatalf("ResolveRef(main) after a force push = %+v, %v; want %s", ref, err, rewritten)
	}
	// A mirror that fetched the old commit before keeps it: a job for it can still run.
	if got, err := m.ReadFile(ctx, gone, "a"); err != nil || string(got) != "2" {
		t.Fatalf("ReadFile of the force-pushed-away commit from a warm mirror = %q, %v", got, err)
	}

	fresh := openMirror(t, t.TempDir(), r.fileURL(), source.Credentials{})
	err = fresh.EnsureCommit(ctx, gone)
	if !errors.Is(err, source.ErrCommitNotFound) {
		t.Fatalf("EnsureCommit of a commit the remote dropped: err = %v, want ErrCommitNotFound", err)
	}
	if !strings.Contains(err.Error(), gone) {
		t.Fatalf("error %q does not name the commit", err)
	}
	// The push event's before is gone: every file counts as changed.
	paths, err := fresh.ChangedPaths(ctx, gone, rewritten)
	if err != nil || !reflect.DeepEqual(paths, []string{"a", "b"}) {
		t.Fatalf("ChangedPaths from a dropped commit = %q, %v; want every file", paths, err)
	}
}

func TestTagsAndRefs(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	r := newRemote(t, t.TempDir(), "tags")
	c1 := r.commit("one", map[string]string{"v": "1"})
	gitCmd(t, r.env, r.work, "tag", "v1.0")
	gitCmd(t, r.env, r.work, "tag", "-a", "-m", "annotated", "v1.1")
	c2 := r.commit("two", map[string]string{"v": "2"})
	gitCmd(t, r.env, r.work, "tag", "release") // also a branch name below
	r.push("refs/heads/main", false)
	gitCmd(t, r.env, r.work, "push", "--quiet", r.bare, "--tags", c1+":refs/heads/release")
	m := openMirror(t, t.TempDir(), r.fileURL(), source.Credentials{})

	for _, tc := range []struct {
		ref, name, sha string
	}{
		{"main", "refs/heads/main", c2},
		{"v1.0", "refs/tags/v1.0", c1},
		{"v1.1", "refs/tags/v1.1", c1}, // annotated: the commit, not the tag object
		{"refs/tags/v1.1", "refs/tags/v1.1", c1},
		{"release", "refs/heads/release", c1}, // a branch wins over a tag of the same name
		{"refs/tags/release", "refs/tags/release", c2},
		{c2, "", c2},
	} {
		got, err := m.ResolveRef(ctx, tc.ref)
		if err != nil || got.Name != tc.name || got.SHA != tc.sha {
			t.Errorf("ResolveRef(%q) = %+v, %v; want {%s %s}", tc.ref, got, err, tc.name, tc.sha)
		}
	}
	for _, bad := range []string{"main~1", "main^", "v1.0..main", "@{-1}", "-v", "a b", ""} {
		if _, err := m.ResolveRef(ctx, bad); !errors.Is(err, source.ErrInvalid) {
			t.Errorf("ResolveRef(%q): err = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := m.ResolveRef(ctx, "nope"); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("ResolveRef of a missing ref: err = %v, want ErrNotFound", err)
	}
	// A tag deleted on the remote is pruned from the mirror.
	gitCmd(t, r.env, r.work, "push", "--quiet", r.bare, ":refs/tags/v1.0")
	if _, err := m.ResolveRef(ctx, "v1.0"); !errors.Is(err, source.ErrNotFound) {
		t.Errorf("ResolveRef of a deleted tag: err = %v, want ErrNotFound", err)
	}
}

func TestChangedPaths(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	r := newRemote(t, t.TempDir(), "diff")
	c1 := r.commit("one", map[string]string{"keep": "k", "mod": "1", "del": "d", "old/name": "same content\n", "docs/x.md": "x"})
	r.push("refs/heads/main", false)
	if err := os.MkdirAll(filepath.Join(r.work, "new"), 0o755); err != nil {
		t.Fatal(err)
	}
	gitCmd(t, r.env, r.work, "mv", "old/name", "new/name")
	c2 := r.commit("two", map[string]string{"mod": "2", "del": "", "added dir/file with space": "n"})
	r.push("refs/heads/main", false)
	m := openMirror(t, t.TempDir(), r.fileURL(), source.Credentials{})

	for _, tc := range []struct {
		name          string
		before, after string
		want          []string
	}{
		{"push", c1, c2, []string{"added dir/file with space", "del", "mod", "new/name", "old/name"}},
		{"new branch", strings.Repeat("0", 40), c1, []string{"del", "docs/x.md", "keep", "mod", "old/name"}},
		{"empty before", "", c2, []string{"added dir/file with space", "docs/x.md", "keep", "mod", "new/name"}},
		{"no change", c2, c2, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := m.ChangedPaths(ctx, tc.before, tc.after)
			if err != nil {
				t.Fatal(err)
			}
			sort.Strings(got)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("ChangedPaths = %q, want %q", got, tc.want)
			}
		})
	}
	if _, err := m.ChangedPaths(ctx, c1, strings.Repeat("0", 40)); !errors.Is(err, source.ErrInvalid) {
		t.Fatalf("ChangedPaths to the zero commit: err = %v, want ErrInvalid", err)
	}
}

func TestDefaultBranch(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	root := t.TempDir()
	r := newRemote(t, root, "def")
	r.commit("one", map[string]string{"a": "1"})
	r.push("refs/heads/main", false)
	r.push("refs/heads/trunk", false)
	srv := newGitServer(t, root, "", "")
	for _, url := range []string{r.fileURL(), srv.url("def")} {
		m := openMirror(t, t.TempDir(), url, source.Credentials{})
		if b, err := m.DefaultBranch(ctx); err != nil || b != "main" {
			t.Fatalf("DefaultBranch over %s = %q, %v", url, b, err)
		}
	}
	gitCmd(t, r.env, r.bare, "symbolic-ref", "HEAD", "refs/heads/trunk")
	m := openMirror(t, t.TempDir(), srv.url("def"), source.Credentials{})
	if b, err := m.DefaultBranch(ctx); err != nil || b != "trunk" {
		t.Fatalf("DefaultBranch after the remote changed it = %q, %v", b, err)
	}
}

func TestConcurrentEnsureCommitFetchesOnce(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	root := t.TempDir()
	r := newRemote(t, root, "conc")
	sha := r.commit("one", map[string]string{"a": "1"})
	r.push("refs/heads/main", false)
	srv := newGitServer(t, root, "", "")
	cache := t.TempDir()

	// Each goroutine opens its own Mirror on the shared cache, as separate processes would:
	// the repository is created once and fetched once.
	const n = 8
	mirrors := make([]*source.Mirror, n)
	var wg sync.WaitGroup
	openErrs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			m, err := source.Open(ctx, source.Config{Dir: cache, URL: srv.url("conc"), Logger: testLogger(t)})
			mirrors[i], openErrs[i] = m, err
		})
	}
	wg.Wait()
	for i, err := range openErrs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		t.Cleanup(func() { _ = mirrors[i].Close() })
	}
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { errs[i] = mirrors[i].EnsureCommit(ctx, sha) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("EnsureCommit %d: %v", i, err)
		}
	}
	if got := srv.advertisements.Load(); got != 1 {
		t.Fatalf("%d concurrent EnsureCommit calls fetched %d times, want once", n, got)
	}
	entries, err := os.ReadDir(cache)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if len(names) != 2 { // the repository and its lock file, no leftover temporary init
		t.Fatalf("cache holds %q, want one repository and its lock", names)
	}
}

func TestFetchCommitOnNoBranch(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	root := t.TempDir()
	r := newRemote(t, root, "pr")
	r.commit("base", map[string]string{"a": "1"})
	r.push("refs/heads/main", false)
	gitCmd(t, r.env, r.work, "checkout", "--quiet", "-b", "feature")
	head := r.commit("pr head", map[string]string{"a": "pr"})
	// A pull request head lives under refs/pull/, which the mirror does not fetch.
	r.push("refs/pull/1/head", false)
	srv := newGitServer(t, root, "", "")
	for _, url := range []string{r.fileURL(), srv.url("pr")} {
		m := openMirror(t, t.TempDir(), url, source.Credentials{})
		if got, err := m.ReadFile(ctx, head, "a"); err != nil || string(got) != "pr" {
			t.Fatalf("ReadFile at a pull request head over %s = %q, %v", url, got, err)
		}
		// Pinned, so gc in the mirror cannot drop it from under a workspace, and a later
		// fetch --prune leaves the pin alone.
		if err := m.Fetch(ctx); err != nil {
			t.Fatal(err)
		}
		if pin := gitCmd(t, r.env, m.Dir(), "rev-parse", "refs/gantry/pins/"+head); pin != head {
			t.Fatalf("pin = %s, want %s", pin, head)
		}
	}
}

func TestTokenOverHTTP(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	root := t.TempDir()
	r := newRemote(t, root, "private")
	sha := r.commit("one", map[string]string{"secret.txt": "s"})
	r.push("refs/heads/main", false)
	const token = "gnt_tok3n_that_must_not_leak"
	srv := newGitServer(t, root, "x-access-token", token)

	// Plain http carries the token in clear: refused before git runs, unless allowed.
	_, err := source.Open(ctx, source.Config{Dir: t.TempDir(), URL: srv.url("private"), Credentials: source.Credentials{Token: token}, Logger: testLogger(t)})
	if !errors.Is(err, source.ErrPlainHTTP) || !strings.Contains(err.Error(), "https://") || !strings.Contains(err.Error(), "--allow-plain-http 127.0.0.1") {
		t.Fatalf("Open with a token over plain http: err = %v, want ErrPlainHTTP naming https:// and --allow-plain-http 127.0.0.1", err)
	}
	if strings.Contains(err.Error(), token) || srv.lastAuth() != "" {
		t.Fatalf("the refused token was sent or shown: err %v, server saw %q", err, srv.lastAuth())
	}

	// git runs through a wrapper that records every command line, as ps would show it.
	argvLog := filepath.Join(t.TempDir(), "argv.log")
	wrapper := filepath.Join(t.TempDir(), "git")
	script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + argvLog + "'\nexec git \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := source.Open(ctx, source.Config{Dir: t.TempDir(), URL: srv.url("private"), Credentials: source.Credentials{Token: token, AllowPlainHTTP: true}, Git: wrapper, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	if got, err := m.ReadFile(ctx, sha, "secret.txt"); err != nil || string(got) != "s" {
		t.Fatalf("ReadFile with the token = %q, %v", got, err)
	}
	if err := source.Checkout(ctx, m, sha, t.TempDir(), source.CheckoutOptions{Depth: 1, Submodules: true}); err != nil {
		t.Fatalf("Checkout with the token: %v", err)
	}
	argv, err := os.ReadFile(argvLog)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(argv), "fetch") || strings.Contains(string(argv), token) {
		t.Fatalf("git's command lines hold the token, or were not recorded:\n%s", argv)
	}
	if got := srv.lastAuth(); got == "" {
		t.Fatal("the server saw no Authorization header")
	}
	cfg, err := os.ReadFile(filepath.Join(m.Dir(), "config"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(cfg), token) {
		t.Fatalf("the mirror's config holds the token:\n%s", cfg)
	}

	for _, tc := range []struct {
		name  string
		creds source.Credentials
	}{
		{"wrong token", source.Credentials{Token: "wrong_" + token, AllowPlainHTTP: true}},
		{"wrong user", source.Credentials{Token: token, Username: "someone", AllowPlainHTTP: true}},
		{"no token", source.Credentials{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := openMirror(t, t.TempDir(), srv.url("private"), tc.creds)
			err := m.EnsureCommit(ctx, sha)
			if err == nil || errors.Is(err, source.ErrCommitNotFound) {
				t.Fatalf("EnsureCommit with %s: err = %v, want an authentication failure", tc.name, err)
			}
			if strings.Contains(err.Error(), token) {
				t.Fatalf("the error leaks the token: %v", err)
			}
			if !strings.Contains(err.Error(), "fetch") || !strings.Contains(err.Error(), srv.url("private")) {
				t.Fatalf("the error %q does not say what failed", err)
			}
		})
	}

	// A bad URL with a password is refused before git runs, without echoing the password.
	_, err = source.Open(ctx, source.Config{Dir: t.TempDir(), URL: strings.Replace(srv.url("private"), "http://", "http://u:"+token+"@", 1)})
	if !errors.Is(err, source.ErrInvalid) || strings.Contains(err.Error(), token) {
		t.Fatalf("Open with a password in the URL: err = %v, want ErrInvalid without the password", err)
	}
}

func TestBadRemote(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	sha := strings.Repeat("ab", 20)
	m := openMirror(t, t.TempDir(), "file://"+filepath.Join(t.TempDir(), "nothing.git"), source.Credentials{})
	err := m.EnsureCommit(ctx, sha)
	if err == nil || errors.Is(err, source.ErrCommitNotFound) || !strings.Contains(err.Error(), "nothing.git") {
		t.Fatalf("EnsureCommit from a missing repository: err = %v, want a fetch error naming it", err)
	}
	for _, url := range []string{"", "ext::sh -c touch% /tmp/pwned", "-upload-pack=evil", "ftp://example.com/x.git"} {
		if _, err := source.Open(ctx, source.Config{Dir: t.TempDir(), URL: url}); !errors.Is(err, source.ErrInvalid) {
			t.Errorf("Open(%q): err = %v, want ErrInvalid", url, err)
		}
	}
	if _, err := source.Open(ctx, source.Config{Dir: t.TempDir(), URL: "file:///x.git", Credentials: source.Credentials{Token: "t"}}); err == nil {
		t.Errorf("a token for a file remote: err = %v, want a refusal", err)
	}
	// A cancelled context stops a fetch.
	r := newRemote(t, t.TempDir(), "x")
	sha = r.commit("one", map[string]string{"a": "1"})
	r.push("refs/heads/main", false)
	m = openMirror(t, t.TempDir(), r.fileURL(), source.Credentials{})
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := m.EnsureCommit(cctx, sha); err == nil {
		t.Fatal("EnsureCommit with a cancelled context succeeded")
	}
}

func TestErrorsRedactCredentials(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	const token = "tok_echoed_back"
	// A git whose fetch fails saying everything it was given, as a verbose transport error
	// might: the error Gantry returns must still not hold the token in any form.
	wrapper := filepath.Join(t.TempDir(), "git")
	script := `#!/bin/sh
case " $* " in *" fetch "*)
	echo "fatal: unable to access: $GIT_CONFIG_VALUE_0 x-access-token:` + token + `" >&2
	exit 128
esac
exec git "$@"
`
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := source.Open(ctx, source.Config{Dir: t.TempDir(), URL: "https://git.invalid/o/r.git", Credentials: source.Credentials{Token: token}, Git: wrapper})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Close() })
	err = m.EnsureCommit(ctx, strings.Repeat("1", 40))
	if err == nil || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Fatalf("EnsureCommit: err = %v, want git's message with the secrets redacted", err)
	}
	if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "Basic eC1") {
		t.Fatalf("the error leaks the credentials: %v", err)
	}
}

// TestCommit: the mirror reads a commit's message and author, fetching it when needed.
func TestCommit(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	r := newRemote(t, t.TempDir(), "app")
	sha := r.commit("Fix the parser\n\nIt read one byte too many.", map[string]string{"a.txt": "a\n"})
	r.push("refs/heads/main", false)
	m := openMirror(t, t.TempDir(), r.fileURL(), source.Credentials{})
	msg, author, err := m.Commit(ctx, sha)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if msg != "Fix the parser\n\nIt read one byte too many." || author == "" {
		t.Errorf("Commit = %q by %q", msg, author)
	}
	if _, _, err := m.Commit(ctx, strings.Repeat("0", 40)); err == nil {
		t.Error("Commit of an unknown commit succeeded")
	}
}
