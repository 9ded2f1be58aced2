package cli

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerAllowedOrigins: gantry server --allowed-origins lets pages of those origins
// write and answers their host names with auth off (a dashboard behind a proxy that
// keeps its own Host); other origins and names stay refused; a malformed origin is a
// usage error.
func TestServerAllowedOrigins(t *testing.T) {
	t.Parallel()
	base, stop := startServer(t, "--db", "sqlite://"+filepath.Join(t.TempDir(), "gantry.db"),
		"--allowed-origins", "https://ci.example.com, http://dash.internal:3000/")
	t.Cleanup(func() { stop() })
	const yaml = "name: o\njobs: {a: {steps: [{run: 'true'}]}}\n"
	tests := []struct {
		origin, host string
		want         int
	}{
		{"https://ci.example.com", "", http.StatusAccepted},
		{"http://dash.internal:3000", "", http.StatusAccepted},
		{"https://ci.example.com", "ci.example.com", http.StatusAccepted},
		{"https://evil.example", "", http.StatusForbidden},
		{"http://dash.internal:3001", "", http.StatusForbidden},
		{"", "evil.example", http.StatusMisdirectedRequest},
	}
	for _, tt := range tests {
		req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/runs", strings.NewReader(yaml))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/yaml")
		if tt.origin != "" {
			req.Header.Set("Origin", tt.origin)
		}
		if tt.host != "" {
			req.Host = tt.host
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != tt.want {
			t.Errorf("Origin %q Host %q: %d, want %d", tt.origin, tt.host, res.StatusCode, tt.want)
		}
	}

	for _, bad := range []string{"ci.example.com", "https://ci.example.com/app", "ftp://x", "https://"} {
		res := runCLI(t, invocation{args: []string{"server", "--allowed-origins", bad}})
		if res.code != exitUsage || !strings.Contains(res.stderr, "--allowed-origins") {
			t.Errorf("--allowed-origins %q: exit %d\n%s", bad, res.code, res.stderr)
		}
	}
}
