package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
)

const (
	// minSecret is the shortest HMAC key the dir store accepts.
	minSecret = 32
	// staleUpload is how old a file in tmp/ must be before OpenDir deletes it as left
	// behind by a crash; younger ones may be uploads of another process still running.
	staleUpload = 24 * time.Hour
)

// DirStore keeps blobs as files in a directory: <dir>/sha256/<first 2 hex>/<digest>.
// Writes land in <dir>/tmp and are renamed into place only once verified. It serves its own
// signed URLs with Handler.
type DirStore struct {
	dir    string
	base   string // Options.BaseURL without its trailing slash
	prefix string
	secret []byte
	clock  clock.Clock
	log    *slog.Logger
}

var _ Handler = (*DirStore)(nil)

// OpenDir opens (creating it when missing) the dir store rooted at the absolute dir.
func OpenDir(dir string, o Options) (*DirStore, error) {
	if !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("open blob dir %q: not an absolute path", dir)
	}
	if len(o.Secret) < minSecret {
		return nil, fmt.Errorf("open blob dir %s: the URL signing secret has %d bytes, want at least %d", dir, len(o.Secret), minSecret)
	}
	prefix := o.Prefix
	if prefix == "" {
		prefix = "/blobs/"
	}
	if !strings.HasPrefix(prefix, "/") || !strings.HasSuffix(prefix, "/") {
		return nil, fmt.Errorf("open blob dir %s: handler prefix %q must start and end with /", dir, prefix)
	}
	base := strings.TrimSuffix(o.BaseURL, "/")
	if base != "" {
		u, err := url.Parse(base)
		if err != nil || !u.IsAbs() || u.Host == "" || u.RawQuery != "" {
			return nil, fmt.Errorf("open blob dir %s: base URL %q is not an absolute http(s) URL", dir, o.BaseURL)
		}
	}
	d := &DirStore{dir: filepath.Clean(dir), base: base, prefix: prefix, secret: append([]byte(nil), o.Secret...), clock: o.Clock}
	if d.clock == nil {
		d.clock = clock.Real{}
	}
	d.log = o.Logger
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	for _, sub := range []string{d.dir, filepath.Join(d.dir, "sha256"), d.tmpDir()} {
		if err := os.MkdirAll(sub, 0o700); err != nil {
			return nil, fmt.Errorf("open blob dir: %w", err)
		}
	}
	d.removeStaleUploads()
	return d, nil
}

func (d *DirStore) tmpDir() string { return filepath.Join(d.dir, "tmp") }

func (d *DirStore) path(digest string) string {
	return filepath.Join(d.dir, "sha256", digest[:2], digest)
}

// removeStaleUploads deletes temp files a crashed process left behind. Best effort: a
// failure only costs disk space.
func (d *DirStore) removeStaleUploads() {
	entries, err := os.ReadDir(d.tmpDir())
	if err != nil {
		return
	}
	for _, e := range entries {
		if info, err := e.Info(); err == nil && d.clock.Now().Sub(info.ModTime()) > staleUpload {
			_ = os.Remove(filepath.Join(d.tmpDir(), e.Name()))
		}
	}
}

// Stat implements Store.
func (d *DirStore) Stat(ctx context.Context, digest string) (Info, error) {
	if err := checkDigest(digest); err != nil {
		return Info{}, err
	}
	fi, err := os.Stat(d.path(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, fmt.Errorf("stat blob %s: %w", digest, ErrNotFound)
	}
	if err != nil {
		return Info{}, fmt.Errorf("stat blob %s: %w", digest, err)
	}
	return Info{Digest: digest, Size: fi.Size(), ModTime: fi.ModTime()}, nil
}

// Open implements Store. The returned reader is an *os.File, so it also seeks.
func (d *DirStore) Open(ctx context.Context, digest string) (io.ReadCloser, error) {
	if err := checkDigest(digest); err != nil {
		return nil, err
	}
	f, err := os.Open(d.path(digest))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("open blob %s: %w", digest, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("open blob %s: %w", digest, err)
	}
	return f, nil
}

// Delete implements Store.
func (d *DirStore) Delete(ctx context.Context, digest string) error {
	if err := checkDigest(digest); err != nil {
		return err
	}
	if err := os.Remove(d.path(digest)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("delete blob %s: %w", digest, err)
	}
	return nil
}

// Put implements Store.
func (d *DirStore) Put(ctx context.Context, digest string, size int64, r io.Reader) error {
	if err := checkDigest(digest); err != nil {
		return err
	}
	if err := checkSize(size); err != nil {
		return err
	}
	_, err := d.ingest(ctx, digest, size, r)
	return err
}

// ingest streams r into a temp file while hashing it, and renames the file into place only
// when it held exactly size bytes with the given digest. It reads at most size+1 bytes, so
// an oversized body is refused without reading it all. existed reports whether the blob was
// already there (the new copy replaces it, refreshing its ModTime).
func (d *DirStore) ingest(ctx context.Context, digest string, size int64, r io.Reader) (existed bool, err error) {
	f, err := os.CreateTemp(d.tmpDir(), "upload-*")
	if err != nil {
		return false, fmt.Errorf("store blob %s: %w", digest, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()

	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(f, h), ctxReader{ctx, io.LimitReader(r, size+1)})
	if err != nil {
		return false, fmt.Errorf("store blob %s: receive: %w", digest, err)
	}
	if n != size {
		got := strconv.FormatInt(n, 10)
		if n > size {
			got = "more than " + strconv.FormatInt(size, 10)
		}
		return false, fmt.Errorf("store blob %s: %w", digest, &mismatch{field: "size", got: got, want: strconv.FormatInt(size, 10)})
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != digest {
		return false, fmt.Errorf("store blob %s: %w", digest, &mismatch{field: "digest", got: got, want: digest})
	}
	if err := f.Sync(); err != nil {
		return false, fmt.Errorf("store blob %s: sync: %w", digest, err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("store blob %s: %w", digest, err)
	}

	final := d.path(digest)
	shard := filepath.Dir(final)
	if err := os.MkdirAll(shard, 0o700); err != nil {
		return false, fmt.Errorf("store blob %s: %w", digest, err)
	}
	_, statErr := os.Lstat(final)
	existed = statErr == nil
	// Replacing an existing copy is safe: both have the same bytes, and rename is atomic, so
	// a reader sees the old file or the new one, never a partial one.
	if err := os.Rename(tmp, final); err != nil {
		return false, fmt.Errorf("store blob %s: %w", digest, err)
	}
	// The rename is durable only once the directory holding it is synced.
	if err := syncDir(shard); err != nil {
		return existed, fmt.Errorf("store blob %s: sync directory: %w", digest, err)
	}
	return existed, nil
}

func syncDir(dir string) error {
	f, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = f.Sync()
	return errors.Join(err, f.Close())
}

// Walk implements Store; it visits blobs in digest order.
func (d *DirStore) Walk(ctx context.Context, fn func(Info) error) error {
	root := filepath.Join(d.dir, "sha256")
	shards, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("walk blobs: %w", err)
	}
	for _, shard := range shards {
		if !shard.IsDir() || len(shard.Name()) != 2 {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(root, shard.Name()))
		if err != nil {
			return fmt.Errorf("walk blobs: %w", err)
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("walk blobs: %w", err)
			}
			name := e.Name()
			if !e.Type().IsRegular() || !ValidDigest(name) || name[:2] != shard.Name() {
				continue
			}
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // deleted while walking
			}
			if err != nil {
				return fmt.Errorf("walk blobs: %w", err)
			}
			if err := fn(Info{Digest: name, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
				return err
			}
		}
	}
	return nil
}

// Close implements Store; a dir store holds nothing open.
func (d *DirStore) Close() error { return nil }
