package api

import (
	"net/http"
	"time"
)

type queueDepthJSON struct {
	Priority string   `json:"priority"`
	Labels   []string `json:"labels"`
	Jobs     int      `json:"jobs"`
}

type statsJSON struct {
	Queued        []queueDepthJSON `json:"queued"`
	QueuedTotal   int              `json:"queued_total"`
	Assigned      int              `json:"assigned"`
	Running       int              `json:"running"`
	Retrying      int              `json:"retrying"`
	OldestQueued  string           `json:"oldest_queued_at,omitempty"`
	OldestWaitSec float64          `json:"oldest_queued_wait_seconds"`
	Workers       map[string]int   `json:"workers"`
}

// offlineAfter is how long a worker may go unseen before it counts offline (see
// store.Worker.StateAt): three missed heartbeats, since a live worker's control requests
// mark it seen about once per heartbeat interval.
func (s *Server) offlineAfter() time.Duration { return 3 * s.heartbeatEvery }

// stats answers queue depth by lane and label set, leased and retrying jobs, the wait of
// the oldest queued job, and workers by state.
func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	q, err := s.store.QueueStats(r.Context())
	if err != nil {
		s.storeError(w, r, "queue stats", err)
		return
	}
	workers, err := s.store.ListWorkers(r.Context())
	if err != nil {
		s.storeError(w, r, "list workers", err)
		return
	}
	now := s.clock.Now()
	out := statsJSON{Queued: []queueDepthJSON{}, Assigned: q.Assigned, Running: q.Running, Retrying: q.Retrying,
		Workers: map[string]int{}}
	for _, d := range q.Queued {
		labels := d.Labels
		if labels == nil {
			labels = []string{}
		}
		out.Queued = append(out.Queued, queueDepthJSON{Priority: string(d.Priority), Labels: labels, Jobs: d.Jobs})
		out.QueuedTotal += d.Jobs
	}
	if !q.OldestQueuedAt.IsZero() {
		out.OldestQueued = formatTime(q.OldestQueuedAt)
		out.OldestWaitSec = max(0, now.Sub(q.OldestQueuedAt).Seconds())
	}
	for _, wk := range workers {
		out.Workers[string(wk.StateAt(now, s.offlineAfter()))]++
	}
	writeJSON(w, http.StatusOK, out)
}
