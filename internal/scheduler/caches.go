package scheduler

import (
	"context"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

// Defaults of CachePolicy, GitHub's: 10 GiB per project, and a week without a restore.
const (
	DefaultCacheMaxSize = 10 << 30
	DefaultCacheMaxAge  = 7 * 24 * time.Hour
)

// CachePolicy bounds what jobs' caches keep. Zero fields do not bound.
type CachePolicy struct {
	// MaxBytes is the most each project's entries may hold; the least recently used go
	// first.
	MaxBytes int64
	// MaxAge is how long an entry is kept after it was last saved or restored.
	MaxAge time.Duration
}

// EvictCaches deletes the cache entries p no longer keeps, as of now, and returns how
// many. Their archives are blobs that CollectArtifacts deletes once nothing names them.
func EvictCaches(ctx context.Context, st store.Caches, p CachePolicy, now time.Time) (int, error) {
	params := store.EvictCachesParams{MaxBytes: p.MaxBytes}
	if p.MaxAge > 0 {
		params.UnusedSince = now.Add(-p.MaxAge)
	}
	if params.MaxBytes <= 0 && params.UnusedSince.IsZero() {
		return 0, nil
	}
	return st.EvictCaches(ctx, params)
}
