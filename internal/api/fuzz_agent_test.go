package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
)

// FuzzAgent posts arbitrary bodies to every worker endpoint. Whatever arrives, the answer
// is a JSON document with a status a worker knows how to read, and the server survives.
func FuzzAgent(f *testing.F) {
	for _, s := range []string{
		`{"name": "w", "labels": ["linux"], "milli_cpu": 1000, "max_jobs": 2}`,
		`{"worker_id": "w", "wait": "0s", "max": 3, "labels": ["a"]}`,
		`{"worker_id": "w", "wait": "-1s"}`,
		`{"token": "t", "status": "running"}`,
		`{"token": "t", "status": "failed", "failure_kind": "timeout", "exit_code": 137}`,
		`{"token": 1}`, `[]`, `null`, ``, `{"token": "t"} {}`, "\xff",
	} {
		for route := range 7 {
			f.Add(uint8(route), s)
		}
	}
	st := openStore(f, nil)
	h := api.New(api.Config{Store: st, MaxBodyBytes: 4 << 10}).Handler()
	const job = "/api/v1/agent/jobs/01970000-0000-7000-8000-000000000000"
	routes := []string{"/api/v1/agent/register", "/api/v1/agent/claim", job + "/start", job + "/heartbeat", job + "/steps/0", job + "/complete", "/api/v1/agent/control"}
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		path := routes[int(route)%len(routes)]
		// A claim with nothing to claim waits; the client giving up ends it, as it would
		// for a worker that went away.
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Host = "localhost" // httptest's example.com is refused with auth off
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Body.Len() == 0 && ctx.Err() != nil {
			return
		}
		switch rec.Code {
		case http.StatusOK, http.StatusBadRequest, http.StatusNotFound, http.StatusConflict, http.StatusRequestEntityTooLarge,
			http.StatusTooManyRequests:
		default:
			t.Fatalf("POST %s %q: status %d: %s", path, body, rec.Code, rec.Body)
		}
		if !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("POST %s %q: invalid JSON answer %q", path, body, rec.Body)
		}
	})
}
