package scheduler

import (
	"context"
	"fmt"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/store"
)

// BlobGrace is how old a blob no artifact names must be before it is deleted. A blob is
// uploaded after its artifact is registered, and may be uploaded again by a retry for up
// to the signed URL's lifetime; a day spares every such upload.
const BlobGrace = 24 * time.Hour

// Collected counts what CollectArtifacts deleted.
type Collected struct {
	Artifacts int   // expired artifact records
	Blobs     int   // blobs no record named
	Bytes     int64 // their size
	Uploads   int   // uploads staged for a project and never committed
}

// CollectArtifacts deletes the artifacts that expired at or before now, then the blobs
// older than grace that neither an artifact, a cache entry nor a log chunk names, with
// the record of which projects owned them, then the uploads staged more than grace ago
// and never committed.
func CollectArtifacts(ctx context.Context, st store.Store, bs blob.Store, now time.Time, grace time.Duration) (Collected, error) {
	var c Collected
	n, err := st.DeleteExpiredArtifacts(ctx, now)
	if err != nil {
		return c, err
	}
	c.Artifacts = n
	var unused []blob.Info
	err = bs.Walk(ctx, func(b blob.Info) error {
		if now.Sub(b.ModTime) < grace {
			return nil
		}
		used, err := st.BlobInUse(ctx, b.Digest)
		if err != nil {
			return err
		}
		if !used {
			unused = append(unused, b)
		}
		return nil
	})
	if err != nil {
		return c, fmt.Errorf("find unused blobs: %w", err)
	}
	for _, b := range unused {
		// A job may have registered the digest again since the walk.
		if used, err := st.BlobInUse(ctx, b.Digest); err != nil || used {
			if err != nil {
				return c, err
			}
			continue
		}
		// Owners first: content stored again later counts only for those that upload it
		// again, and a project that finds no owner just uploads once more.
		if err := st.DeleteBlobOwners(ctx, b.Digest); err != nil {
			return c, err
		}
		if err := bs.Delete(ctx, b.Digest); err != nil {
			return c, fmt.Errorf("delete blob %s: %w", b.Digest, err)
		}
		c.Blobs++
		c.Bytes += b.Size
	}
	// A staged upload is committed within the signed URL's lifetime or never.
	n, err = bs.DeleteUploads(ctx, now.Add(-grace))
	c.Uploads = n
	if err != nil {
		return c, err
	}
	return c, nil
}
