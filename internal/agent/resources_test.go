package agent

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

// TestResourcesNeverOverbooked: a worker offering 2 CPUs and 4 GiB is given three jobs
// of 1.5 CPUs and 3 GiB each. It runs them one at a time: each job's step takes a lock
// directory that a second job running beside it could not take. And no claim it sends
// offers more than what the jobs the coordinator has handed it leave of its capacity.
//
// With three slots it claimed again, with the whole capacity, as soon as the first
// claim was answered, before the first job's goroutine had counted that job. With one
// slot each completion carries the next claim, and what that claim brings must be
// counted as the main loop's claims are, or the count goes wrong once it ends.
func TestResourcesNeverOverbooked(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		maxJobs int
	}{
		{"three slots", 3},
		{"one slot, claims carried by completions", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			testResourcesNeverOverbooked(t, tt.maxJobs)
		})
	}
}

func testResourcesNeverOverbooked(t *testing.T, maxJobs int) {
	const (
		cpu = 2000
		mem = 4 << 30
	)
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// A claim waits at most half a lease for a job: a short lease keeps short the wait of
	// a claim sent while one job held the capacity, for the jobs behind it.
	h := api.New(api.Config{Store: st, HeartbeatEvery: 200 * time.Millisecond, LeaseTTL: 2 * time.Second,
		Blobs: newBlobs(t, t.TempDir())}).Handler()
	var (
		mu         sync.Mutex
		run        uuid.UUID // set before any job can be claimed
		claims     int
		overbooked []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/api/v1/agent/claim" {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			var req struct {
				WorkerID   string `json:"worker_id"`
				FreeCPU    int64  `json:"free_milli_cpu"`
				FreeMemory int64  `json:"free_memory"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			id := run
			mu.Unlock()
			// What the store holds for the worker as the claim arrives: every such job
			// came in the answer of a claim the worker sent before this one, and is not
			// given back before the worker has reported it ended.
			var heldCPU, heldMem int64
			if id != uuid.Nil {
				jobs, err := st.ListJobs(r.Context(), id)
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				for _, j := range jobs {
					if j.WorkerID == req.WorkerID && j.Status.Leased() {
						heldCPU += j.MilliCPU
						heldMem += j.Memory
					}
				}
			}
			mu.Lock()
			claims++
			// A worker with all of its capacity taken still claims with 1 of each.
			if req.FreeCPU > max(cpu-heldCPU, 1) || req.FreeMemory > max(mem-heldMem, 1) {
				overbooked = append(overbooked, fmt.Sprintf("free %dm CPU, %d bytes while it held %dm, %d bytes",
					req.FreeCPU, req.FreeMemory, heldCPU, heldMem))
			}
			mu.Unlock()
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		_ = st.Close()
	})
	b := &bundle{st: st, url: srv.URL}
	lock := filepath.Join(t.TempDir(), "lock")
	id := b.submit(t, fmt.Sprintf(`
jobs:
  heavy:
    matrix: { n: [1, 2, 3] }
    runs_on: [linux]
    resources: { cpu: 1500m, memory: 3Gi }
    steps:
      - run: 'mkdir %[1]q || { echo "another job runs beside this one"; exit 99; }; sleep 0.3; rmdir %[1]q'
`, lock))
	mu.Lock()
	run = id
	mu.Unlock()
	b.startWith(t, Config{Name: "small", Labels: []string{"linux"}, MaxJobs: maxJobs, MilliCPU: cpu, Memory: mem})
	b.wantSuccess(t, id)
	// Once the carried claims bring no more jobs, the claim loop claims on its own again,
	// with what the carried jobs left of the count.
	deadline := time.Now().Add(10 * time.Second)
	mu.Lock()
	defer mu.Unlock()
	for claims < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the worker did not claim again within 10s of the run's end")
		}
		mu.Unlock()
		pause(t, 10*time.Millisecond)
		mu.Lock()
	}
	for _, o := range overbooked {
		t.Errorf("the worker claimed with more than it had left: %s", o)
	}
}
