// Package storebench holds the store benchmarks every driver runs, so their numbers are
// comparable: the same workloads, the same concurrency.
//
// It is test support: only drivers' _test files import it.
package storebench

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
	"github.com/google/uuid"
)

// Open returns a fresh, empty store for one benchmark.
type Open func(b *testing.B) store.Store

func plan(b *testing.B, src string) *pipeline.Plan {
	p, err := pipeline.Compile([]byte(src), pipeline.Options{})
	if err != nil {
		b.Fatal(err)
	}
	return p
}

// Run runs every store benchmark against one driver.
func Run(b *testing.B, open Open) {
	b.Run("CreateRun", func(b *testing.B) { benchCreate(b, open) })
	b.Run("Cycle", func(b *testing.B) { benchCycle(b, open, 8, 1, false) })
	b.Run("CycleRunsOf20", func(b *testing.B) { benchCycle(b, open, 8, 20, false) })
	b.Run("CycleWithinCapacity", func(b *testing.B) { benchCycle(b, open, 8, 1, true) })
	b.Run("ClaimDeepQueue", func(b *testing.B) { benchClaimDeep(b, open) })
	b.Run("RunsPage", func(b *testing.B) { benchRunsPage(b, open, store.ListRunsParams{}) })
	b.Run("RunsPageFiltered", func(b *testing.B) {
		benchRunsPage(b, open, store.ListRunsParams{Branch: "dev", Event: "push", Status: store.RunFailed})
	})
	b.Run("AddTestResults", func(b *testing.B) { benchAddTestResults(b, open) })
}

// benchAddTestResults measures what keeping a large test report costs the store: batches
// of testreport.BatchResults results (one in ten failing, with a message and output, as
// the test-reports scenario of gantry bench sends) added to one job attempt, as a
// worker sends them. It reports the cost per result.
func benchAddTestResults(b *testing.B, open Open) {
	s := open(b)
	ctx := context.Background()
	p := plan(b, "jobs: {unit: {steps: [{run: 'true'}]}}")
	// lease makes a run of one job and leases the job: an attempt keeps at most
	// store.MaxTestResults, so a long benchmark fills several.
	lease := func() store.LeaseRef {
		if _, _, _, err := s.CreateRun(ctx, store.CreateRunParams{Project: "web", Plan: p,
			Trigger: store.Trigger{Branch: "main", SHA: strings.Repeat("a", 40), Event: "push"}}); err != nil {
			b.Fatal(err)
		}
		cs, err := s.Claim(ctx, store.ClaimParams{WorkerID: "w", Max: 1, LeaseTTL: time.Hour})
		if err != nil || len(cs) != 1 {
			b.Fatalf("claim: %v (%d jobs)", err, len(cs))
		}
		return store.LeaseRef{JobID: cs[0].Job.ID, Token: cs[0].Lease.Token}
	}
	const perBatch = testreport.BatchResults
	batch := make([]testreport.Result, perBatch)
	ref, first, n := lease(), 0, 0
	for b.Loop() {
		if first+perBatch > store.MaxTestResults {
			ref, first = lease(), 0
		}
		for k := range batch {
			i := first + k
			r := testreport.Result{Suite: fmt.Sprintf("example.com/app/pkg%03d", i/500), Name: fmt.Sprintf("TestCase%06d", i),
				File: fmt.Sprintf("pkg%03d/case_test.go", i/500), Line: i % 900, Status: testreport.Passed, Duration: time.Millisecond}
			if i%10 == 0 {
				r.Status, r.Message = testreport.Failed, "expected 1, got 2"
				r.Output = strings.Repeat("=== RUN TestCase\n    case_test.go:12: expected 1, got 2\n", 8)
			}
			batch[k] = r
		}
		if _, err := s.AddTestResults(ctx, store.AddTestResultsParams{LeaseRef: ref, First: first, Results: batch}); err != nil {
			b.Fatal(err)
		}
		first += perBatch
		n += perBatch
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(n), "µs/result")
}

// benchRunsPage measures what the dashboard's runs list reads every 2 s: a page of 25
// runs of every project, the total its filters match, and the page's digests (states and
// failures), with 10,000 runs stored, a quarter of them failed in a named step.
func benchRunsPage(b *testing.B, open Open, filter store.ListRunsParams) {
	s := open(b)
	ctx := context.Background()
	p := plan(b, "jobs: {a: {steps: [{name: test, run: 'false'}]}}")
	const runs, submitters = 10_000, 8
	var wg sync.WaitGroup
	for w := range submitters {
		wg.Go(func() {
			for i := w; i < runs; i += submitters {
				tr := store.Trigger{Branch: []string{"main", "dev"}[i%2], Event: []string{"push", "pull_request"}[i/2%2],
					Actor: fmt.Sprintf("user%d", i%7)}
				if _, _, _, err := s.CreateRun(ctx, store.CreateRunParams{Project: "web", Trigger: tr, Plan: p}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	exit := 1
	for failed := 0; failed < runs/4; {
		cs, err := s.Claim(ctx, store.ClaimParams{WorkerID: "w", Max: 100, LeaseTTL: time.Minute})
		if err != nil || len(cs) == 0 {
			b.Fatalf("claim: %v (%d jobs)", err, len(cs))
		}
		for _, c := range cs {
			ref := store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token}
			if err := s.UpdateStep(ctx, store.UpdateStepParams{LeaseRef: ref,
				StepUpdate: store.StepUpdate{Index: 0, Status: store.StepFailed, ExitCode: &exit}}); err != nil {
				b.Fatal(err)
			}
			if _, err := s.CompleteJob(ctx, store.CompleteParams{LeaseRef: ref, Status: store.JobFailed,
				FailureKind: store.FailureExit, ExitCode: &exit}); err != nil {
				b.Fatal(err)
			}
		}
		failed += len(cs)
	}
	filter.Limit = 25
	var lat, list, count, digest []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		page, err := s.ListRuns(ctx, filter)
		if err != nil || len(page) == 0 {
			b.Fatalf("list runs: %v (%d runs)", err, len(page))
		}
		listed := time.Now()
		if _, err := s.CountRuns(ctx, filter, 0); err != nil {
			b.Fatal(err)
		}
		counted := time.Now()
		ids := make([]uuid.UUID, len(page))
		for k, r := range page {
			ids[k] = r.ID
		}
		if _, err := s.DigestRuns(ctx, ids); err != nil {
			b.Fatal(err)
		}
		end := time.Now()
		lat, list = append(lat, end.Sub(start)), append(list, listed.Sub(start))
		count, digest = append(count, counted.Sub(listed)), append(digest, end.Sub(counted))
	}
	b.StopTimer()
	ReportPercentiles(b, lat, "page")
	ReportPercentiles(b, list, "list")
	ReportPercentiles(b, count, "count")
	ReportPercentiles(b, digest, "digest")
}

// benchCreate measures intake: single-job runs created by 8 goroutines.
func benchCreate(b *testing.B, open Open) {
	s := open(b)
	p := plan(b, "jobs: {a: {steps: [{run: 'true'}]}}")
	ctx := context.Background()
	b.SetParallelism(4) // 4 x GOMAXPROCS(2) = 8 submitters
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, _, err := s.CreateRun(ctx, store.CreateRunParams{Plan: p}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "runs/s")
}

// benchCycle measures a no-op job's whole life: create, claim, complete (which advances
// the DAG and finishes the run). Runs of perRun independent jobs are submitted by 8
// goroutines; claimers behave like workers with 8 job slots each: they claim as many jobs
// as they have free slots, complete each as soon as it is "done", and claim again as soon
// as a slot frees. b.N counts jobs.
//
// With capacity, each job asks for CPU and memory and each claimer registered a capacity
// that its slots' jobs never exceed: every claim then checks the worker's capacity left
// (what that check costs), and is never refused by it.
func benchCycle(b *testing.B, open Open, claimers, perRun int, capacity bool) {
	const slots = 8
	s := open(b)
	resources := ""
	if capacity {
		resources = "\n    resources: {cpu: 500m, memory: 1Gi}"
	}
	p := plan(b, "jobs:\n  a:"+resources+"\n    steps: [{run: 'true'}]\n")
	if perRun > 1 {
		p = plan(b, fmt.Sprintf("jobs:\n  a:%s\n    matrix: {n: [%s]}\n    steps: [{run: 'true'}]\n", resources, seq(perRun)))
	}
	ctx := context.Background()
	if capacity {
		for i := range claimers {
			w := &store.Worker{ID: fmt.Sprint("w", i), Name: fmt.Sprint("w", i), MilliCPU: slots * 500, Memory: slots << 30,
				MaxJobs: slots, State: store.WorkerIdle}
			if err := s.UpsertWorker(ctx, w); err != nil {
				b.Fatal(err)
			}
		}
	}
	var created, done atomic.Int64
	n := int64(b.N)
	runs := (n + int64(perRun) - 1) / int64(perRun)
	n = runs * int64(perRun)
	var stmts0 int64
	if c, ok := s.(statementCounter); ok {
		stmts0 = c.WriteStatements()
	}
	b.ResetTimer()
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for created.Add(1) <= runs {
				if _, _, _, err := s.CreateRun(ctx, store.CreateRunParams{Plan: p}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	for i := range claimers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wake, stop := s.WaitForJobs()
			defer stop()
			free := make(chan struct{}, slots)
			for range slots {
				free <- struct{}{}
			}
			var running sync.WaitGroup
			defer running.Wait()
			for done.Load() < n {
				<-free
				max := 1
			more:
				for max < slots {
					select {
					case <-free:
						max++
					default:
						break more
					}
				}
				cs, err := s.Claim(ctx, store.ClaimParams{WorkerID: fmt.Sprint("w", i), Max: max, LeaseTTL: time.Minute})
				if err != nil {
					b.Error(err)
					return
				}
				for range max - len(cs) {
					free <- struct{}{}
				}
				if len(cs) == 0 {
					select {
					case <-wake:
					case <-time.After(10 * time.Millisecond):
					}
					continue
				}
				for _, c := range cs {
					running.Add(1)
					go func() {
						defer running.Done()
						_, err := s.CompleteJob(ctx, store.CompleteParams{LeaseRef: store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token}, Status: store.JobSuccess})
						if err != nil {
							b.Error(err)
						}
						done.Add(1)
						free <- struct{}{}
					}()
				}
			}
		}()
	}
	wg.Wait()
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "jobs/s")
	if c, ok := s.(statementCounter); ok {
		b.ReportMetric(float64(c.WriteStatements()-stmts0)/float64(n), "stmts/job")
	}
}

// statementCounter is a store that counts the statements its write transactions run.
type statementCounter interface{ WriteStatements() int64 }

func seq(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprint(i)
	}
	return strings.Join(parts, ", ")
}

// benchClaimDeep measures one claim-and-complete with 100,000 jobs queued.
func benchClaimDeep(b *testing.B, open Open) {
	s := open(b)
	ctx := context.Background()
	p := plan(b, "jobs:\n  t:\n    matrix: {a: [0,1,2,3,4,5,6,7,8,9], b: [0,1,2,3,4,5,6,7,8,9], c: [0,1,2,3,4,5,6,7,8,9], d: [0,1,2,3,4]}\n    steps: [{run: 'true'}]\n")
	// 20 runs of 5,000 jobs: 100,000 queued.
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, _, _, err := s.CreateRun(ctx, store.CreateRunParams{Plan: p}); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		cs, err := s.Claim(ctx, store.ClaimParams{WorkerID: "w", Max: 1, LeaseTTL: time.Minute})
		lat = append(lat, time.Since(start))
		if err != nil || len(cs) != 1 {
			b.Fatalf("claim: %v (%d jobs)", err, len(cs))
		}
		if _, err := s.CompleteJob(ctx, store.CompleteParams{LeaseRef: store.LeaseRef{JobID: cs[0].Job.ID, Token: cs[0].Lease.Token}, Status: store.JobSuccess}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	ReportPercentiles(b, lat, "claim")
}

// ReportPercentiles reports p50 and p99 of the samples in microseconds.
func ReportPercentiles(b *testing.B, lat []time.Duration, name string) {
	if len(lat) == 0 {
		return
	}
	sorted := append([]time.Duration(nil), lat...)
	for i := 1; i < len(sorted); i++ {
		for j := i; j > 0 && sorted[j] < sorted[j-1]; j-- {
			sorted[j], sorted[j-1] = sorted[j-1], sorted[j]
		}
	}
	b.ReportMetric(float64(sorted[len(sorted)/2].Microseconds()), name+"-p50-µs")
	b.ReportMetric(float64(sorted[len(sorted)*99/100].Microseconds()), name+"-p99-µs")
}
