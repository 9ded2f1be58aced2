package api_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store"
)

// fullStore is a store whose run creation fails for lack of space while full is set, as
// a driver does when its disk is full.
type fullStore struct {
	store.Store
	full atomic.Bool
}

func (s *fullStore) CreateRun(ctx context.Context, p store.CreateRunParams) (*store.Run, []*store.Job, bool, error) {
	if s.full.Load() {
		return nil, nil, false, fmt.Errorf("create run: commit: database or disk is full: %w", store.ErrFull)
	}
	return s.Store.CreateRun(ctx, p)
}

// TestStorageFullReadiness: a write that fails for lack of space answers 503
// storage_full with Retry-After, and /readyz reports not ready until a write works, or,
// with data directories, until a probe write to them does, or, without, for a while.
func TestStorageFullReadiness(t *testing.T) {
	t.Parallel()
	const yaml = "name: x\njobs: {a: {steps: [{run: 'true'}]}}\n"
	submit := func(b *bundle) response {
		return b.do(t, http.MethodPost, "/api/v1/runs", "application/yaml", yaml, nil)
	}

	t.Run("a write that works clears it", func(t *testing.T) {
		t.Parallel()
		var fs *fullStore
		b := setupWith(t, func(c *api.Config) { fs = &fullStore{Store: c.Store}; c.Store = fs })
		fs.full.Store(true)
		r := submit(b)
		expectError(t, r, http.StatusServiceUnavailable, "storage_full")
		if r.header.Get("Retry-After") == "" {
			t.Error("no Retry-After on storage_full")
		}
		expectError(t, b.get(t, "/readyz"), http.StatusServiceUnavailable, "storage_full")
		// Reads and health go on.
		if r := b.get(t, "/healthz"); r.status != http.StatusOK {
			t.Errorf("healthz: %d", r.status)
		}
		fs.full.Store(false)
		// Without data directories to probe, not ready until fullHold passes...
		expectError(t, b.get(t, "/readyz"), http.StatusServiceUnavailable, "storage_full")
		// ...or a write works.
		if r := submit(b); r.status != http.StatusAccepted {
			t.Fatalf("submit after space came back: %d %s", r.status, r.body)
		}
		if r := b.get(t, "/readyz"); r.status != http.StatusOK {
			t.Fatalf("readyz after a write worked: %d %s", r.status, r.body)
		}
	})

	t.Run("without directories it passes with time", func(t *testing.T) {
		t.Parallel()
		var fs *fullStore
		b := setupWith(t, func(c *api.Config) { fs = &fullStore{Store: c.Store}; c.Store = fs })
		fs.full.Store(true)
		expectError(t, submit(b), http.StatusServiceUnavailable, "storage_full")
		b.clock.Advance(29 * time.Second)
		expectError(t, b.get(t, "/readyz"), http.StatusServiceUnavailable, "storage_full")
		b.clock.Advance(time.Second)
		if r := b.get(t, "/readyz"); r.status != http.StatusOK {
			t.Fatalf("readyz 30 s after the last failure: %d %s", r.status, r.body)
		}
	})

	t.Run("a probe of the data directories", func(t *testing.T) {
		t.Parallel()
		// A directory that is not there yet stands for one the probe cannot write to.
		dir := filepath.Join(t.TempDir(), "data")
		var fs *fullStore
		b := setupWith(t, func(c *api.Config) { fs = &fullStore{Store: c.Store}; c.Store = fs; c.DataDirs = []string{dir} })
		fs.full.Store(true)
		expectError(t, submit(b), http.StatusServiceUnavailable, "storage_full")
		expectError(t, b.get(t, "/readyz"), http.StatusServiceUnavailable, "storage_full")
		b.clock.Advance(time.Hour) // without a probe that works, time alone changes nothing
		expectError(t, b.get(t, "/readyz"), http.StatusServiceUnavailable, "storage_full")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		// Probes run at most once a second.
		expectError(t, b.get(t, "/readyz"), http.StatusServiceUnavailable, "storage_full")
		b.clock.Advance(time.Second)
		if r := b.get(t, "/readyz"); r.status != http.StatusOK {
			t.Fatalf("readyz once the directory takes writes: %d %s", r.status, r.body)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "*")); len(left) != 0 {
			t.Errorf("probe files left behind: %v", left)
		}
	})
}
