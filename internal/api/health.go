package api

import (
	"context"
	"net/http"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

// readyTimeout bounds the store call of /readyz, so a hung database answers 503 rather
// than hanging the probe.
const readyTimeout = 2 * time.Second

type statusJSON struct {
	Status string `json:"status"`
}

// healthz answers 200 while the process serves HTTP at all.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, statusJSON{Status: "ok"})
}

// readyz answers 200 when the store answers a cheap read, else 503.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if _, err := s.store.ListRuns(ctx, store.ListRunsParams{Limit: 1}); err != nil {
		s.log.WarnContext(r.Context(), "not ready: store unavailable", "err", err)
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the store is unavailable", nil)
		return
	}
	writeJSON(w, http.StatusOK, statusJSON{Status: "ok"})
}
