package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// dashboardAssets are the scripts and styles index.html loads.
var dashboardAssets = regexp.MustCompile(`(?:src|href)="(/assets/[^"]+)"`)

// fetch GETs url and returns the answer's status, Content-Type and body.
func fetch(t *testing.T, url string) (int, string, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
}

// waitListening waits until p says where it listens and sets p.base.
func waitListening(t *testing.T, p *serverProcess) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		if m := listening.FindStringSubmatch(p.stderr.String()); m != nil {
			p.base = "http://" + m[1]
			return
		}
		select {
		case <-p.exited:
			t.Fatalf("server process exited before listening:\n%s", p.stderr.String())
		case <-deadline:
			t.Fatalf("server process did not report its address:\n%s", p.stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestServerServesDashboard: a `gantry server` process serves the dashboard on its API
// address, page and assets, with auth off and on (where the API wants a token and the
// page, which asks for one, does not); --dashboard=false and GANTRY_DASHBOARD=false turn
// it off with a 404 that says so, and leave the API as it was.
func TestServerServesDashboard(t *testing.T) {
	t.Parallel()
	for _, auth := range []string{"off", "on"} {
		t.Run("auth "+auth, func(t *testing.T) {
			t.Parallel()
			db := "sqlite://" + filepath.Join(t.TempDir(), "gantry.db")
			p := startServerProcess(t, db, "--auth", auth)
			for _, path := range []string{"/", "/runs/0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b", "/signin"} {
				code, ctype, body := fetch(t, p.base+path)
				if code != http.StatusOK || !strings.HasPrefix(ctype, "text/html") || !strings.Contains(body, "<title>Gantry</title>") {
					t.Fatalf("GET %s = %d %s:\n%.300s", path, code, ctype, body)
				}
			}
			_, _, index := fetch(t, p.base+"/")
			assets := dashboardAssets.FindAllStringSubmatch(index, -1)
			if len(assets) < 2 {
				t.Fatalf("index.html names %d assets, want its script and its style:\n%s", len(assets), index)
			}
			want := map[string]string{".js": "text/javascript", ".css": "text/css"}
			for _, m := range assets {
				code, ctype, body := fetch(t, p.base+m[1])
				if code != http.StatusOK || !strings.HasPrefix(ctype, want[filepath.Ext(m[1])]) || body == "" {
					t.Errorf("GET %s = %d %q, %d bytes", m[1], code, ctype, len(body))
				}
			}
			// The app's modules import each other: one of them is there too.
			if code, _, _ := fetch(t, p.base+strings.Replace(assets[0][1], filepath.Base(assets[0][1]), "signin.js", 1)); code != http.StatusOK {
				t.Errorf("the sign-in module: %d", code)
			}
			// The API is the API: JSON, and with auth on, a token first.
			wantRuns := http.StatusOK
			if auth == "on" {
				wantRuns = http.StatusUnauthorized
			}
			if code, ctype, body := fetch(t, p.base+"/api/v1/runs"); code != wantRuns || ctype != "application/json" {
				t.Errorf("GET /api/v1/runs = %d %s: %s", code, ctype, body)
			}
			if code, ctype, _ := fetch(t, p.base+"/api/v1/nothing-here"); code != http.StatusNotFound || ctype != "application/json" {
				t.Errorf("GET an unknown API route = %d %s", code, ctype)
			}
		})
	}
	off := func(t *testing.T, p *serverProcess) {
		t.Helper()
		for _, path := range []string{"/", "/runs/x", "/assets/x/app.js"} {
			code, ctype, body := fetch(t, p.base+path)
			var e struct {
				Error struct{ Code, Message string }
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || code != http.StatusNotFound || ctype != "application/json" ||
				e.Error.Code != "not_found" || !strings.Contains(e.Error.Message, "dashboard is off") || !strings.Contains(e.Error.Message, "--dashboard=false") {
				t.Errorf("GET %s with the dashboard off = %d %s %s", path, code, ctype, body)
			}
		}
		if code, _, body := fetch(t, p.base+"/api/v1/runs"); code != http.StatusOK {
			t.Errorf("GET /api/v1/runs with the dashboard off = %d %s", code, body)
		}
	}
	t.Run("--dashboard=false", func(t *testing.T) {
		t.Parallel()
		off(t, startServerProcess(t, "sqlite://"+filepath.Join(t.TempDir(), "gantry.db"), "--dashboard=false"))
	})
	t.Run("GANTRY_DASHBOARD=false", func(t *testing.T) {
		t.Parallel()
		p := startChildEnv(t, []string{"GANTRY_DASHBOARD=false"},
			[]string{"server", "--addr", "127.0.0.1:0", "--db", "sqlite://" + filepath.Join(t.TempDir(), "gantry.db")})
		waitListening(t, p)
		off(t, p)
	})
}
