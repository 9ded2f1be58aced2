package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

// readyTimeout bounds the store call of /readyz, so a hung database answers 503 rather
// than hanging the probe.
const readyTimeout = 2 * time.Second

const (
	// codeStorageFull answers a write that failed because the coordinator's storage
	// (database, log files, blobs) is full.
	codeStorageFull = "storage_full"
	// fullHold is how long /readyz reports not ready after a write failed for lack of
	// space when there is no directory to probe (PostgreSQL): a later write that works
	// says so sooner.
	fullHold = 30 * time.Second
	// probeBytes is what a readiness probe writes to each data directory while writes
	// fail for lack of space: room for a few batches of a database or log write.
	probeBytes = 64 << 10
	// probeEvery bounds how often probes write, however often /readyz is asked.
	probeEvery = time.Second
)

type statusJSON struct {
	Status string `json:"status"`
}

// healthz answers 200 while the process serves HTTP at all.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, statusJSON{Status: "ok"})
}

// readyz answers 200 when the store answers a cheap read and writes do not fail for lack
// of space, else 503.
func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if _, err := s.store.ListRuns(ctx, store.ListRunsParams{Limit: 1}); err != nil {
		s.log.WarnContext(r.Context(), "not ready: store unavailable", "err", err)
		writeError(w, http.StatusServiceUnavailable, codeUnavailable, "the store is unavailable", nil)
		return
	}
	if msg := s.storage.check(s.clock.Now(), s.dataDirs); msg != "" {
		writeError(w, http.StatusServiceUnavailable, codeStorageFull, msg, nil)
		return
	}
	writeJSON(w, http.StatusOK, statusJSON{Status: "ok"})
}

// isStorageFull reports errors that mean a write found no space: the store's ErrFull,
// and a file write's ENOSPC or EDQUOT (log files, blobs).
func isStorageFull(err error) bool {
	return errors.Is(err, store.ErrFull) || errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// storageFullError answers a write that failed for lack of space with 503 storage_full,
// and makes /readyz report not ready until writes of that kind work again. Nothing of
// the write was kept, so the client retries it as it is.
func (s *Server) storageFullError(w http.ResponseWriter, r *http.Request, kind storageKind, action string, err error) {
	s.storage.failed(kind, s.clock.Now(), err)
	s.log.ErrorContext(r.Context(), "write failed: storage full", "action", action, "err", err)
	w.Header().Set("Retry-After", "10")
	writeError(w, http.StatusServiceUnavailable, codeStorageFull,
		action+": the coordinator's storage is full, so nothing was written; retry once space is freed", nil)
}

// storageKind is where a write goes: the store and log files, or the blob store, which
// may be on a disk of its own. A write that works says so of its own kind only.
type storageKind int

const (
	storageData storageKind = iota
	storageBlobs
	storageKinds
)

// storageState remembers whether writes fail for lack of space. A write that fails so
// sets it; a write of the same kind that works, or a probe write to the data
// directories, clears it.
type storageState struct {
	fullAt [storageKinds]atomic.Int64 // Unix nanoseconds of the last failure; 0 while writes work

	mu        sync.Mutex // serialises probes
	lastErr   string
	lastProbe time.Time
	probeErr  error
}

func (st *storageState) failed(kind storageKind, now time.Time, err error) {
	st.mu.Lock()
	st.lastErr = err.Error()
	st.mu.Unlock()
	st.fullAt[kind].Store(now.UnixNano())
}

// wrote records a write of kind that worked. It is on every write's path, so it only
// reads unless the state changes.
func (st *storageState) wrote(kind storageKind) {
	if st.fullAt[kind].Load() != 0 {
		st.fullAt[kind].Store(0)
	}
}

// clear forgets the failures seen up to at, keeping any newer one.
func (st *storageState) clear(at [storageKinds]int64) {
	for k := range at {
		st.fullAt[k].CompareAndSwap(at[k], 0)
	}
}

// check returns why the server is not ready for writes, or "" when it is. While writes
// fail it probes the data directories (at most every probeEvery); when they take a
// write again, it is ready. Without directories, it waits fullHold after the last
// failure.
func (st *storageState) check(now time.Time, dirs []string) string {
	var at [storageKinds]int64
	var last int64
	for k := range at {
		at[k] = st.fullAt[k].Load()
		last = max(last, at[k])
	}
	if last == 0 {
		return ""
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(dirs) == 0 {
		if now.Sub(time.Unix(0, last)) >= fullHold {
			st.clear(at)
			return ""
		}
		return "writes are failing: the storage is full (" + st.lastErr + ")"
	}
	if st.lastProbe.IsZero() || now.Sub(st.lastProbe) >= probeEvery || now.Before(st.lastProbe) {
		st.lastProbe = now
		st.probeErr = probeDirs(dirs)
	}
	if st.probeErr == nil {
		st.clear(at)
		return ""
	}
	return fmt.Sprintf("writes are failing: the storage is full (%s); a probe write failed: %v", st.lastErr, st.probeErr)
}

// probeDirs writes, syncs and removes probeBytes in each directory.
func probeDirs(dirs []string) error {
	buf := make([]byte, probeBytes)
	for _, dir := range dirs {
		f, err := os.CreateTemp(dir, ".gantry-probe-*")
		if err != nil {
			return fmt.Errorf("probe %s: %w", dir, err)
		}
		_, err = f.Write(buf)
		if err == nil {
			err = f.Sync()
		}
		err = errors.Join(err, f.Close(), os.Remove(f.Name()))
		if err != nil {
			return fmt.Errorf("probe %s: %w", dir, err)
		}
	}
	return nil
}
