package source

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Errors callers test with errors.Is.
var (
	// ErrNotFound: the file is absent at that commit, or the ref does not exist.
	ErrNotFound = errors.New("not found")
	// ErrCommitNotFound: the remote does not have the commit (never pushed, or force-pushed
	// away and garbage collected).
	ErrCommitNotFound = errors.New("commit not found on the remote")
	// ErrTooLarge: the file is larger than the mirror's MaxFileSize.
	ErrTooLarge = errors.New("file too large")
	// ErrInvalid: an argument is malformed (not a full commit id, a path outside the tree).
	ErrInvalid = errors.New("invalid argument")
	// ErrPlainHTTP: a token was to be sent to an http:// remote, where anyone on the path
	// could read it, and Credentials.AllowPlainHTTP does not allow it.
	ErrPlainHTTP = errors.New("a repository token is not sent over plain http")
)

// DefaultMaxFileSize caps ReadFile: pipeline definitions are limited to 1 MiB.
const DefaultMaxFileSize = 1 << 20

// Config opens a Mirror.
type Config struct {
	// Dir is the cache directory. It holds one bare repository per remote URL, named by a
	// hash of the URL, and may be shared by several processes.
	Dir string
	// URL is the remote: https, http, ssh (ssh:// or scp-like user@host:path), git or file.
	// A password in the URL is refused: pass it as Credentials.Token.
	URL         string
	Credentials Credentials
	// MaxFileSize caps ReadFile; DefaultMaxFileSize when zero.
	MaxFileSize int64
	// Git is the git binary; "git" from PATH when empty.
	Git string
	// SSHCommand is the ssh program; "ssh" from PATH when empty.
	SSHCommand string
	// Logger receives fetch timings and fallbacks; slog.Default() when nil.
	Logger *slog.Logger
}

// Mirror is a bare cache of one remote: it fetches only what it lacks, and reads at exact
// commits. It is safe for concurrent use by goroutines, and by processes sharing Dir.
type Mirror struct {
	url     string
	dir     string // the bare repository
	lock    string // the flock file, beside the repository so it exists before it does
	private string // HOME and key files of this Mirror; removed by Close
	maxFile int64
	git     *runner
	log     *slog.Logger
	sem     chan struct{}
}

// Ref is a resolved reference.
type Ref struct {
	Name string // full name, refs/heads/main or refs/tags/v1; empty when given a commit id
	SHA  string
}

// Open returns the mirror of cfg.URL in cfg.Dir, creating the bare repository when it is not
// there yet. It does not fetch: the first EnsureCommit, ResolveRef or Fetch does.
func Open(ctx context.Context, cfg Config) (*Mirror, error) {
	if cfg.Dir == "" {
		return nil, fmt.Errorf("open mirror: no cache directory: %w", ErrInvalid)
	}
	if err := checkRemoteURL(cfg.URL); err != nil {
		return nil, fmt.Errorf("open mirror: %w", err)
	}
	root, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("open mirror: %w", err)
	}
	if err := os.MkdirAll(root, 0o755); err != nil {
		return nil, fmt.Errorf("open mirror: create cache directory: %w", err)
	}
	sum := sha256.Sum256([]byte(cfg.URL))
	name := hex.EncodeToString(sum[:16])
	private, err := os.MkdirTemp("", "gantry-git-")
	if err != nil {
		return nil, fmt.Errorf("open mirror: create private directory: %w", err)
	}
	r, err := newRunner(cfg.Git, cfg.SSHCommand, cfg.URL, private, root, cfg.Credentials)
	if err != nil {
		_ = os.RemoveAll(private)
		return nil, fmt.Errorf("open mirror of %s: %w", redactURL(cfg.URL), err)
	}
	m := &Mirror{
		url:     cfg.URL,
		dir:     filepath.Join(root, name+".git"),
		lock:    filepath.Join(root, name+".lock"),
		private: private,
		maxFile: cfg.MaxFileSize,
		git:     r,
		log:     cfg.Logger,
	}
	if m.maxFile <= 0 {
		m.maxFile = DefaultMaxFileSize
	}
	if m.log == nil {
		m.log = slog.Default()
	}
	m.sem = processLock(m.lock)
	if err := m.create(ctx); err != nil {
		_ = os.RemoveAll(private)
		return nil, err
	}
	return m, nil
}

// Close removes the Mirror's private files (its ssh key among them). The cache stays.
func (m *Mirror) Close() error {
	return os.RemoveAll(m.private)
}

// URL is the remote's URL.
func (m *Mirror) URL() string { return m.url }

// Dir is the bare repository's directory.
func (m *Mirror) Dir() string { return m.dir }

func checkRemoteURL(raw string) error {
	if raw == "" {
		return fmt.Errorf("no remote URL: %w", ErrInvalid)
	}
	if strings.ContainsAny(raw, "\n\r\x00") || strings.HasPrefix(raw, "-") {
		return fmt.Errorf("remote URL %q: %w", raw, ErrInvalid)
	}
	if i := strings.Index(raw, "::"); i >= 0 && (!strings.Contains(raw, "://") || i < strings.Index(raw, "://")) {
		// transport::address runs a remote helper (ext:: runs any command); nothing here
		// needs one.
		return fmt.Errorf("remote URL %q: remote helper syntax is not allowed: %w", redactURL(raw), ErrInvalid)
	}
	if strings.Contains(raw, "://") {
		u, err := url.Parse(raw)
		if err != nil {
			return fmt.Errorf("remote URL %q: %v: %w", redactURL(raw), err, ErrInvalid)
		}
		if _, ok := u.User.Password(); ok {
			return fmt.Errorf("remote URL %s carries a password; pass it as a token instead: %w", u.Redacted(), ErrInvalid)
		}
		switch u.Scheme {
		case "http", "https", "ssh", "git", "file":
		default:
			// ext:: and friends run commands; nothing here needs them.
			return fmt.Errorf("remote URL %s: scheme %q is not one of http, https, ssh, git, file: %w", u.Redacted(), u.Scheme, ErrInvalid)
		}
	}
	return nil
}

// processLocks serialises the Mirrors of one process that share a lock file, so a waiting
// goroutine can give up when its context ends (flock alone would block a thread).
var (
	processLocksMu sync.Mutex
	processLocks   = map[string]chan struct{}{}
)

func processLock(path string) chan struct{} {
	processLocksMu.Lock()
	defer processLocksMu.Unlock()
	c, ok := processLocks[path]
	if !ok {
		c = make(chan struct{}, 1)
		processLocks[path] = c
	}
	return c
}

// locked runs fn holding the mirror's lock: first among this process's goroutines, then
// across processes with flock on the lock file.
func (m *Mirror) locked(ctx context.Context, fn func() error) error {
	select {
	case m.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("wait for mirror lock: %w", ctx.Err())
	}
	defer func() { <-m.sem }()

	f, err := os.OpenFile(m.lock, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("open mirror lock: %w", err)
	}
	// Closing the file releases the flock.
	defer f.Close()
	wait := 5 * time.Millisecond
	for {
		ok, err := tryFlock(f)
		if err != nil {
			return fmt.Errorf("lock mirror: %w", err)
		}
		if ok {
			break
		}
		// Another process holds it (a fetch takes seconds at most); back off up to 200 ms.
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("wait for mirror lock: %w", ctx.Err())
		}
		wait = min(wait*2, 200*time.Millisecond)
	}
	return fn()
}

// create makes the bare repository when it is missing. It is built in a temporary directory
// and renamed into place, so no process ever sees half a repository.
func (m *Mirror) create(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(m.dir, "HEAD")); err == nil {
		return m.checkOrigin(ctx)
	}
	return m.locked(ctx, func() error {
		if _, err := os.Stat(filepath.Join(m.dir, "HEAD")); err == nil {
			return m.checkOrigin(ctx)
		}
		tmp, err := os.MkdirTemp(filepath.Dir(m.dir), filepath.Base(m.dir)+".init-")
		if err != nil {
			return fmt.Errorf("create mirror: %w", err)
		}
		defer os.RemoveAll(tmp) // a no-op once renamed
		steps := [][]string{
			{"init", "--bare", "--quiet", tmp},
			{"config", "remote.origin.url", m.url},
			{"config", "remote.origin.fetch", "+refs/heads/*:refs/heads/*"},
			{"config", "--add", "remote.origin.fetch", "+refs/tags/*:refs/tags/*"},
			// Shallow checkouts fetch one commit by id from the mirror, which may be
			// reachable from no ref (a pull request head).
			{"config", "uploadpack.allowAnySHA1InWant", "true"},
			// gc runs inside the fetch that triggered it, under the lock, not detached
			// where it would outlive the lock.
			{"config", "gc.autoDetach", "false"},
		}
		for i, args := range steps {
			dir := tmp
			if i == 0 {
				dir = ""
			}
			if _, err := m.git.run(ctx, dir, args...); err != nil {
				return fmt.Errorf("create mirror of %s: %w", redactURL(m.url), err)
			}
		}
		if err := os.Rename(tmp, m.dir); err != nil {
			return fmt.Errorf("create mirror of %s: %w", redactURL(m.url), err)
		}
		return nil
	})
}

// checkOrigin refuses a cache directory whose repository mirrors another URL: the name is
// a hash of the URL, so this means someone put it there by hand.
func (m *Mirror) checkOrigin(ctx context.Context) error {
	out, err := m.git.run(ctx, m.dir, "config", "--get", "remote.origin.url")
	if err != nil {
		return fmt.Errorf("open mirror %s: %w", m.dir, err)
	}
	if got := strings.TrimSpace(string(out)); got != m.url {
		return fmt.Errorf("open mirror %s: it mirrors %s, not %s", m.dir, redactURL(got), redactURL(m.url))
	}
	return nil
}

// Fetch brings every branch and tag up to date with the remote, removing those the remote
// deleted. Only objects the mirror lacks are transferred.
func (m *Mirror) Fetch(ctx context.Context) error {
	return m.locked(ctx, func() error { return m.fetchLocked(ctx) })
}

// keepPack makes a fetch keep what it receives as one pack, never as loose objects. Readers
// look a commit up without the mirror's lock (EnsureCommit's quick path, ReadFile), and a
// small fetch unpacked into loose objects writes them one by one: another process could see
// the commit and then miss its tree or a file, and take the file for absent. A pack's
// objects all appear at once, when its index is renamed into place.
const keepPack = "fetch.unpackLimit=1"

func (m *Mirror) fetchLocked(ctx context.Context) error {
	start := time.Now()
	if _, err := m.git.run(ctx, m.dir, "-c", keepPack, "fetch", "--prune", "--quiet", "--no-progress", "origin"); err != nil {
		return fmt.Errorf("fetch %s: %w", redactURL(m.url), err)
	}
	m.log.Debug("mirror fetched", "url", redactURL(m.url), "took", time.Since(start))
	return nil
}

// validSHA says whether s is a full object id (SHA-1 or SHA-256), lower or upper case.
func validSHA(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func zeroSHA(s string) bool {
	return s == "" || strings.Trim(s, "0") == ""
}

func checkSHA(sha string) error {
	if !validSHA(sha) {
		return fmt.Errorf("%q is not a full commit id: %w", sha, ErrInvalid)
	}
	return nil
}

// hasCommit says whether the mirror holds the commit.
func (m *Mirror) hasCommit(ctx context.Context, sha string) (bool, error) {
	_, err := m.git.run(ctx, m.dir, "cat-file", "-e", sha+"^{commit}")
	if err == nil {
		return true, nil
	}
	if exitCode(err) > 0 {
		return false, nil
	}
	return false, fmt.Errorf("look up commit %s: %w", sha, err)
}

// EnsureCommit makes sure the mirror holds the commit, fetching only when it does not:
// first the branches and tags, then the commit by id (a pull request head is on no branch).
// A commit the remote lacks is ErrCommitNotFound.
func (m *Mirror) EnsureCommit(ctx context.Context, sha string) error {
	if err := checkSHA(sha); err != nil {
		return fmt.Errorf("ensure commit: %w", err)
	}
	sha = strings.ToLower(sha)
	if ok, err := m.hasCommit(ctx, sha); err != nil || ok {
		return err
	}
	return m.locked(ctx, func() error {
		// Whoever held the lock before may have fetched it.
		if ok, err := m.hasCommit(ctx, sha); err != nil || ok {
			return err
		}
		if err := m.fetchLocked(ctx); err != nil {
			return fmt.Errorf("ensure commit %s: %w", sha, err)
		}
		if ok, err := m.hasCommit(ctx, sha); err != nil || ok {
			return err
		}
		_, fetchErr := m.git.run(ctx, m.dir, "-c", keepPack, "fetch", "--quiet", "--no-progress", "--no-write-fetch-head", "origin", sha)
		if ok, err := m.hasCommit(ctx, sha); err != nil {
			return err
		} else if ok {
			// Reachable from no ref, it would be garbage to gc, and a workspace borrowing
			// objects from this mirror would lose them: pin it.
			if _, err := m.git.run(ctx, m.dir, "update-ref", "refs/gantry/pins/"+sha, sha); err != nil {
				return fmt.Errorf("pin commit %s: %w", sha, err)
			}
			return nil
		}
		if fetchErr != nil && ctx.Err() != nil {
			return fmt.Errorf("ensure commit %s: %w", sha, fetchErr)
		}
		if fetchErr != nil {
			return fmt.Errorf("commit %s in %s: %w (%v)", sha, redactURL(m.url), ErrCommitNotFound, fetchErr)
		}
		return fmt.Errorf("commit %s in %s: %w", sha, redactURL(m.url), ErrCommitNotFound)
	})
}

// cleanPath turns a repository path into the form git wants after "sha:": relative, slash
// separated, no "." or ".." components.
func cleanPath(p string) (string, error) {
	if strings.ContainsAny(p, "\n\x00") {
		return "", fmt.Errorf("path %q: %w", p, ErrInvalid)
	}
	c := path.Clean(strings.TrimPrefix(p, "/"))
	if c == "." || c == ".." || strings.HasPrefix(c, "../") {
		return "", fmt.Errorf("path %q is not a file inside the repository: %w", p, ErrInvalid)
	}
	return c, nil
}

// ReadFile returns the content of the file at path in the commit sha, fetching the commit
// first when the mirror lacks it. It never reads any other commit: a file absent at sha is
// ErrNotFound even if a branch has it. Files over MaxFileSize are ErrTooLarge. A symbolic
// link reads as its target's name.
func (m *Mirror) ReadFile(ctx context.Context, sha, file string) ([]byte, error) {
	p, err := cleanPath(file)
	if err != nil {
		return nil, fmt.Errorf("read file: %w", err)
	}
	if err := m.EnsureCommit(ctx, sha); err != nil {
		return nil, fmt.Errorf("read %s: %w", p, err)
	}
	sha = strings.ToLower(sha)
	var out bytes.Buffer
	// --batch prints a header with the type and size before the content, so a file over the
	// cap is known (and git stopped) after reading at most the cap.
	_, runErr := m.git.runWith(ctx, runOpts{
		dir:    m.dir,
		stdin:  []byte(sha + ":" + p + "\n"),
		stdout: &out,
		limit:  m.maxFile + 256,
	}, "cat-file", "--batch")
	header, body, _ := bytes.Cut(out.Bytes(), []byte("\n"))
	fields := strings.Fields(string(header))
	switch {
	case len(fields) == 2 && fields[1] == "missing":
		return nil, fmt.Errorf("read %s at %s: %w", p, sha, ErrNotFound)
	case len(fields) != 3:
		if runErr != nil {
			return nil, fmt.Errorf("read %s at %s: %w", p, sha, runErr)
		}
		return nil, fmt.Errorf("read %s at %s: unexpected answer from git cat-file: %q", p, sha, header)
	}
	size, err := strconv.ParseInt(fields[2], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("read %s at %s: unexpected size from git cat-file: %q", p, sha, header)
	}
	if fields[1] != "blob" {
		return nil, fmt.Errorf("read %s at %s: it is a %s, not a file: %w", p, sha, fields[1], ErrNotFound)
	}
	if size > m.maxFile {
		return nil, fmt.Errorf("read %s at %s: %d bytes, over the limit of %d: %w", p, sha, size, m.maxFile, ErrTooLarge)
	}
	if runErr != nil {
		return nil, fmt.Errorf("read %s at %s: %w", p, sha, runErr)
	}
	if int64(len(body)) < size {
		return nil, fmt.Errorf("read %s at %s: %w", p, sha, io.ErrUnexpectedEOF)
	}
	return append([]byte(nil), body[:size]...), nil
}

// MaxCommitMessage bounds the commit message Commit reads, in bytes.
const MaxCommitMessage = 64 << 10

// Commit returns the message and the author's name of the commit sha, fetching it first
// when the mirror lacks it.
func (m *Mirror) Commit(ctx context.Context, sha string) (message, author string, err error) {
	if err := m.EnsureCommit(ctx, sha); err != nil {
		return "", "", fmt.Errorf("read commit %s: %w", sha, err)
	}
	var out bytes.Buffer
	if _, err := m.git.runWith(ctx, runOpts{dir: m.dir, stdout: &out, limit: MaxCommitMessage},
		"log", "-1", "--format=%an%x00%B", strings.ToLower(sha), "--"); err != nil {
		return "", "", fmt.Errorf("read commit %s: %w", sha, err)
	}
	author, message, _ = strings.Cut(out.String(), "\x00")
	return strings.TrimSpace(message), author, nil
}

// ChangedPaths lists the paths that differ between two commits: added, modified, deleted,
// and both names of a rename. A zero before (a new branch or tag) or one the remote no
// longer has (a force push) lists every file of after, so path filters err on running.
func (m *Mirror) ChangedPaths(ctx context.Context, before, after string) ([]string, error) {
	if zeroSHA(after) {
		return nil, fmt.Errorf("changed paths: after is the zero commit (a deleted ref): %w", ErrInvalid)
	}
	if err := m.EnsureCommit(ctx, after); err != nil {
		return nil, fmt.Errorf("changed paths: %w", err)
	}
	all := zeroSHA(before)
	if !all {
		err := m.EnsureCommit(ctx, before)
		switch {
		case errors.Is(err, ErrCommitNotFound):
			m.log.Info("changed paths: before commit is gone from the remote; every file counts as changed",
				"url", redactURL(m.url), "before", before, "after", after)
			all = true
		case err != nil:
			return nil, fmt.Errorf("changed paths: %w", err)
		}
	}
	var out []byte
	var err error
	if all {
		out, err = m.git.run(ctx, m.dir, "ls-tree", "-r", "-z", "--name-only", "--full-tree", after)
	} else {
		out, err = m.git.run(ctx, m.dir, "diff-tree", "-r", "-z", "--name-only", "--no-renames", "--no-commit-id", before, after)
	}
	if err != nil {
		return nil, fmt.Errorf("changed paths %s..%s: %w", before, after, err)
	}
	var paths []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}

// DefaultBranch asks the remote which branch its HEAD names ("main", not "refs/heads/main").
func (m *Mirror) DefaultBranch(ctx context.Context) (string, error) {
	out, err := m.git.run(ctx, m.dir, "ls-remote", "--symref", "origin", "HEAD")
	if err != nil {
		return "", fmt.Errorf("default branch of %s: %w", redactURL(m.url), err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		target, ok := strings.CutPrefix(line, "ref: ")
		if !ok {
			continue
		}
		target, _, _ = strings.Cut(target, "\t")
		if b, ok := strings.CutPrefix(target, "refs/heads/"); ok {
			return b, nil
		}
	}
	return "", fmt.Errorf("default branch of %s: the remote names no HEAD branch (an empty repository?): %w", redactURL(m.url), ErrNotFound)
}

// checkRefName refuses what is not a plain ref name, so revision syntax (main~1, a..b,
// @{-1}) can never pass for a ref.
func checkRefName(ref string) error {
	bad := ref == "" || strings.HasPrefix(ref, "-") || strings.HasPrefix(ref, "/") ||
		strings.HasSuffix(ref, "/") || strings.HasSuffix(ref, ".lock") || strings.HasSuffix(ref, ".") ||
		strings.Contains(ref, "..") || strings.Contains(ref, "@{") || strings.Contains(ref, "//") || ref == "@"
	for _, c := range ref {
		if c < 0x20 || c == 0x7f || strings.ContainsRune(" ~^:?*[\\", c) {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("%q is not a ref name: %w", ref, ErrInvalid)
	}
	return nil
}

// ResolveRef fetches, then resolves ref to a commit: a full name (refs/heads/x, refs/tags/v1),
// a branch name, or else a tag name; a full commit id is ensured and returned as is. Annotated
// tags resolve to the commit they tag.
func (m *Mirror) ResolveRef(ctx context.Context, ref string) (Ref, error) {
	if validSHA(ref) {
		if err := m.EnsureCommit(ctx, ref); err != nil {
			return Ref{}, fmt.Errorf("resolve %s: %w", ref, err)
		}
		return Ref{SHA: strings.ToLower(ref)}, nil
	}
	if err := checkRefName(ref); err != nil {
		return Ref{}, fmt.Errorf("resolve ref: %w", err)
	}
	if err := m.Fetch(ctx); err != nil {
		return Ref{}, fmt.Errorf("resolve %s: %w", ref, err)
	}
	candidates := []string{ref}
	if !strings.HasPrefix(ref, "refs/") {
		candidates = []string{"refs/heads/" + ref, "refs/tags/" + ref}
	}
	for _, c := range candidates {
		out, err := m.git.run(ctx, m.dir, "rev-parse", "--verify", "--quiet", "--end-of-options", c+"^{commit}")
		if err == nil {
			return Ref{Name: c, SHA: strings.TrimSpace(string(out))}, nil
		}
		if exitCode(err) <= 0 {
			return Ref{}, fmt.Errorf("resolve %s: %w", ref, err)
		}
	}
	return Ref{}, fmt.Errorf("resolve %s in %s: %w", ref, redactURL(m.url), ErrNotFound)
}
