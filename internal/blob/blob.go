package blob

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
)

// Errors that stores return; test them with errors.Is.
var (
	ErrNotFound = errors.New("blob not found")
	// ErrMismatch means the bytes offered for a digest had another digest or size.
	ErrMismatch = errors.New("blob content does not match its digest or size")
	// ErrInvalid means a malformed request: bad digest syntax, a negative size, a bad ttl.
	ErrInvalid = errors.New("invalid blob request")
)

const (
	// MaxSize is the largest blob a store accepts, S3's limit for one object.
	MaxSize = 5 << 40
	// MinTTL and MaxTTL bound the lifetime of a signed URL; they are S3's limits, kept
	// for the dir store too so that both stores accept the same requests.
	MinTTL = time.Second
	MaxTTL = 7 * 24 * time.Hour
)

// Info describes a stored blob.
type Info struct {
	Digest string // lowercase hex SHA-256, 64 chars
	Size   int64
	// ModTime is when the blob was stored; garbage collection uses it to spare fresh blobs.
	ModTime time.Time
}

// Signed is a pre-signed HTTP request a client without credentials can make.
type Signed struct {
	Method string // PUT or GET
	// URL is absolute for S3. For the dir store it is a path ("/blobs/...") relative to the
	// coordinator's base URL, unless Options.BaseURL is set.
	URL string
	// Header holds headers the client must send exactly as given (may be empty). A
	// Content-Length in it is the exact body size the signature allows.
	Header  http.Header
	Expires time.Time
}

// GetOptions shape a download.
type GetOptions struct {
	Filename  string // Content-Disposition attachment filename, optional
	MediaType string // Content-Type to answer with, optional
}

// Store is a content-addressed blob store. Every digest is a lowercase hex SHA-256.
type Store interface {
	// Stat describes a stored blob, or returns ErrNotFound.
	Stat(ctx context.Context, digest string) (Info, error)
	// PresignPut returns a request that uploads exactly size bytes whose SHA-256 is digest.
	// The blob becomes visible only once the whole body arrived and matched; a mismatch is
	// rejected and stores nothing.
	PresignPut(ctx context.Context, digest string, size int64, ttl time.Duration) (Signed, error)
	// PresignUpload is PresignPut into owner's own staging area: what is uploaded there
	// becomes the blob of digest only at CommitUpload. owner is a label the caller chooses
	// (Gantry gives a project's id), 1 to 64 lowercase letters, digits and dashes. The URL
	// is the same whether or not the blob of digest is stored already: it tells the
	// uploader nothing about what others stored.
	PresignUpload(ctx context.Context, owner, digest string, size int64, ttl time.Duration) (Signed, error)
	// CommitUpload makes what owner uploaded for digest through a PresignUpload URL the
	// blob of digest (replacing a stored copy, which holds the same bytes) and empties
	// that place of owner's staging area. Since the store verified the bytes when they
	// arrived, its success proves that owner sent the content; a blob already stored
	// proves nothing of the kind. ErrNotFound when owner has no such upload: never
	// made, refused for its bytes, or already committed.
	CommitUpload(ctx context.Context, owner, digest string, size int64) error
	// DeleteUploads removes the uploads staged before t and never committed, and returns
	// how many.
	DeleteUploads(ctx context.Context, before time.Time) (int, error)
	// PresignGet returns a request that downloads the blob; it does not check that the blob
	// exists.
	PresignGet(ctx context.Context, digest string, ttl time.Duration, o GetOptions) (Signed, error)
	// Put stores size bytes read from r, verified like an upload; ErrMismatch when they do
	// not match.
	Put(ctx context.Context, digest string, size int64, r io.Reader) error
	// Open reads a blob, or returns ErrNotFound.
	Open(ctx context.Context, digest string) (io.ReadCloser, error)
	// Delete removes a blob; deleting a missing blob is not an error.
	Delete(ctx context.Context, digest string) error
	// Walk calls fn for every stored blob, in no promised order, and stops at fn's first
	// error, which it returns.
	Walk(ctx context.Context, fn func(Info) error) error
	Close() error
}

// Handler is implemented by stores that serve their own signed URLs (the dir store), on
// the path prefix Options.Prefix.
type Handler interface{ Handler() http.Handler }

// Options configure a store; each field says which store reads it.
type Options struct {
	// BaseURL is an optional absolute base for the dir store's signed URLs.
	BaseURL string
	// Secret is the HMAC key of the dir store's signed URLs, at least 32 bytes (required
	// for the dir store). Keep it across restarts (LoadOrCreateKey) or URLs handed out
	// before a restart stop working.
	Secret []byte
	// Prefix is the request path prefix of the dir store's handler, default "/blobs/".
	Prefix string
	// HTTPClient is optional; the S3 store uses its Transport.
	HTTPClient *http.Client
	// Clock tells the dir store the time for signing and checking expiry; default the wall
	// clock. (S3 signatures always use the wall clock.)
	Clock clock.Clock
	// Logger receives the dir store's handler failures that are not the client's fault;
	// default none.
	Logger *slog.Logger
}

// Open opens a store from a URL: "file:///abs/dir" for the dir store, or
// "s3://bucket?endpoint=host:port&region=us-east-1&secure=false" for S3 (see ParseS3URL).
func Open(rawURL string, o Options) (Store, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("open blob store: bad URL: %w", err)
	}
	switch u.Scheme {
	case "file":
		dir, err := parseFileURL(u)
		if err != nil {
			return nil, err
		}
		return OpenDir(dir, o)
	case "s3":
		c, err := ParseS3URL(rawURL)
		if err != nil {
			return nil, err
		}
		return OpenS3(c, o)
	case "":
		return nil, fmt.Errorf("open blob store %q: want a URL, file:///abs/dir or s3://bucket?endpoint=host:port", rawURL)
	default:
		return nil, fmt.Errorf("open blob store: unknown scheme %q (want file or s3)", u.Scheme)
	}
}

func parseFileURL(u *url.URL) (string, error) {
	if u.Host != "" && u.Host != "localhost" {
		return "", fmt.Errorf("open blob store %q: a file URL names an absolute directory as file:///abs/dir, not host %q", u.Redacted(), u.Host)
	}
	if u.Opaque != "" || u.Path == "" || u.Path[0] != '/' {
		return "", fmt.Errorf("open blob store %q: a file URL names an absolute directory, as file:///abs/dir", u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("open blob store %q: a file URL takes no query or fragment", u.Redacted())
	}
	return u.Path, nil
}

// ValidDigest reports whether d is a lowercase hex SHA-256.
func ValidDigest(d string) bool {
	if len(d) != 64 {
		return false
	}
	for i := 0; i < len(d); i++ {
		c := d[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func checkDigest(d string) error {
	if !ValidDigest(d) {
		return fmt.Errorf("%w: digest %q is not a lowercase hex SHA-256", ErrInvalid, d)
	}
	return nil
}

// ValidOwner reports whether o can own staged uploads: 1 to 64 lowercase letters, digits
// and dashes, which is safe as a path segment and an object key segment.
func ValidOwner(o string) bool {
	if o == "" || len(o) > 64 {
		return false
	}
	for i := 0; i < len(o); i++ {
		c := o[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') && c != '-' {
			return false
		}
	}
	return true
}

func checkOwner(o string) error {
	if !ValidOwner(o) {
		return fmt.Errorf("%w: upload owner %q is not 1 to 64 lowercase letters, digits and dashes", ErrInvalid, o)
	}
	return nil
}

func checkSize(size int64) error {
	if size < 0 || size > MaxSize {
		return fmt.Errorf("%w: size %d is out of range 0..%d", ErrInvalid, size, int64(MaxSize))
	}
	return nil
}

func checkTTL(ttl time.Duration) error {
	if ttl < MinTTL || ttl > MaxTTL {
		return fmt.Errorf("%w: ttl %v is out of range %v..%v", ErrInvalid, ttl, MinTTL, MaxTTL)
	}
	return nil
}

// base64Digest is the digest as S3's x-amz-checksum-sha256 header wants it. d must be valid.
func base64Digest(d string) string {
	raw, _ := hex.DecodeString(d)
	return base64.StdEncoding.EncodeToString(raw)
}

// mismatch tells which of digest or size did not match; it is ErrMismatch to errors.Is.
type mismatch struct {
	field     string // "digest" or "size"
	got, want string
}

func (m *mismatch) Error() string {
	return fmt.Sprintf("%v: %s is %s, want %s", ErrMismatch, m.field, m.got, m.want)
}

func (m *mismatch) Is(target error) bool { return target == ErrMismatch }

// ctxReader fails reads once ctx is done, so a long copy stops on cancel.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
