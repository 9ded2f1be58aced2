package bench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// singleJob is a run of one job, with the labels it needs.
func singleJob(labels ...string) []byte {
	runsOn := ""
	if len(labels) > 0 {
		runsOn = "    runs_on: [" + strings.Join(labels, ", ") + "]\n"
	}
	return []byte("name: bench\njobs:\n  job:\n" + runsOn + "    steps: [{run: \"true\"}]\n")
}

// manyJobs is a run of n independent jobs.
func manyJobs(n int, labels ...string) []byte {
	var b strings.Builder
	b.WriteString("name: bench\njobs:\n")
	for i := range n {
		fmt.Fprintf(&b, "  j%d:\n", i)
		if len(labels) > 0 {
			fmt.Fprintf(&b, "    runs_on: [%s]\n", strings.Join(labels, ", "))
		}
		b.WriteString("    steps: [{run: \"true\"}]\n")
	}
	return []byte(b.String())
}

// submitter posts runs and times each post.
type submitter struct {
	c       *client
	latency samples
	runs    atomic.Int64
	jobs    atomic.Int64
}

// closedLoop submits n runs of def from conc goroutines, each posting the next as soon as
// its previous answer arrives.
func (s *submitter) closedLoop(ctx context.Context, def []byte, n, conc int) error {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
		errs = make(chan error, conc)
	)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(n) {
				if err := s.one(ctx, def); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// paced submits n runs of def at rate runs per second, each post on time whether or not
// earlier ones have been answered (an open loop, as independent users submit).
func (s *submitter) paced(ctx context.Context, def []byte, n int, rate float64) error {
	var (
		wg       sync.WaitGroup
		firstErr atomic.Pointer[error]
	)
	began := time.Now()
	for i := range n {
		due := began.Add(time.Duration(float64(i) / rate * float64(time.Second)))
		if d := time.Until(due); d > 0 {
			select {
			case <-time.After(d):
			case <-ctx.Done():
				wg.Wait()
				return ctx.Err()
			}
		}
		if p := firstErr.Load(); p != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.one(ctx, def); err != nil {
				firstErr.CompareAndSwap(nil, &err)
			}
		}()
	}
	wg.Wait()
	if p := firstErr.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *submitter) one(ctx context.Context, def []byte) error {
	began := time.Now()
	r, err := s.c.submit(ctx, def)
	if err != nil {
		return err
	}
	s.latency.add(time.Since(began))
	s.runs.Add(1)
	s.jobs.Add(int64(len(r.Jobs)))
	return nil
}

// waitCount waits until count reaches n, the workers fail, or within runs out.
func waitCount(ctx context.Context, count *atomic.Int64, n int64, stats *simStats, within time.Duration, what string) error {
	deadline := time.After(within)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for count.Load() < n {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline:
			return fmt.Errorf("%s: %d of %d after %s (workers: %v)", what, count.Load(), n, within, stats.err())
		case <-tick.C:
		}
	}
	return nil
}

// cpuMeter measures a process's CPU use and memory over a window.
type cpuMeter struct {
	pid    int
	began  time.Time
	start  usage
	maxRSS atomic.Int64
	stop   chan struct{}
	done   chan struct{}
}

// meter starts measuring pid, sampling its resident memory every 250 ms.
func meter(pid int) (*cpuMeter, error) {
	u, err := readUsage(pid)
	if err != nil {
		return nil, err
	}
	m := &cpuMeter{pid: pid, began: time.Now(), start: u, stop: make(chan struct{}), done: make(chan struct{})}
	m.maxRSS.Store(u.RSS)
	go func() {
		defer close(m.done)
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				return
			case <-t.C:
				if u, err := readUsage(pid); err == nil && u.RSS > m.maxRSS.Load() {
					m.maxRSS.Store(u.RSS)
				}
			}
		}
	}()
	return m, nil
}

// end stops measuring and returns the CPU used as a share of one core (1.0 = one core
// busy all the time) and the highest resident memory seen.
func (m *cpuMeter) end() (cores float64, maxRSS int64, err error) {
	close(m.stop)
	<-m.done
	u, err := readUsage(m.pid)
	if err != nil {
		return 0, 0, err
	}
	wall := time.Since(m.began)
	return float64(u.CPU-m.start.CPU) / float64(wall), max(m.maxRSS.Load(), u.RSS), nil
}

const mib = 1 << 20
