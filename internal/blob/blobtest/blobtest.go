package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
)

// Target is a store under test and how a client reaches its signed URLs.
type Target struct {
	Store  blob.Store
	Base   *url.URL     // resolves relative signed URLs; nil when they are absolute
	Client *http.Client // nil means http.DefaultClient
}

// Run runs the contract suite. open returns a new, empty store for each subtest and closes
// it with t.Cleanup.
func Run(t *testing.T, open func(t *testing.T) Target) {
	tests := []struct {
		name string
		fn   func(t *testing.T, tg Target)
	}{
		{"PutStatOpenDelete", testPutStatOpenDelete},
		{"EmptyBlob", testEmptyBlob},
		{"InvalidRequests", testInvalid},
		{"Walk", testWalk},
		{"SignedRoundTrip", testSignedRoundTrip},
		{"SignedRange", testSignedRange},
		{"GetMissing", testGetMissing},
		{"Dedupe", testDedupe},
		{"PutMismatch", testPutMismatch},
		{"SignedPutWrongDigest", testSignedWrongDigest},
		{"SignedPutWrongSize", testSignedWrongSize},
		{"SignedURLForOtherBlob", testSignedOtherBlob},
		{"TamperedURL", testTampered},
		{"Expired", testExpired},
		{"LargeStream", testLarge},
		{"ConcurrentSameBlob", testConcurrent},
		{"StagedUpload", testStagedUpload},
		{"StagedUploadIsItsOwners", testStagedOwner},
		{"StagedUploadOfStoredBlob", testStagedStored},
		{"StagedUploadRefused", testStagedRefused},
		{"StagedUploadInvalid", testStagedInvalid},
		{"DeleteUploads", testDeleteUploads},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.fn(t, open(t))
		})
	}
}

// content is a test blob with its digest.
type content struct {
	data   []byte
	digest string
}

func newContent(s string) content {
	sum := sha256.Sum256([]byte(s))
	return content{data: []byte(s), digest: hex.EncodeToString(sum[:])}
}

func (c content) size() int64 { return int64(len(c.data)) }

func ctx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func put(t *testing.T, tg Target, c content) {
	t.Helper()
	if err := tg.Store.Put(ctx(t), c.digest, c.size(), bytes.NewReader(c.data)); err != nil {
		t.Fatalf("Put %s: %v", c.digest, err)
	}
}

// send makes a signed request and returns the whole answer body.
func send(t *testing.T, tg Target, s blob.Signed, body []byte) ([]byte, *http.Response, error) {
	t.Helper()
	return sendSized(t, tg, s, bytes.NewReader(body), int64(len(body)))
}

func sendSized(t *testing.T, tg Target, s blob.Signed, body io.Reader, size int64) ([]byte, *http.Response, error) {
	t.Helper()
	resp, err := blob.Send(ctx(t), tg.Client, tg.Base, s, body, size)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return b, resp, err
}

func signPut(t *testing.T, tg Target, digest string, size int64, ttl time.Duration) blob.Signed {
	t.Helper()
	s, err := tg.Store.PresignPut(ctx(t), digest, size, ttl)
	if err != nil {
		t.Fatalf("PresignPut %s: %v", digest, err)
	}
	if s.Method != http.MethodPut {
		t.Fatalf("PresignPut method = %q, want PUT", s.Method)
	}
	return s
}

func signGet(t *testing.T, tg Target, digest string, ttl time.Duration, o blob.GetOptions) blob.Signed {
	t.Helper()
	s, err := tg.Store.PresignGet(ctx(t), digest, ttl, o)
	if err != nil {
		t.Fatalf("PresignGet %s: %v", digest, err)
	}
	if s.Method != http.MethodGet {
		t.Fatalf("PresignGet method = %q, want GET", s.Method)
	}
	return s
}

func wantNotStored(t *testing.T, tg Target, digests ...string) {
	t.Helper()
	for _, d := range digests {
		if info, err := tg.Store.Stat(ctx(t), d); !errors.Is(err, blob.ErrNotFound) {
			t.Errorf("Stat %s = %+v, %v; want ErrNotFound", d, info, err)
		}
	}
}

func wantStored(t *testing.T, tg Target, c content) {
	t.Helper()
	info, err := tg.Store.Stat(ctx(t), c.digest)
	if err != nil {
		t.Fatalf("Stat %s: %v", c.digest, err)
	}
	if info.Digest != c.digest || info.Size != c.size() {
		t.Errorf("Stat = %+v, want digest %s size %d", info, c.digest, c.size())
	}
	r, err := tg.Store.Open(ctx(t), c.digest)
	if err != nil {
		t.Fatalf("Open %s: %v", c.digest, err)
	}
	defer r.Close()
	got, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("read %s: %v", c.digest, err)
	}
	if !bytes.Equal(got, c.data) {
		t.Errorf("Open %s read %q, want %q", c.digest, got, c.data)
	}
}

// wantStatus checks that err is a refused signed request with one of the statuses.
func wantStatus(t *testing.T, what string, err error, statuses ...int) {
	t.Helper()
	var re *blob.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("%s: error = %v, want a refusal with status %v", what, err, statuses)
	}
	for _, s := range statuses {
		if re.StatusCode == s {
			return
		}
	}
	t.Errorf("%s: %v, want status %v", what, err, statuses)
}

func walkAll(t *testing.T, tg Target) map[string]blob.Info {
	t.Helper()
	got := map[string]blob.Info{}
	err := tg.Store.Walk(ctx(t), func(i blob.Info) error {
		if _, dup := got[i.Digest]; dup {
			t.Errorf("Walk visited %s twice", i.Digest)
		}
		got[i.Digest] = i
		return nil
	})
	if err != nil {
		t.Fatalf("Walk: %v", err)
	}
	return got
}

func testPutStatOpenDelete(t *testing.T, tg Target) {
	c := newContent("hello, blob")
	before := time.Now().Add(-time.Minute) // S3 servers' clocks may lag ours a little
	put(t, tg, c)
	wantStored(t, tg, c)
	info, err := tg.Store.Stat(ctx(t), c.digest)
	if err != nil {
		t.Fatal(err)
	}
	if info.ModTime.Before(before) || info.ModTime.After(time.Now().Add(time.Minute)) {
		t.Errorf("ModTime = %v, want about now", info.ModTime)
	}

	if err := tg.Store.Delete(ctx(t), c.digest); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	wantNotStored(t, tg, c.digest)
	if _, err := tg.Store.Open(ctx(t), c.digest); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Open after Delete: %v, want ErrNotFound", err)
	}
	if err := tg.Store.Delete(ctx(t), c.digest); err != nil {
		t.Errorf("Delete of a missing blob: %v, want nil", err)
	}
}

func testEmptyBlob(t *testing.T, tg Target) {
	c := newContent("")
	put(t, tg, c)
	wantStored(t, tg, c)
	if err := tg.Store.Delete(ctx(t), c.digest); err != nil {
		t.Fatal(err)
	}
	if _, _, err := send(t, tg, signPut(t, tg, c.digest, 0, time.Minute), nil); err != nil {
		t.Fatalf("signed PUT of the empty blob: %v", err)
	}
	wantStored(t, tg, c)
	got, _, err := send(t, tg, signGet(t, tg, c.digest, time.Minute, blob.GetOptions{}), nil)
	if err != nil || len(got) != 0 {
		t.Errorf("signed GET of the empty blob = %q, %v", got, err)
	}
}

func testInvalid(t *testing.T, tg Target) {
	good := newContent("x").digest
	badDigests := []string{"", "abc", strings.ToUpper(good), good[:63] + "g", good + "0", "../" + good[3:]}
	s := tg.Store
	for _, d := range badDigests {
		checks := map[string]error{}
		_, checks["Stat"] = s.Stat(ctx(t), d)
		_, checks["Open"] = s.Open(ctx(t), d)
		checks["Delete"] = s.Delete(ctx(t), d)
		checks["Put"] = s.Put(ctx(t), d, 1, strings.NewReader("x"))
		_, checks["PresignPut"] = s.PresignPut(ctx(t), d, 1, time.Minute)
		_, checks["PresignGet"] = s.PresignGet(ctx(t), d, time.Minute, blob.GetOptions{})
		for op, err := range checks {
			if !errors.Is(err, blob.ErrInvalid) {
				t.Errorf("%s(%q) = %v, want ErrInvalid", op, d, err)
			}
		}
	}
	if err := s.Put(ctx(t), good, -1, strings.NewReader("x")); !errors.Is(err, blob.ErrInvalid) {
		t.Errorf("Put with size -1 = %v, want ErrInvalid", err)
	}
	if _, err := s.PresignPut(ctx(t), good, -1, time.Minute); !errors.Is(err, blob.ErrInvalid) {
		t.Errorf("PresignPut with size -1 = %v, want ErrInvalid", err)
	}
	for _, ttl := range []time.Duration{0, -time.Second, blob.MaxTTL + time.Second} {
		if _, err := s.PresignPut(ctx(t), good, 1, ttl); !errors.Is(err, blob.ErrInvalid) {
			t.Errorf("PresignPut with ttl %v = %v, want ErrInvalid", ttl, err)
		}
		if _, err := s.PresignGet(ctx(t), good, ttl, blob.GetOptions{}); !errors.Is(err, blob.ErrInvalid) {
			t.Errorf("PresignGet with ttl %v = %v, want ErrInvalid", ttl, err)
		}
	}
	if _, err := s.PresignGet(ctx(t), good, time.Minute, blob.GetOptions{Filename: "a\r\nb"}); !errors.Is(err, blob.ErrInvalid) {
		t.Errorf("PresignGet with a newline in the filename = %v, want ErrInvalid", err)
	}
	if _, err := s.PresignGet(ctx(t), good, time.Minute, blob.GetOptions{MediaType: "not a type"}); !errors.Is(err, blob.ErrInvalid) {
		t.Errorf("PresignGet with a bad media type = %v, want ErrInvalid", err)
	}
}

func testWalk(t *testing.T, tg Target) {
	if got := walkAll(t, tg); len(got) != 0 {
		t.Fatalf("Walk of an empty store visited %v", got)
	}
	want := map[string]int64{}
	for _, s := range []string{"one", "two", "three!"} {
		c := newContent(s)
		put(t, tg, c)
		want[c.digest] = c.size()
	}
	got := walkAll(t, tg)
	if len(got) != len(want) {
		t.Errorf("Walk visited %d blobs, want %d", len(got), len(want))
	}
	for d, size := range want {
		if info, ok := got[d]; !ok || info.Size != size || info.ModTime.IsZero() {
			t.Errorf("Walk: %s = %+v (visited %v), want size %d and a ModTime", d, info, ok, size)
		}
	}

	stop := errors.New("stop")
	calls := 0
	err := tg.Store.Walk(ctx(t), func(blob.Info) error { calls++; return stop })
	if !errors.Is(err, stop) || calls != 1 {
		t.Errorf("Walk with a failing fn = %v after %d calls, want its error after 1", err, calls)
	}
}

func testSignedRoundTrip(t *testing.T, tg Target) {
	c := newContent("uploaded through a signed URL")
	s := signPut(t, tg, c.digest, c.size(), time.Minute)
	if time.Until(s.Expires) < 50*time.Second || time.Until(s.Expires) > 2*time.Minute {
		t.Errorf("Expires = %v, want about a minute from now", s.Expires)
	}
	if _, _, err := send(t, tg, s, c.data); err != nil {
		t.Fatalf("signed PUT: %v", err)
	}
	wantStored(t, tg, c)

	g := signGet(t, tg, c.digest, time.Minute, blob.GetOptions{Filename: "report final.txt", MediaType: "text/plain; charset=utf-8"})
	got, resp, err := send(t, tg, g, nil)
	if err != nil {
		t.Fatalf("signed GET: %v", err)
	}
	if !bytes.Equal(got, c.data) {
		t.Errorf("signed GET = %q, want %q", got, c.data)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/plain; charset=utf-8" {
		t.Errorf("Content-Type = %q, want the signed media type", ct)
	}
	if cd := resp.Header.Get("Content-Disposition"); cd != `attachment; filename="report final.txt"` {
		t.Errorf("Content-Disposition = %q, want the signed filename", cd)
	}

	// Without options: no attachment, and the bytes still arrive.
	got, resp, err = send(t, tg, signGet(t, tg, c.digest, time.Minute, blob.GetOptions{}), nil)
	if err != nil || !bytes.Equal(got, c.data) {
		t.Errorf("plain signed GET = %q, %v", got, err)
	} else if cd := resp.Header.Get("Content-Disposition"); cd != "" {
		t.Errorf("plain signed GET: Content-Disposition = %q, want none", cd)
	}

	// A GET URL does not upload, and a PUT URL does not download.
	if _, _, err := send(t, tg, blob.Signed{Method: http.MethodPut, URL: g.URL, Header: g.Header}, c.data); err == nil {
		t.Error("PUT on a URL signed for GET succeeded")
	}
	if _, _, err := send(t, tg, blob.Signed{Method: http.MethodGet, URL: s.URL, Header: s.Header}, nil); err == nil {
		t.Error("GET on a URL signed for PUT succeeded")
	}
}

func testSignedRange(t *testing.T, tg Target) {
	c := newContent("0123456789")
	put(t, tg, c)
	g := signGet(t, tg, c.digest, time.Minute, blob.GetOptions{})
	g.Header = g.Header.Clone()
	if g.Header == nil {
		g.Header = http.Header{}
	}
	g.Header.Set("Range", "bytes=2-5")
	got, resp, err := send(t, tg, g, nil)
	if err != nil {
		t.Fatalf("ranged GET: %v", err)
	}
	if resp.StatusCode != http.StatusPartialContent || string(got) != "2345" {
		t.Errorf("ranged GET = %d %q, want 206 \"2345\"", resp.StatusCode, got)
	}
}

func testGetMissing(t *testing.T, tg Target) {
	c := newContent("never stored")
	_, _, err := send(t, tg, signGet(t, tg, c.digest, time.Minute, blob.GetOptions{}), nil)
	wantStatus(t, "GET of a missing blob", err, http.StatusNotFound)
	if !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("GET of a missing blob: %v, want ErrNotFound", err)
	}
}

func testDedupe(t *testing.T, tg Target) {
	c := newContent("stored twice, kept once")
	put(t, tg, c)
	put(t, tg, c)
	if _, _, err := send(t, tg, signPut(t, tg, c.digest, c.size(), time.Minute), c.data); err != nil {
		t.Fatalf("signed PUT of a stored blob: %v", err)
	}
	wantStored(t, tg, c)
	if got := walkAll(t, tg); len(got) != 1 {
		t.Errorf("Walk after storing one blob three times visited %d blobs", len(got))
	}
}

func testPutMismatch(t *testing.T, tg Target) {
	a, b := newContent("the declared content"), newContent("the content that came")
	if err := tg.Store.Put(ctx(t), a.digest, b.size(), bytes.NewReader(b.data)); !errors.Is(err, blob.ErrMismatch) {
		t.Errorf("Put with another digest = %v, want ErrMismatch", err)
	}
	if err := tg.Store.Put(ctx(t), a.digest, a.size()-1, bytes.NewReader(a.data)); !errors.Is(err, blob.ErrMismatch) {
		t.Errorf("Put with a short size = %v, want ErrMismatch", err)
	}
	if err := tg.Store.Put(ctx(t), a.digest, a.size()+1, bytes.NewReader(a.data)); !errors.Is(err, blob.ErrMismatch) {
		t.Errorf("Put of a body shorter than its size = %v, want ErrMismatch", err)
	}
	wantNotStored(t, tg, a.digest, b.digest)
	if got := walkAll(t, tg); len(got) != 0 {
		t.Errorf("Walk after refused Puts visited %v", got)
	}
}

func testSignedWrongDigest(t *testing.T, tg Target) {
	a, b := newContent("signed content, 24 bytes"), newContent("other content, 24 bytes!")
	if a.size() != b.size() {
		t.Fatal("test contents must have the same size")
	}
	_, _, err := send(t, tg, signPut(t, tg, a.digest, a.size(), time.Minute), b.data)
	wantStatus(t, "PUT of other bytes", err, http.StatusBadRequest, http.StatusUnprocessableEntity)
	if !errors.Is(err, blob.ErrMismatch) {
		t.Errorf("PUT of other bytes: %v, want ErrMismatch", err)
	}
	wantNotStored(t, tg, a.digest, b.digest)
}

func testSignedWrongSize(t *testing.T, tg Target) {
	a := newContent("size is signed too")
	// The right bytes, but the URL was signed for another size, bigger or smaller.
	for _, size := range []int64{a.size() + 1, a.size() - 1} {
		_, _, err := send(t, tg, signPut(t, tg, a.digest, size, time.Minute), a.data)
		wantStatus(t, fmt.Sprintf("PUT of %d bytes to a URL signed for %d", a.size(), size), err,
			http.StatusBadRequest, http.StatusForbidden, http.StatusUnprocessableEntity)
	}
	// The right size, but the body ends early: the client refuses, or the server does.
	if _, _, err := sendSized(t, tg, signPut(t, tg, a.digest, a.size(), time.Minute), bytes.NewReader(a.data[:5]), a.size()); err == nil {
		t.Error("PUT of a body shorter than its Content-Length succeeded")
	}
	wantNotStored(t, tg, a.digest)
}

func testSignedOtherBlob(t *testing.T, tg Target) {
	a, b := newContent("the blob the URL is for"), newContent("a blob it must not write")
	s := signPut(t, tg, a.digest, a.size(), time.Minute)

	// b's bytes at a's URL.
	_, _, err := send(t, tg, s, b.data)
	wantStatus(t, "PUT of another blob's bytes", err, http.StatusBadRequest, http.StatusForbidden, http.StatusUnprocessableEntity)

	// a's URL edited to b's digest.
	other := s
	other.URL = strings.Replace(s.URL, a.digest, b.digest, 1)
	if other.URL == s.URL {
		t.Fatalf("signed URL %s does not name its digest", s.URL)
	}
	_, _, err = send(t, tg, other, b.data)
	wantStatus(t, "PUT to a URL edited to another digest", err, http.StatusForbidden)

	// Signed headers edited for b.
	if len(s.Header) > 0 {
		sb := signPut(t, tg, b.digest, b.size(), time.Minute)
		edited := s
		edited.Header = sb.Header
		_, _, err = send(t, tg, edited, b.data)
		wantStatus(t, "PUT with another blob's signed headers", err, http.StatusForbidden, http.StatusBadRequest)
	}
	wantNotStored(t, tg, a.digest, b.digest)
}

// flipLastQueryValue changes one character in the middle of the URL's last query value,
// where both stores put the signature.
func flipLastQueryValue(t *testing.T, raw string) string {
	t.Helper()
	i := strings.LastIndexByte(raw, '=')
	if i < 0 || len(raw)-i < 8 {
		t.Fatalf("no signature at the end of %s", raw)
	}
	j := i + (len(raw)-i)/2
	c := byte('0')
	if raw[j] == '0' {
		c = '1'
	}
	return raw[:j] + string(c) + raw[j+1:]
}

func testTampered(t *testing.T, tg Target) {
	c := newContent("tamper-proof")
	s := signPut(t, tg, c.digest, c.size(), time.Minute)
	bad := s
	bad.URL = flipLastQueryValue(t, s.URL)
	_, _, err := send(t, tg, bad, c.data)
	wantStatus(t, "PUT with a changed signature", err, http.StatusForbidden)
	wantNotStored(t, tg, c.digest)

	// Changed signed headers.
	for k := range s.Header {
		if http.CanonicalHeaderKey(k) == "Content-Length" {
			continue
		}
		bad := s
		bad.Header = s.Header.Clone()
		bad.Header.Set(k, "x"+s.Header.Get(k))
		_, _, err := send(t, tg, bad, c.data)
		wantStatus(t, "PUT with a changed "+k, err, http.StatusForbidden, http.StatusBadRequest)
	}
	wantNotStored(t, tg, c.digest)

	put(t, tg, c)
	g := signGet(t, tg, c.digest, time.Minute, blob.GetOptions{Filename: "a.txt"})
	g.URL = flipLastQueryValue(t, g.URL)
	_, _, err = send(t, tg, g, nil)
	wantStatus(t, "GET with a changed signature", err, http.StatusForbidden)

	// A filename the URL was not signed for.
	g = signGet(t, tg, c.digest, time.Minute, blob.GetOptions{Filename: "a.txt"})
	g.URL = strings.Replace(g.URL, "a.txt", "b.txt", 1)
	_, _, err = send(t, tg, g, nil)
	wantStatus(t, "GET with a changed filename", err, http.StatusForbidden)
}

func testExpired(t *testing.T, tg Target) {
	stored, fresh := newContent("stored before"), newContent("uploaded too late")
	put(t, tg, stored)
	// The PUT is signed first, so it expires no later than the GET: once the GET is refused,
	// the PUT has expired too.
	p := signPut(t, tg, fresh.digest, fresh.size(), time.Second)
	g := signGet(t, tg, stored.digest, time.Second, blob.GetOptions{})
	deadline := time.Now().Add(15 * time.Second)
	var err error
	for {
		if _, _, err = send(t, tg, g, nil); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a GET URL signed for 1s still worked after 15s")
		}
		time.Sleep(100 * time.Millisecond) // polling the expiry, which only time moves
	}
	wantStatus(t, "GET after expiry", err, http.StatusForbidden)
	_, _, err = send(t, tg, p, fresh.data)
	wantStatus(t, "PUT after expiry", err, http.StatusForbidden)
	wantNotStored(t, tg, fresh.digest)
}

// LargeSize is the size of the blob the large-stream test moves.
const LargeSize = 64 << 20

// largeReader generates n pseudo-random bytes from seed, without holding them.
func largeReader(seed uint64, n int64) io.Reader {
	return io.LimitReader(rand.NewChaCha8([32]byte{byte(seed), byte(seed >> 8)}), n)
}

func largeDigest(seed uint64, n int64) string {
	h := sha256.New()
	_, _ = io.Copy(h, largeReader(seed, n)) // neither side fails
	return hex.EncodeToString(h.Sum(nil))
}

func wantLarge(t *testing.T, tg Target, digest string, n int64) {
	t.Helper()
	r, err := tg.Store.Open(ctx(t), digest)
	if err != nil {
		t.Fatalf("Open large blob: %v", err)
	}
	defer r.Close()
	h := sha256.New()
	got, err := io.Copy(h, r)
	if err != nil {
		t.Fatalf("read large blob: %v", err)
	}
	if got != n || hex.EncodeToString(h.Sum(nil)) != digest {
		t.Errorf("large blob read back %d bytes with digest %x, want %d bytes with %s", got, h.Sum(nil), n, digest)
	}
}

func testLarge(t *testing.T, tg Target) {
	var wg sync.WaitGroup
	wg.Go(func() {
		d := largeDigest(1, LargeSize)
		if err := tg.Store.Put(ctx(t), d, LargeSize, largeReader(1, LargeSize)); err != nil {
			t.Errorf("Put of %d bytes: %v", LargeSize, err)
			return
		}
		wantLarge(t, tg, d, LargeSize)
		// A large body that goes wrong at its end is refused, after it streamed.
		bad := io.MultiReader(largeReader(1, LargeSize-1), strings.NewReader("!"))
		if err := tg.Store.Put(ctx(t), largeDigest(2, LargeSize), LargeSize, bad); !errors.Is(err, blob.ErrMismatch) {
			t.Errorf("Put of %d wrong bytes = %v, want ErrMismatch", LargeSize, err)
		}
	})
	wg.Go(func() {
		d := largeDigest(3, LargeSize)
		s := signPut(t, tg, d, LargeSize, time.Minute)
		if _, _, err := sendSized(t, tg, s, largeReader(3, LargeSize), LargeSize); err != nil {
			t.Errorf("signed PUT of %d bytes: %v", LargeSize, err)
			return
		}
		wantLarge(t, tg, d, LargeSize)
		resp, err := blob.Send(ctx(t), tg.Client, tg.Base, signGet(t, tg, d, time.Minute, blob.GetOptions{}), nil, 0)
		if err != nil {
			t.Errorf("signed GET of %d bytes: %v", LargeSize, err)
			return
		}
		defer resp.Body.Close()
		h := sha256.New()
		if n, err := io.Copy(h, resp.Body); err != nil || n != LargeSize || hex.EncodeToString(h.Sum(nil)) != d {
			t.Errorf("signed GET of %d bytes read %d, %v", LargeSize, n, err)
		}
	})
	wg.Wait()
	wantNotStored(t, tg, largeDigest(2, LargeSize))
}

func testConcurrent(t *testing.T, tg Target) {
	c := newContent(strings.Repeat("raced ", 100_000))
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			if i%2 == 0 {
				if err := tg.Store.Put(ctx(t), c.digest, c.size(), bytes.NewReader(c.data)); err != nil {
					t.Errorf("concurrent Put %d: %v", i, err)
				}
				return
			}
			if _, _, err := send(t, tg, signPut(t, tg, c.digest, c.size(), time.Minute), c.data); err != nil {
				t.Errorf("concurrent signed PUT %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	wantStored(t, tg, c)
	if got := walkAll(t, tg); len(got) != 1 {
		t.Errorf("Walk after concurrent uploads of one blob visited %d blobs", len(got))
	}
}

func signUpload(t *testing.T, tg Target, owner, digest string, size int64) blob.Signed {
	t.Helper()
	s, err := tg.Store.PresignUpload(ctx(t), owner, digest, size, time.Minute)
	if err != nil {
		t.Fatalf("PresignUpload %s for %s: %v", digest, owner, err)
	}
	if s.Method != http.MethodPut {
		t.Fatalf("PresignUpload method = %q, want PUT", s.Method)
	}
	return s
}

func commit(t *testing.T, tg Target, owner string, c content) error {
	t.Helper()
	return tg.Store.CommitUpload(ctx(t), owner, c.digest, c.size())
}

// testStagedUpload: an upload through PresignUpload is no blob until it is committed,
// then is one; a second commit finds nothing left to commit.
func testStagedUpload(t *testing.T, tg Target) {
	c := newContent("staged first, stored on commit")
	if err := commit(t, tg, "alpha", c); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("CommitUpload before any upload = %v, want ErrNotFound", err)
	}
	if _, _, err := send(t, tg, signUpload(t, tg, "alpha", c.digest, c.size()), c.data); err != nil {
		t.Fatalf("staged PUT: %v", err)
	}
	wantNotStored(t, tg, c.digest)
	if got := walkAll(t, tg); len(got) != 0 {
		t.Errorf("Walk visits a staged upload: %v", got)
	}
	if err := commit(t, tg, "alpha", c); err != nil {
		t.Fatalf("CommitUpload: %v", err)
	}
	wantStored(t, tg, c)
	if err := commit(t, tg, "alpha", c); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("second CommitUpload = %v, want ErrNotFound", err)
	}
	wantStored(t, tg, c)
}

// testStagedOwner: what one owner uploaded commits for that owner only, and a URL
// edited to another owner is refused.
func testStagedOwner(t *testing.T, tg Target) {
	c := newContent("alpha's upload")
	s := signUpload(t, tg, "alpha", c.digest, c.size())
	edited := s
	edited.URL = strings.Replace(s.URL, "alpha", "beta", 1)
	if edited.URL != s.URL {
		_, _, err := send(t, tg, edited, c.data)
		wantStatus(t, "PUT to a URL edited to another owner", err, http.StatusForbidden)
	}
	if _, _, err := send(t, tg, s, c.data); err != nil {
		t.Fatalf("staged PUT: %v", err)
	}
	if err := commit(t, tg, "beta", c); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("CommitUpload for another owner = %v, want ErrNotFound", err)
	}
	wantNotStored(t, tg, c.digest)
	if err := commit(t, tg, "alpha", c); err != nil {
		t.Fatalf("CommitUpload for its owner: %v", err)
	}
	wantStored(t, tg, c)
}

// testStagedStored: a blob stored already is no upload of anyone's: committing without
// uploading fails, the upload URL is the one an unknown digest gets, and an upload of the
// same bytes commits and keeps one copy.
func testStagedStored(t *testing.T, tg Target) {
	c, unknown := newContent("a secret another owner stored"), newContent("never stored")
	put(t, tg, c)
	if err := commit(t, tg, "alpha", c); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("CommitUpload of a stored blob never uploaded = %v, want ErrNotFound", err)
	}
	a, b := signUpload(t, tg, "alpha", c.digest, c.size()), signUpload(t, tg, "alpha", unknown.digest, unknown.size())
	if len(a.Header) != len(b.Header) || strings.Count(a.URL, "&") != strings.Count(b.URL, "&") {
		t.Errorf("upload URLs of a stored and an unknown digest differ in shape: %+v, %+v", a, b)
	}
	if _, _, err := send(t, tg, a, c.data); err != nil {
		t.Fatalf("staged PUT of stored bytes: %v", err)
	}
	if err := commit(t, tg, "alpha", c); err != nil {
		t.Fatalf("CommitUpload: %v", err)
	}
	wantStored(t, tg, c)
	if got := walkAll(t, tg); len(got) != 1 {
		t.Errorf("Walk after a staged upload of a stored blob visited %d blobs, want 1", len(got))
	}
}

// testStagedRefused: other bytes, or a short body, staged under a digest are refused
// as they arrive and leave nothing to commit.
func testStagedRefused(t *testing.T, tg Target) {
	a, b := newContent("signed content, 24 bytes"), newContent("other content, 24 bytes!")
	_, _, err := send(t, tg, signUpload(t, tg, "alpha", a.digest, a.size()), b.data)
	wantStatus(t, "staged PUT of other bytes", err, http.StatusBadRequest, http.StatusUnprocessableEntity)
	if _, _, err := sendSized(t, tg, signUpload(t, tg, "alpha", a.digest, a.size()), bytes.NewReader(a.data[:5]), a.size()); err == nil {
		t.Error("staged PUT of a body shorter than its Content-Length succeeded")
	}
	if err := commit(t, tg, "alpha", a); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("CommitUpload after refused uploads = %v, want ErrNotFound", err)
	}
	wantNotStored(t, tg, a.digest, b.digest)
}

func testStagedInvalid(t *testing.T, tg Target) {
	c := newContent("x")
	for _, owner := range []string{"", "../x", "a/b", "Alpha", strings.Repeat("a", 65), "a b"} {
		if _, err := tg.Store.PresignUpload(ctx(t), owner, c.digest, c.size(), time.Minute); !errors.Is(err, blob.ErrInvalid) {
			t.Errorf("PresignUpload for owner %q = %v, want ErrInvalid", owner, err)
		}
		if err := tg.Store.CommitUpload(ctx(t), owner, c.digest, c.size()); !errors.Is(err, blob.ErrInvalid) {
			t.Errorf("CommitUpload for owner %q = %v, want ErrInvalid", owner, err)
		}
	}
	if _, err := tg.Store.PresignUpload(ctx(t), "alpha", "ABC", 1, time.Minute); !errors.Is(err, blob.ErrInvalid) {
		t.Errorf("PresignUpload of a bad digest = %v, want ErrInvalid", err)
	}
}

// testDeleteUploads: uploads never committed go once older than the bound; blobs stay.
func testDeleteUploads(t *testing.T, tg Target) {
	stored, staged := newContent("a stored blob"), newContent("an upload nobody committed")
	put(t, tg, stored)
	if _, _, err := send(t, tg, signUpload(t, tg, "alpha", staged.digest, staged.size()), staged.data); err != nil {
		t.Fatalf("staged PUT: %v", err)
	}
	// S3 servers' clocks may lag ours a little.
	if n, err := tg.Store.DeleteUploads(ctx(t), time.Now().Add(-time.Hour)); err != nil || n != 0 {
		t.Errorf("DeleteUploads of uploads older than an hour = %d, %v; want 0", n, err)
	}
	if n, err := tg.Store.DeleteUploads(ctx(t), time.Now().Add(time.Hour)); err != nil || n != 1 {
		t.Errorf("DeleteUploads of every upload = %d, %v; want 1", n, err)
	}
	if err := commit(t, tg, "alpha", staged); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("CommitUpload of a deleted upload = %v, want ErrNotFound", err)
	}
	wantStored(t, tg, stored)
	wantNotStored(t, tg, staged.digest)
}
