package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	"github.com/minio/minio-go/v7/pkg/s3utils"
)

const (
	s3KeyPrefix = "sha256/"
	// s3UploadPrefix holds uploads staged by PresignUpload: uploads/<owner>/<digest>.
	s3UploadPrefix = "uploads/"
	// s3PartSize is the smallest multipart part Put uses; blobs up to it go in one PUT,
	// which S3 verifies against the digest itself. Parts are buffered by nobody: each
	// streams straight from the caller's reader.
	s3PartSize = 16 << 20
	// s3MaxParts is S3's limit on parts per upload.
	s3MaxParts = 10000
	// s3OpenTimeout bounds the bucket check OpenS3 makes.
	s3OpenTimeout = 30 * time.Second
)

// S3Config names an S3 bucket and how to reach it.
type S3Config struct {
	Bucket    string
	Endpoint  string // host[:port], default s3.amazonaws.com
	Region    string // optional; asked of the service when empty
	Secure    bool   // HTTPS
	PathStyle bool   // bucket in the path instead of the host name
	// AccessKey and SecretKey (and SessionToken) sign requests; when empty they come from
	// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_SESSION_TOKEN.
	AccessKey, SecretKey, SessionToken string
}

// ParseS3URL reads "s3://bucket?endpoint=host:port&region=r&secure=false&path_style=true",
// with access_key and secret_key query parameters accepted for tests. Credentials not in
// the URL come from the standard AWS_* environment variables.
func ParseS3URL(rawURL string) (S3Config, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return S3Config{}, fmt.Errorf("open blob store: bad URL: %w", err)
	}
	if u.Scheme != "s3" {
		return S3Config{}, fmt.Errorf("open blob store: %q is not an s3:// URL", u.Redacted())
	}
	c := S3Config{Bucket: u.Host, Endpoint: "s3.amazonaws.com", Secure: true}
	if err := s3utils.CheckValidBucketNameStrict(c.Bucket); err != nil {
		return S3Config{}, fmt.Errorf("open blob store: s3 bucket %q: %w", c.Bucket, err)
	}
	if (u.Path != "" && u.Path != "/") || u.User != nil || u.Fragment != "" {
		return S3Config{}, fmt.Errorf("open blob store: want s3://bucket?endpoint=host:port, without a path, user or fragment")
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return S3Config{}, fmt.Errorf("open blob store: s3 URL query: %w", err)
	}
	for k, v := range q {
		val := v[len(v)-1]
		switch k {
		case "endpoint":
			c.Endpoint = val
		case "region":
			c.Region = val
		case "secure", "path_style":
			b, err := strconv.ParseBool(val)
			if err != nil {
				return S3Config{}, fmt.Errorf("open blob store: s3 URL: %s=%q is not true or false", k, val)
			}
			if k == "secure" {
				c.Secure = b
			} else {
				c.PathStyle = b
			}
		case "access_key":
			c.AccessKey = val
		case "secret_key":
			c.SecretKey = val
		default:
			return S3Config{}, fmt.Errorf("open blob store: s3 URL: unknown parameter %q (known: endpoint, region, secure, path_style, access_key, secret_key)", k)
		}
	}
	if c.Endpoint == "" || strings.Contains(c.Endpoint, "/") {
		return S3Config{}, fmt.Errorf("open blob store: s3 endpoint %q must be host[:port], without a scheme (secure=false for http)", c.Endpoint)
	}
	return c, nil
}

// S3Store keeps blobs as objects "sha256/<digest>" in one bucket of an S3-compatible
// service, which also serves the signed URLs; uploads made with PresignUpload wait as
// "uploads/<owner>/<digest>" until CommitUpload.
type S3Store struct {
	client *minio.Client
	core   minio.Core
	bucket string
}

// OpenS3 connects to the bucket, creating it when missing; that check is the one request
// it makes, bounded by 30 s.
func OpenS3(c S3Config, o Options) (*S3Store, error) {
	creds := credentials.NewStaticV4(c.AccessKey, c.SecretKey, c.SessionToken)
	if c.AccessKey == "" && c.SecretKey == "" {
		if os.Getenv("AWS_ACCESS_KEY_ID") == "" || os.Getenv("AWS_SECRET_ACCESS_KEY") == "" {
			return nil, fmt.Errorf("open blob store s3://%s: no credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", c.Bucket)
		}
		creds = credentials.NewEnvAWS()
	}
	mo := &minio.Options{Creds: creds, Secure: c.Secure, Region: c.Region}
	if c.PathStyle {
		mo.BucketLookup = minio.BucketLookupPath
	}
	if o.HTTPClient != nil && o.HTTPClient.Transport != nil {
		mo.Transport = o.HTTPClient.Transport
	}
	client, err := minio.New(c.Endpoint, mo)
	if err != nil {
		return nil, fmt.Errorf("open blob store s3://%s at %s: %w", c.Bucket, c.Endpoint, err)
	}
	s := &S3Store{client: client, core: minio.Core{Client: client}, bucket: c.Bucket}

	ctx, cancel := context.WithTimeout(context.Background(), s3OpenTimeout)
	defer cancel()
	ok, err := client.BucketExists(ctx, c.Bucket)
	if err != nil {
		return nil, fmt.Errorf("open blob store s3://%s at %s: check bucket: %w", c.Bucket, c.Endpoint, err)
	}
	if !ok {
		err := client.MakeBucket(ctx, c.Bucket, minio.MakeBucketOptions{Region: c.Region})
		if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" {
			err = nil // made by a racing replica
		}
		if err != nil {
			return nil, fmt.Errorf("open blob store s3://%s at %s: create bucket: %w", c.Bucket, c.Endpoint, err)
		}
	}
	return s, nil
}

func s3Key(digest string) string { return s3KeyPrefix + digest }

func s3UploadKey(owner, digest string) string { return s3UploadPrefix + owner + "/" + digest }

// s3Err translates a missing object into ErrNotFound and a refused body into ErrMismatch.
func s3Err(action, digest string, err error) error {
	switch minio.ToErrorResponse(err).Code {
	case "NoSuchKey", "NotFound":
		return fmt.Errorf("%s blob %s: %w", action, digest, ErrNotFound)
	case "BadDigest", "XAmzContentSHA256Mismatch", "XAmzContentChecksumMismatch", "InvalidDigest", "IncompleteBody":
		return fmt.Errorf("%s blob %s: %w (%v)", action, digest, ErrMismatch, err)
	}
	return fmt.Errorf("%s blob %s: %w", action, digest, err)
}

// Stat implements Store.
func (s *S3Store) Stat(ctx context.Context, digest string) (Info, error) {
	if err := checkDigest(digest); err != nil {
		return Info{}, err
	}
	oi, err := s.client.StatObject(ctx, s.bucket, s3Key(digest), minio.StatObjectOptions{})
	if err != nil {
		return Info{}, s3Err("stat", digest, err)
	}
	return Info{Digest: digest, Size: oi.Size, ModTime: oi.LastModified}, nil
}

// Open implements Store.
func (s *S3Store) Open(ctx context.Context, digest string) (io.ReadCloser, error) {
	if err := checkDigest(digest); err != nil {
		return nil, err
	}
	body, _, _, err := s.core.GetObject(ctx, s.bucket, s3Key(digest), minio.GetObjectOptions{})
	if err != nil {
		return nil, s3Err("open", digest, err)
	}
	return body, nil
}

// Delete implements Store.
func (s *S3Store) Delete(ctx context.Context, digest string) error {
	if err := checkDigest(digest); err != nil {
		return err
	}
	if err := s.client.RemoveObject(ctx, s.bucket, s3Key(digest), minio.RemoveObjectOptions{}); err != nil {
		if errors.Is(s3Err("delete", digest, err), ErrNotFound) {
			return nil
		}
		return s3Err("delete", digest, err)
	}
	return nil
}

// Walk implements Store; it visits blobs in digest order.
func (s *S3Store) Walk(ctx context.Context, fn func(Info) error) error {
	// The iterator, unlike ListObjects' channel, needs no goroutine and stops with the loop.
	for oi := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s3KeyPrefix, Recursive: true}) {
		if oi.Err != nil {
			return fmt.Errorf("walk blobs: %w", oi.Err)
		}
		digest := strings.TrimPrefix(oi.Key, s3KeyPrefix)
		if !ValidDigest(digest) {
			continue
		}
		if err := fn(Info{Digest: digest, Size: oi.Size, ModTime: oi.LastModified}); err != nil {
			return err
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("walk blobs: %w", err)
	}
	return nil
}

// PresignPut implements Store. The URL signs the headers Content-Length and
// x-amz-checksum-sha256 (the digest in base64), returned in Signed.Header: the service then
// refuses a body of another size or digest, and any change to those headers breaks the
// signature.
func (s *S3Store) PresignPut(ctx context.Context, digest string, size int64, ttl time.Duration) (Signed, error) {
	if err := errors.Join(checkDigest(digest), checkSize(size), checkTTL(ttl)); err != nil {
		return Signed{}, err
	}
	h := http.Header{}
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("X-Amz-Checksum-Sha256", base64Digest(digest))
	now := time.Now()
	u, err := s.client.PresignHeader(ctx, http.MethodPut, s.bucket, s3Key(digest), ttl, nil, h)
	if err != nil {
		return Signed{}, fmt.Errorf("sign upload of blob %s: %w", digest, err)
	}
	return Signed{Method: http.MethodPut, URL: u.String(), Header: h, Expires: s3Expiry(now, ttl)}, nil
}

// PresignUpload implements Store: PresignPut of the object uploads/<owner>/<digest>, so
// that the service checks the bytes against the digest as it does for a blob.
func (s *S3Store) PresignUpload(ctx context.Context, owner, digest string, size int64, ttl time.Duration) (Signed, error) {
	if err := errors.Join(checkOwner(owner), checkDigest(digest), checkSize(size), checkTTL(ttl)); err != nil {
		return Signed{}, err
	}
	h := http.Header{}
	h.Set("Content-Length", strconv.FormatInt(size, 10))
	h.Set("X-Amz-Checksum-Sha256", base64Digest(digest))
	now := time.Now()
	u, err := s.client.PresignHeader(ctx, http.MethodPut, s.bucket, s3UploadKey(owner, digest), ttl, nil, h)
	if err != nil {
		return Signed{}, fmt.Errorf("sign upload of blob %s: %w", digest, err)
	}
	return Signed{Method: http.MethodPut, URL: u.String(), Header: h, Expires: s3Expiry(now, ttl)}, nil
}

// CommitUpload implements Store: the staged object, which the service accepted only with
// the signed checksum, is copied onto the blob's key inside the service (an object of
// one signed PUT is at most 5 GiB, what one copy takes), then removed.
func (s *S3Store) CommitUpload(ctx context.Context, owner, digest string, size int64) error {
	if err := errors.Join(checkOwner(owner), checkDigest(digest), checkSize(size)); err != nil {
		return err
	}
	key := s3UploadKey(owner, digest)
	oi, err := s.client.StatObject(ctx, s.bucket, key, minio.StatObjectOptions{Checksum: true})
	if err != nil {
		return s3Err("commit upload of", digest, err)
	}
	if oi.Size != size {
		return fmt.Errorf("commit upload of blob %s: %w", digest,
			&mismatch{field: "size", got: strconv.FormatInt(oi.Size, 10), want: strconv.FormatInt(size, 10)})
	}
	if oi.ChecksumSHA256 != "" && oi.ChecksumSHA256 != base64Digest(digest) {
		return fmt.Errorf("commit upload of blob %s: %w", digest, &mismatch{field: "digest", got: oi.ChecksumSHA256, want: base64Digest(digest)})
	}
	_, err = s.client.CopyObject(ctx,
		minio.CopyDestOptions{Bucket: s.bucket, Object: s3Key(digest)},
		minio.CopySrcOptions{Bucket: s.bucket, Object: key})
	if err != nil {
		return s3Err("commit upload of", digest, err)
	}
	if err := s.client.RemoveObject(ctx, s.bucket, key, minio.RemoveObjectOptions{}); err != nil && !errors.Is(s3Err("", digest, err), ErrNotFound) {
		return s3Err("commit upload of", digest, err)
	}
	return nil
}

// DeleteUploads implements Store.
func (s *S3Store) DeleteUploads(ctx context.Context, before time.Time) (int, error) {
	n := 0
	for oi := range s.client.ListObjectsIter(ctx, s.bucket, minio.ListObjectsOptions{Prefix: s3UploadPrefix, Recursive: true}) {
		if oi.Err != nil {
			return n, fmt.Errorf("delete stale uploads: %w", oi.Err)
		}
		if !oi.LastModified.Before(before) {
			continue
		}
		if err := s.client.RemoveObject(ctx, s.bucket, oi.Key, minio.RemoveObjectOptions{}); err != nil {
			return n, fmt.Errorf("delete stale upload %s: %w", oi.Key, err)
		}
		n++
	}
	if err := ctx.Err(); err != nil {
		return n, fmt.Errorf("delete stale uploads: %w", err)
	}
	return n, nil
}

// s3Expiry is when a URL signed at now for ttl stops working: the signature counts whole
// seconds from its X-Amz-Date, which drops the fraction of now.
func s3Expiry(now time.Time, ttl time.Duration) time.Time {
	return now.Truncate(time.Second).Add(ttl.Truncate(time.Second))
}

// PresignGet implements Store.
func (s *S3Store) PresignGet(ctx context.Context, digest string, ttl time.Duration, o GetOptions) (Signed, error) {
	if err := errors.Join(checkDigest(digest), checkTTL(ttl), checkGetOptions(o)); err != nil {
		return Signed{}, err
	}
	q := url.Values{}
	if o.Filename != "" {
		q.Set("response-content-disposition", mime.FormatMediaType("attachment", map[string]string{"filename": o.Filename}))
	}
	if o.MediaType != "" {
		q.Set("response-content-type", o.MediaType)
	}
	now := time.Now()
	u, err := s.client.PresignedGetObject(ctx, s.bucket, s3Key(digest), ttl, q)
	if err != nil {
		return Signed{}, fmt.Errorf("sign download of blob %s: %w", digest, err)
	}
	return Signed{Method: http.MethodGet, URL: u.String(), Header: http.Header{}, Expires: s3Expiry(now, ttl)}, nil
}

// Put implements Store. A blob up to s3PartSize goes in one PUT whose signed payload hash is
// the digest, so the service itself refuses wrong bytes. A larger one goes in parts while
// Put hashes the stream, and the upload is completed only when the digest and size
// matched; otherwise it is aborted, so a mismatch never becomes visible.
//
// If r holds more than size bytes and the first size bytes match the digest, the blob is
// stored (it is correct) and Put still reports ErrMismatch.
func (s *S3Store) Put(ctx context.Context, digest string, size int64, r io.Reader) error {
	if err := errors.Join(checkDigest(digest), checkSize(size)); err != nil {
		return err
	}
	var err error
	if size <= s3PartSize {
		err = s.putSingle(ctx, digest, size, r)
	} else {
		err = s.putMultipart(ctx, digest, size, r)
	}
	if err != nil {
		return err
	}
	if n, _ := io.ReadFull(r, make([]byte, 1)); n > 0 {
		return fmt.Errorf("store blob %s: %w", digest, &mismatch{field: "size", got: "more than " + strconv.FormatInt(size, 10), want: strconv.FormatInt(size, 10)})
	}
	return nil
}

// countingReader counts the bytes read through it and remembers whether it hit EOF.
type countingReader struct {
	r   io.Reader
	n   int64
	eof bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if err == io.EOF {
		c.eof = true
	}
	return n, err
}

func shortBody(digest string, got, want int64) error {
	return fmt.Errorf("store blob %s: %w", digest, &mismatch{field: "size", got: strconv.FormatInt(got, 10), want: strconv.FormatInt(want, 10)})
}

func (s *S3Store) putSingle(ctx context.Context, digest string, size int64, r io.Reader) error {
	cr := &countingReader{r: io.LimitReader(r, size)}
	_, err := s.core.PutObject(ctx, s.bucket, s3Key(digest), cr, size, "", digest, minio.PutObjectOptions{
		// The payload hash (the digest) is signed instead of streamed chunk signatures, and
		// the checksum is stored with the object; it also stops minio-go adding a CRC.
		DisableContentSha256: true,
		UserMetadata:         map[string]string{"X-Amz-Checksum-Sha256": base64Digest(digest)},
	})
	if err != nil {
		if cr.eof && cr.n < size {
			return shortBody(digest, cr.n, size)
		}
		return s3Err("store", digest, err)
	}
	return nil
}

func (s *S3Store) putMultipart(ctx context.Context, digest string, size int64, r io.Reader) (err error) {
	key := s3Key(digest)
	uploadID, err := s.core.NewMultipartUpload(ctx, s.bucket, key, minio.PutObjectOptions{})
	if err != nil {
		return s3Err("store", digest, err)
	}
	defer func() {
		if err != nil {
			// Abort even when ctx is done: the parts would otherwise linger, billed.
			actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
			defer cancel()
			_ = s.core.AbortMultipartUpload(actx, s.bucket, key, uploadID)
		}
	}()

	partSize := max(int64(s3PartSize), (size+s3MaxParts-1)/s3MaxParts)
	h := sha256.New()
	cr := &countingReader{r: io.TeeReader(io.LimitReader(r, size), h)}
	var parts []minio.CompletePart
	for num, left := 1, size; left > 0; num++ {
		n := min(partSize, left)
		part, err := s.core.PutObjectPart(ctx, s.bucket, key, uploadID, num, io.LimitReader(cr, n), n, minio.PutObjectPartOptions{})
		if err != nil {
			if cr.eof && cr.n < size {
				return shortBody(digest, cr.n, size)
			}
			return s3Err("store", digest, err)
		}
		parts = append(parts, minio.CompletePart{PartNumber: num, ETag: part.ETag})
		left -= n
	}
	if cr.n != size {
		return shortBody(digest, cr.n, size)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != digest {
		return fmt.Errorf("store blob %s: %w", digest, &mismatch{field: "digest", got: got, want: digest})
	}
	if _, err := s.core.CompleteMultipartUpload(ctx, s.bucket, key, uploadID, parts, minio.PutObjectOptions{}); err != nil {
		return s3Err("store", digest, err)
	}
	return nil
}

// Close implements Store.
func (s *S3Store) Close() error { return nil }
