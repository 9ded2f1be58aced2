package blob_test

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/blob/blobtest"
	"github.com/gantry-ci/gantry/internal/clock"
)

func secret(t *testing.T) []byte {
	t.Helper()
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	return k
}

// dirBundle is a dir store served by a test HTTP server.
type dirBundle struct {
	store *blob.DirStore
	dir   string
	srv   *httptest.Server
	base  *url.URL
	clock *clock.Fake
}

func setupDir(t *testing.T, fake bool) *dirBundle {
	t.Helper()
	b := &dirBundle{dir: t.TempDir()}
	o := blob.Options{Secret: secret(t)}
	if fake {
		b.clock = clock.NewFake(time.Now())
		o.Clock = b.clock
	}
	s, err := blob.Open("file://"+b.dir, o)
	if err != nil {
		t.Fatalf("open dir store: %v", err)
	}
	b.store = s.(*blob.DirStore)
	mux := http.NewServeMux()
	mux.Handle("/blobs/", b.store.Handler())
	b.srv = httptest.NewServer(mux)
	t.Cleanup(b.srv.Close)
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	b.base, _ = url.Parse(b.srv.URL)
	return b
}

func TestDirContract(t *testing.T) {
	t.Parallel()
	blobtest.Run(t, func(t *testing.T) blobtest.Target {
		b := setupDir(t, false)
		return blobtest.Target{Store: b.store, Base: b.base, Client: b.srv.Client()}
	})
}

func digestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// apiError decodes the handler's JSON error.
func apiError(t *testing.T, resp *http.Response) (code, message string) {
	t.Helper()
	var body struct {
		Error struct{ Code, Message string }
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("error Content-Type = %q, want application/json", ct)
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatalf("decode error body: %v", err)
	}
	if body.Error.Message == "" {
		t.Error("error without a message")
	}
	return body.Error.Code, body.Error.Message
}

func do(t *testing.T, b *dirBundle, req *http.Request) *http.Response {
	t.Helper()
	resp, err := b.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

func TestDirHandlerErrors(t *testing.T) {
	t.Parallel()
	b := setupDir(t, true)
	data := "some artifact bytes"
	d := digestOf(data)
	ctx := t.Context()
	put, err := b.store.PresignPut(ctx, d, int64(len(data)), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(put.URL, "/blobs/"+d+"?") {
		t.Errorf("signed URL = %s, want a path under /blobs/", put.URL)
	}
	target := b.srv.URL + put.URL

	tests := []struct {
		name   string
		req    func() *http.Request
		status int
		code   string
	}{
		{"declared length too long", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPut, target, strings.NewReader(data+"x"))
			return r
		}, http.StatusBadRequest, "size_mismatch"},
		{"chunked body too long", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPut, target, io.MultiReader(strings.NewReader(data), strings.NewReader("more")))
			r.ContentLength = -1
			return r
		}, http.StatusBadRequest, "size_mismatch"},
		{"chunked body other bytes", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPut, target, io.MultiReader(strings.NewReader(strings.ToUpper(data))))
			r.ContentLength = -1
			return r
		}, http.StatusBadRequest, "digest_mismatch"},
		{"no signature", func() *http.Request {
			r, _ := http.NewRequest(http.MethodPut, b.srv.URL+"/blobs/"+d+"?size=19&expires=99999999999", strings.NewReader(data))
			return r
		}, http.StatusForbidden, "bad_signature"},
		{"longer expiry", func() *http.Request {
			u, _ := url.Parse(target)
			q := u.Query()
			q.Set("expires", "99999999999")
			u.RawQuery = q.Encode()
			r, _ := http.NewRequest(http.MethodPut, u.String(), strings.NewReader(data))
			return r
		}, http.StatusForbidden, "bad_signature"},
		{"not a digest", func() *http.Request {
			r, _ := http.NewRequest(http.MethodGet, b.srv.URL+"/blobs/"+strings.ToUpper(d), nil)
			return r
		}, http.StatusNotFound, "not_found"},
		{"method", func() *http.Request {
			r, _ := http.NewRequest(http.MethodDelete, target, nil)
			return r
		}, http.StatusMethodNotAllowed, "method_not_allowed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp := do(t, b, tt.req())
			code, msg := apiError(t, resp)
			if resp.StatusCode != tt.status || code != tt.code {
				t.Errorf("answer = %d %s (%s), want %d %s", resp.StatusCode, code, msg, tt.status, tt.code)
			}
		})
	}
	if _, err := b.store.Stat(ctx, d); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Stat after refused uploads = %v, want ErrNotFound", err)
	}
	if left, _ := os.ReadDir(filepath.Join(b.dir, "tmp")); len(left) != 0 {
		t.Errorf("refused uploads left %d temp files", len(left))
	}

	// Expiry, moved by the fake clock: the URL works until its second passes.
	b.clock.Advance(59 * time.Second)
	resp := do(t, b, mustRequest(t, http.MethodPut, target, data))
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("PUT before expiry = %d, want 201", resp.StatusCode)
	}
	resp = do(t, b, mustRequest(t, http.MethodPut, target, data))
	if resp.StatusCode != http.StatusOK {
		t.Errorf("second PUT of a stored blob = %d, want 200", resp.StatusCode)
	}
	b.clock.Advance(2 * time.Second)
	resp = do(t, b, mustRequest(t, http.MethodPut, target, data))
	if code, _ := apiError(t, resp); resp.StatusCode != http.StatusForbidden || code != "expired" {
		t.Errorf("PUT after expiry = %d %s, want 403 expired", resp.StatusCode, code)
	}
}

func mustRequest(t *testing.T, method, target, body string) *http.Request {
	t.Helper()
	r, err := http.NewRequest(method, target, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDirHandlerGetHeaders(t *testing.T) {
	t.Parallel()
	b := setupDir(t, false)
	data := "<script>alert(1)</script>"
	d := digestOf(data)
	if err := b.store.Put(t.Context(), d, int64(len(data)), strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	g, err := b.store.PresignGet(t.Context(), d, time.Minute, blob.GetOptions{Filename: `naïve "quoted".html`, MediaType: "text/html"})
	if err != nil {
		t.Fatal(err)
	}
	resp := do(t, b, mustRequest(t, http.MethodGet, b.srv.URL+g.URL, ""))
	got, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || string(got) != data {
		t.Fatalf("GET = %d %q", resp.StatusCode, got)
	}
	h := resp.Header
	if cd := h.Get("Content-Disposition"); cd != `attachment; filename*=utf-8''na%C3%AFve%20%22quoted%22.html` {
		t.Errorf("Content-Disposition = %q", cd)
	}
	if h.Get("X-Content-Type-Options") != "nosniff" || !strings.Contains(h.Get("Content-Security-Policy"), "sandbox") {
		t.Errorf("user content served without nosniff and a sandbox CSP: %v", h)
	}
	if h.Get("ETag") != `"`+d+`"` || h.Get("Accept-Ranges") != "bytes" {
		t.Errorf("ETag = %q, Accept-Ranges = %q", h.Get("ETag"), h.Get("Accept-Ranges"))
	}

	req := mustRequest(t, http.MethodGet, b.srv.URL+g.URL, "")
	req.Header.Set("If-None-Match", `"`+d+`"`)
	if resp := do(t, b, req); resp.StatusCode != http.StatusNotModified {
		t.Errorf("conditional GET = %d, want 304", resp.StatusCode)
	}
	if resp := do(t, b, mustRequest(t, http.MethodHead, b.srv.URL+g.URL, "")); resp.StatusCode != http.StatusOK || resp.ContentLength != int64(len(data)) {
		t.Errorf("HEAD = %d, length %d", resp.StatusCode, resp.ContentLength)
	}
}

func TestDirLayout(t *testing.T) {
	t.Parallel()
	b := setupDir(t, false)
	data := "laid out on disk"
	d := digestOf(data)
	if err := b.store.Put(t.Context(), d, int64(len(data)), strings.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(b.dir, "sha256", d[:2], d))
	if err != nil || string(got) != data {
		t.Errorf("blob file = %q, %v", got, err)
	}
	// Strays in the tree are not blobs.
	for _, p := range []string{"sha256/zz/notes.txt", "sha256/" + d[:2] + "/" + digestOf("x")} {
		full := filepath.Join(b.dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var seen []string
	if err := b.store.Walk(t.Context(), func(i blob.Info) error { seen = append(seen, i.Digest); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 1 || seen[0] != d {
		t.Errorf("Walk = %v, want only %s", seen, d)
	}
}

func TestDirBaseURL(t *testing.T) {
	t.Parallel()
	s, err := blob.OpenDir(t.TempDir(), blob.Options{Secret: secret(t), BaseURL: "https://ci.example.com/", Prefix: "/files/"})
	if err != nil {
		t.Fatal(err)
	}
	g, err := s.PresignGet(t.Context(), digestOf("x"), time.Minute, blob.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(g.URL, "https://ci.example.com/files/"+digestOf("x")+"?") {
		t.Errorf("URL = %s", g.URL)
	}
}

func TestOpenErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		url  string
		want string
	}{
		{"", "want a URL"},
		{"/abs/dir", "want a URL"},
		{"ftp://x", "unknown scheme"},
		{"file://relative/dir", "absolute directory"},
		{"file:relative", "absolute directory"},
		{"file://" + dir + "?x=1", "no query"},
		{"file://" + dir, "signing secret"},
		{"s3://", "bucket"},
		{"s3://Bad_Bucket?endpoint=localhost:9000", "bucket"},
		{"s3://bucket/path?endpoint=localhost:9000", "without a path"},
		{"s3://bucket?endpoint=http://localhost:9000", "without a scheme"},
		{"s3://bucket?secure=maybe", "secure"},
		{"s3://bucket?endpont=localhost:9000", `unknown parameter "endpont"`},
	}
	for _, tt := range tests {
		if _, err := blob.Open(tt.url, blob.Options{}); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Open(%q) = %v, want an error saying %q", tt.url, err, tt.want)
		}
	}
	if _, err := blob.OpenDir(dir, blob.Options{Secret: secret(t), Prefix: "blobs"}); err == nil {
		t.Error("OpenDir with a prefix without slashes succeeded")
	}
}

func TestS3NoCredentials(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	_, err := blob.Open("s3://bucket?endpoint=127.0.0.1:1&secure=false", blob.Options{})
	if err == nil || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Errorf("Open without credentials = %v, want an error naming AWS_ACCESS_KEY_ID", err)
	}
}

func TestLoadOrCreateKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state", "blob.key")
	k1, err := blob.LoadOrCreateKey(path)
	if err != nil || len(k1) != blob.KeySize {
		t.Fatalf("create key = %x, %v", k1, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode = %v, %v; want 0600", fi.Mode(), err)
	}
	k2, err := blob.LoadOrCreateKey(path)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Errorf("reload key = %x, %v; want %x", k2, err, k1)
	}
	if err := os.WriteFile(path, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := blob.LoadOrCreateKey(path); err == nil {
		t.Error("a 5-byte key file was accepted")
	}
}

func TestSendErrors(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		io.WriteString(w, `<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>Request has expired</Message></Error>`)
	}))
	t.Cleanup(srv.Close)
	_, err := blob.Send(t.Context(), srv.Client(), nil, blob.Signed{Method: http.MethodGet, URL: srv.URL + "/b/x?X-Amz-Signature=secret"}, nil, 0)
	var re *blob.ResponseError
	if !errors.As(err, &re) || re.StatusCode != 403 || re.Code != "AccessDenied" || re.Message != "Request has expired" {
		t.Fatalf("Send = %v, want the S3 error", err)
	}
	if strings.Contains(err.Error(), "secret") || !strings.Contains(err.Error(), "403") {
		t.Errorf("error %q should name the status and leave out the signature", err)
	}
	if _, err := blob.Send(t.Context(), nil, nil, blob.Signed{Method: http.MethodGet, URL: "/blobs/x"}, nil, 0); err == nil {
		t.Error("Send of a relative URL without a base succeeded")
	}
}

func TestDirHandlerBrokenBody(t *testing.T) {
	t.Parallel()
	b := setupDir(t, false)
	data := "nineteen bytes long"
	d := digestOf(data)
	put, err := b.store.PresignPut(t.Context(), d, int64(len(data)), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A client that declares the full length and hangs up halfway; Go's client refuses to
	// send such a request, so it is written by hand.
	conn, err := net.Dial("tcp", b.srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: blobs\r\nContent-Length: %d\r\n\r\n%s", put.URL, len(data), data[:5])
	if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if code, _ := apiError(t, resp); resp.StatusCode != http.StatusBadRequest || code != "incomplete_body" {
		t.Errorf("broken body = %d %s, want 400 incomplete_body", resp.StatusCode, code)
	}
	if _, err := b.store.Stat(t.Context(), d); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("Stat after a broken upload = %v, want ErrNotFound", err)
	}
}
