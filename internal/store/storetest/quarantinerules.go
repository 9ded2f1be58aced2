package storetest

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testreport"
)

var quarantineRuleTests = []test{
	{"FlakyOfOneTest", testFlakyOfOneTest},
	{"ReleaseKeptAsEnded", testQuarantineReleaseKept},
	{"AddKeepsOneInForce", testQuarantineAdd},
	{"AddAtOnceAddsOnce", testQuarantineAddRace},
	{"Rule", testQuarantineRule},
	{"RuleGoesWithProject", testQuarantineRuleGoesWithProject},
}

// flipOn runs a job of project web on sha whose results are rs.
func (b *bundle) flipOn(sha string, rs ...testreport.Result) {
	b.t.Helper()
	b.createRun(`jobs: {a: {steps: [{run: "true"}]}}`, onCommit("main", sha))
	c := b.claimOne()
	b.addTests(c, 0, rs...)
	b.complete(c, store.JobSuccess)
}

// rerun is a test that passed after its tool re-ran it once: flaky by itself.
func rerun(name string) testreport.Result {
	r := tr("p", name, testreport.Passed)
	r.FailedAttempts, r.Message = 1, "first try failed"
	return r
}

// testFlakyOfOneTest: FlakyTests with a test lists that test alone, with the commits it
// flipped on since Since.
func testFlakyOfOneTest(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.flipOn("c1", rerun("TestA"), rerun("TestB"))
	b.clk.Advance(time.Hour)
	b.flipOn("c2", rerun("TestA"))
	b.clk.Advance(time.Hour)
	b.flipOn("c3", rerun("TestA"), tr("p", "TestB", testreport.Passed))
	a := testreport.TestID{Suite: "p", Name: "TestA"}
	got, err := b.s.FlakyTests(b.ctx, store.FlakyTestsParams{Project: "web", Since: epoch, Test: a})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Test != a || got[0].Commits != 3 {
		t.Fatalf("FlakyTests of TestA = %+v, want TestA alone on 3 commits", got)
	}
	got, err = b.s.FlakyTests(b.ctx, store.FlakyTestsParams{Project: "web", Since: epoch.Add(time.Hour), Test: a})
	if err != nil || len(got) != 1 || got[0].Commits != 2 {
		t.Errorf("FlakyTests of TestA an hour on = %+v, %v; want it on 2 commits", got, err)
	}
	got, err = b.s.FlakyTests(b.ctx, store.FlakyTestsParams{Project: "web", Since: epoch.Add(time.Hour),
		Test: testreport.TestID{Suite: "p", Name: "TestB"}})
	if err != nil || len(got) != 0 {
		t.Errorf("FlakyTests of TestB an hour on = %+v, %v; want none", got, err)
	}
}

// testQuarantineReleaseKept: a released quarantine is no longer in force but is listed
// among those that ended, ending when it was released; releasing it again is ErrNotFound.
func testQuarantineReleaseKept(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	test := testreport.TestID{Suite: "p", Name: "TestFlaky"}
	if _, err := b.s.PutQuarantine(b.ctx, store.PutQuarantineParams{Project: "web", Test: test, Owner: "alice",
		ExpiresAt: epoch.Add(48 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Hour)
	if err := b.s.DeleteQuarantine(b.ctx, "web", test); err != nil {
		t.Fatal(err)
	}
	if qs, err := b.s.ListQuarantines(b.ctx, store.ListQuarantinesParams{Project: "web"}); err != nil || len(qs) != 0 {
		t.Errorf("in force after the release: %+v, %v", qs, err)
	}
	qs, err := b.s.ListQuarantines(b.ctx, store.ListQuarantinesParams{Project: "web", Expired: true})
	if err != nil || len(qs) != 1 || !qs[0].ExpiresAt.Equal(epoch.Add(time.Hour)) || qs[0].Owner != "alice" {
		t.Fatalf("ended ones after the release: %+v, %v; want alice's, ended an hour in", qs, err)
	}
	wantErr(t, "release again", b.s.DeleteQuarantine(b.ctx, "web", test), store.ErrNotFound)
}

// testQuarantineAdd: AddQuarantine adds a quarantine to a test with none in force, with
// its audit entry; it leaves one in force as it is, however long, and records nothing;
// once that one ended it adds one again. Its refusals are PutQuarantine's.
func testQuarantineAdd(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	test := testreport.TestID{Suite: "p", Name: "TestFlaky"}
	add := func(owner string, expires time.Time) (*store.Quarantine, bool, error) {
		ctx := store.WithAudit(b.ctx, store.AuditEntry{Actor: store.ActorRule, Action: "test.quarantined", Project: "web", Target: test.String()})
		return b.s.AddQuarantine(ctx, store.PutQuarantineParams{Project: "web", Test: test, Owner: owner, Reason: "flaky on 3 commits",
			CreatedBy: store.ActorRule, ExpiresAt: expires})
	}
	audited := func() int {
		t.Helper()
		return len(b.listAudit(store.ListAuditParams{Action: "test.quarantined"}))
	}
	if _, err := b.s.PutQuarantine(b.ctx, store.PutQuarantineParams{Project: "web", Test: test, Owner: "alice",
		CreatedBy: "bob", ExpiresAt: epoch.Add(30 * 24 * time.Hour)}); err != nil {
		t.Fatal(err)
	}
	q, added, err := add("rule", epoch.Add(14*24*time.Hour))
	if err != nil || added || q.Owner != "alice" || !q.ExpiresAt.Equal(epoch.Add(30*24*time.Hour)) || q.CreatedBy != "bob" {
		t.Fatalf("AddQuarantine over alice's = %+v, added %v, %v; want alice's, as it was", q, added, err)
	}
	if n := audited(); n != 0 {
		t.Errorf("%d entries for a quarantine not added", n)
	}
	qs, err := b.s.ListQuarantines(b.ctx, store.ListQuarantinesParams{Project: "web"})
	if err != nil || len(qs) != 1 || qs[0].Owner != "alice" || !qs[0].ExpiresAt.Equal(epoch.Add(30*24*time.Hour)) {
		t.Fatalf("after AddQuarantine: %+v, %v; want alice's untouched", qs, err)
	}

	b.clk.Advance(31 * 24 * time.Hour)
	now := b.clk.Now()
	q, added, err = add("rule", now.Add(14*24*time.Hour))
	if err != nil || !added || q.Owner != "rule" || q.CreatedBy != store.ActorRule || !q.ExpiresAt.Equal(now.Add(14*24*time.Hour)) {
		t.Fatalf("AddQuarantine once alice's ended = %+v, added %v, %v; want the rule's", q, added, err)
	}
	if n := audited(); n != 1 {
		t.Errorf("%d entries for one quarantine added, want 1", n)
	}
	if _, added, err := add("rule", now.Add(time.Hour)); err != nil || added {
		t.Errorf("AddQuarantine again: added %v, %v; want the first kept", added, err)
	}
	qs, err = b.s.ListQuarantines(b.ctx, store.ListQuarantinesParams{Project: "web"})
	if err != nil || len(qs) != 1 || !qs[0].ExpiresAt.Equal(now.Add(14*24*time.Hour)) || qs[0].Reason != "flaky on 3 commits" {
		t.Errorf("after adding twice: %+v, %v; want the first one", qs, err)
	}
	_, _, err = add("", now.Add(time.Hour))
	wantErr(t, "AddQuarantine without an owner", err, store.ErrInvalid)
	_, _, err = b.s.AddQuarantine(b.ctx, store.PutQuarantineParams{Project: "nope", Test: test, Owner: "a", ExpiresAt: now.Add(time.Hour)})
	wantErr(t, "AddQuarantine in an unknown project", err, store.ErrNotFound)
}

// testQuarantineAddRace: replicas adding one test's quarantine at once add it once and
// record one entry.
func testQuarantineAddRace(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	test := testreport.TestID{Suite: "p", Name: "TestFlaky"}
	const callers = 8
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		added int
		errs  []error
	)
	for i := range callers {
		wg.Go(func() {
			ctx := store.WithAudit(b.ctx, store.AuditEntry{Actor: store.ActorRule, Action: "test.quarantined", Project: "web", Target: test.String()})
			_, ok, err := b.s.AddQuarantine(ctx, store.PutQuarantineParams{Project: "web", Test: test, Owner: fmt.Sprintf("replica-%d", i),
				CreatedBy: store.ActorRule, ExpiresAt: epoch.Add(time.Hour)})
			mu.Lock()
			defer mu.Unlock()
			if ok {
				added++
			}
			if err != nil {
				errs = append(errs, err)
			}
		})
	}
	wg.Wait()
	if added != 1 || len(errs) != 0 {
		t.Fatalf("%d of %d concurrent adds added one (errors %v), want 1", added, callers, errs)
	}
	if n := len(b.listAudit(store.ListAuditParams{Action: "test.quarantined"})); n != 1 {
		t.Errorf("%d audit entries, want 1", n)
	}
}

// testQuarantineRule: a project has no rule until one is set; setting one again
// replaces it; a rule out of bounds is refused; deleting it leaves none. Setting and
// deleting record the context's entry, and a refused change none.
func testQuarantineRule(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	if r, err := b.s.GetQuarantineRule(b.ctx, "web"); err != nil || r != nil {
		t.Fatalf("GetQuarantineRule of a project without one = %+v, %v; want nil", r, err)
	}
	_, err := b.s.GetQuarantineRule(b.ctx, "nope")
	wantErr(t, "GetQuarantineRule of an unknown project", err, store.ErrNotFound)

	rule := &store.QuarantineRule{Project: "web", FlakyCommits: 3, Within: 7 * 24 * time.Hour, For: 14 * 24 * time.Hour,
		Owner: "rule", UpdatedBy: "alice"}
	if err := b.s.PutQuarantineRule(b.audited("test.quarantine_rule_set", "web", "web"), rule); err != nil {
		t.Fatal(err)
	}
	if !rule.UpdatedAt.Equal(epoch) {
		t.Errorf("UpdatedAt = %v, want now", rule.UpdatedAt)
	}
	got, err := b.s.GetQuarantineRule(b.ctx, "web")
	if err != nil || got == nil || *got != *rule {
		t.Fatalf("GetQuarantineRule = %+v, %v; want %+v", got, err, rule)
	}
	if s := got.String(); s != "flaky on 3 commits within 7d: quarantined for 14d" {
		t.Errorf("String() = %q", s)
	}
	b.clk.Advance(time.Minute)
	again := &store.QuarantineRule{Project: "web", FlakyCommits: 1, Within: 36 * time.Hour, For: time.Hour, Owner: "carol"}
	if err := b.s.PutQuarantineRule(b.ctx, again); err != nil {
		t.Fatal(err)
	}
	if got, err := b.s.GetQuarantineRule(b.ctx, "web"); err != nil || got == nil || *got != *again {
		t.Errorf("after setting it again = %+v, %v; want %+v", got, err, again)
	}

	for _, tc := range []struct {
		name string
		mod  func(*store.QuarantineRule)
	}{
		{"no commits", func(r *store.QuarantineRule) { r.FlakyCommits = 0 }},
		{"too many commits", func(r *store.QuarantineRule) { r.FlakyCommits = store.MaxRuleCommits + 1 }},
		{"a window too short", func(r *store.QuarantineRule) { r.Within = time.Hour - time.Second }},
		{"a window too long", func(r *store.QuarantineRule) { r.Within = store.MaxRuleWindow + time.Hour }},
		{"a quarantine too short", func(r *store.QuarantineRule) { r.For = time.Minute }},
		{"a quarantine too long", func(r *store.QuarantineRule) { r.For = store.MaxQuarantine + time.Hour }},
		{"no owner", func(r *store.QuarantineRule) { r.Owner = " " }},
		{"an owner of two lines", func(r *store.QuarantineRule) { r.Owner = "a\nb" }},
	} {
		bad := *rule
		tc.mod(&bad)
		wantErr(t, tc.name, b.s.PutQuarantineRule(b.audited("test.quarantine_rule_set", "web", "web"), &bad), store.ErrInvalid)
	}
	wantErr(t, "a rule of an unknown project", b.s.PutQuarantineRule(b.ctx, &store.QuarantineRule{Project: "nope",
		FlakyCommits: 3, Within: time.Hour, For: time.Hour, Owner: "rule"}), store.ErrNotFound)

	if err := b.s.DeleteQuarantineRule(b.audited("test.quarantine_rule_deleted", "web", "web"), "web"); err != nil {
		t.Fatal(err)
	}
	if r, err := b.s.GetQuarantineRule(b.ctx, "web"); err != nil || r != nil {
		t.Errorf("after deleting it = %+v, %v; want none", r, err)
	}
	wantErr(t, "delete again", b.s.DeleteQuarantineRule(b.audited("test.quarantine_rule_deleted", "web", "web"), "web"), store.ErrNotFound)
	if got := actions(b.listAudit(store.ListAuditParams{Action: "test"})); fmt.Sprint(got) != "[test.quarantine_rule_deleted test.quarantine_rule_set]" {
		t.Errorf("audit = %q, want the one set and the one delete", got)
	}
}

// testQuarantineRuleGoesWithProject: a deleted project's rule and quarantines go with
// it; a project made later under its name has neither.
func testQuarantineRuleGoesWithProject(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.project("web")
	if err := b.s.PutQuarantineRule(b.ctx, &store.QuarantineRule{Project: "web", FlakyCommits: 3, Within: time.Hour,
		For: time.Hour, Owner: "rule"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.s.PutQuarantine(b.ctx, store.PutQuarantineParams{Project: "web", Test: testreport.TestID{Suite: "p", Name: "T"},
		Owner: "alice", ExpiresAt: epoch.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	if err := b.s.DeleteProject(b.ctx, "web"); err != nil {
		t.Fatalf("DeleteProject: %v", err)
	}
	b.project("web")
	if r, err := b.s.GetQuarantineRule(b.ctx, "web"); err != nil || r != nil {
		t.Errorf("the new project's rule = %+v, %v; want none", r, err)
	}
	if qs, err := b.s.ListQuarantines(b.ctx, store.ListQuarantinesParams{Project: "web", Expired: true}); err != nil || len(qs) != 0 {
		t.Errorf("the new project's quarantines = %+v, %v; want none", qs, err)
	}
}
