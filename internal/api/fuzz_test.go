package api_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
)

// FuzzCreateRun posts arbitrary bodies as YAML and as JSON: whatever the body, the answer
// is one of the documented statuses with a JSON body, and the server never panics.
func FuzzCreateRun(f *testing.F) {
	seeds := []string{
		simplePipeline,
		badPipeline,
		`{"name":"j","jobs":{"a":{"steps":[{"run":"true"}]}}}`,
		`{"pipeline":"name: e\njobs:\n  a:\n    steps: [ { run: x } ]\n","project":"p","ref":"refs/heads/main","priority":"low"}`,
		`{"pipeline":"x","unknown":1}`,
		`{"pipeline":"x"} trailing`,
		`{"pipeline":1}`,
		`{"pipeline":"a: *b"}`,
		"a: &a [*a]",
		"",
		"null",
		"[]",
		"\x00\xff",
		strings.Repeat("[", 200),
	}
	for _, s := range seeds {
		f.Add(s, true)
		f.Add(s, false)
	}
	st := openStore(f, nil)
	h := api.New(api.Config{Store: st, MaxBodyBytes: 4 << 10}).Handler()
	f.Fuzz(func(t *testing.T, body string, asJSON bool) {
		ct := "application/yaml"
		if asJSON {
			ct = "application/json"
		}
		req := httptest.NewRequest(http.MethodPost, "/api/v1/runs", strings.NewReader(body))
		req.Header.Set("Content-Type", ct)
		req.Host = "localhost" // httptest's example.com is refused with auth off
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		switch rec.Code {
		case http.StatusAccepted, http.StatusOK, http.StatusBadRequest,
			http.StatusRequestEntityTooLarge, http.StatusUnprocessableEntity:
		default:
			t.Fatalf("status %d for %q: %s", rec.Code, body, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("invalid JSON answer for %q: %q", body, rec.Body)
		}
	})
}
