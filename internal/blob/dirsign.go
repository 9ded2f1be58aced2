package blob

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The dir store's signed URLs look like
//
//	PUT {prefix}{digest}?size=N&expires=UNIX&sig=HEX
//	PUT {prefix}{digest}?expires=UNIX&owner=O&size=N&sig=HEX   (PresignUpload: staged for O)
//	GET {prefix}{digest}?expires=UNIX&filename=F&type=T&sig=HEX
//
// where sig is the hex HMAC-SHA256, under Options.Secret, of every field that shapes the
// request: method, digest, size, expiry, filename, media type and, for a staged upload,
// owner. Fields are length-prefixed so that no two requests share a signed string; the
// owner is an eighth field, so URLs signed before it existed stay valid and no staged
// upload's signature is a direct one's.

const signVersion = "gantry-blob-v1"

func (d *DirStore) sign(method, digest, size string, expires int64, filename, mediaType, owner string) string {
	fields := []string{signVersion, method, digest, size, strconv.FormatInt(expires, 10), filename, mediaType}
	if owner != "" {
		fields = append(fields, owner)
	}
	var msg []byte
	for _, f := range fields {
		msg = binary.AppendUvarint(msg, uint64(len(f)))
		msg = append(msg, f...)
	}
	mac := hmac.New(sha256.New, d.secret)
	mac.Write(msg)
	return hex.EncodeToString(mac.Sum(nil))
}

// expiry rounds now+ttl up to a whole second, so a URL never lives shorter than ttl.
func (d *DirStore) expiry(ttl time.Duration) int64 {
	t := d.clock.Now().Add(ttl)
	if t.Nanosecond() > 0 {
		return t.Unix() + 1
	}
	return t.Unix()
}

// PresignPut implements Store.
func (d *DirStore) PresignPut(ctx context.Context, digest string, size int64, ttl time.Duration) (Signed, error) {
	if err := errors.Join(checkDigest(digest), checkSize(size), checkTTL(ttl)); err != nil {
		return Signed{}, err
	}
	exp := d.expiry(ttl)
	sz := strconv.FormatInt(size, 10)
	// The signature goes last, by hand: url.Values.Encode would sort it in between.
	q := url.Values{"size": {sz}, "expires": {strconv.FormatInt(exp, 10)}}
	return Signed{
		Method:  http.MethodPut,
		URL:     d.base + d.prefix + digest + "?" + q.Encode() + "&sig=" + d.sign(http.MethodPut, digest, sz, exp, "", "", ""),
		Header:  http.Header{},
		Expires: time.Unix(exp, 0),
	}, nil
}

// PresignUpload implements Store.
func (d *DirStore) PresignUpload(ctx context.Context, owner, digest string, size int64, ttl time.Duration) (Signed, error) {
	if err := errors.Join(checkOwner(owner), checkDigest(digest), checkSize(size), checkTTL(ttl)); err != nil {
		return Signed{}, err
	}
	exp := d.expiry(ttl)
	sz := strconv.FormatInt(size, 10)
	q := url.Values{"size": {sz}, "expires": {strconv.FormatInt(exp, 10)}, "owner": {owner}}
	return Signed{
		Method:  http.MethodPut,
		URL:     d.base + d.prefix + digest + "?" + q.Encode() + "&sig=" + d.sign(http.MethodPut, digest, sz, exp, "", "", owner),
		Header:  http.Header{},
		Expires: time.Unix(exp, 0),
	}, nil
}

// PresignGet implements Store.
func (d *DirStore) PresignGet(ctx context.Context, digest string, ttl time.Duration, o GetOptions) (Signed, error) {
	if err := errors.Join(checkDigest(digest), checkTTL(ttl), checkGetOptions(o)); err != nil {
		return Signed{}, err
	}
	exp := d.expiry(ttl)
	q := url.Values{"expires": {strconv.FormatInt(exp, 10)}}
	if o.Filename != "" {
		q.Set("filename", o.Filename)
	}
	if o.MediaType != "" {
		q.Set("type", o.MediaType)
	}
	return Signed{
		Method:  http.MethodGet,
		URL:     d.base + d.prefix + digest + "?" + q.Encode() + "&sig=" + d.sign(http.MethodGet, digest, "", exp, o.Filename, o.MediaType, ""),
		Header:  http.Header{},
		Expires: time.Unix(exp, 0),
	}, nil
}

// checkGetOptions refuses values that cannot be sent as header values.
func checkGetOptions(o GetOptions) error {
	if strings.ContainsAny(o.Filename, "\x00\r\n/\\") {
		return fmt.Errorf("%w: filename %q has a control character or a path separator", ErrInvalid, o.Filename)
	}
	if o.MediaType != "" {
		if _, _, err := mime.ParseMediaType(o.MediaType); err != nil {
			return fmt.Errorf("%w: media type %q: %v", ErrInvalid, o.MediaType, err)
		}
	}
	return nil
}

// Handler serves the store's signed URLs under Options.Prefix: PUT uploads a blob, GET and
// HEAD download one (with Range support). Failures answer JSON
// {"error":{"code":"...","message":"..."}}: 403 for a bad or expired signature, 400 for a
// body that does not match the signed digest or size, 404 for a missing blob.
func (d *DirStore) Handler() http.Handler { return http.HandlerFunc(d.serve) }

func (d *DirStore) serve(w http.ResponseWriter, r *http.Request) {
	digest, ok := strings.CutPrefix(r.URL.Path, d.prefix)
	if !ok || !ValidDigest(digest) {
		writeError(w, http.StatusNotFound, "not_found", "no blob at this path: want "+d.prefix+"<sha256 hex>")
		return
	}
	q := r.URL.Query()
	switch r.Method {
	case http.MethodPut:
		d.servePut(w, r, digest, q)
	case http.MethodGet, http.MethodHead:
		d.serveGet(w, r, digest, q)
	default:
		w.Header().Set("Allow", "GET, HEAD, PUT")
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "signed blob URLs take GET, HEAD or PUT")
	}
}

// verify checks the signature first and the expiry second, so that a forged URL never
// learns whether its expiry would have passed.
func (d *DirStore) verify(w http.ResponseWriter, q url.Values, method, digest, size, filename, mediaType, owner string) bool {
	exp, err := strconv.ParseInt(q.Get("expires"), 10, 64)
	want := d.sign(method, digest, size, exp, filename, mediaType, owner)
	if err != nil || !hmac.Equal([]byte(q.Get("sig")), []byte(want)) {
		writeError(w, http.StatusForbidden, "bad_signature", "the URL's signature does not match its request; ask for a new signed URL")
		return false
	}
	if d.clock.Now().Unix() >= exp {
		writeError(w, http.StatusForbidden, "expired", "the signed URL expired at "+time.Unix(exp, 0).UTC().Format(time.RFC3339)+"; ask for a new one")
		return false
	}
	return true
}

func (d *DirStore) servePut(w http.ResponseWriter, r *http.Request, digest string, q url.Values) {
	sz, owner := q.Get("size"), q.Get("owner")
	if !d.verify(w, q, http.MethodPut, digest, sz, "", "", owner) {
		return
	}
	final := d.path(digest)
	if owner != "" {
		// Signed, so valid; checked again all the same before it becomes a path.
		if !ValidOwner(owner) {
			writeError(w, http.StatusBadRequest, "invalid_request", "the signed owner is not valid")
			return
		}
		final = d.stagedPath(owner, digest)
	}
	size, err := strconv.ParseInt(sz, 10, 64)
	if err != nil || checkSize(size) != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", "the signed size is not valid")
		return
	}
	// A declared length that differs is refused before reading a byte of the body.
	if r.ContentLength >= 0 && r.ContentLength != size {
		writeError(w, http.StatusBadRequest, "size_mismatch",
			fmt.Sprintf("the body has %d bytes, the URL is signed for %d", r.ContentLength, size))
		return
	}
	body := &readErrReader{r: r.Body}
	existed, err := d.ingestTo(r.Context(), final, digest, size, body)
	var mm *mismatch
	switch {
	case errors.As(err, &mm):
		writeError(w, http.StatusBadRequest, mm.field+"_mismatch", fmt.Sprintf("the body's %s is %s, the URL is signed for %s", mm.field, mm.got, mm.want))
		return
	case err != nil && (body.err != nil || r.Context().Err() != nil):
		// Answered even though the client may be gone: one that only half-closed still reads.
		writeError(w, http.StatusBadRequest, "incomplete_body", fmt.Sprintf("the body broke off before its %d bytes arrived", size))
		return
	case err != nil && diskFull(err):
		// Nothing was kept (the temp file is removed): the uploader retries once space
		// is freed. The API's readiness check counts this 503 as the disk being full.
		d.log.Error("blob upload failed: disk full", "digest", digest, "size", size, "dir", d.dir, "err", err)
		w.Header().Set("Retry-After", "10")
		writeError(w, http.StatusServiceUnavailable, "storage_full", "the blob store's disk is full; retry once space is freed")
		return
	case err != nil:
		d.log.Error("blob upload failed", "digest", digest, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the blob could not be stored")
		return
	}
	status := http.StatusCreated
	if existed {
		status = http.StatusOK
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"digest": digest, "size": size})
}

func (d *DirStore) serveGet(w http.ResponseWriter, r *http.Request, digest string, q url.Values) {
	filename, mediaType := q.Get("filename"), q.Get("type")
	if !d.verify(w, q, http.MethodGet, digest, "", filename, mediaType, "") {
		return
	}
	f, err := os.Open(d.path(digest))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			writeError(w, http.StatusNotFound, "not_found", "blob "+digest+" is not stored")
		} else {
			d.log.Error("blob download failed", "digest", digest, "err", err)
			writeError(w, http.StatusInternalServerError, "internal", "the blob could not be read")
		}
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		d.log.Error("blob download failed", "digest", digest, "err", err)
		writeError(w, http.StatusInternalServerError, "internal", "the blob could not be read")
		return
	}
	h := w.Header()
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	h.Set("Content-Type", mediaType)
	if filename != "" {
		h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
	}
	// Blobs are user content served from the coordinator's origin: never let a browser run
	// it as a page of that origin.
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	h.Set("ETag", `"`+digest+`"`)
	http.ServeContent(w, r, "", fi.ModTime(), f)
}

// diskFull reports a write that found no space (or no quota) left.
func diskFull(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// readErrReader remembers a failed read, to tell a broken request body from a failed disk.
type readErrReader struct {
	r   io.Reader
	err error
}

func (e *readErrReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err != nil && err != io.EOF {
		e.err = err
	}
	return n, err
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	var body struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	body.Error.Code, body.Error.Message = code, message
	_ = json.NewEncoder(w).Encode(body)
}
