package bench

import (
	"slices"
	"sync"
	"time"
)

// summary is the distribution of a set of latencies.
type summary struct {
	N             int
	P50, P99, Max time.Duration
}

// summarize computes the nearest-rank percentiles of ds, which it sorts.
func summarize(ds []time.Duration) summary {
	if len(ds) == 0 {
		return summary{}
	}
	slices.Sort(ds)
	rank := func(p float64) time.Duration {
		i := int(p*float64(len(ds))+0.999999) - 1
		return ds[min(max(i, 0), len(ds)-1)]
	}
	return summary{N: len(ds), P50: rank(0.50), P99: rank(0.99), Max: ds[len(ds)-1]}
}

// samples collects latencies from many goroutines.
type samples struct {
	mu sync.Mutex
	ds []time.Duration
}

func (s *samples) add(d time.Duration) {
	s.mu.Lock()
	s.ds = append(s.ds, d)
	s.mu.Unlock()
}

// take returns a copy of the samples so far.
func (s *samples) take() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ds)
}

func (s *samples) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ds)
}
