package api

import (
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gantry-ci/gantry/internal/scheduler"
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
	// Unfit counts the queued jobs (of Queued) that no live worker carrying the set's
	// labels is big enough for in cpu or memory: they wait for a worker the pool does not
	// have, however idle it is. UnfitMilliCPU and UnfitMemory are the most any of them
	// asks: a worker that has both takes every one.
	Unfit         int   `json:"unfit"`
	UnfitMilliCPU int64 `json:"unfit_milli_cpu"`
	UnfitMemory   int64 `json:"unfit_memory"`
	// DesiredWorkers is ceil((queued - unfit + running) / capacity) +
	// ceil(unfit / capacity): the pool that runs every job of the set now, with bigger
	// workers for the unfit. AdditionalWorkers is how many more than Workers that is:
	// the unfit jobs' workers always, since no worker there can take them.
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
	shapes := map[string][]store.QueueShape{}
	for _, sh := range stats.Shapes {
		key := strings.Join(sh.Labels, ",")
		shapes[key] = append(shapes[key], sh)
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
		s.size(sc, workers, shapes[strings.Join(labels, ",")], capacity)
		writeJSON(w, http.StatusOK, sc)
		return
	}
	out := make([]*scalingJSON, 0, len(sets))
	for key, sc := range sets {
		s.size(sc, workers, shapes[key], capacity)
		out = append(out, sc)
	}
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i].Labels, ",") < strings.Join(out[j].Labels, ",") })
	total := scalingJSON{Labels: []string{}}
	for _, sc := range out {
		total.Queued += sc.Queued
		total.QuotaHeld += sc.QuotaHeld
		total.Running += sc.Running
		total.Unfit += sc.Unfit
		total.UnfitMilliCPU = max(total.UnfitMilliCPU, sc.UnfitMilliCPU)
		total.UnfitMemory = max(total.UnfitMemory, sc.UnfitMemory)
		total.DesiredWorkers += sc.DesiredWorkers
		total.AdditionalWorkers += sc.AdditionalWorkers
	}
	writeJSON(w, http.StatusOK, map[string]any{"label_sets": out, "total": total})
}

// size fills in a label set's workers and what it needs, from the workers and the
// set's queued jobs by the resources they ask (shapes).
func (s *Server) size(sc *scalingJSON, workers []*store.Worker, shapes []store.QueueShape, capacity int) {
	now := s.clock.Now()
	slots := 0
	var live []*store.Worker // those that may take a job of the set now
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
	for _, wk := range scheduler.LiveWorkers(workers, now, s.offlineAfter()) {
		if covers(wk.Labels, sc.Labels) {
			live = append(live, wk)
		}
	}
	// With no live worker of the labels every job of the set counts towards new workers
	// already; unfit tells apart the jobs the workers there are too small for.
	for _, sh := range shapes {
		n := sh.Jobs - sh.Held // a held job needs no worker yet
		if n <= 0 || len(live) == 0 ||
			slices.ContainsFunc(live, func(wk *store.Worker) bool { return scheduler.BigEnough(wk, sh.MilliCPU, sh.Memory) }) {
			continue
		}
		sc.Unfit += n
		sc.UnfitMilliCPU = max(sc.UnfitMilliCPU, sh.MilliCPU)
		sc.UnfitMemory = max(sc.UnfitMemory, sh.Memory)
	}
	switch {
	case capacity > 0:
		sc.CapacityPerWorker = capacity
	case sc.Workers > 0:
		sc.CapacityPerWorker = max(1, slots/sc.Workers)
	default:
		sc.CapacityPerWorker = 1
	}
	ceil := func(jobs int) int { return (jobs + sc.CapacityPerWorker - 1) / sc.CapacityPerWorker }
	fit := ceil(sc.Queued - sc.Unfit + sc.Running)
	bigger := ceil(sc.Unfit)
	sc.DesiredWorkers = fit + bigger
	sc.AdditionalWorkers = max(0, fit-sc.Workers) + bigger
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
