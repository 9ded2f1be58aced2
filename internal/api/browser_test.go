package api_test

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

// request sends one request with the headers given, Host included (set as the request's
// Host, which is what a browser of a rebound name would send).
func (b *bundle) request(t *testing.T, method, path, body string, header map[string]string) response {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: data}
}

func (b *bundle) countRuns(t *testing.T) int {
	t.Helper()
	// Not t.Context(): this also runs in a cleanup, after that context ended.
	runs, err := b.store.ListRuns(context.Background(), store.ListRunsParams{Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	return len(runs)
}

// TestBrowserWritesRefused: the requests a page of another site can make without a
// CORS preflight — a form post, fetch with mode no-cors and a text/plain body — and
// writes that say they come from another origin or site are refused before they do
// anything; the server's own pages, the CLI and workers go on working.
func TestBrowserWritesRefused(t *testing.T) {
	t.Parallel()
	const yaml = "name: x\njobs: {a: {steps: [{run: 'touch /tmp/pwned'}]}}\n"
	tests := []struct {
		name   string
		method string
		path   string
		body   string
		header map[string]string
		status int
		code   string
	}{
		{"no content type", "POST", "/api/v1/runs", yaml, nil, 415, "unsupported_media_type"},
		{"text/plain", "POST", "/api/v1/runs", yaml, map[string]string{"Content-Type": "text/plain;charset=UTF-8"}, 415, "unsupported_media_type"},
		{"form", "POST", "/api/v1/runs", "a=" + url.QueryEscape(yaml), map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"multipart", "POST", "/api/v1/runs", "--x--\r\n", map[string]string{"Content-Type": "multipart/form-data; boundary=x"}, 415, "unsupported_media_type"},
		{"form on an empty body", "POST", "/api/v1/runs/0190b5a0-0000-7000-8000-000000000000/cancel", "", map[string]string{"Content-Type": "application/x-www-form-urlencoded"}, 415, "unsupported_media_type"},
		{"worker call as text/plain", "POST", "/api/v1/agent/register", `{"name": "w"}`, map[string]string{"Content-Type": "text/plain"}, 415, "unsupported_media_type"},
		{"other origin", "POST", "/api/v1/runs", yaml, map[string]string{"Content-Type": "application/yaml", "Origin": "http://evil.example"}, 403, "forbidden"},
		{"null origin", "POST", "/api/v1/runs", yaml, map[string]string{"Content-Type": "application/yaml", "Origin": "null"}, 403, "forbidden"},
		{"other port", "POST", "/api/v1/runs", yaml, map[string]string{"Content-Type": "application/yaml", "Origin": "http://127.0.0.1:1"}, 403, "forbidden"},
		{"cross-site fetch metadata", "POST", "/api/v1/runs", yaml, map[string]string{"Content-Type": "application/yaml", "Sec-Fetch-Site": "cross-site"}, 403, "forbidden"},
		{"other origin cancel without body", "POST", "/api/v1/runs/0190b5a0-0000-7000-8000-000000000000/cancel", "", map[string]string{"Origin": "http://evil.example"}, 403, "forbidden"},
		{"rebound name, read", "GET", "/api/v1/runs", "", map[string]string{"Host": "evil.example"}, 421, "misdirected_request"},
		{"rebound name with port, read", "GET", "/api/v1/workers", "", map[string]string{"Host": "evil.example:8080"}, 421, "misdirected_request"},
		{"rebound name, write", "POST", "/api/v1/runs", yaml, map[string]string{"Host": "evil.example", "Content-Type": "application/yaml"}, 421, "misdirected_request"},
		{"rebound name, dashboard", "GET", "/", "", map[string]string{"Host": "evil.example"}, 421, "misdirected_request"},
	}
	b := setup(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			expectError(t, b.request(t, tt.method, tt.path, tt.body, tt.header), tt.status, tt.code)
		})
	}
	t.Cleanup(func() {
		if n := b.countRuns(t); n != 0 {
			t.Errorf("%d runs were created by refused requests", n)
		}
	})
}

// TestOwnWritesAccepted: the server's own pages (same origin, same-origin fetch
// metadata), a configured origin, loopback names and requests without browser headers
// (the CLI, workers) still write.
func TestOwnWritesAccepted(t *testing.T) {
	t.Parallel()
	const yaml = "name: x\njobs: {a: {steps: [{run: 'true'}]}}\n"
	b := setupWith(t, func(c *api.Config) { c.AllowedOrigins = []string{"https://CI.example.com/"} })
	u, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	port := u.Port()
	tests := []struct {
		name   string
		header map[string]string
	}{
		{"cli", map[string]string{"Content-Type": "application/yaml"}},
		{"yaml with charset", map[string]string{"Content-Type": "application/x-yaml; charset=utf-8"}},
		{"same origin", map[string]string{"Content-Type": "application/yaml", "Origin": b.url, "Sec-Fetch-Site": "same-origin"}},
		{"configured origin", map[string]string{"Content-Type": "application/yaml", "Origin": "https://ci.example.com"}},
		{"localhost", map[string]string{"Content-Type": "text/yaml", "Host": "localhost:" + port, "Origin": "http://localhost:" + port}},
		{"sub.localhost", map[string]string{"Content-Type": "text/yaml", "Host": "gantry.localhost:" + port}},
		{"ipv6 loopback", map[string]string{"Content-Type": "text/yaml", "Host": "[::1]:" + port}},
		{"other loopback address", map[string]string{"Content-Type": "text/yaml", "Host": "127.0.0.2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if r := b.request(t, http.MethodPost, "/api/v1/runs", yaml, tt.header); r.status != http.StatusAccepted {
				t.Fatalf("status %d, want 202: %s", r.status, r.body)
			}
		})
	}
	// A write without a body needs no Content-Type (gantry cancel, the dashboard's
	// buttons).
	if r := b.request(t, http.MethodPost, "/api/v1/runs/0190b5a0-0000-7000-8000-000000000000/cancel", "", nil); r.status != http.StatusNotFound {
		t.Errorf("cancel without a body: %d, want 404 (no such run): %s", r.status, r.body)
	}
}

// TestHostCheckOnlyWithoutAuth: with authentication on, a request must carry a token a
// rebound page cannot have, so any Host is served (behind proxies and load balancers).
func TestHostCheckOnlyWithoutAuth(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	tok := issue(t, b.store, store.RoleRead)
	if r := b.request(t, http.MethodGet, "/api/v1/runs", "", map[string]string{"Host": "ci.example.com", "Authorization": "Bearer " + tok}); r.status != http.StatusOK {
		t.Fatalf("status %d, want 200: %s", r.status, r.body)
	}
	// Configured names are answered with auth off too.
	b2 := setupWith(t, func(c *api.Config) { c.AllowedHosts = []string{"Gantry.Internal"} })
	if r := b2.request(t, http.MethodGet, "/api/v1/runs", "", map[string]string{"Host": "gantry.internal:8080"}); r.status != http.StatusOK {
		t.Fatalf("allowed host: status %d, want 200: %s", r.status, r.body)
	}
}

// TestBearerSchemeCaseInsensitive: "bearer", "BEARER" and "Bearer" are one scheme.
func TestBearerSchemeCaseInsensitive(t *testing.T) {
	t.Parallel()
	b := setupWith(t, func(c *api.Config) { c.Auth = true })
	tok := issue(t, b.store, store.RoleRead)
	for _, scheme := range []string{"Bearer", "bearer", "BEARER", "bEaReR"} {
		if r := b.request(t, http.MethodGet, "/api/v1/runs", "", map[string]string{"Authorization": scheme + " " + tok}); r.status != http.StatusOK {
			t.Errorf("%s: status %d, want 200: %s", scheme, r.status, r.body)
		}
	}
	for _, h := range []string{"Basic " + tok, "Bearer", "Bearer ", tok, "Bearertoken"} {
		expectError(t, b.request(t, http.MethodGet, "/api/v1/runs", "", map[string]string{"Authorization": h}), http.StatusUnauthorized, "unauthorized")
	}
}

// TestProjectNameValidation: a project name with a NUL or another control character, or
// longer than api.MaxProjectName, is refused with a message saying why, on submit and as
// a filter; nothing is created.
func TestProjectNameValidation(t *testing.T) {
	t.Parallel()
	b := setup(t)
	submit := func(project string) response {
		return b.do(t, http.MethodPost, "/api/v1/runs", "application/json",
			mustJSON(t, map[string]any{"pipeline": simplePipeline, "project": project}), nil)
	}
	for _, name := range []string{"web\x00app", "web\r\napp", "tab\there", strings.Repeat("p", api.MaxProjectName+1)} {
		e := expectError(t, submit(name), http.StatusBadRequest, "bad_request")
		if !strings.Contains(e.Error.Message, "project") {
			t.Errorf("submit %q: message %q does not name the project", name, e.Error.Message)
		}
		e = expectError(t, b.get(t, "/api/v1/runs?project="+url.QueryEscape(name)), http.StatusBadRequest, "bad_request")
		if !strings.Contains(e.Error.Message, "project") {
			t.Errorf("filter %q: message %q does not name the project", name, e.Error.Message)
		}
	}
	if n := b.countRuns(t); n != 0 {
		t.Fatalf("%d runs created with bad project names", n)
	}
	longest := strings.Repeat("p", api.MaxProjectName)
	if r := submit(longest); r.status != http.StatusAccepted {
		t.Fatalf("a %d-byte name: status %d: %s", api.MaxProjectName, r.status, r.body)
	}
	if r := b.get(t, "/api/v1/runs?project="+longest); r.status != http.StatusOK {
		t.Fatalf("filter by the longest name: %d %s", r.status, r.body)
	}
}

// TestArtifactNameControlCharacters: a CR, LF or other control character in an artifact
// name is refused at registration, with the file's path in the details.
func TestArtifactNameControlCharacters(t *testing.T) {
	t.Parallel()
	b, _ := withBlobs(t)
	b.post(t, "/api/v1/runs", diamond)
	got := b.claim(t, `{"worker_id": "w", "max": 1, "wait": "0s"}`)
	if len(got.Jobs) != 1 {
		t.Fatalf("claimed %d jobs", len(got.Jobs))
	}
	j := got.Jobs[0]
	for _, name := range []string{"report\r\nSet-Cookie: x=1", "a\nb", "bell\a", "esc\x1b[31m", "del\x7f"} {
		r := b.post(t, "/api/v1/agent/jobs/"+j.ID+"/artifacts", mustJSON(t, map[string]any{
			"token": j.Lease.Token, "artifacts": []map[string]any{{"name": name, "sha256": digest("x"), "size": 1}}}))
		e := expectError(t, r, http.StatusBadRequest, "bad_request")
		if len(e.Error.Details) != 1 || e.Error.Details[0].Path != "artifacts[0].name" {
			t.Errorf("%q: details %+v, want one for artifacts[0].name", name, e.Error.Details)
		}
	}
	arts, err := b.store.ListArtifacts(t.Context(), mustUUID(t, j.ID))
	if err != nil || len(arts) != 0 {
		t.Fatalf("artifacts after refused registrations: %v, %v", arts, err)
	}
}
