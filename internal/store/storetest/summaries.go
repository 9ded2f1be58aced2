package storetest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var summaryTests = []test{
	{"PutAndListed", testSummariesPutAndListed},
	{"ResentReplaces", testSummariesResent},
	{"Fenced", testSummariesFenced},
	{"Bounded", testSummariesBounded},
	{"ConcurrentPutsKeepTheBound", testSummariesConcurrentBound},
	{"RunListsCurrentAttempts", testSummariesOfRun},
	{"Invalid", testSummariesInvalid},
	{"Retention", testSummariesRetention},
}

func (b *bundle) putSummary(c *store.Claim, step int, markdown string) {
	b.t.Helper()
	if err := b.s.PutSummary(b.ctx, store.PutSummaryParams{LeaseRef: ref(c), Step: step, Markdown: markdown}); err != nil {
		b.t.Fatalf("PutSummary(step %d): %v", step, err)
	}
}

func (b *bundle) listSummaries(p store.ListSummariesParams) []*store.SummaryPart {
	b.t.Helper()
	ps, err := b.s.ListSummaries(b.ctx, p)
	if err != nil {
		b.t.Fatalf("ListSummaries(%+v): %v", p, err)
	}
	return ps
}

// summaryTexts is each part's step and text, "step:text".
func summaryTexts(ps []*store.SummaryPart) string {
	var out []string
	for _, p := range ps {
		out = append(out, fmt.Sprintf("%d:%s", p.Step, p.Markdown))
	}
	return strings.Join(out, " ")
}

// testSummariesPutAndListed: parts read back in step order whatever order they were put
// in, with the job's run, the attempt, their size and the store's time; their text only
// when asked for.
func testSummariesPutAndListed(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`jobs: {a: {steps: [{run: "true"}, {run: "true"}, {run: "true"}]}}`)
	c := b.claimOne()
	b.putSummary(c, 2, "## Two\n")
	b.clk.Advance(time.Second)
	b.putSummary(c, 0, "| a | b |\n| - | - |\n| é | 1 |\n")
	ps := b.listSummaries(store.ListSummariesParams{JobID: c.Job.ID, Markdown: true})
	if got := summaryTexts(ps); got != "0:| a | b |\n| - | - |\n| é | 1 |\n 2:## Two\n" {
		t.Fatalf("parts %q, want steps 0 and 2 in order", got)
	}
	p := ps[0]
	if p.JobID != c.Job.ID || p.RunID != run.ID || p.Attempt != c.Job.Attempt || p.Bytes != len("| a | b |\n| - | - |\n| é | 1 |\n") {
		t.Errorf("part %+v: want job %s, run %s, attempt %d and its size in bytes", *p, c.Job.ID, run.ID, c.Job.Attempt)
	}
	wantTime(t, "step 0 CreatedAt", p.CreatedAt, epoch.Add(time.Second))
	wantTime(t, "step 2 CreatedAt", ps[1].CreatedAt, epoch)
	sizes := b.listSummaries(store.ListSummariesParams{JobID: c.Job.ID, Attempt: c.Job.Attempt})
	if len(sizes) != 2 || sizes[0].Markdown != "" || sizes[1].Markdown != "" || sizes[1].Bytes != len("## Two\n") {
		t.Errorf("parts without their text: %+v", sizes)
	}
	if ps := b.listSummaries(store.ListSummariesParams{JobID: c.Job.ID, Attempt: c.Job.Attempt + 1}); len(ps) != 0 {
		t.Errorf("another attempt lists %d parts", len(ps))
	}
}

// testSummariesResent: a step's summary put again replaces the one kept; a re-sent
// report leaves one part.
func testSummariesResent(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	b.putSummary(c, 0, "first")
	b.putSummary(c, 0, "first")
	if got := summaryTexts(b.listSummaries(store.ListSummariesParams{JobID: c.Job.ID, Markdown: true})); got != "0:first" {
		t.Errorf("after a re-send: %q, want one part", got)
	}
	b.putSummary(c, 0, "again")
	ps := b.listSummaries(store.ListSummariesParams{JobID: c.Job.ID, Markdown: true})
	if got := summaryTexts(ps); got != "0:again" || ps[0].Bytes != 5 {
		t.Errorf("after a put of other text: %q (%d bytes), want it replaced", got, ps[0].Bytes)
	}
}

// testSummariesFenced: only the worker holding the job's lease puts a summary, and only
// into its own attempt; a stale or wrong token changes nothing.
func testSummariesFenced(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create("name: fenced\njobs:\n  work:\n    retry: { max_attempts: 3, on: [lost] }\n    steps: [{run: \"true\"}]\n")
	first := b.claimOne()
	b.putSummary(first, 0, "first attempt")
	put := func(l store.LeaseRef, text string) error {
		return b.s.PutSummary(b.ctx, store.PutSummaryParams{LeaseRef: l, Step: 0, Markdown: text})
	}
	wantErr(t, "wrong token", put(store.LeaseRef{JobID: first.Job.ID, Token: "not-the-token"}, "x"), store.ErrLeaseLost)
	wantErr(t, "empty token", put(store.LeaseRef{JobID: first.Job.ID}, "x"), store.ErrLeaseLost)
	wantErr(t, "unknown job", put(store.LeaseRef{JobID: uuid.New(), Token: first.Lease.Token}, "x"), store.ErrNotFound)

	b.clk.Advance(leaseTTL + time.Second)
	if n := b.reap(); n != 1 {
		t.Fatalf("reaped %d jobs, want 1", n)
	}
	second := b.claimOne()
	wantErr(t, "the lost attempt's token", put(ref(first), "late"), store.ErrLeaseLost)
	b.putSummary(second, 0, "second attempt")
	b.complete(second, store.JobSuccess)
	wantErr(t, "after the completion", put(ref(second), "after"), store.ErrLeaseLost)

	if got := summaryTexts(b.listSummaries(store.ListSummariesParams{JobID: first.Job.ID, Attempt: first.Job.Attempt, Markdown: true})); got != "0:first attempt" {
		t.Errorf("first attempt: %q", got)
	}
	if got := summaryTexts(b.listSummaries(store.ListSummariesParams{JobID: first.Job.ID, Markdown: true})); got != "0:second attempt" {
		t.Errorf("current attempt: %q", got)
	}
}

// testSummariesBounded: an attempt keeps the summaries of MaxSummarySteps steps; one more
// step's is ErrConflict, and a step it keeps may still be put again.
func testSummariesBounded(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	for step := range store.MaxSummarySteps {
		b.putSummary(c, step, "s")
	}
	err := b.s.PutSummary(b.ctx, store.PutSummaryParams{LeaseRef: ref(c), Step: store.MaxSummarySteps, Markdown: "one too many"})
	wantErr(t, "a step past the bound", err, store.ErrConflict)
	b.putSummary(c, 3, "put again")
	ps := b.listSummaries(store.ListSummariesParams{JobID: c.Job.ID, Markdown: true})
	if len(ps) != store.MaxSummarySteps || ps[3].Markdown != "put again" {
		t.Errorf("%d parts kept (step 3: %q), want %d with step 3 replaced", len(ps), ps[3].Markdown, store.MaxSummarySteps)
	}
}

// testSummariesConcurrentBound: puts of different steps racing never keep more than the
// bound.
func testSummariesConcurrentBound(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		kept int
	)
	for step := range store.MaxSummarySteps + 10 {
		wg.Go(func() {
			err := b.s.PutSummary(b.ctx, store.PutSummaryParams{LeaseRef: ref(c), Step: step, Markdown: "s"})
			switch {
			case err == nil:
				mu.Lock()
				kept++
				mu.Unlock()
			case !errors.Is(err, store.ErrConflict):
				t.Errorf("PutSummary(step %d): %v", step, err)
			}
		})
	}
	wg.Wait()
	if ps := b.listSummaries(store.ListSummariesParams{JobID: c.Job.ID}); len(ps) != store.MaxSummarySteps || kept != store.MaxSummarySteps {
		t.Errorf("%d parts kept, %d puts succeeded; want %d", len(ps), kept, store.MaxSummarySteps)
	}
}

// testSummariesOfRun: a run lists the summaries of its jobs' current attempts, in plan
// order, then step; a retried job's earlier attempt is left out, and so is another run.
func testSummariesOfRun(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
jobs:
  first: {steps: [{run: "true"}]}
  second: {needs: [first], steps: [{run: "true"}, {run: "true"}]}
`)
	other, _ := b.create(`jobs: {x: {steps: [{run: "true"}]}}`)
	claims := byKey(b.claimAll())
	first := claims["first"]
	b.putSummary(first, 0, "old")
	b.putSummary(claims["x"], 0, "other run")
	b.complete(first, store.JobFailed)
	b.wantRunDone(run.ID, store.RunFailed)
	if err := b.s.RetryJob(b.ctx, first.Job.ID); err != nil {
		t.Fatalf("RetryJob: %v", err)
	}
	again := b.claimOne()
	b.putSummary(again, 0, "new")
	b.complete(again, store.JobSuccess)
	second := b.claimOne()
	b.putSummary(second, 1, "second's step 1")
	b.putSummary(second, 0, "second's step 0")
	ps := b.listSummaries(store.ListSummariesParams{RunID: run.ID, Markdown: true})
	for _, p := range ps {
		if p.RunID != run.ID {
			t.Errorf("part %q has run %s", p.Markdown, p.RunID)
		}
	}
	if got := summaryTexts(ps); got != "0:new 0:second's step 0 1:second's step 1" {
		t.Errorf("run's parts %q", got)
	}
	if ps[0].JobID != first.Job.ID || ps[0].Attempt != again.Job.Attempt || ps[1].JobID != second.Job.ID {
		t.Errorf("run's parts name jobs and attempts %+v %+v", *ps[0], *ps[1])
	}
	if got := summaryTexts(b.listSummaries(store.ListSummariesParams{JobID: first.Job.ID, Attempt: first.Job.Attempt, Markdown: true})); got != "0:old" {
		t.Errorf("the first attempt's parts %q, want old kept", got)
	}
	if ps := b.listSummaries(store.ListSummariesParams{RunID: other.ID}); len(ps) != 1 || ps[0].Markdown != "" {
		t.Errorf("other run: %+v, want one part without its text", ps)
	}
}

// testSummariesInvalid: a negative step, an empty text, one over the limit, one that is
// not UTF-8 or holds NUL are ErrInvalid and keep nothing; the largest allowed is kept
// whole. Listing nothing is ErrInvalid, an unknown job ErrNotFound, an unknown run empty.
func testSummariesInvalid(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	put := func(step int, text string) error {
		return b.s.PutSummary(b.ctx, store.PutSummaryParams{LeaseRef: ref(c), Step: step, Markdown: text})
	}
	wantErr(t, "step -1", put(-1, "x"), store.ErrInvalid)
	wantErr(t, "empty", put(0, ""), store.ErrInvalid)
	wantErr(t, "over the limit", put(0, strings.Repeat("x", store.MaxSummaryBytes+1)), store.ErrInvalid)
	wantErr(t, "NUL", put(0, "a\x00b"), store.ErrInvalid)
	wantErr(t, "not UTF-8", put(0, "a\xffb"), store.ErrInvalid)
	if ps := b.listSummaries(store.ListSummariesParams{JobID: c.Job.ID}); len(ps) != 0 {
		t.Fatalf("refused puts kept %d parts", len(ps))
	}
	largest := strings.Repeat("é", store.MaxSummaryBytes/2)
	b.putSummary(c, 0, largest)
	if ps := b.listSummaries(store.ListSummariesParams{JobID: c.Job.ID, Markdown: true}); len(ps) != 1 || ps[0].Markdown != largest || ps[0].Bytes != store.MaxSummaryBytes {
		t.Errorf("the largest summary did not read back whole")
	}
	_, err := b.s.ListSummaries(b.ctx, store.ListSummariesParams{})
	wantErr(t, "list of nothing", err, store.ErrInvalid)
	_, err = b.s.ListSummaries(b.ctx, store.ListSummariesParams{JobID: uuid.New()})
	wantErr(t, "list of an unknown job", err, store.ErrNotFound)
	if ps := b.listSummaries(store.ListSummariesParams{RunID: uuid.New()}); len(ps) != 0 {
		t.Errorf("unknown run lists %d", len(ps))
	}
}

// testSummariesRetention: DeleteSummariesBefore deletes the parts put before the cut, and
// only those.
func testSummariesRetention(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}, {run: "true"}]}}`)
	c := b.claimOne()
	b.putSummary(c, 0, "old")
	b.clk.Advance(time.Hour)
	cut := b.clk.Now()
	b.putSummary(c, 1, "new")
	n, err := b.s.DeleteSummariesBefore(b.ctx, cut)
	if err != nil || n != 1 {
		t.Fatalf("DeleteSummariesBefore = %d, %v; want 1", n, err)
	}
	if got := summaryTexts(b.listSummaries(store.ListSummariesParams{JobID: c.Job.ID, Markdown: true})); got != "1:new" {
		t.Errorf("after retention: %q, want the newer part only", got)
	}
}
