package metrics

import (
	"context"
	"math"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// fakeState answers the scrape-time reads and counts them.
type fakeState struct {
	q       store.QueueStats
	workers []*store.Worker
	reads   int
}

func (f *fakeState) QueueStats(context.Context) (*store.QueueStats, error) {
	f.reads++
	q := f.q
	return &q, nil
}

func (f *fakeState) ListWorkers(context.Context) ([]*store.Worker, error) { return f.workers, nil }

// TestDrainEstimate checks the documented formula: queued x mean duration / slots of the
// live workers carrying the labels, +Inf when none does.
func TestDrainEstimate(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC))
	now := clk.Now()
	src := &fakeState{
		q: store.QueueStats{Queued: []store.QueueDepth{
			{Priority: pipeline.PriorityNormal, Labels: []string{"linux"}, Jobs: 6},
			{Priority: pipeline.PriorityHigh, Labels: []string{"linux"}, Jobs: 2},
			{Priority: pipeline.PriorityNormal, Labels: []string{"linux", "gpu"}, Jobs: 3},
			{Priority: pipeline.PriorityNormal, Labels: []string{"arm64"}, Jobs: 1},
		}},
		workers: []*store.Worker{
			{Labels: []string{"linux"}, MaxJobs: 2, State: store.WorkerIdle, LastSeenAt: now},
			{Labels: []string{"gpu", "linux"}, MaxJobs: 2, State: store.WorkerBusy, LastSeenAt: now},
			{Labels: []string{"arm64"}, MaxJobs: 8, State: store.WorkerIdle, LastSeenAt: now.Add(-time.Hour)}, // offline
			{Labels: []string{"linux"}, MaxJobs: 8, State: store.WorkerDraining, LastSeenAt: now},
		},
	}
	m := NewCoordinator()
	m.WatchState(src, StateOptions{OfflineAfter: 30 * time.Second, Clock: clk})
	for _, mf := range gather(t, m) {
		if mf.GetName() == "gantry_queue_drain_seconds" {
			t.Errorf("%d drain series before any job finished; want none", len(mf.GetMetric()))
		}
	}
	for _, d := range []time.Duration{10 * time.Second, 30 * time.Second} {
		m.JobFinished(&store.Job{Status: store.JobSuccess, QueuedAt: now, StartedAt: now, FinishedAt: now.Add(d)}, now)
	}
	clk.Advance(DefaultStateCacheFor) // the first reading is cached
	// mean 20 s; linux: 8 queued over 4 slots (both live workers carry linux);
	// gpu,linux: 3 over 2; arm64: its only worker is offline.
	want := map[string]float64{"linux": 8 * 20.0 / 4, "gpu,linux": 3 * 20.0 / 2, "arm64": math.Inf(1)}
	got := map[string]float64{}
	for _, mf := range gather(t, m) {
		if mf.GetName() != "gantry_queue_drain_seconds" {
			continue
		}
		for _, s := range mf.GetMetric() {
			got[s.GetLabel()[0].GetValue()] = s.GetGauge().GetValue()
		}
	}
	for set, w := range want {
		if got[set] != w {
			t.Errorf("drain{labels=%q} = %v, want %v", set, got[set], w)
		}
	}
	reads := src.reads
	gather(t, m)
	gather(t, m)
	if src.reads != reads {
		t.Errorf("scrapes within the cache time read the store %d more times; want 0", src.reads-reads)
	}
	clk.Advance(DefaultStateCacheFor)
	gather(t, m)
	if src.reads != reads+1 {
		t.Errorf("a scrape after the cache time read the store %d times; want 1", src.reads-reads)
	}
}

func gather(t *testing.T, m *Coordinator) []*dto.MetricFamily {
	t.Helper()
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

func TestLabelSet(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		in   []string
		want string
	}{{nil, ""}, {[]string{"linux"}, "linux"}, {[]string{"linux", "amd64", "linux"}, "amd64,linux"}} {
		if got := LabelSet(c.in); got != c.want {
			t.Errorf("LabelSet(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// The store decorator must be a whole store.Store.
var _ store.Store = (*instrumented)(nil)
