// Package storeerr holds the store's domain errors, so that a package that only reports
// them (the worker's side of the logs, say) need not link the store. store.ErrNotFound
// and the rest are these same values.
package storeerr

import "errors"

// Domain errors returned by every driver. Callers test them with errors.Is.
var (
	// ErrNotFound: the record does not exist.
	ErrNotFound = errors.New("not found")
	// ErrLeaseLost: the lease token is not the job's current one (the lease expired and
	// the job was reaped, re-claimed, revoked or finished). Nothing was changed.
	ErrLeaseLost = errors.New("lease lost")
	// ErrConflict: the record is not in a state that allows the change, such as completing
	// a job that already finished or cancelling a finished run. Nothing was changed.
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the request itself is malformed (an unknown status, a missing plan).
	ErrInvalid = errors.New("invalid request")
	// ErrForbidden: the caller may not make this change, such as approving a job of an
	// environment that does not name them. Nothing was changed.
	ErrForbidden = errors.New("forbidden")
	// ErrFull: a write failed because the database's storage is full. Nothing was
	// changed; the same write succeeds once space is freed.
	ErrFull = errors.New("storage full")
	// ErrUnavailable: the database could not be reached, or refused connections for now
	// (down, cut off, starting up or recovering). The same call may succeed later.
	ErrUnavailable = errors.New("database unavailable")
)
