package api

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// Error codes: the stable, machine-readable half of every error answer.
const (
	codeBadRequest       = "bad_request"
	codeNotFound         = "not_found"
	codeConflict         = "conflict"
	codeInvalidPipeline  = "invalid_pipeline"
	codePayloadTooLarge  = "payload_too_large"
	codeMethodNotAllowed = "method_not_allowed"
	codeUnsupportedMedia = "unsupported_media_type"
	codeUnavailable      = "unavailable"
	codeInternal         = "internal"
	codeUnauthorized     = "unauthorized"
	codeForbidden        = "forbidden"
	codeTooManyRequests  = "too_many_requests"
)

// errorBody is the one error format: {"error": {"code", "message", "details": [...]}}.
type errorBody struct {
	Error errorJSON `json:"error"`
}

type errorJSON struct {
	Code    string        `json:"code"`
	Message string        `json:"message"`
	Details []errorDetail `json:"details"`
}

// errorDetail is one mistake in a submitted pipeline.
type errorDetail struct {
	// File is set when the mistake is in a reusable workflow the pipeline calls: its
	// path (.github/workflows/build.yml) or owner/repo/path@ref.
	File    string `json:"file,omitempty"`
	Path    string `json:"path"`
	Line    int    `json:"line"`
	Column  int    `json:"column"`
	Message string `json:"message"`
	Code    string `json:"code"`
}

func writeError(w http.ResponseWriter, status int, code, msg string, details []errorDetail) {
	if details == nil {
		details = []errorDetail{}
	}
	writeJSON(w, status, errorBody{Error: errorJSON{Code: code, Message: msg, Details: details}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		// Every value written here is built from plain structs; failing to marshal one is
		// a bug, answered like any other.
		status = http.StatusInternalServerError
		b = []byte(`{"error":{"code":"internal","message":"encode response","details":[]}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// storeError answers an error from the store: domain errors map to 4xx, anything else is
// logged and answered 500 without its text, which may name internals.
func (s *Server) storeError(w http.ResponseWriter, r *http.Request, action string, err error) {
	switch {
	case errors.Is(err, store.ErrNotFound):
		writeError(w, http.StatusNotFound, codeNotFound, err.Error(), nil)
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrLeaseLost):
		writeError(w, http.StatusConflict, codeConflict, err.Error(), nil)
	case errors.Is(err, store.ErrInvalid):
		writeError(w, http.StatusBadRequest, codeBadRequest, err.Error(), nil)
	case errors.Is(err, store.ErrForbidden):
		writeError(w, http.StatusForbidden, codeForbidden, err.Error(), nil)
	case isStorageFull(err):
		s.storageFullError(w, r, storageData, action, err)
	case storeUnreachable(r, err):
		// The database is down, cut off or too slow: nothing here is a bug, and the same
		// request may work in a moment (writes are idempotent or fenced: a run by its
		// Idempotency-Key, a worker's by its lease).
		s.log.WarnContext(r.Context(), "store unreachable", "action", action, "err", err)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, action+": the store cannot be reached; try again", nil)
	case r.Context().Err() != nil && errors.Is(err, context.Canceled):
		// The caller went away (a worker stopping, a closed long poll): nobody reads
		// the answer and nothing failed.
		s.log.DebugContext(r.Context(), "store call abandoned by its caller", "action", action, "err", err)
		writeError(w, http.StatusServiceUnavailable, codeInternal, action+": the request was cancelled", nil)
	default:
		s.log.ErrorContext(r.Context(), "store call failed", "action", action, "err", err)
		writeError(w, http.StatusInternalServerError, codeInternal, action+": internal error", nil)
	}
}

// pipelineDetails lists every mistake of a failed compile.
func pipelineDetails(err error) []errorDetail {
	var es pipeline.Errors
	if errors.As(err, &es) {
		out := make([]errorDetail, len(es))
		for i, e := range es {
			out[i] = errorDetail{File: e.File, Path: e.Path, Line: e.Line, Column: e.Column, Message: e.Message, Code: string(e.Kind)}
		}
		return out
	}
	var e *pipeline.Error
	if errors.As(err, &e) {
		return []errorDetail{{File: e.File, Path: e.Path, Line: e.Line, Column: e.Column, Message: e.Message, Code: string(e.Kind)}}
	}
	return []errorDetail{{Message: err.Error(), Code: string(pipeline.ErrInvalid)}}
}

// storeUnreachable reports a store error that says the database could not be reached or
// did not answer in time: the store's ErrUnavailable (a connection the driver could not
// make: no route, no such host, a server starting or recovering), and as every driver's
// connections fail, a network error (refused, reset, timed out), a connection that ended
// mid-answer, one the driver found broken, or the store's own deadline passing while the
// request's had not.
func storeUnreachable(r *http.Request, err error) bool {
	var ne net.Error
	return errors.Is(err, store.ErrUnavailable) || errors.As(err, &ne) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, driver.ErrBadConn) ||
		r.Context().Err() == nil && errors.Is(err, context.DeadlineExceeded)
}
