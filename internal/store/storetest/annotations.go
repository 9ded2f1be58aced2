package storetest

import (
	"fmt"
	"sync"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var annotationTests = []test{
	{"AddedAndListed", testAnnotationsAddedAndListed},
	{"ResentAddsNothing", testAnnotationsResent},
	{"Bounded", testAnnotationsBounded},
	{"ConcurrentAddsKeepTheBound", testAnnotationsConcurrentBound},
	{"RunListsCurrentAttempts", testAnnotationsOfRun},
	{"Invalid", testAnnotationsInvalid},
}

func (b *bundle) addAnnotations(jobID uuid.UUID, attempt int, as ...*store.Annotation) int {
	b.t.Helper()
	n, err := b.s.AddAnnotations(b.ctx, store.AddAnnotationsParams{JobID: jobID, Attempt: attempt, Annotations: as})
	if err != nil {
		b.t.Fatalf("AddAnnotations: %v", err)
	}
	return n
}

func (b *bundle) listAnnotations(p store.ListAnnotationsParams) []*store.Annotation {
	b.t.Helper()
	as, err := b.s.ListAnnotations(b.ctx, p)
	if err != nil {
		b.t.Fatalf("ListAnnotations(%+v): %v", p, err)
	}
	return as
}

func seqs(as []*store.Annotation) []int64 {
	out := []int64{}
	for _, a := range as {
		out = append(out, a.Seq)
	}
	return out
}

// testAnnotationsAddedAndListed: every field of an annotation reads back, in seq order,
// with the job's run and the store's time.
func testAnnotationsAddedAndListed(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	want := &store.Annotation{Seq: 7, Step: 2, Level: store.AnnotationError, Message: "one\ntwo", Title: "Vet",
		File: "src/a.go", Line: 3, Col: 4, EndLine: 5, EndColumn: 6}
	if n := b.addAnnotations(c.Job.ID, c.Job.Attempt,
		want, &store.Annotation{Seq: 3, Step: -1, Level: store.AnnotationNotice, Message: "fyi"}); n != 2 {
		t.Fatalf("added %d, want 2", n)
	}
	as := b.listAnnotations(store.ListAnnotationsParams{JobID: c.Job.ID})
	if got := fmt.Sprint(seqs(as)); got != "[3 7]" {
		t.Fatalf("seqs %s, want [3 7]", got)
	}
	got := *as[1]
	wantTime(t, "CreatedAt", got.CreatedAt, epoch)
	want.JobID, want.RunID, want.Attempt, want.CreatedAt = c.Job.ID, run.ID, c.Job.Attempt, got.CreatedAt
	if got != *want {
		t.Errorf("annotation\n got %+v\nwant %+v", got, *want)
	}
	if as[0].Step != -1 || as[0].Level != store.AnnotationNotice || as[0].File != "" || as[0].Line != 0 {
		t.Errorf("annotation without properties %+v", *as[0])
	}
	if as := b.listAnnotations(store.ListAnnotationsParams{JobID: c.Job.ID, Attempt: c.Job.Attempt + 1}); len(as) != 0 {
		t.Errorf("another attempt lists %d annotations", len(as))
	}
}

// testAnnotationsResent: an annotation of a seq already recorded is skipped, as a re-sent
// log batch's are.
func testAnnotationsResent(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	a := func(seq int64, msg string) *store.Annotation {
		return &store.Annotation{Seq: seq, Step: 0, Level: store.AnnotationWarning, Message: msg}
	}
	b.addAnnotations(c.Job.ID, c.Job.Attempt, a(1, "first"), a(2, "second"))
	if n := b.addAnnotations(c.Job.ID, c.Job.Attempt, a(2, "again"), a(3, "third")); n != 1 {
		t.Errorf("re-send added %d, want 1", n)
	}
	as := b.listAnnotations(store.ListAnnotationsParams{JobID: c.Job.ID})
	if len(as) != 3 || as[1].Message != "second" {
		t.Errorf("annotations %d, second %q; want 3 and the first record kept", len(as), as[1].Message)
	}
}

// testAnnotationsBounded: of each level, MaxAnnotationsPerStep per step and
// MaxAnnotationsPerJob per attempt are kept; a step not known counts only per attempt.
func testAnnotationsBounded(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	var seq int64
	batch := func(level string, step, n int) []*store.Annotation {
		var as []*store.Annotation
		for range n {
			seq++
			as = append(as, &store.Annotation{Seq: seq, Step: step, Level: level, Message: "m"})
		}
		return as
	}
	if n := b.addAnnotations(c.Job.ID, c.Job.Attempt, batch(store.AnnotationError, 0, store.MaxAnnotationsPerStep+5)...); n != store.MaxAnnotationsPerStep {
		t.Errorf("step 0 errors: added %d, want %d", n, store.MaxAnnotationsPerStep)
	}
	// Another level of the same step has a bound of its own, and so does a later add.
	if n := b.addAnnotations(c.Job.ID, c.Job.Attempt, batch(store.AnnotationWarning, 0, 3)...); n != 3 {
		t.Errorf("step 0 warnings: added %d, want 3", n)
	}
	if n := b.addAnnotations(c.Job.ID, c.Job.Attempt, batch(store.AnnotationError, 0, 1)...); n != 0 {
		t.Errorf("step 0 error past the bound: added %d", n)
	}
	total := store.MaxAnnotationsPerStep
	for step := 1; total < store.MaxAnnotationsPerJob-store.MaxAnnotationsPerStep; step++ {
		total += b.addAnnotations(c.Job.ID, c.Job.Attempt, batch(store.AnnotationError, step, store.MaxAnnotationsPerStep)...)
	}
	left := store.MaxAnnotationsPerJob - total
	if n := b.addAnnotations(c.Job.ID, c.Job.Attempt, batch(store.AnnotationError, -1, left+20)...); n != left {
		t.Errorf("errors of no step: added %d, want the %d the attempt has left", n, left)
	}
	if n := b.addAnnotations(c.Job.ID, c.Job.Attempt, batch(store.AnnotationError, 99, 1)...); n != 0 {
		t.Errorf("error past the attempt's bound: added %d", n)
	}
	if n := b.addAnnotations(c.Job.ID, c.Job.Attempt, batch(store.AnnotationNotice, -1, 2)...); n != 2 {
		t.Errorf("notices: added %d, want 2", n)
	}
	errs := 0
	for _, a := range b.listAnnotations(store.ListAnnotationsParams{JobID: c.Job.ID}) {
		if a.Level == store.AnnotationError {
			errs++
		}
	}
	if errs != store.MaxAnnotationsPerJob {
		t.Errorf("%d errors kept, want %d", errs, store.MaxAnnotationsPerJob)
	}
}

// testAnnotationsConcurrentBound: adds racing on one step never keep more than its bound.
func testAnnotationsConcurrentBound(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			var as []*store.Annotation
			for i := range 4 {
				as = append(as, &store.Annotation{Seq: int64(1 + w*4 + i), Step: 1, Level: store.AnnotationWarning, Message: "m"})
			}
			if _, err := b.s.AddAnnotations(b.ctx, store.AddAnnotationsParams{JobID: c.Job.ID, Attempt: c.Job.Attempt, Annotations: as}); err != nil {
				t.Errorf("AddAnnotations: %v", err)
			}
		})
	}
	wg.Wait()
	if as := b.listAnnotations(store.ListAnnotationsParams{JobID: c.Job.ID}); len(as) != store.MaxAnnotationsPerStep {
		t.Errorf("%d annotations kept, want %d", len(as), store.MaxAnnotationsPerStep)
	}
}

// testAnnotationsOfRun: a run lists the annotations of its jobs' current attempts, in plan
// order; a retried job's earlier attempt is left out.
func testAnnotationsOfRun(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(`
jobs:
  first: {steps: [{run: "true"}]}
  second: {needs: [first], steps: [{run: "true"}]}
`)
	other, _ := b.create(`jobs: {x: {steps: [{run: "true"}]}}`)
	claims := byKey(b.claimAll())
	first := claims["first"]
	b.addAnnotations(first.Job.ID, first.Job.Attempt, &store.Annotation{Seq: 5, Step: 0, Level: store.AnnotationError, Message: "old"})
	b.addAnnotations(claims["x"].Job.ID, claims["x"].Job.Attempt, &store.Annotation{Seq: 1, Step: 0, Level: store.AnnotationError, Message: "other run"})
	b.complete(first, store.JobFailed)
	b.wantRunDone(run.ID, store.RunFailed)
	if err := b.s.RetryJob(b.ctx, first.Job.ID); err != nil {
		t.Fatalf("RetryJob: %v", err)
	}
	again := b.claimOne()
	b.addAnnotations(again.Job.ID, again.Job.Attempt, &store.Annotation{Seq: 9, Step: 0, Level: store.AnnotationNotice, Message: "new"})
	b.complete(again, store.JobSuccess)
	second := b.claimOne()
	b.addAnnotations(second.Job.ID, second.Job.Attempt, &store.Annotation{Seq: 2, Step: 0, Level: store.AnnotationWarning, Message: "second"})
	var got []string
	for _, a := range b.listAnnotations(store.ListAnnotationsParams{RunID: run.ID}) {
		if a.RunID != run.ID {
			t.Errorf("annotation %q has run %s", a.Message, a.RunID)
		}
		got = append(got, a.Message)
	}
	if fmt.Sprint(got) != "[new second]" {
		t.Errorf("run's annotations %q, want [new second]", got)
	}
	if as := b.listAnnotations(store.ListAnnotationsParams{JobID: first.Job.ID, Attempt: first.Job.Attempt}); len(as) != 1 || as[0].Message != "old" {
		t.Errorf("the first attempt's annotations are %d, want old kept", len(as))
	}
	if as := b.listAnnotations(store.ListAnnotationsParams{RunID: other.ID}); len(as) != 1 {
		t.Errorf("other run: %d annotations, want 1", len(as))
	}
}

// testAnnotationsInvalid: an unknown job is ErrNotFound; a bad level, seq or attempt, or a
// list of nothing, ErrInvalid.
func testAnnotationsInvalid(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	add := func(jobID uuid.UUID, attempt int, a store.Annotation) error {
		_, err := b.s.AddAnnotations(b.ctx, store.AddAnnotationsParams{JobID: jobID, Attempt: attempt, Annotations: []*store.Annotation{&a}})
		return err
	}
	ok := store.Annotation{Seq: 1, Level: store.AnnotationError, Message: "m"}
	wantErr(t, "unknown job", add(uuid.New(), 1, ok), store.ErrNotFound)
	wantErr(t, "attempt 0", add(c.Job.ID, 0, ok), store.ErrInvalid)
	bad := ok
	bad.Level = "debug"
	wantErr(t, "level debug", add(c.Job.ID, c.Job.Attempt, bad), store.ErrInvalid)
	bad = ok
	bad.Seq = 0
	wantErr(t, "seq 0", add(c.Job.ID, c.Job.Attempt, bad), store.ErrInvalid)
	_, err := b.s.ListAnnotations(b.ctx, store.ListAnnotationsParams{})
	wantErr(t, "list of nothing", err, store.ErrInvalid)
	_, err = b.s.ListAnnotations(b.ctx, store.ListAnnotationsParams{JobID: uuid.New()})
	wantErr(t, "list of an unknown job", err, store.ErrNotFound)
	if as := b.listAnnotations(store.ListAnnotationsParams{RunID: uuid.New()}); len(as) != 0 {
		t.Errorf("unknown run lists %d", len(as))
	}
}
