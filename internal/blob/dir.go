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
	"syscall"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
)

const (
	// minSecret is the shortest HMAC key the dir store accepts.
	minSecret = 32
)

// DirStore keeps blobs as files in a directory: <dir>/sha256/<first 2 hex>/<digest>.
// Writes land in <dir>/tmp and are renamed into place only once verified; an upload made
// with PresignUpload is renamed to <dir>/uploads/<owner>/<digest> instead, until
// CommitUpload. It serves its own signed URLs with Handler.
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
	for _, sub := range []string{d.dir, filepath.Join(d.dir, "sha256"), d.tmpDir(), d.uploadsDir()} {
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

func (d *DirStore) uploadsDir() string { return filepath.Join(d.dir, "uploads") }

// stagedPath is where owner's upload of digest waits for CommitUpload.
func (d *DirStore) stagedPath(owner, digest string) string {
	return filepath.Join(d.uploadsDir(), owner, digest)
}

// removeStaleUploads deletes the partial uploads a killed process left behind, so that
// their space comes back when the store opens again. An upload under way holds an
// exclusive flock on its temp file until the file is renamed into place (see
// createUpload), and the kernel drops the locks of a process that dies, so a temp file
// nobody holds locked is one nobody will finish: it goes at once, whatever its age, while
// the uploads of other processes sharing the directory go on. Best effort: a failure
// only costs disk space, and is logged.
func (d *DirStore) removeStaleUploads() {
	entries, err := os.ReadDir(d.tmpDir())
	if err != nil {
		d.log.Warn("blob store: list partial uploads", "dir", d.tmpDir(), "err", err)
		return
	}
	removed := 0
	for _, e := range entries {
		p := filepath.Join(d.tmpDir(), e.Name())
		f, err := os.Open(p)
		if err != nil {
			continue // gone meanwhile: renamed into place or removed by another process
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // an upload under way
			continue
		}
		if err := os.Remove(p); err == nil {
			removed++
		} else if !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("blob store: remove a partial upload", "file", p, "err", err)
		}
		f.Close()
	}
	if removed > 0 {
		d.log.Info("blob store: removed partial uploads left by a stopped process", "count", removed)
	}
}

// createUpload makes a temp file for an upload and locks it (see removeStaleUploads).
// The lock is taken after the file exists, so a sweep may remove the file in between;
// the file is then made again.
func (d *DirStore) createUpload() (*os.File, error) {
	for {
		f, err := os.CreateTemp(d.tmpDir(), "upload-*")
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
			f.Close()
			os.Remove(f.Name())
			return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		held, err1 := f.Stat()
		named, err2 := os.Stat(f.Name())
		if err1 == nil && err2 == nil && os.SameFile(held, named) {
			return f, nil
		}
		f.Close()
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
	if err != nil && !errors.Is(err, ErrMismatch) && ctx.Err() == nil {
		d.log.Error("blob store: put failed", "digest", digest, "size", size, "dir", d.dir, "err", err)
	}
	return err
}

// ingest streams r into a temp file while hashing it, and renames the file into place only
// when it held exactly size bytes with the given digest. It reads at most size+1 bytes, so
// an oversized body is refused without reading it all. existed reports whether the blob was
// already there (the new copy replaces it, refreshing its ModTime).
func (d *DirStore) ingest(ctx context.Context, digest string, size int64, r io.Reader) (existed bool, err error) {
	return d.ingestTo(ctx, d.path(digest), digest, size, r)
}

// ingestTo is ingest into the file final: the blob's place, or a staged upload's.
func (d *DirStore) ingestTo(ctx context.Context, final, digest string, size int64, r io.Reader) (existed bool, err error) {
	f, err := d.createUpload()
	if err != nil {
		return false, fmt.Errorf("store blob %s: %w", digest, err)
	}
	tmp := f.Name()
	// The file stays open, and so locked, until it is renamed into place or removed:
	// closing it would unlock it for another process's sweep.
	defer func() {
		if err != nil {
			os.Remove(tmp)
		}
		f.Close()
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

// CommitUpload implements Store. The staged file was verified as it arrived (ingestTo):
// renaming it into place makes it the blob, and refreshes the ModTime of a copy that was
// there, as an upload straight to the blob would.
func (d *DirStore) CommitUpload(ctx context.Context, owner, digest string, size int64) error {
	if err := errors.Join(checkOwner(owner), checkDigest(digest), checkSize(size)); err != nil {
		return err
	}
	staged := d.stagedPath(owner, digest)
	fi, err := os.Lstat(staged)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("commit upload of blob %s: %w", digest, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("commit upload of blob %s: %w", digest, err)
	}
	if !fi.Mode().IsRegular() || fi.Size() != size {
		return fmt.Errorf("commit upload of blob %s: %w", digest,
			&mismatch{field: "size", got: strconv.FormatInt(fi.Size(), 10), want: strconv.FormatInt(size, 10)})
	}
	final := d.path(digest)
	shard := filepath.Dir(final)
	if err := os.MkdirAll(shard, 0o700); err != nil {
		return fmt.Errorf("commit upload of blob %s: %w", digest, err)
	}
	// Two commits of one upload race to this rename: one moves the file, the other finds
	// it gone and says so (ErrNotFound).
	if err := os.Rename(staged, final); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("commit upload of blob %s: %w", digest, ErrNotFound)
	} else if err != nil {
		return fmt.Errorf("commit upload of blob %s: %w", digest, err)
	}
	if err := syncDir(shard); err != nil {
		return fmt.Errorf("commit upload of blob %s: sync directory: %w", digest, err)
	}
	return nil
}

// DeleteUploads implements Store. Owners' directories stay: an upload may be renamed
// into one at any moment.
func (d *DirStore) DeleteUploads(ctx context.Context, before time.Time) (int, error) {
	owners, err := os.ReadDir(d.uploadsDir())
	if err != nil {
		return 0, fmt.Errorf("delete stale uploads: %w", err)
	}
	n := 0
	for _, o := range owners {
		if !o.IsDir() {
			continue
		}
		dir := filepath.Join(d.uploadsDir(), o.Name())
		entries, err := os.ReadDir(dir)
		if err != nil {
			return n, fmt.Errorf("delete stale uploads: %w", err)
		}
		for _, e := range entries {
			if err := ctx.Err(); err != nil {
				return n, fmt.Errorf("delete stale uploads: %w", err)
			}
			fi, err := e.Info()
			if errors.Is(err, fs.ErrNotExist) {
				continue // committed meanwhile
			}
			if err != nil {
				return n, fmt.Errorf("delete stale uploads: %w", err)
			}
			if !fi.ModTime().Before(before) {
				continue
			}
			if err := os.Remove(filepath.Join(dir, e.Name())); err == nil {
				n++
			} else if !errors.Is(err, fs.ErrNotExist) {
				return n, fmt.Errorf("delete stale uploads: %w", err)
			}
		}
	}
	return n, nil
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
