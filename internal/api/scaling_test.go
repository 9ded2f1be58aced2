package api_test

import (
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"
)

type scalingView struct {
	Labels            []string `json:"labels"`
	Queued            int      `json:"queued"`
	QuotaHeld         int      `json:"quota_held"`
	Running           int      `json:"running"`
	CapacityPerWorker int      `json:"capacity_per_worker"`
	Workers           int      `json:"workers"`
	IdleWorkers       int      `json:"idle_workers"`
	Unfit             int      `json:"unfit"`
	UnfitMilliCPU     int64    `json:"unfit_milli_cpu"`
	UnfitMemory       int64    `json:"unfit_memory"`
	DesiredWorkers    int      `json:"desired_workers"`
	AdditionalWorkers int      `json:"additional_workers"`
}

// TestScaling: the autoscaling answer for scripted queue states: per label set, the jobs
// queued and running, the workers that can run them, and how many workers that needs.
func TestScaling(t *testing.T) {
	t.Parallel()
	b := setup(t)
	get := func(path string) (out struct {
		LabelSets []scalingView `json:"label_sets"`
		Total     scalingView   `json:"total"`
	}) {
		t.Helper()
		r := b.get(t, path)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		r.decode(t, &out)
		return out
	}
	if got := get("/api/v1/stats/scaling"); len(got.LabelSets) != 0 || got.Total.DesiredWorkers != 0 {
		t.Fatalf("an empty queue needs %+v", got)
	}

	// Five linux jobs and two gpu jobs; one linux worker of 2 slots and one gpu worker of 1.
	b.post(t, "/api/v1/runs", `{"pipeline": "name: s\njobs:\n  build: {runs_on: [linux], matrix: {n: [1, 2, 3, 4, 5]}, steps: [{run: make}]}\n  train: {runs_on: [linux, gpu], matrix: {n: [1, 2]}, steps: [{run: make}]}\n"}`)
	b.post(t, "/api/v1/agent/register", `{"id": "cpu", "name": "cpu", "labels": ["linux"], "max_jobs": 2}`)
	b.post(t, "/api/v1/agent/register", `{"id": "gpu", "name": "gpu", "labels": ["linux", "gpu"], "max_jobs": 1}`)
	if c := b.claim(t, `{"worker_id": "cpu", "labels": ["linux"], "max": 2, "wait": "0s"}`); len(c.Jobs) != 2 {
		t.Fatalf("the cpu worker claimed %d jobs, want 2", len(c.Jobs))
	}
	got := get("/api/v1/stats/scaling")
	want := map[string]scalingView{
		// 3 queued + 2 running linux jobs; both workers run linux jobs, 3 slots between
		// two workers make a capacity of 1 each: 5 workers, 3 more than the 2.
		"linux": {Queued: 3, Running: 2, CapacityPerWorker: 1, Workers: 2, IdleWorkers: 2, DesiredWorkers: 5, AdditionalWorkers: 3},
		// 2 queued gpu jobs; only the gpu worker runs them.
		"gpu,linux": {Queued: 2, CapacityPerWorker: 1, Workers: 1, IdleWorkers: 1, DesiredWorkers: 2, AdditionalWorkers: 1},
	}
	if len(got.LabelSets) != 2 {
		t.Fatalf("label sets %+v, want linux and gpu,linux", got.LabelSets)
	}
	for _, sc := range got.LabelSets {
		key := ""
		for i, l := range sc.Labels {
			if i > 0 {
				key += ","
			}
			key += l
		}
		w := want[key]
		w.Labels = sc.Labels
		if !reflect.DeepEqual(sc, w) {
			t.Errorf("label set %s = %+v, want %+v", key, sc, w)
		}
	}
	if got.Total.DesiredWorkers != 7 || got.Total.AdditionalWorkers != 4 || got.Total.Queued != 5 || got.Total.Running != 2 {
		t.Errorf("total = %+v, want 7 desired, 4 more, 5 queued, 2 running", got.Total)
	}

	// A worker image that runs 4 jobs: ?capacity=4 sizes the pool for it, one set at a time.
	var one scalingView
	b.get(t, "/api/v1/stats/scaling?labels=linux&capacity=4").decode(t, &one)
	if one.Queued != 3 || one.Running != 2 || one.CapacityPerWorker != 4 || one.DesiredWorkers != 2 || one.AdditionalWorkers != 0 {
		t.Errorf("linux at capacity 4 = %+v, want 2 workers, none more", one)
	}
	b.get(t, "/api/v1/stats/scaling?labels=arm64").decode(t, &one)
	if one.Queued != 0 || one.DesiredWorkers != 0 || one.Workers != 0 {
		t.Errorf("a set nothing asks for = %+v, want zeros", one)
	}

	// Workers three heartbeats late do not count.
	b.clock.Advance(time.Minute)
	b.get(t, "/api/v1/stats/scaling?labels=linux").decode(t, &one)
	if one.Workers != 0 || one.AdditionalWorkers != one.DesiredWorkers {
		t.Errorf("linux with its workers offline = %+v, want no workers", one)
	}
	expectError(t, b.get(t, "/api/v1/stats/scaling?capacity=0"), http.StatusBadRequest, "bad_request")
}

// TestScalingQuotaHeld: queued jobs that their project's limit of concurrent jobs holds
// back are counted apart, as quota_held, and need no worker.
func TestScalingQuotaHeld(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.post(t, "/api/v1/runs", `{"project": "nightly", "pipeline": "name: n\njobs:\n  build: {runs_on: [linux], matrix: {n: [1, 2, 3, 4]}, steps: [{run: make}]}\n"}`)
	b.post(t, "/api/v1/runs", `{"project": "web", "pipeline": "name: w\njobs:\n  lint: {runs_on: [linux], steps: [{run: make}]}\n"}`)
	if r := b.do(t, http.MethodPatch, "/api/v1/projects/nightly", "application/json", `{"max_concurrent_jobs": 1}`, nil); r.status != http.StatusOK {
		t.Fatalf("PATCH nightly's limit: %d %s", r.status, r.body)
	}
	b.post(t, "/api/v1/agent/register", `{"id": "cpu", "name": "cpu", "labels": ["linux"], "max_jobs": 1}`)
	var one scalingView
	b.get(t, "/api/v1/stats/scaling?labels=linux").decode(t, &one)
	// nightly may run 1 of its 4, web its 1: 2 queued a worker can take, 3 held.
	if one.Queued != 2 || one.QuotaHeld != 3 || one.Running != 0 || one.DesiredWorkers != 2 || one.AdditionalWorkers != 1 {
		t.Errorf("linux with nightly at a limit of 1 = %+v, want 2 queued, 3 held, 2 workers desired", one)
	}
	if c := b.claim(t, `{"worker_id": "cpu", "labels": ["linux"], "max": 1, "wait": "0s"}`); len(c.Jobs) != 1 {
		t.Fatalf("claimed %d jobs, want 1", len(c.Jobs))
	}
	var all struct {
		LabelSets []scalingView `json:"label_sets"`
		Total     scalingView   `json:"total"`
	}
	b.get(t, "/api/v1/stats/scaling").decode(t, &all)
	if all.Total.Queued+all.Total.QuotaHeld != 4 || all.Total.QuotaHeld != 3 || all.Total.Running != 1 || all.Total.DesiredWorkers != 2 {
		t.Errorf("total after a claim = %+v, want 1 queued and 3 held, 1 running, 2 desired", all.Total)
	}
}

// TestScalingUnfit: queued jobs that no live worker carrying their labels is big enough
// for are counted as unfit, with the largest cpu and memory they ask, and need workers
// on top of those the pool has: a job waiting for an 8Gi worker beside an idle 4Gi one
// is not "no worker needed".
func TestScalingUnfit(t *testing.T) {
	t.Parallel()
	const (
		gi = 1 << 30
		// One job that fits a 4Gi worker, one that asks for 8Gi, one for 4 CPUs.
		mixed = "name: m\njobs:\n  small: {runs_on: [linux], resources: {memory: 1Gi}, steps: [{run: make}]}\n" +
			"  big: {runs_on: [linux], resources: {memory: 8Gi}, steps: [{run: make}]}\n" +
			"  wide: {runs_on: [linux], resources: {cpu: 4, memory: 2Gi}, steps: [{run: make}]}\n"
		// Two 8Gi jobs of a project that runs one job at a time.
		twoBig = "name: b\njobs:\n  big: {runs_on: [linux], resources: {memory: 8Gi}, matrix: {n: [1, 2]}, steps: [{run: make}]}\n"
		small  = `{"id": "small", "name": "small", "labels": ["linux"], "milli_cpu": 2000, "memory": 4294967296, "max_jobs": 4}`
		large  = `{"id": "large", "name": "large", "labels": ["linux"], "milli_cpu": 8000, "memory": 17179869184, "max_jobs": 2}`
		// A worker that gives no sizes takes any job (as a claim does).
		unsized = `{"id": "unsized", "name": "unsized", "labels": ["linux"], "max_jobs": 2}`
		// A big worker of other labels, online in every case, takes none of them.
		windows = `{"id": "windows", "name": "windows", "labels": ["windows"], "memory": 68719476736, "max_jobs": 2}`
	)
	tests := []struct {
		name     string
		pipeline string
		limit    int      // the project's max_concurrent_jobs, 0 for none
		offline  []string // workers registered and then unseen past the bound
		online   []string
		want     scalingView
	}{
		// The 4Gi worker runs 4 jobs at once and takes the small one; the other two need
		// one more worker, of 4 CPUs and 8Gi.
		{"only a 4Gi worker", mixed, 0, nil, []string{small}, scalingView{Queued: 3, CapacityPerWorker: 4, Workers: 1, IdleWorkers: 1,
			Unfit: 2, UnfitMilliCPU: 4000, UnfitMemory: 8 * gi, DesiredWorkers: 2, AdditionalWorkers: 1}},
		{"a 16Gi worker beside it", mixed, 0, nil, []string{small, large}, scalingView{Queued: 3, CapacityPerWorker: 3, Workers: 2, IdleWorkers: 2,
			DesiredWorkers: 1}},
		{"the 16Gi worker offline", mixed, 0, []string{large}, []string{small}, scalingView{Queued: 3, CapacityPerWorker: 4, Workers: 1, IdleWorkers: 1,
			Unfit: 2, UnfitMilliCPU: 4000, UnfitMemory: 8 * gi, DesiredWorkers: 2, AdditionalWorkers: 1}},
		{"a worker of any size", mixed, 0, nil, []string{unsized}, scalingView{Queued: 3, CapacityPerWorker: 2, Workers: 1, IdleWorkers: 1,
			DesiredWorkers: 2, AdditionalWorkers: 1}},
		// Without a worker of the labels every job counts already; none is unfit.
		{"no linux worker", mixed, 0, nil, nil, scalingView{Queued: 3, CapacityPerWorker: 1, DesiredWorkers: 3, AdditionalWorkers: 3}},
		// The job the project's limit holds needs no worker yet; the other one does.
		{"one held by its project's limit", twoBig, 1, nil, []string{small}, scalingView{Queued: 1, QuotaHeld: 1, CapacityPerWorker: 4,
			Workers: 1, IdleWorkers: 1, Unfit: 1, UnfitMemory: 8 * gi, DesiredWorkers: 1, AdditionalWorkers: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			b.post(t, "/api/v1/runs", fmt.Sprintf(`{"project": "p", "pipeline": %q}`, tt.pipeline))
			if tt.limit > 0 {
				if r := b.do(t, http.MethodPatch, "/api/v1/projects/p", "application/json", fmt.Sprintf(`{"max_concurrent_jobs": %d}`, tt.limit), nil); r.status != http.StatusOK {
					t.Fatalf("PATCH p's limit: %d %s", r.status, r.body)
				}
			}
			for _, w := range tt.offline {
				b.post(t, "/api/v1/agent/register", w)
			}
			b.clock.Advance(time.Minute)
			for _, w := range append(tt.online, windows) {
				b.post(t, "/api/v1/agent/register", w)
			}
			var got scalingView
			b.get(t, "/api/v1/stats/scaling?labels=linux").decode(t, &got)
			want := tt.want
			want.Labels = []string{"linux"}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("linux = %+v\nwant    %+v", got, want)
			}
			var all struct {
				Total scalingView `json:"total"`
			}
			b.get(t, "/api/v1/stats/scaling").decode(t, &all)
			if all.Total.Unfit != want.Unfit || all.Total.UnfitMemory != want.UnfitMemory || all.Total.UnfitMilliCPU != want.UnfitMilliCPU ||
				all.Total.AdditionalWorkers != want.AdditionalWorkers {
				t.Errorf("total = %+v, want unfit %d (%d milli-CPUs, %d bytes), %d more workers", all.Total,
					want.Unfit, want.UnfitMilliCPU, want.UnfitMemory, want.AdditionalWorkers)
			}
		})
	}
}
