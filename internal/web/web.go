package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

//go:embed static
var files embed.FS

// assetsPrefix is where the app's scripts and styles are served, followed by the
// version (a hash of every embedded file) and the file's name. A new build changes the
// version, so assets can be cached for good while index.html is always revalidated.
const assetsPrefix = "/assets/"

// versionPlaceholder is replaced in index.html with the assets' path.
const versionPlaceholder = "%ASSETS%"

// clientRoutes are the paths the app draws itself; each gets index.html so that deep
// links and reloads work.
var clientRoutes = lazyre.New(`^/(|runs|runs/[^/]+|jobs/[^/]+|workers|stats|signin|dispatch|projects|projects/[^/]+|projects/[^/]+/tests|projects/[^/]+/runs/[0-9]+|approvals)$`)

type asset struct {
	body  []byte
	ctype string
	etag  string
}

type handler struct {
	index   []byte
	version string
	assets  map[string]asset // by name under static/, e.g. "app.js"
}

// Handler returns the dashboard's handler: index.html for the app's own routes, its
// scripts and styles under /assets/<version>/, and 404 for anything else. It is meant to
// be mounted as api.Config.UI, which sends it the GET requests the API does not own.
//
// The files are read and hashed when the first request comes, not when the server
// starts: most `gantry run`s never serve the dashboard, and hashing its files costs
// each of them a few milliseconds.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		loaded().ServeHTTP(w, r)
	})
}

// loaded is the dashboard's files, read once.
var loaded = sync.OnceValue(func() *handler {
	h, err := load(files)
	if err != nil {
		panic("web: embedded dashboard is broken: " + err.Error()) // a build mistake, caught by the tests
	}
	return h
})

func load(fsys fs.FS) (*handler, error) {
	h := &handler{assets: map[string]asset{}}
	var names []string
	err := fs.WalkDir(fsys, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		names = append(names, p)
		return nil
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	sum := sha256.New()
	bodies := map[string][]byte{}
	for _, p := range names {
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil, err
		}
		sum.Write([]byte(p))
		sum.Write(b)
		bodies[strings.TrimPrefix(p, "static/")] = b
	}
	h.version = hex.EncodeToString(sum.Sum(nil))[:12]
	for name, b := range bodies {
		if name == "index.html" {
			h.index = bytes.ReplaceAll(b, []byte(versionPlaceholder), []byte(assetsPrefix+h.version))
			continue
		}
		ctype := mime.TypeByExtension(path.Ext(name))
		if path.Ext(name) == ".js" {
			ctype = "text/javascript; charset=utf-8" // mime's table depends on the machine
		}
		if ctype == "" {
			ctype = "application/octet-stream"
		}
		d := sha256.Sum256(b)
		h.assets[name] = asset{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(d[:8]) + `"`}
	}
	if h.index == nil {
		return nil, fs.ErrNotExist
	}
	return h, nil
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hdr := w.Header()
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hdr.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if rest, ok := strings.CutPrefix(r.URL.Path, assetsPrefix); ok {
		h.serveAsset(w, r, rest)
		return
	}
	status := http.StatusOK
	if !clientRoutes.Regexp().MatchString(r.URL.Path) {
		// The app tells the user the page does not exist; the status tells machines.
		status = http.StatusNotFound
	}
	hdr.Set("Content-Type", "text/html; charset=utf-8")
	hdr.Set("Cache-Control", "no-cache")
	hdr.Set("Content-Security-Policy", csp(r))
	hdr.Set("X-Frame-Options", "DENY")
	w.WriteHeader(status)
	if r.Method != http.MethodHead {
		_, _ = w.Write(h.index)
	}
}

func (h *handler) serveAsset(w http.ResponseWriter, r *http.Request, rest string) {
	version, name, ok := strings.Cut(rest, "/")
	a, found := h.assets[name]
	if !ok || !found || version != h.version {
		// An asset of another version would be cached for good under the wrong name.
		hdr := w.Header()
		hdr.Set("Cache-Control", "no-store")
		http.Error(w, "no such asset", http.StatusNotFound)
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", a.ctype)
	hdr.Set("Cache-Control", "public, max-age=31536000, immutable")
	hdr.Set("ETag", a.etag)
	if r.Header.Get("If-None-Match") == a.etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method != http.MethodHead {
		_, _ = w.Write(a.body)
	}
}

// csp allows scripts, styles and fetches from this origin only, plus WebSockets to this
// host (older browsers do not count ws: and wss: as 'self'). Nothing inline: the app
// builds its DOM with textContent, so log text can never become markup.
func csp(r *http.Request) string {
	connect := "'self'"
	if host := r.Host; host != "" && !strings.ContainsAny(host, " ;,'\"") {
		connect += " ws://" + host + " wss://" + host
	}
	return "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
		"connect-src " + connect + "; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
}
