package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/web"
)

// TestMountedByTheAPI: mounted as api.Config.UI, the dashboard answers the app's routes,
// also with auth on (its pages ask for the token themselves), while the API keeps its
// own paths, JSON 404s included.
func TestMountedByTheAPI(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "gantry.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := api.New(api.Config{Store: st, UI: web.Handler(), Auth: true})
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.Close(); srv.Close(); _ = st.Close() })

	tests := []struct {
		path  string
		want  int
		ctype string
	}{
		{"/", http.StatusOK, "text/html"},
		{"/runs/0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b", http.StatusOK, "text/html"},
		{"/jobs/0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b", http.StatusOK, "text/html"},
		{"/workers", http.StatusOK, "text/html"},
		{"/healthz", http.StatusOK, "application/json"},
		{"/api/v1/runs", http.StatusUnauthorized, "application/json"},
		{"/api/v1/nope", http.StatusNotFound, "application/json"},
	}
	for _, tt := range tests {
		res, err := http.Get(ts.URL + tt.path)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != tt.want || !strings.HasPrefix(res.Header.Get("Content-Type"), tt.ctype) {
			t.Errorf("%s: %d %s, want %d %s", tt.path, res.StatusCode, res.Header.Get("Content-Type"), tt.want, tt.ctype)
		}
		if tt.ctype == "application/json" && !json.Valid(body) {
			t.Errorf("%s: not JSON: %s", tt.path, body)
		}
	}
}
