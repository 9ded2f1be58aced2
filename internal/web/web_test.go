package web

import (
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

func get(t *testing.T, h http.Handler, path string, hdr ...string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Result()
}

// TestHandlerRoutes: the app's own routes get index.html, so deep links and reloads work;
// anything else is a 404, still with the app so that it can say so.
func TestHandlerRoutes(t *testing.T) {
	t.Parallel()
	h := Handler()
	tests := []struct {
		path string
		want int
	}{
		{"/", http.StatusOK},
		{"/runs", http.StatusOK},
		{"/runs/0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b", http.StatusOK},
		{"/jobs/0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b", http.StatusOK},
		{"/workers", http.StatusOK},
		{"/stats", http.StatusOK},
		{"/signin", http.StatusOK},
		{"/projects/web/tests", http.StatusOK},
		{"/projects/web/runs/42", http.StatusOK},
		{"/projects/web/runs/x", http.StatusNotFound},
		{"/projects/web/settings", http.StatusNotFound},
		{"/nowhere", http.StatusNotFound},
		{"/runs/a/b", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			t.Parallel()
			res := get(t, h, tt.path)
			body, _ := io.ReadAll(res.Body)
			if res.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.want)
			}
			if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
				t.Errorf("Cache-Control %q, want no-cache: a new build must show at once", cc)
			}
			csp := res.Header.Get("Content-Security-Policy")
			for _, want := range []string{"script-src 'self'", "style-src 'self'", "connect-src 'self' ws://example.com wss://example.com", "default-src 'none'"} {
				if !strings.Contains(csp, want) {
					t.Errorf("CSP %q lacks %q", csp, want)
				}
			}
			if strings.Contains(string(body), "%ASSETS%") || !strings.Contains(string(body), `<script type="module" src="/assets/`) {
				t.Errorf("index.html does not point at the versioned assets:\n%s", body)
			}
		})
	}
}

// TestHandlerAssets: every asset index.html and the modules name is served under the
// current version, cached for good; other versions and names are 404.
func TestHandlerAssets(t *testing.T) {
	t.Parallel()
	h := Handler()
	body, _ := io.ReadAll(get(t, h, "/").Body)
	refs := regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`).FindAllStringSubmatch(string(body), -1)
	if len(refs) < 2 {
		t.Fatalf("index.html names %d assets, want a script and a style sheet", len(refs))
	}
	base := strings.TrimSuffix(refs[0][1], "/style.css")
	base = strings.TrimSuffix(base, "/app.js")
	imports := regexp.MustCompile(`from "\./([a-z]+\.js)"`)
	seen := map[string]bool{}
	queue := []string{"app.js", "style.css"}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		res := get(t, h, base+"/"+name)
		b, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s: status %d", name, res.StatusCode)
			continue
		}
		if cc := res.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("%s: Cache-Control %q", name, cc)
		}
		wantType := map[bool]string{true: "text/javascript; charset=utf-8", false: "text/css; charset=utf-8"}[strings.HasSuffix(name, ".js")]
		if ct := res.Header.Get("Content-Type"); ct != wantType {
			t.Errorf("%s: Content-Type %q, want %q", name, ct, wantType)
		}
		if bytesContain(b, "innerHTML") || bytesContain(b, "insertAdjacentHTML") || bytesContain(b, "document.write") {
			t.Errorf("%s builds markup from strings; use the dom.js helpers", name)
		}
		for _, m := range imports.FindAllStringSubmatch(string(b), -1) {
			queue = append(queue, m[1])
		}
		if res := get(t, h, base+"/"+name, "If-None-Match", res.Header.Get("ETag")); res.StatusCode != http.StatusNotModified {
			t.Errorf("%s: revalidation answered %d, want 304", name, res.StatusCode)
		}
	}
	if len(seen) < 8 {
		t.Errorf("found only %d modules from app.js: %v", len(seen), seen)
	}
	for _, p := range []string{"/assets/000000000000/app.js", base + "/nope.js", base + "/index.html", "/assets/"} {
		if res := get(t, h, p); res.StatusCode != http.StatusNotFound {
			t.Errorf("%s: status %d, want 404", p, res.StatusCode)
		}
	}
}

func bytesContain(b []byte, s string) bool { return strings.Contains(string(b), s) }
