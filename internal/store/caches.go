package store

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Caches is the index of jobs' caches: which blob holds the archive saved under a key,
// per project and scope (the branch, pull request or tag a run was of). The archives
// are blobs; an entry is only a name for one.
type Caches interface {
	// PutCache records an entry unless the project's scope already has one of that key:
	// entries are immutable, and the first one saved wins. It fills in ID, CreatedAt and
	// LastUsedAt of a new entry and returns the entry that is stored, with created false
	// when it was already there. A new entry needs its project to own the archive's blob
	// (Artifacts.AddBlobOwner): ErrForbidden otherwise, as a blob another project
	// uploaded is not this project's.
	PutCache(ctx context.Context, c *CacheEntry) (stored *CacheEntry, created bool, err error)
	// FindCache looks in each of p.Scopes in order for the entry of p.Key exactly, then,
	// for each of p.RestoreKeys in order, the newest entry whose key starts with it; the
	// first found is returned with its LastUsedAt set to now. ErrNotFound when none
	// matches.
	FindCache(ctx context.Context, p FindCacheParams) (*CacheEntry, error)
	// ListCaches lists a project's entries, most recently used first.
	ListCaches(ctx context.Context, projectID uuid.UUID) ([]*CacheEntry, error)
	// DeleteCaches deletes a project's entries that match p (all of them when p names no
	// key, scope or id) and returns how many.
	DeleteCaches(ctx context.Context, p DeleteCachesParams) (int, error)
	// EvictCaches deletes the entries last used before p.UnusedSince (when set), then in
	// each project whose entries hold more than p.MaxBytes bytes (when positive) the
	// least recently used ones until they fit. It returns how many it deleted; their
	// blobs stay until nothing names them (BlobInUse).
	EvictCaches(ctx context.Context, p EvictCachesParams) (int, error)
}

// CacheEntry names the blob that holds a cache archive.
type CacheEntry struct {
	ID        uuid.UUID
	ProjectID uuid.UUID
	// Scope is where the entry was saved: a branch name, "pr/N" or "tag/NAME".
	Scope      string
	Key        string
	SHA256     string // the archive's blob
	Size       int64
	CreatedAt  time.Time
	LastUsedAt time.Time
}

// FindCacheParams say which entry a job restores.
type FindCacheParams struct {
	ProjectID   uuid.UUID
	Scopes      []string // searched in order: the run's own first
	Key         string
	RestoreKeys []string
}

// DeleteCachesParams select a project's entries to delete; zero fields do not filter.
type DeleteCachesParams struct {
	ProjectID uuid.UUID
	ID        uuid.UUID
	Key       string
	Scope     string
}

// EvictCachesParams bound what caches keep.
type EvictCachesParams struct {
	UnusedSince time.Time // zero: no eviction by age
	MaxBytes    int64     // per project; zero or less: no eviction by size
}

// UnverifiedScope begins the cache scope of a run whose ref is not verified.
const UnverifiedScope = "unverified/"

// branchPrefix begins the scope of a branch whose name begins as another kind of scope
// does ("pr/7", "tag/v1", "unverified/main", or "branch/" itself).
const branchPrefix = "branch/"

// branchScope is a branch's cache scope: its name, unless the name would read as the
// scope of a pull request, a tag or an unverified ref; those get branchPrefix. Without
// it, a push of a branch named pr/7 wrote where pull request 7 reads, and one named
// tag/v1 where the release build of tag v1 reads.
func branchScope(b string) string {
	for _, p := range []string{"pr/", "tag/", UnverifiedScope, branchPrefix} {
		if strings.HasPrefix(b, p) {
			return branchPrefix + b
		}
	}
	return b
}

// CacheScopes are where a run of trigger tr saves its caches (write) and where it looks
// for them, in order (read): its own scope, then for a pull request its base branch,
// then the project's default branch (main when the project names none). A run that
// is not of a branch, pull request or tag (one submitted by hand) saves under the
// default branch's scope. A run whose ref is not verified (Trigger.RefVerified) saves
// under that scope behind UnverifiedScope ("unverified/main"), and reads there and then
// the default branch only: it never writes where a verified run reads. A pull
// request's scope is "pr/N", a tag's "tag/NAME", a branch's its name (see branchScope):
// no two refs share a scope, so a pull request never writes where a branch reads.
func CacheScopes(tr Trigger, defaultBranch string) (write string, read []string) {
	if defaultBranch == "" {
		defaultBranch = "main"
	}
	defaultBranch = branchScope(defaultBranch)
	switch {
	case tr.PRNumber > 0:
		write = "pr/" + strconv.Itoa(tr.PRNumber)
	case tr.Branch != "":
		write = branchScope(tr.Branch)
	case tr.Tag != "":
		write = "tag/" + tr.Tag
	default:
		write = defaultBranch
	}
	if !tr.RefVerified() {
		write = UnverifiedScope + write
		return write, []string{write, defaultBranch}
	}
	read = []string{write}
	base := ""
	if tr.Branch != "" {
		base = branchScope(tr.Branch)
	}
	for _, s := range []string{base, defaultBranch} {
		if s != "" && !slices.Contains(read, s) {
			read = append(read, s)
		}
	}
	return write, read
}
