package api

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gantry-ci/gantry/internal/store"
)

// scalingJSON is what an autoscaler needs to size the pool for one label set.
type scalingJSON struct {
	Labels []string `json:"labels"`
	// Queued counts the jobs a worker could take now; QuotaHeld those their project's
	// limit of concurrent jobs holds back, which need no worker until it frees room.
	Queued    int `json:"queued"`
	QuotaHeld int `json:"quota_held"`
	Running   int `json:"running"` // assigned or running
	// CapacityPerWorker is how many jobs one worker runs at once: ?capacity=, else the
	// mean max_jobs of the workers that can run the set, else 1.
	CapacityPerWorker int `json:"capacity_per_worker"`
	Workers           int `json:"workers"` // online workers whose labels cover the set
	IdleWorkers       int `json:"idle_workers"`
	// DesiredWorkers is ceil((queued + running) / capacity): the pool that runs every job
	// of the set now. AdditionalWorkers is how many more than Workers that is.
	DesiredWorkers    int `json:"desired_workers"`
	AdditionalWorkers int `json:"additional_workers"`
}

// scaling answers, per label set that jobs are queued or running with, how many workers
// the set needs now, for an external autoscaler. ?labels=a,b answers one set as an object
// (zeros when nothing asks for it), which is what a metrics scaler reads a value from.
func (s *Server) scaling(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	capacity := 0
	if v := q.Get("capacity"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 10_000 {
			writeError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("capacity %q: want jobs per worker, 1 to 10000", v), nil)
			return
		}
		capacity = n
	}
	stats, err := s.store.QueueStats(r.Context())
	if err != nil {
		s.storeError(w, r, "queue stats", err)
		return
	}
	workers, err := s.store.ListWorkers(r.Context())
	if err != nil {
		s.storeError(w, r, "list workers", err)
		return
	}
	sets := map[string]*scalingJSON{}
	set := func(labels []string) *scalingJSON {
		key := strings.Join(labels, ",")
		if sets[key] == nil {
			sets[key] = &scalingJSON{Labels: append([]string{}, labels...)}
		}
		return sets[key]
	}
	for _, d := range stats.Queued {
		set(d.Labels).Queued += d.Jobs
	}
	for _, d := range stats.Held {
		sc := set(d.Labels)
		sc.Queued -= d.Jobs
		sc.QuotaHeld += d.Jobs
	}
	for _, d := range stats.Leased {
		set(d.Labels).Running += d.Jobs
	}
	one, single := q["labels"]
	if single {
		var labels []string
		for _, l := range strings.Split(strings.Join(one, ","), ",") {
			if l = strings.TrimSpace(l); l != "" {
				labels = append(labels, l)
			}
		}
		sort.Strings(labels)
		labels = slices.Compact(labels)
		sc := set(labels)
		s.size(sc, workers, capacity)
		writeJSON(w, http.StatusOK, sc)
		return
	}
	out := make([]*scalingJSON, 0, len(sets))
	for _, sc := range sets {
		s.size(sc, workers, capacity)
		out = append(out, sc)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i].Labels, ",") < strings.Join(out[j].Labels, ",") })
	total := scalingJSON{Labels: []string{}}
	for _, sc := range out {
		total.Queued += sc.Queued
		total.QuotaHeld += sc.QuotaHeld
		total.Running += sc.Running
		total.DesiredWorkers += sc.DesiredWorkers
		total.AdditionalWorkers += sc.AdditionalWorkers
	}
	writeJSON(w, http.StatusOK, map[string]any{"label_sets": out, "total": total})
}

// size fills in a label set's workers and what it needs.
func (s *Server) size(sc *scalingJSON, workers []*store.Worker, capacity int) {
	now := s.clock.Now()
	slots := 0
	for _, wk := range workers {
		if wk.StateAt(now, s.offlineAfter()) == store.WorkerOffline || !covers(wk.Labels, sc.Labels) {
			continue
		}
		sc.Workers++
		slots += max(wk.MaxJobs, 1)
		if wk.State == store.WorkerIdle {
			sc.IdleWorkers++
		}
	}
	switch {
	case capacity > 0:
		sc.CapacityPerWorker = capacity
	case sc.Workers > 0:
		sc.CapacityPerWorker = max(1, slots/sc.Workers)
	default:
		sc.CapacityPerWorker = 1
	}
	jobs := sc.Queued + sc.Running
	sc.DesiredWorkers = (jobs + sc.CapacityPerWorker - 1) / sc.CapacityPerWorker
	sc.AdditionalWorkers = max(0, sc.DesiredWorkers-sc.Workers)
}

// covers reports whether a worker with labels have can run jobs asking for want.
func covers(have, want []string) bool {
	for _, l := range want {
		if !slices.Contains(have, l) {
			return false
		}
	}
	return true
}
