package trigger

import (
	"cmp"
	"fmt"
	"strings"

	"github.com/gantry-ci/gantry/internal/glob"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// Kind is what happened.
type Kind string

// The kinds of event a pipeline can react to.
const (
	KindPush        Kind = "push"         // a branch was pushed to
	KindTag         Kind = "tag"          // a tag was pushed
	KindPullRequest Kind = "pull_request" // a pull (merge) request was opened, updated, ...
	KindSchedule    Kind = "schedule"     // a schedule's tick came due
	KindDispatch    Kind = "dispatch"     // someone started the pipeline by hand
	// KindWorkflowRun: a run of a pipeline of the same project was requested, started
	// or ended (GitHub's workflow_run).
	KindWorkflowRun Kind = "workflow_run"
)

// Event is what Match needs to know about an event. It is deliberately independent of
// how the event arrived (a forge's webhook, the scheduler, the API), so that each source
// converts to it and the rules live in one place.
type Event struct {
	Kind Kind
	// Branch is the branch pushed to (KindPush), without refs/heads/.
	Branch string
	// Tag is the tag pushed (KindTag), without refs/tags/.
	Tag string
	// BaseBranch is the branch a pull request would merge into (KindPullRequest).
	BaseBranch string
	// Action is what happened to a pull request: opened, synchronize, reopened, closed;
	// or to a run (KindWorkflowRun): requested, in_progress, completed.
	Action string
	// Workflow is the name of the pipeline whose run it was (KindWorkflowRun); Branch is
	// then the branch that run was for ("" when it had none).
	Workflow string
	// ChangedPaths are the repository paths the push or pull request changed.
	ChangedPaths []string
	// ChangedPathsIncomplete says ChangedPaths may be missing some (the forge lists a
	// bounded number of commits, or none for a new branch). Path filters then never skip
	// a run: building too often is a nuisance, silently not building is a bug.
	ChangedPathsIncomplete bool
	// Deleted says the push deleted Branch or Tag. There is nothing to build.
	Deleted bool
}

// describe names the event the way a reason starts: "push to refs/heads/dev".
func (ev Event) describe() string {
	switch ev.Kind {
	case KindPush:
		return "push to refs/heads/" + ev.Branch
	case KindTag:
		return "push to refs/tags/" + ev.Tag
	case KindPullRequest:
		action := ev.Action
		if action == "" {
			action = "event"
		}
		return fmt.Sprintf("pull_request %s into %s", action, ev.BaseBranch)
	case KindSchedule:
		return "schedule"
	case KindDispatch:
		return "dispatch"
	case KindWorkflowRun:
		d := fmt.Sprintf("workflow_run %s of %q", cmp.Or(ev.Action, "event"), ev.Workflow)
		if ev.Branch != "" {
			d += " on " + ev.Branch
		}
		return d
	}
	return fmt.Sprintf("event %q", string(ev.Kind))
}

// Match decides whether an event starts a run of a pipeline whose compiled on: is t (nil
// for a pipeline without on:, which runs on every push of a branch or tag and on nothing
// else). The reason says why or why not, beginning with the event, as in
// "push to refs/heads/dev: branch dev is not in branches [main, release/*]".
func Match(t *pipeline.Triggers, ev Event) (bool, string) {
	desc := ev.describe()
	no := func(format string, args ...any) (bool, string) {
		return false, desc + ": " + fmt.Sprintf(format, args...)
	}
	if ev.Deleted {
		what := "branch"
		if ev.Kind == KindTag {
			what = "tag"
		}
		return no("the push deletes the %s, and a deletion never runs", what)
	}
	switch ev.Kind {
	case KindPush, KindTag:
		if t == nil {
			return true, desc + ": a pipeline without on: runs on every push"
		}
		if t.Push == nil {
			return no("on: has no push (%s)", listEvents(t))
		}
		return matchPush(t.Push, ev, desc)
	case KindPullRequest:
		if t == nil {
			return no("a pipeline without on: runs only on pushes; add on: [push, pull_request]")
		}
		if t.PullRequest == nil {
			return no("on: has no pull_request (%s)", listEvents(t))
		}
		return matchPullRequest(t.PullRequest, ev, desc)
	case KindSchedule:
		if t == nil {
			return no("a pipeline without on: runs only on pushes")
		}
		if len(t.Schedule) == 0 {
			return no("on: has no schedule (%s)", listEvents(t))
		}
		return true, desc + ": on: has a schedule"
	case KindDispatch:
		if t == nil {
			return no("a pipeline without on: runs only on pushes; add on: dispatch to start it by hand")
		}
		if t.Dispatch == nil {
			return no("on: has no dispatch (%s); add dispatch to start it by hand", listEvents(t))
		}
		return true, desc + ": on: has dispatch"
	case KindWorkflowRun:
		if t == nil {
			return no("a pipeline without on: runs only on pushes")
		}
		if t.WorkflowRun == nil {
			return no("on: has no workflow_run (%s)", listEvents(t))
		}
		return matchWorkflowRun(t.WorkflowRun, ev, desc)
	}
	return no("Gantry does not know this kind of event")
}

// listEvents says what on: does list, so "has no X" is followed by what it has.
func listEvents(t *pipeline.Triggers) string {
	var evs []string
	if t.Push != nil {
		evs = append(evs, "push")
	}
	if t.PullRequest != nil {
		evs = append(evs, "pull_request")
	}
	if len(t.Schedule) > 0 {
		evs = append(evs, "schedule")
	}
	if t.Dispatch != nil {
		evs = append(evs, "dispatch")
	}
	if t.WorkflowRun != nil {
		evs = append(evs, "workflow_run")
	}
	if len(evs) == 0 {
		return "it lists no event"
	}
	return "it lists " + strings.Join(evs, ", ")
}

func matchPush(p *pipeline.PushTrigger, ev Event, desc string) (bool, string) {
	branchFilters := len(p.Branches) > 0 || len(p.BranchesIgnore) > 0
	tagFilters := len(p.Tags) > 0 || len(p.TagsIgnore) > 0
	var why []string
	if ev.Kind == KindTag {
		// As on GitHub: filtering only branches means tags are not wanted, and the other
		// way round; path filters say nothing about a tag, which changes no file.
		if branchFilters && !tagFilters {
			return false, desc + ": on.push filters branches only, so tag pushes do not run"
		}
		ok, reason := refFilter("push", "tag", ev.Tag, "tags", p.Tags, p.TagsIgnore)
		if !ok {
			return false, desc + ": " + reason
		}
		return true, desc + ": " + reason
	}
	if tagFilters && !branchFilters {
		return false, desc + ": on.push filters tags only, so branch pushes do not run"
	}
	ok, reason := refFilter("push", "branch", ev.Branch, "branches", p.Branches, p.BranchesIgnore)
	if !ok {
		return false, desc + ": " + reason
	}
	why = append(why, reason)
	ok, reason = pathFilter(p.Paths, p.PathsIgnore, ev)
	if reason != "" {
		why = append(why, reason)
	}
	return ok, desc + ": " + strings.Join(why, "; ")
}

func matchPullRequest(p *pipeline.PullRequestTrigger, ev Event, desc string) (bool, string) {
	types := p.Types
	if len(types) == 0 {
		types = pipeline.DefaultPullRequestTypes
	}
	if !contains(types, ev.Action) {
		return false, fmt.Sprintf("%s: action %s is not in types %s", desc, ev.Action, list(types))
	}
	ok, reason := refFilter("pull_request", "base branch", ev.BaseBranch, "branches", p.Branches, p.BranchesIgnore)
	if !ok {
		return false, desc + ": " + reason
	}
	why := []string{reason}
	ok, reason = pathFilter(p.Paths, p.PathsIgnore, ev)
	if reason != "" {
		why = append(why, reason)
	}
	return ok, desc + ": " + strings.Join(why, "; ")
}

// matchWorkflowRun matches a run's activity against workflow_run: the run's pipeline must
// be one of workflows (by name, exactly), the activity one of types, and the branch the
// run was for pass the branch filters. A run for no branch (a tag, a commit) passes no
// branches list, as on GitHub, where head_branch is then null.
func matchWorkflowRun(w *pipeline.WorkflowRunTrigger, ev Event, desc string) (bool, string) {
	if !contains(w.Workflows, ev.Workflow) {
		return false, fmt.Sprintf("%s: %q is not in workflows %s", desc, ev.Workflow, list(w.Workflows))
	}
	types := w.Types
	if len(types) == 0 {
		types = pipeline.WorkflowRunTypes
	}
	if !contains(types, ev.Action) {
		return false, fmt.Sprintf("%s: type %s is not in types %s", desc, ev.Action, list(types))
	}
	if ev.Branch == "" && len(w.Branches) > 0 {
		return false, fmt.Sprintf("%s: the run was for no branch, and on.workflow_run filters branches %s", desc, list(w.Branches))
	}
	if ev.Branch == "" && len(w.BranchesIgnore) > 0 {
		return true, fmt.Sprintf("%s: the run was for no branch, which branches_ignore %s does not exclude", desc, list(w.BranchesIgnore))
	}
	ok, reason := refFilter("workflow_run", "branch", ev.Branch, "branches", w.Branches, w.BranchesIgnore)
	return ok, desc + ": " + reason
}

// refFilter applies a positive list or an ignore list (a definition has at most one of
// the two; should a hand-built plan have both, the name must pass both).
func refFilter(event, what, name, key string, include, ignore []string) (bool, string) {
	if len(include) == 0 && len(ignore) == 0 {
		return true, fmt.Sprintf("on.%s has no %s filter", event, key)
	}
	if len(include) > 0 {
		l, err := glob.CompileList(include)
		if err != nil {
			return false, fmt.Sprintf("%s filter cannot be applied: %v", key, err)
		}
		if !l.Match(name) {
			return false, fmt.Sprintf("%s %s is not in %s %s", what, name, key, list(include))
		}
	}
	if len(ignore) > 0 {
		l, err := glob.CompileList(ignore)
		if err != nil {
			return false, fmt.Sprintf("%s_ignore filter cannot be applied: %v", key, err)
		}
		if l.Match(name) {
			return false, fmt.Sprintf("%s %s is in %s_ignore %s", what, name, key, list(ignore))
		}
		if len(include) == 0 {
			return true, fmt.Sprintf("%s %s is not in %s_ignore %s", what, name, key, list(ignore))
		}
	}
	return true, fmt.Sprintf("%s %s is in %s %s", what, name, key, list(include))
}

// pathFilter applies paths (run when any changed path matches) or paths_ignore (skip only
// when every changed path matches). The reason is "" when there is no path filter.
func pathFilter(include, ignore []string, ev Event) (bool, string) {
	if len(include) == 0 && len(ignore) == 0 {
		return true, ""
	}
	filters := "paths " + list(include)
	if len(include) == 0 {
		filters = "paths_ignore " + list(ignore)
	} else if len(ignore) > 0 {
		filters += " and paths_ignore " + list(ignore)
	}
	if ev.ChangedPathsIncomplete {
		return true, "the list of changed paths is incomplete, so " + filters + " cannot skip the run"
	}
	if len(include) > 0 {
		l, err := glob.CompileList(include)
		if err != nil {
			return false, fmt.Sprintf("paths filter cannot be applied: %v", err)
		}
		var hit string
		for _, p := range ev.ChangedPaths {
			if l.Match(p) {
				hit = p
				break
			}
		}
		switch {
		case len(ev.ChangedPaths) == 0:
			return false, "no path changed, and paths " + list(include) + " needs a change to one"
		case hit == "":
			return false, "no changed path is in paths " + list(include)
		}
		if len(ignore) == 0 {
			return true, fmt.Sprintf("changed path %s is in paths %s", hit, list(include))
		}
	}
	l, err := glob.CompileList(ignore)
	if err != nil {
		return false, fmt.Sprintf("paths_ignore filter cannot be applied: %v", err)
	}
	for _, p := range ev.ChangedPaths {
		if !l.Match(p) && (len(include) == 0 || matches(include, p)) {
			return true, fmt.Sprintf("changed path %s is not in paths_ignore %s", p, list(ignore))
		}
	}
	if len(ev.ChangedPaths) == 0 {
		// An empty commit (often pushed to start a build again) ignores nothing.
		return true, "no path changed, so paths_ignore " + list(ignore) + " skips nothing"
	}
	return false, "every changed path is ignored " + parenList(ignore)
}

func matches(patterns []string, s string) bool {
	l, err := glob.CompileList(patterns)
	return err == nil && l.Match(s)
}

func list(items []string) string { return "[" + strings.Join(items, ", ") + "]" }

func parenList(items []string) string { return "(" + strings.Join(items, ", ") + ")" }

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// PathsMatter says whether a change of the paths changed between two commits could
// change what the plan's jobs see, by the path filters its on: sets for events of kind
// (a pull request's filters for KindPullRequest, a push's otherwise), and why. A change
// of no path never matters (the two commits hold the same files); without a path filter
// any other change does. What the test verdicts read: a test that passed on one commit
// and fails on the next though nothing that matters changed between them is flaky.
func PathsMatter(on *pipeline.Triggers, kind Kind, changed []string) (bool, string) {
	if len(changed) == 0 {
		return false, "no file changed between them"
	}
	var include, ignore []string
	switch {
	case on == nil:
	case kind == KindPullRequest && on.PullRequest != nil:
		include, ignore = on.PullRequest.Paths, on.PullRequest.PathsIgnore
	case kind != KindPullRequest && on.Push != nil:
		include, ignore = on.Push.Paths, on.Push.PathsIgnore
	}
	files := "1 file"
	if len(changed) != 1 {
		files = fmt.Sprintf("%d files", len(changed))
	}
	if len(include) == 0 && len(ignore) == 0 {
		return true, files + " changed between them, and the pipeline has no path filter"
	}
	ok, reason := pathFilter(include, ignore, Event{ChangedPaths: changed})
	return ok, files + " changed between them: " + reason
}
