package forge_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/gantry-ci/gantry/internal/forge"
)

// The commits the testdata payloads name.
const (
	shaBefore   = "9c4e7f0a1b2c3d4e5f60718293a4b5c6d7e8f901"
	shaAfter    = "3f1d2e4c5b6a79808f7e6d5c4b3a291807f6e5d4"
	shaFirst    = "1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d"
	shaTag      = "7e8f9a0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f"
	shaHead     = "5d4c3b2a1f0e9d8c7b6a5f4e3d2c1b0a9f8e7d6c"
	shaBase     = "0f9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e"
	shaPRBefore = "2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e"
)

// pushPaths is the union of what the two commits of every push.json touch.
var pushPaths = []string{"README.md", "cmd/health/main.go", "docs/health.md", "go.mod", "scripts/old.sh"}

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read testdata: %v", err)
	}
	return b
}

func header(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i+1 < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func hmacHex(body, secret []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return hex.EncodeToString(m.Sum(nil))
}

// seedFuzz adds every testdata payload of a provider, with each event header value, as
// fuzz seeds.
func seedFuzz(f *testing.F, dir string, events ...string) {
	files, err := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no testdata in %s: %v", dir, err)
	}
	for _, file := range files {
		b, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		for _, ev := range events {
			f.Add(ev, b)
		}
	}
}

func TestLookup(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]string{
		"github": "github", "GitHub": "github", "gitlab": "gitlab", "gitea": "gitea",
		"forgejo": "gitea", " Forgejo ": "gitea", "generic": "generic",
	} {
		p, err := forge.Lookup(name, forge.Config{})
		if err != nil || p.Name() != want {
			t.Errorf("Lookup(%q) = %v, %v; want %s", name, p, err, want)
		}
	}
	for _, name := range []string{"", "bitbucket", "git hub"} {
		if _, err := forge.Lookup(name, forge.Config{}); !errors.Is(err, forge.ErrUnknownProvider) {
			t.Errorf("Lookup(%q) = %v, want ErrUnknownProvider", name, err)
		}
	}
	if got := forge.Names(); len(got) != 5 || got[0] != "forgejo" || got[4] != "gitlab" {
		t.Errorf("Names() = %v", got)
	}
}

// fuzzRequest builds a webhook request carrying one event header.
func fuzzRequest(t *testing.T, name, value string) *http.Request {
	r, err := http.NewRequest(http.MethodPost, "http://gantry.test/api/v1/hooks", nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Header.Set(name, value)
	return r
}

// checkParse is what every fuzzed Parse must hold to: no panic, and either an event that
// makes sense or an error of a known kind.
func checkParse(t *testing.T, p forge.Provider, r *http.Request, body []byte) {
	ev, err := p.Parse(r, body)
	if err != nil {
		if ev != nil {
			t.Fatalf("Parse returned both %+v and %v", ev, err)
		}
		if !errors.Is(err, forge.ErrIgnored) && !errors.Is(err, forge.ErrMalformed) {
			t.Fatalf("Parse error %v is neither ignored nor malformed", err)
		}
		return
	}
	if ev.Provider != p.Name() {
		t.Fatalf("event from %q", ev.Provider)
	}
	switch ev.Kind {
	case forge.KindPing:
		return
	case forge.KindPush, forge.KindTag, forge.KindPullRequest:
	default:
		t.Fatalf("kind %q", ev.Kind)
	}
	if ev.Deleted != (ev.SHA == "") {
		t.Fatalf("deleted %v with sha %q", ev.Deleted, ev.SHA)
	}
	if ev.Ref == "" || (ev.Branch == "") == (ev.Tag == "") && ev.Kind != forge.KindPullRequest {
		t.Fatalf("ref %q branch %q tag %q", ev.Ref, ev.Branch, ev.Tag)
	}
}
