package store

import "github.com/gantry-ci/gantry/internal/store/storeerr"

// Domain errors returned by every driver (package storeerr holds them). Callers test them
// with errors.Is.
var (
	ErrNotFound    = storeerr.ErrNotFound
	ErrLeaseLost   = storeerr.ErrLeaseLost
	ErrConflict    = storeerr.ErrConflict
	ErrInvalid     = storeerr.ErrInvalid
	ErrForbidden   = storeerr.ErrForbidden
	ErrFull        = storeerr.ErrFull
	ErrUnavailable = storeerr.ErrUnavailable
)
