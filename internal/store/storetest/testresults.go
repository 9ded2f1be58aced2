package storetest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
	"github.com/google/uuid"
)

var testResultTests = []test{
	{"AddAndListed", testResultsAddAndListed},
	{"BySlowest", testResultsBySlowest},
	{"ResentAddsNothing", testResultsResent},
	{"Fenced", testResultsFenced},
	{"Invalid", testResultsInvalid},
	{"ManyInOneBatch", testResultsMany},
	{"History", testResultsHistory},
	{"EvidenceAndFlaky", testResultsEvidence},
	{"FlakyWithinOneReport", testResultsRerunInReport},
	{"Retention", testResultsRetention},
	{"Quarantine", testQuarantine},
}

// onCommit is a run of project web on branch at sha, as a webhook would start it.
func onCommit(branch, sha string) store.CreateRunParams {
	return store.CreateRunParams{Project: "web", Trigger: store.Trigger{Ref: "refs/heads/" + branch, Branch: branch, SHA: sha,
		Event: "push", Verified: store.RefFromWebhook}}
}

func (b *bundle) addTests(c *store.Claim, first int, rs ...testreport.Result) int {
	b.t.Helper()
	n, err := b.s.AddTestResults(b.ctx, store.AddTestResultsParams{LeaseRef: ref(c), First: first, Results: rs})
	if err != nil {
		b.t.Fatalf("AddTestResults(first %d, %d results): %v", first, len(rs), err)
	}
	return n
}

func (b *bundle) listTests(p store.ListTestResultsParams) []*store.TestResult {
	b.t.Helper()
	rs, err := b.s.ListTestResults(b.ctx, p)
	if err != nil {
		b.t.Fatalf("ListTestResults(%+v): %v", p, err)
	}
	return rs
}

func tr(suite, name string, s testreport.Status) testreport.Result {
	r := testreport.Result{Suite: suite, Name: name, Status: s, Duration: 1500 * time.Microsecond}
	if s != testreport.Passed {
		r.Message, r.Output = name+" broke", "output of "+name
	}
	return r
}

// testNames is each result's "suite.name:status".
func testNames(rs []*store.TestResult) string {
	var out []string
	for _, r := range rs {
		out = append(out, fmt.Sprintf("%s:%s", r.ID(), r.Status))
	}
	return strings.Join(out, " ")
}

// testResultsAddAndListed: results read back failing first, then skipped, then passed,
// each with its run, project, branch, commit and job; a passed test keeps no message or
// output; counts by status agree.
func testResultsAddAndListed(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.createRun(`jobs: {unit: {steps: [{run: "true"}]}, lint: {steps: [{run: "true"}]}}`, onCommit("main", "c1"))
	cs := b.claimAll()
	byKey := map[string]*store.Claim{}
	for _, c := range cs {
		byKey[c.Job.Key] = c
	}
	passed := tr("pkg", "TestA", testreport.Passed)
	passed.Message, passed.File, passed.Line = "should not be kept", "a_test.go", 12
	if n := b.addTests(byKey["unit"], 0, passed, tr("pkg", "TestB", testreport.Failed), tr("pkg", "TestC", testreport.Skipped)); n != 3 {
		t.Fatalf("added %d, want 3", n)
	}
	b.addTests(byKey["lint"], 0, tr("lint", "vet", testreport.Errored), tr("lint", "fmt", testreport.Passed))
	rs := b.listTests(store.ListTestResultsParams{RunID: run.ID})
	if got, want := testNames(rs), "pkg.TestB:failed lint.vet:errored pkg.TestC:skipped pkg.TestA:passed lint.fmt:passed"; got != want {
		t.Fatalf("run's results %q, want %q", got, want)
	}
	f := rs[0]
	if f.RunID != run.ID || f.RunNumber != run.Number || f.Project != "web" || f.Branch != "main" || f.SHA != "c1" ||
		f.Job != "unit" || f.Attempt != 1 || f.Index != 1 || f.Message != "TestB broke" || f.Output != "output of TestB" ||
		f.Duration != 1500*time.Microsecond {
		t.Errorf("failed result %+v: want its run, project web, branch main, commit c1, job unit, attempt 1, index 1 and its texts", *f)
	}
	wantTime(t, "CreatedAt", f.CreatedAt, epoch)
	p := rs[3]
	if p.Message != "" || p.Output != "" || p.File != "a_test.go" || p.Line != 12 {
		t.Errorf("passed result %+v: want its file and line, and no message or output", *p)
	}
	failing := b.listTests(store.ListTestResultsParams{RunID: run.ID, Statuses: []testreport.Status{testreport.Failed, testreport.Errored}})
	if got := testNames(failing); got != "pkg.TestB:failed lint.vet:errored" {
		t.Errorf("failing only: %q", got)
	}
	page := b.listTests(store.ListTestResultsParams{RunID: run.ID, Offset: 1, Limit: 2})
	if got := testNames(page); got != "lint.vet:errored pkg.TestC:skipped" {
		t.Errorf("page 2 of 2: %q", got)
	}
	job := b.listTests(store.ListTestResultsParams{JobID: byKey["lint"].Job.ID})
	if got := testNames(job); got != "lint.vet:errored lint.fmt:passed" {
		t.Errorf("job lint: %q", got)
	}
	counts, err := b.s.CountTestResults(b.ctx, store.ListTestResultsParams{RunID: run.ID})
	if err != nil {
		t.Fatal(err)
	}
	if counts[testreport.Passed] != 2 || counts[testreport.Failed] != 1 || counts[testreport.Errored] != 1 || counts[testreport.Skipped] != 1 {
		t.Errorf("counts %v", counts)
	}
	_, err = b.s.ListTestResults(b.ctx, store.ListTestResultsParams{JobID: uuid.New()})
	wantErr(t, "an unknown job", err, store.ErrNotFound)
	_, err = b.s.ListTestResults(b.ctx, store.ListTestResultsParams{})
	wantErr(t, "neither run nor job", err, store.ErrInvalid)
}

// testResultsBySlowest: BySlowest lists a run's results (the current attempt of each
// job) longest first whatever their status, ties by suite and name then job, paged and
// filtered as the default order is; a job's alone when asked.
func testResultsBySlowest(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const def = "jobs:\n  unit:\n    retry: { max_attempts: 2, on: [lost] }\n    steps: [{run: \"true\"}]\n" +
		"  e2e:\n    retry: { max_attempts: 2, on: [lost] }\n    steps: [{run: \"true\"}]\n"
	run, _ := b.createRun(def, onCommit("main", "c1"))
	took := func(suite, name string, s testreport.Status, d time.Duration) testreport.Result {
		r := tr(suite, name, s)
		r.Duration = d
		return r
	}
	byKey := map[string]*store.Claim{}
	for _, c := range b.claimAll() {
		byKey[c.Job.Key] = c
	}
	// Attempt 1 of unit holds the slowest result of all; it is lost (and e2e's first with
	// it), so it is not the run's.
	b.addTests(byKey["unit"], 0, took("u", "TestLost", testreport.Passed, time.Hour))
	b.clk.Advance(leaseTTL + time.Second)
	if n := b.reap(); n != 2 {
		t.Fatalf("reaped %d jobs, want 2", n)
	}
	for _, c := range b.claimAll() {
		byKey[c.Job.Key] = c
	}
	b.addTests(byKey["unit"], 0, took("u", "TestFast", testreport.Passed, time.Millisecond), took("u", "TestSlow", testreport.Failed, 9*time.Second),
		took("u", "TestB", testreport.Passed, 2*time.Second), took("u", "TestSkip", testreport.Skipped, 0))
	b.addTests(byKey["e2e"], 0, took("e", "TestLogin", testreport.Passed, 30*time.Second), took("u", "TestB", testreport.Passed, 2*time.Second),
		took("e", "TestA", testreport.Errored, 2*time.Second))
	slow := func(p store.ListTestResultsParams) string {
		t.Helper()
		p.BySlowest = true
		var out []string
		for _, r := range b.listTests(p) {
			out = append(out, fmt.Sprintf("%s/%s:%s", r.Job, r.ID(), r.Duration))
		}
		return strings.Join(out, " ")
	}
	if got, want := slow(store.ListTestResultsParams{RunID: run.ID}),
		"e2e/e.TestLogin:30s unit/u.TestSlow:9s e2e/e.TestA:2s unit/u.TestB:2s e2e/u.TestB:2s unit/u.TestFast:1ms unit/u.TestSkip:0s"; got != want {
		t.Errorf("the run's results, slowest first:\n got %s\nwant %s", got, want)
	}
	if got, want := slow(store.ListTestResultsParams{RunID: run.ID, Limit: 2, Offset: 1}), "unit/u.TestSlow:9s e2e/e.TestA:2s"; got != want {
		t.Errorf("a page of them: %s, want %s", got, want)
	}
	if got, want := slow(store.ListTestResultsParams{RunID: run.ID, Statuses: []testreport.Status{testreport.Passed}, Limit: 2}),
		"e2e/e.TestLogin:30s unit/u.TestB:2s"; got != want {
		t.Errorf("the slowest passed: %s, want %s", got, want)
	}
	if got, want := slow(store.ListTestResultsParams{JobID: byKey["unit"].Job.ID, Attempt: 1}), "unit/u.TestLost:1h0m0s"; got != want {
		t.Errorf("unit's lost attempt: %s, want %s", got, want)
	}
}

// testResultsResent: a batch sent again adds nothing; one that overlaps adds the new.
func testResultsResent(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	batch := []testreport.Result{tr("s", "one", testreport.Passed), tr("s", "two", testreport.Failed)}
	b.addTests(c, 0, batch...)
	if n := b.addTests(c, 0, batch...); n != 0 {
		t.Errorf("a re-sent batch added %d", n)
	}
	if n := b.addTests(c, 1, batch[1], tr("s", "three", testreport.Passed)); n != 1 {
		t.Errorf("an overlapping batch added %d, want 1", n)
	}
	if rs := b.listTests(store.ListTestResultsParams{JobID: c.Job.ID}); len(rs) != 3 {
		t.Errorf("%d results kept, want 3: %s", len(rs), testNames(rs))
	}
}

// testResultsFenced: only the lease holder adds results, into its own attempt; the run
// lists its jobs' current attempts, and an earlier attempt stays readable by number.
func testResultsFenced(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create("jobs:\n  work:\n    retry: { max_attempts: 3, on: [lost] }\n    steps: [{run: \"true\"}]\n")
	first := b.claimOne()
	b.addTests(first, 0, tr("s", "first", testreport.Failed))
	add := func(l store.LeaseRef) error {
		_, err := b.s.AddTestResults(b.ctx, store.AddTestResultsParams{LeaseRef: l, Results: []testreport.Result{tr("s", "x", testreport.Passed)}})
		return err
	}
	wantErr(t, "wrong token", add(store.LeaseRef{JobID: first.Job.ID, Token: "not-the-token"}), store.ErrLeaseLost)
	wantErr(t, "unknown job", add(store.LeaseRef{JobID: uuid.New(), Token: first.Lease.Token}), store.ErrNotFound)
	b.clk.Advance(leaseTTL + time.Second)
	if n := b.reap(); n != 1 {
		t.Fatalf("reaped %d jobs, want 1", n)
	}
	second := b.claimOne()
	wantErr(t, "the lost attempt's token", add(ref(first)), store.ErrLeaseLost)
	b.addTests(second, 0, tr("s", "second", testreport.Passed))
	b.complete(second, store.JobSuccess)
	wantErr(t, "after the completion", add(ref(second)), store.ErrLeaseLost)
	if got := testNames(b.listTests(store.ListTestResultsParams{RunID: run.ID})); got != "s.second:passed" {
		t.Errorf("the run's current attempts: %q", got)
	}
	if got := testNames(b.listTests(store.ListTestResultsParams{JobID: first.Job.ID, Attempt: 1})); got != "s.first:failed" {
		t.Errorf("attempt 1: %q", got)
	}
}

// testResultsInvalid: what the store refuses, adding nothing of the batch.
func testResultsInvalid(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	long := strings.Repeat("x", testreport.MaxMessageBytes+1)
	for _, tc := range []struct {
		name  string
		first int
		r     testreport.Result
	}{
		{"unknown status", 0, testreport.Result{Name: "a", Status: "broken"}},
		{"no name", 0, testreport.Result{Suite: "s", Status: testreport.Passed}},
		{"NUL in a name", 0, testreport.Result{Name: "a\x00b", Status: testreport.Passed}},
		{"not UTF-8", 0, testreport.Result{Name: "a", Message: "\xff", Status: testreport.Failed}},
		{"message too long", 0, testreport.Result{Name: "a", Message: long, Status: testreport.Failed}},
		{"negative index", -1, testreport.Result{Name: "a", Status: testreport.Passed}},
		{"index past the bound", store.MaxTestResults, testreport.Result{Name: "a", Status: testreport.Passed}},
	} {
		_, err := b.s.AddTestResults(b.ctx, store.AddTestResultsParams{LeaseRef: ref(c), First: tc.first,
			Results: []testreport.Result{tr("s", "fine", testreport.Passed), tc.r}})
		wantErr(t, tc.name, err, store.ErrInvalid)
	}
	if rs := b.listTests(store.ListTestResultsParams{JobID: c.Job.ID}); len(rs) != 0 {
		t.Errorf("refused batches kept %d results", len(rs))
	}
}

// testResultsMany: a batch of thousands, of a length that is no multiple of anything, is
// kept whole and in order.
func testResultsMany(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	const n = 1237
	rs := make([]testreport.Result, n)
	for i := range rs {
		rs[i] = tr("big", fmt.Sprintf("Test%05d", i), testreport.Passed)
	}
	rs[1000].Status = testreport.Failed
	if got := b.addTests(c, 0, rs...); got != n {
		t.Fatalf("added %d, want %d", got, n)
	}
	all := b.listTests(store.ListTestResultsParams{JobID: c.Job.ID})
	if len(all) != n || all[0].Name != "Test01000" || all[1].Name != "Test00000" || all[n-1].Name != fmt.Sprintf("Test%05d", n-1) {
		t.Fatalf("%d results; first %s, second %s: want %d, the failed one first, then in name order", len(all), all[0].Name, all[1].Name, n)
	}
}

// testResultsHistory: one test's results in a project, newest first, on a branch when
// asked, before a time when asked; another suite's test of the same name is another
// test.
func testResultsHistory(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const def = `jobs: {a: {steps: [{run: "true"}]}}`
	type step struct {
		branch, sha string
		status      testreport.Status
	}
	var runs []*store.Run
	for _, s := range []step{{"main", "c1", testreport.Passed}, {"dev", "d1", testreport.Failed}, {"main", "c2", testreport.Failed}} {
		run, _ := b.createRun(def, onCommit(s.branch, s.sha))
		runs = append(runs, run)
		c := b.claimOne()
		b.addTests(c, 0, tr("pkg", "TestX", s.status), tr("other", "TestX", testreport.Passed))
		b.complete(c, store.JobSuccess)
		b.clk.Advance(time.Minute)
	}
	hist := func(p store.TestHistoryParams) string {
		t.Helper()
		p.Project, p.Test = "web", testreport.TestID{Suite: "pkg", Name: "TestX"}
		rs, err := b.s.TestHistory(b.ctx, p)
		if err != nil {
			t.Fatalf("TestHistory(%+v): %v", p, err)
		}
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%d/%s/%s:%s", r.RunNumber, r.Branch, r.SHA, r.Status))
		}
		return strings.Join(out, " ")
	}
	n := func(i int) int { return runs[i].Number }
	if got, want := hist(store.TestHistoryParams{}), fmt.Sprintf("%d/main/c2:failed %d/dev/d1:failed %d/main/c1:passed", n(2), n(1), n(0)); got != want {
		t.Errorf("history %q, want %q", got, want)
	}
	if got, want := hist(store.TestHistoryParams{Branch: "main", Limit: 1}), fmt.Sprintf("%d/main/c2:failed", n(2)); got != want {
		t.Errorf("on main, one: %q, want %q", got, want)
	}
	if got, want := hist(store.TestHistoryParams{Before: epoch.Add(90 * time.Second)}), fmt.Sprintf("%d/dev/d1:failed %d/main/c1:passed", n(1), n(0)); got != want {
		t.Errorf("before the third run: %q, want %q", got, want)
	}
	_, err := b.s.TestHistory(b.ctx, store.TestHistoryParams{Project: "nope", Test: testreport.TestID{Name: "TestX"}})
	wantErr(t, "an unknown project", err, store.ErrNotFound)
}

// testResultsEvidence: a test that failed and passed on one commit (a retried job) is
// flaky with those results as evidence; a test that only failed is not; the evidence
// of a run's failures holds their results on the commit and their latest on the branch
// and the default branch before the run.
func testResultsEvidence(t *testing.T, h Harness) {
	_, b := setup(t, h)
	const def = "jobs:\n  a:\n    retry: { max_attempts: 3, on: [lost] }\n    steps: [{run: \"true\"}]\n"
	// Run 1 on main at c1: TestFlaky passes, TestBroken fails.
	b.createRun(def, onCommit("main", "c1"))
	c := b.claimOne()
	b.addTests(c, 0, tr("p", "TestFlaky", testreport.Passed), tr("p", "TestBroken", testreport.Failed))
	b.complete(c, store.JobFailed)
	b.clk.Advance(time.Minute)
	// Run 2 on feature at c2: attempt 1 fails TestFlaky and is lost; attempt 2 passes it.
	run2, _ := b.createRun(def, onCommit("feature", "c2"))
	first := b.claimOne()
	b.addTests(first, 0, tr("p", "TestFlaky", testreport.Failed), tr("p", "TestBroken", testreport.Failed), tr("p", "TestNew", testreport.Failed))
	b.clk.Advance(leaseTTL + time.Second)
	b.reap()
	second := b.claimOne()
	b.addTests(second, 0, tr("p", "TestFlaky", testreport.Passed), tr("p", "TestBroken", testreport.Failed), tr("p", "TestNew", testreport.Failed))
	b.complete(second, store.JobFailed)

	flaky, err := b.s.FlakyTests(b.ctx, store.FlakyTestsParams{Project: "web", Since: epoch})
	if err != nil {
		t.Fatal(err)
	}
	if len(flaky) != 1 || flaky[0].Test != (testreport.TestID{Suite: "p", Name: "TestFlaky"}) || flaky[0].Commits != 1 {
		t.Fatalf("flaky tests %+v, want p.TestFlaky on one commit", flaky)
	}
	if got := testNames(flaky[0].Evidence); got != "p.TestFlaky:passed p.TestFlaky:failed" || flaky[0].Evidence[1].Attempt != 1 ||
		flaky[0].Evidence[0].Attempt != 2 || flaky[0].Evidence[0].SHA != "c2" {
		t.Errorf("evidence %q (attempts %d, %d): want attempt 2's pass, then attempt 1's failure, on c2",
			got, flaky[0].Evidence[0].Attempt, flaky[0].Evidence[1].Attempt)
	}
	if later, err := b.s.FlakyTests(b.ctx, store.FlakyTestsParams{Project: "web", Since: b.clk.Now().Add(time.Hour)}); err != nil || len(later) != 0 {
		t.Errorf("flaky since an hour on: %+v, %v; want none", later, err)
	}

	ids := []testreport.TestID{{Suite: "p", Name: "TestFlaky"}, {Suite: "p", Name: "TestBroken"}, {Suite: "p", Name: "TestNew"}, {Suite: "p", Name: "TestNever"}}
	ev, err := b.s.TestEvidence(b.ctx, store.TestEvidenceParams{Project: "web", Tests: ids, SHA: "c2", Branch: "feature",
		DefaultBranch: "main", Before: run2.CreatedAt})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := ev[ids[3]]; ok || len(ev) != 3 {
		t.Errorf("evidence of %d tests (%v); want three, none for a test never seen", len(ev), ev)
	}
	if e := ev[ids[0]]; e == nil || testNames(e.OnCommit) != "p.TestFlaky:failed p.TestFlaky:passed" || e.LastOnBranch != nil ||
		e.LastOnDefault == nil || e.LastOnDefault.Status != testreport.Passed || e.LastOnDefault.SHA != "c1" {
		t.Errorf("TestFlaky's evidence %+v: want its failure and pass on c2, nothing earlier on feature, its pass on main", e)
	}
	if e := ev[ids[1]]; e == nil || e.LastOnDefault == nil || e.LastOnDefault.Status != testreport.Failed {
		t.Errorf("TestBroken's evidence %+v: want its failure on main", e)
	}
	if e := ev[ids[2]]; e == nil || e.LastOnDefault != nil || len(e.OnCommit) != 2 {
		t.Errorf("TestNew's evidence %+v: want its two failures on c2 and nothing on main", e)
	}
}

// testResultsRerunInReport: a test its tool re-ran within one report until it passed is
// flaky by that one result, which keeps the failed attempts' message.
func testResultsRerunInReport(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.createRun(`jobs: {a: {steps: [{run: "true"}]}}`, onCommit("main", "c1"))
	c := b.claimOne()
	rerun := tr("p", "TestRerun", testreport.Passed)
	rerun.FailedAttempts, rerun.Message = 2, "first try: timeout"
	b.addTests(c, 0, rerun, tr("p", "TestSteady", testreport.Passed))
	rs := b.listTests(store.ListTestResultsParams{JobID: c.Job.ID})
	if len(rs) != 2 || rs[0].Name != "TestRerun" || rs[0].FailedAttempts != 2 || rs[0].Message != "first try: timeout" {
		t.Fatalf("results %+v: want TestRerun with its 2 failed attempts and their message", rs)
	}
	flaky, err := b.s.FlakyTests(b.ctx, store.FlakyTestsParams{Project: "web", Since: epoch})
	if err != nil {
		t.Fatal(err)
	}
	if len(flaky) != 1 || flaky[0].Test.Name != "TestRerun" || len(flaky[0].Evidence) != 1 {
		t.Fatalf("flaky tests %+v, want TestRerun alone, by its one result", flaky)
	}
}

// testResultsRetention: results added before the cut are deleted, later ones kept.
func testResultsRetention(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`jobs: {a: {steps: [{run: "true"}]}}`)
	c := b.claimOne()
	b.addTests(c, 0, tr("s", "old", testreport.Passed))
	b.clk.Advance(time.Hour)
	b.addTests(c, 1, tr("s", "new", testreport.Passed))
	n, err := b.s.DeleteTestResultsBefore(b.ctx, epoch.Add(time.Minute))
	if err != nil || n != 1 {
		t.Fatalf("DeleteTestResultsBefore = %d, %v; want 1", n, err)
	}
	if got := testNames(b.listTests(store.ListTestResultsParams{JobID: c.Job.ID})); got != "s.new:passed" {
		t.Errorf("after retention: %q", got)
	}
}

// testQuarantine: a quarantine is listed while in force and ends by itself at its
// expiry; putting it again replaces it; it can be ended early; what is not a
// quarantine is refused.
func testQuarantine(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.createRun(`jobs: {a: {steps: [{run: "true"}]}}`, onCommit("main", "c1"))
	flaky := testreport.TestID{Suite: "p", Name: "TestFlaky"}
	put := func(p store.PutQuarantineParams) (*store.Quarantine, error) {
		p.Project = "web"
		if p.Test == (testreport.TestID{}) {
			p.Test = flaky
		}
		return b.s.PutQuarantine(b.ctx, p)
	}
	list := func(p store.ListQuarantinesParams) string {
		t.Helper()
		p.Project = "web"
		qs, err := b.s.ListQuarantines(b.ctx, p)
		if err != nil {
			t.Fatalf("ListQuarantines: %v", err)
		}
		var out []string
		for _, q := range qs {
			out = append(out, fmt.Sprintf("%s:%s:%s", q.Test, q.Owner, q.ExpiresAt.Sub(epoch)))
		}
		return strings.Join(out, " ")
	}
	q, err := put(store.PutQuarantineParams{Owner: "alice", Reason: "races on CI", CreatedBy: "bob", ExpiresAt: epoch.Add(48 * time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if q.Test != flaky || q.Owner != "alice" || q.Reason != "races on CI" || q.CreatedBy != "bob" || !q.CreatedAt.Equal(epoch) {
		t.Errorf("quarantine %+v", *q)
	}
	if _, err := put(store.PutQuarantineParams{Test: testreport.TestID{Suite: "p", Name: "TestOther"}, Owner: "carol",
		ExpiresAt: epoch.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := list(store.ListQuarantinesParams{}); got != "p.TestFlaky:alice:48h0m0s p.TestOther:carol:1h0m0s" {
		t.Errorf("in force: %q", got)
	}
	b.clk.Advance(2 * time.Hour)
	if got := list(store.ListQuarantinesParams{}); got != "p.TestFlaky:alice:48h0m0s" {
		t.Errorf("in force two hours on: %q, want TestOther's ended by itself", got)
	}
	if got := list(store.ListQuarantinesParams{Expired: true}); got != "p.TestFlaky:alice:48h0m0s p.TestOther:carol:1h0m0s" {
		t.Errorf("with the ended ones: %q", got)
	}
	if _, err := put(store.PutQuarantineParams{Owner: "dave", ExpiresAt: epoch.Add(72 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if got := list(store.ListQuarantinesParams{}); got != "p.TestFlaky:dave:72h0m0s" {
		t.Errorf("put again: %q, want it replaced", got)
	}
	if err := b.s.DeleteQuarantine(b.ctx, "web", flaky); err != nil {
		t.Fatal(err)
	}
	if got := list(store.ListQuarantinesParams{}); got != "" {
		t.Errorf("after its release: %q", got)
	}
	wantErr(t, "release again", b.s.DeleteQuarantine(b.ctx, "web", flaky), store.ErrNotFound)
	now := b.clk.Now()
	for _, tc := range []struct {
		name string
		p    store.PutQuarantineParams
	}{
		{"no owner", store.PutQuarantineParams{ExpiresAt: now.Add(time.Hour)}},
		{"no name", store.PutQuarantineParams{Test: testreport.TestID{Suite: "p"}, Owner: "a", ExpiresAt: now.Add(time.Hour)}},
		{"ended already", store.PutQuarantineParams{Owner: "a", ExpiresAt: now}},
		{"too long", store.PutQuarantineParams{Owner: "a", ExpiresAt: now.Add(store.MaxQuarantine + time.Hour)}},
		{"NUL in the owner", store.PutQuarantineParams{Owner: "a\x00", ExpiresAt: now.Add(time.Hour)}},
	} {
		_, err := put(tc.p)
		wantErr(t, tc.name, err, store.ErrInvalid)
	}
	_, err = b.s.PutQuarantine(b.ctx, store.PutQuarantineParams{Project: "nope", Test: flaky, Owner: "a", ExpiresAt: now.Add(time.Hour)})
	wantErr(t, "an unknown project", err, store.ErrNotFound)
}
