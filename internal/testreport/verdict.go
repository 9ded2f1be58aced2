package testreport

import (
	"fmt"
	"time"
)

// Kind is what a failing test's failure is, decided from its history.
type Kind string

// The kinds of failure, in the order they are decided: the first that holds wins.
const (
	// KindFlaky: the test failed and passed on the same commit (a retry of its job or a
	// rerun of the run), or it passed on the branch's commit before and fails now though
	// nothing that matters changed between the two: the failure says nothing about the
	// change.
	KindFlaky Kind = "flaky"
	// KindKnown: the test's latest result on the default branch before this run is a
	// failure: it was broken before this change.
	KindKnown Kind = "known"
	// KindStill: the test failed on an earlier commit of this branch already, and not on
	// the default branch: broken by an earlier change of the branch.
	KindStill Kind = "still"
	// KindNew: nothing before says the test fails: this commit broke it, as far as the
	// history shows.
	KindNew Kind = "new"
)

// Observation is one result of a test in its history: where and when it was seen.
type Observation struct {
	Status Status
	// FailedAttempts are the reruns the test tool made within its report before a pass.
	FailedAttempts int
	Run            int // the run's number in its project
	Job            string
	Attempt        int
	Branch         string
	SHA            string
	At             time.Time
}

func (o Observation) String() string {
	sha := o.SHA
	if len(sha) > 12 {
		sha = sha[:12]
	}
	status := string(o.Status)
	if o.Status == Passed && o.FailedAttempts > 0 {
		reruns := "reruns"
		if o.FailedAttempts == 1 {
			reruns = "rerun"
		}
		status = fmt.Sprintf("passed after %d failed %s", o.FailedAttempts, reruns)
	}
	return fmt.Sprintf("%s in run %d (%s attempt %d) on %s at %s", status, o.Run, o.Job, o.Attempt, o.Branch, sha)
}

// Evidence is what a failing test's verdict is decided from.
type Evidence struct {
	// OnCommit are the test's results on the commit judged, in any run and attempt,
	// this run's included.
	OnCommit []Observation
	// LastOnBranch and LastOnDefault are its latest results on the run's branch and on
	// the project's default branch before the run judged; nil when there is none.
	LastOnBranch, LastOnDefault *Observation
	// Unchanged, when set, says LastOnBranch is a pass on another commit and why nothing
	// that matters to the test changed between that commit and the one judged ("no file
	// changed between them", or what the pipeline's path filters leave out). Set by the
	// caller, which can read the repository.
	Unchanged string
}

// Verdict is a failing test's kind of failure, why, and the observations that show it.
type Verdict struct {
	Kind     Kind
	Why      string
	Evidence []Observation
}

// Judge decides what a failing test's failure is. The rules, in order:
//   - flaky when it both failed and passed on the commit judged (a pass after failed
//     reruns within one report is both);
//   - flaky when it passed on the branch's commit before and nothing that matters
//     changed since (Evidence.Unchanged);
//   - known when its latest result on the default branch before the run failed;
//   - still when its latest result on the run's branch before the run failed;
//   - new otherwise, citing the passes before it when there are any.
//
// A commit judged by a run with no commit (no OnCommit but this run's) can only be
// known, still or new.
func Judge(ev Evidence) Verdict {
	var fail, pass *Observation
	for i := range ev.OnCommit {
		o := &ev.OnCommit[i]
		if o.Status == Passed && o.FailedAttempts > 0 {
			// The test tool saw it fail and pass in one report: flaky by itself.
			return Verdict{Kind: KindFlaky, Why: "failed and passed on the same commit: " + o.String(), Evidence: []Observation{*o}}
		}
		switch {
		case o.Status.Failing() && fail == nil:
			fail = o
		case o.Status == Passed && pass == nil:
			pass = o
		}
	}
	if fail != nil && pass != nil {
		first, second := *fail, *pass
		if second.At.Before(first.At) {
			first, second = second, first
		}
		return Verdict{Kind: KindFlaky, Why: fmt.Sprintf("failed and passed on the same commit: %s; %s", first, second),
			Evidence: []Observation{first, second}}
	}
	if b := ev.LastOnBranch; b != nil && ev.Unchanged != "" && b.Status == Passed {
		v := Verdict{Kind: KindFlaky, Evidence: []Observation{*b}}
		if fail != nil {
			v.Evidence = append(v.Evidence, *fail)
		}
		v.Why = fmt.Sprintf("passed on the commit before and fails now, though %s: %s", ev.Unchanged, b)
		return v
	}
	if d := ev.LastOnDefault; d != nil && d.Status.Failing() {
		return Verdict{Kind: KindKnown, Why: "already failing on the default branch: " + d.String(), Evidence: []Observation{*d}}
	}
	if b := ev.LastOnBranch; b != nil && b.Status.Failing() {
		return Verdict{Kind: KindStill, Why: "failing on this branch since an earlier commit: " + b.String(), Evidence: []Observation{*b}}
	}
	v := Verdict{Kind: KindNew, Why: "no earlier failure: first seen failing on this commit"}
	for _, o := range []*Observation{ev.LastOnBranch, ev.LastOnDefault} {
		if o != nil {
			v.Evidence = append(v.Evidence, *o)
		}
	}
	if len(v.Evidence) > 0 {
		v.Why = "first seen failing on this commit; before it: " + v.Evidence[0].String()
	}
	return v
}

// Tally counts verdicts by kind, for a run's headline ("1 new failure, 2 known flaky").
type Tally map[Kind]int

// String says the tally as a person would, new failures first; "" when empty.
func (t Tally) String() string {
	var out string
	for _, k := range []struct {
		kind      Kind
		one, many string
	}{
		{KindNew, "1 new failure", "%d new failures"},
		{KindStill, "1 still failing", "%d still failing"},
		{KindKnown, "1 known broken", "%d known broken"},
		{KindFlaky, "1 known flaky", "%d known flaky"},
	} {
		n := t[k.kind]
		if n == 0 {
			continue
		}
		if out != "" {
			out += ", "
		}
		if n == 1 {
			out += k.one
		} else {
			out += fmt.Sprintf(k.many, n)
		}
	}
	return out
}
