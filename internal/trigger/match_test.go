package trigger

import (
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// compileOn compiles a definition with the given on: and one job, and returns its triggers.
func compileOn(t *testing.T, on string) *pipeline.Triggers {
	t.Helper()
	src := "jobs: {a: {steps: [{run: x}]}}\n"
	if on != "" {
		src = "on:\n" + on + "\n" + src
	}
	p, err := pipeline.Compile([]byte(src), pipeline.Options{})
	if err != nil {
		t.Fatalf("compile on:\n%s\n%v", on, err)
	}
	return p.On
}

func push(branch string, paths ...string) Event {
	return Event{Kind: KindPush, Branch: branch, ChangedPaths: paths}
}

func tag(name string) Event { return Event{Kind: KindTag, Tag: name} }

func pr(action, base string, paths ...string) Event {
	return Event{Kind: KindPullRequest, Action: action, BaseBranch: base, ChangedPaths: paths}
}

func wfRun(workflow, action, branch string) Event {
	return Event{Kind: KindWorkflowRun, Workflow: workflow, Action: action, Branch: branch}
}

func TestMatch(t *testing.T) {
	t.Parallel()
	incomplete := func(ev Event) Event { ev.ChangedPathsIncomplete = true; return ev }
	deleted := func(ev Event) Event { ev.Deleted = true; return ev }
	tests := []struct {
		name   string
		on     string // the body of on:, indented by two; "" for a definition without on:
		ev     Event
		want   bool
		reason string // the whole reason, or a part of it when it starts with "~"
	}{
		// No on: every push, nothing else.
		{"no on: branch push", "", push("dev"), true, "push to refs/heads/dev: a pipeline without on: runs on every push"},
		{"no on: tag push", "", tag("v1"), true, "push to refs/tags/v1: a pipeline without on: runs on every push"},
		{"no on: pull request", "", pr("opened", "main"), false, "pull_request opened into main: a pipeline without on: runs only on pushes; add on: [push, pull_request]"},
		{"no on: schedule", "", Event{Kind: KindSchedule}, false, "schedule: a pipeline without on: runs only on pushes"},
		{"no on: dispatch", "", Event{Kind: KindDispatch}, false, "~add on: dispatch"},
		{"no on: branch deletion", "", deleted(push("dev")), false, "push to refs/heads/dev: the push deletes the branch, and a deletion never runs"},
		{"no on: tag deletion", "", deleted(tag("v1")), false, "push to refs/tags/v1: the push deletes the tag, and a deletion never runs"},
		{"unknown kind", "", Event{Kind: "issue"}, false, `event "issue": Gantry does not know this kind of event`},

		// Events on: does not list.
		{"push not listed", "  pull_request:\n  schedule: [{cron: '@daily'}]", push("main"), false, "push to refs/heads/main: on: has no push (it lists pull_request, schedule)"},
		{"pull request not listed", "  push:", pr("opened", "main"), false, "pull_request opened into main: on: has no pull_request (it lists push)"},
		{"schedule not listed", "  push:", Event{Kind: KindSchedule}, false, "schedule: on: has no schedule (it lists push)"},
		{"dispatch not listed", "  push:", Event{Kind: KindDispatch}, false, "dispatch: on: has no dispatch (it lists push); add dispatch to start it by hand"},
		{"schedule listed", "  schedule: [{cron: '@daily'}]", Event{Kind: KindSchedule}, true, "schedule: on: has a schedule"},
		{"dispatch listed", "  workflow_dispatch:", Event{Kind: KindDispatch}, true, "dispatch: on: has dispatch"},
		{"deletion with push listed", "  push:", deleted(push("main")), false, "~a deletion never runs"},

		// workflow_run.
		{"no on: workflow_run", "", wfRun("build", "completed", "main"), false, `workflow_run completed of "build" on main: a pipeline without on: runs only on pushes`},
		{"workflow_run not listed", "  push:", wfRun("build", "completed", "main"), false, `workflow_run completed of "build" on main: on: has no workflow_run (it lists push)`},
		{"workflow_run listed", "  workflow_run: {workflows: [build]}", wfRun("build", "completed", "main"), true, `workflow_run completed of "build" on main: on.workflow_run has no branches filter`},
		{"workflow_run of another workflow", "  workflow_run: {workflows: [build, Docs]}", wfRun("docs", "completed", "main"), false, `workflow_run completed of "docs" on main: "docs" is not in workflows [build, Docs]`},
		{"workflow_run types default to all", "  workflow_run: {workflows: [build]}", wfRun("build", "requested", ""), true, "~has no branches filter"},
		{"workflow_run type not listed", "  workflow_run: {workflows: [build], types: [completed]}", wfRun("build", "in_progress", "main"), false, `workflow_run in_progress of "build" on main: type in_progress is not in types [completed]`},
		{"workflow_run branch in branches", "  workflow_run: {workflows: [build], branches: ['release/**']}", wfRun("build", "completed", "release/1"), true, "~branch release/1 is in branches [release/**]"},
		{"workflow_run branch not in branches", "  workflow_run: {workflows: [build], branches: [main]}", wfRun("build", "completed", "dev"), false, "~branch dev is not in branches [main]"},
		{"workflow_run branch ignored", "  workflow_run: {workflows: [build], branches-ignore: [dev]}", wfRun("build", "completed", "dev"), false, "~branch dev is in branches_ignore [dev]"},
		{"workflow_run of no branch with branches", "  workflow_run: {workflows: [build], branches: [main]}", wfRun("build", "completed", ""), false, "~the run was for no branch, and on.workflow_run filters branches [main]"},
		{"workflow_run of no branch with branches_ignore", "  workflow_run: {workflows: [build], branches_ignore: [dev]}", wfRun("build", "completed", ""), true, "~does not exclude"},

		// Branch and tag filters.
		{"plain push runs on a branch", "  push:", push("anything/at/all"), true, "push to refs/heads/anything/at/all: on.push has no branches filter"},
		{"plain push runs on a tag", "  push:", tag("v9"), true, "push to refs/tags/v9: on.push has no tags filter"},
		{"branch not in branches", "  push: {branches: [main, release/*]}", push("dev"), false, "push to refs/heads/dev: branch dev is not in branches [main, release/*]"},
		{"branch in branches", "  push: {branches: [main, release/*]}", push("release/2.0"), true, "push to refs/heads/release/2.0: branch release/2.0 is in branches [main, release/*]"},
		{"star stops at slash", "  push: {branches: [release/*]}", push("release/2.0/fix"), false, "~is not in branches"},
		{"double star crosses slash", "  push: {branches: ['release/**']}", push("release/2.0/fix"), true, "~is in branches"},
		{"negation excludes", "  push: {branches: ['release/**', '!release/**-alpha']}", push("release/3-alpha"), false, "push to refs/heads/release/3-alpha: branch release/3-alpha is not in branches [release/**, !release/**-alpha]"},
		{"later pattern includes again", "  push: {branches: ['release/**', '!release/**-alpha', release/keep-alpha]}", push("release/keep-alpha"), true, "~is in branches"},
		{"branches_ignore skips", "  push: {branches-ignore: [dev, 'wip/**']}", push("wip/x/y"), false, "push to refs/heads/wip/x/y: branch wip/x/y is in branches_ignore [dev, wip/**]"},
		{"branches_ignore lets others run", "  push: {branches_ignore: [dev]}", push("main"), true, "push to refs/heads/main: branch main is not in branches_ignore [dev]"},
		{"branch filters only: tags do not run", "  push: {branches: [main]}", tag("v1"), false, "push to refs/tags/v1: on.push filters branches only, so tag pushes do not run"},
		{"branches_ignore only: tags do not run", "  push: {branches_ignore: [dev]}", tag("v1"), false, "~filters branches only"},
		{"tag filters only: branches do not run", "  push: {tags: ['v*']}", push("main"), false, "push to refs/heads/main: on.push filters tags only, so branch pushes do not run"},
		{"tag in tags", "  push: {tags: ['v[0-9]+.*']}", tag("v12.0"), true, "push to refs/tags/v12.0: tag v12.0 is in tags [v[0-9]+.*]"},
		{"tag not in tags", "  push: {tags: ['v[0-9]+.*']}", tag("nightly"), false, "push to refs/tags/nightly: tag nightly is not in tags [v[0-9]+.*]"},
		{"tags_ignore skips", "  push: {tags-ignore: ['*-rc*']}", tag("v1-rc1"), false, "push to refs/tags/v1-rc1: tag v1-rc1 is in tags_ignore [*-rc*]"},
		{"both kinds of filter: branch", "  push: {branches: [main], tags: ['v*']}", push("main"), true, "~branch main is in branches"},
		{"both kinds of filter: tag", "  push: {branches: [main], tags: ['v*']}", tag("v2"), true, "~tag v2 is in tags"},
		{"paths do not apply to tags", "  push: {paths: [src/**]}", tag("v1"), true, "push to refs/tags/v1: on.push has no tags filter"},

		// Path filters.
		{"paths: one changed path matches", "  push: {paths: ['src/**']}", push("main", "README.md", "src/app/main.go"), true, "push to refs/heads/main: on.push has no branches filter; changed path src/app/main.go is in paths [src/**]"},
		{"paths: none matches", "  push: {paths: ['src/**', go.mod]}", push("main", "README.md", "docs/x.md"), false, "push to refs/heads/main: on.push has no branches filter; no changed path is in paths [src/**, go.mod]"},
		{"paths: nothing changed", "  push: {paths: ['src/**']}", push("main"), false, "~no path changed, and paths [src/**] needs a change to one"},
		{"paths: negation inside paths", "  push: {paths: ['src/**', '!src/**/*_test.go']}", push("main", "src/a_test.go"), false, "~no changed path is in paths"},
		{"paths_ignore: everything ignored", "  push: {paths_ignore: ['docs/**']}", push("main", "docs/a.md", "docs/b/c.md"), false, "push to refs/heads/main: on.push has no branches filter; every changed path is ignored (docs/**)"},
		{"paths_ignore: one path is not", "  push: {paths-ignore: ['docs/**', '*.md']}", push("main", "README.md", "src/x.go"), true, "~changed path src/x.go is not in paths_ignore [docs/**, *.md]"},
		{"paths_ignore: empty commit runs", "  push: {paths_ignore: ['docs/**']}", push("main"), true, "~no path changed, so paths_ignore [docs/**] skips nothing"},
		{"paths_ignore star stays in its directory", "  push: {paths_ignore: ['*.md']}", push("main", "docs/a.md"), true, "~changed path docs/a.md is not in paths_ignore"},
		{"incomplete list: paths cannot skip", "  push: {paths: ['src/**']}", incomplete(push("main", "README.md")), true, "push to refs/heads/main: on.push has no branches filter; the list of changed paths is incomplete, so paths [src/**] cannot skip the run"},
		{"incomplete list: paths_ignore cannot skip", "  push: {paths_ignore: ['docs/**']}", incomplete(push("main", "docs/a.md")), true, "~the list of changed paths is incomplete, so paths_ignore [docs/**] cannot skip the run"},
		{"incomplete list: branch filter still applies", "  push: {branches: [main], paths: ['src/**']}", incomplete(push("dev")), false, "~branch dev is not in branches [main]"},
		{"branch filter before paths", "  push: {branches: [main], paths: ['src/**']}", push("dev", "src/x"), false, "push to refs/heads/dev: branch dev is not in branches [main]"},

		// Pull requests.
		{"pr default types: opened", "  pull_request:", pr("opened", "main"), true, "pull_request opened into main: on.pull_request has no branches filter"},
		{"pr default types: synchronize", "  pull_request:", pr("synchronize", "main"), true, "~no branches filter"},
		{"pr default types: reopened", "  pull_request:", pr("reopened", "main"), true, "~no branches filter"},
		{"pr default types: not closed", "  pull_request:", pr("closed", "main"), false, "pull_request closed into main: action closed is not in types [opened, synchronize, reopened]"},
		{"pr types closed", "  pull_request: {types: [closed]}", pr("closed", "main"), true, "~no branches filter"},
		{"pr base branch filter", "  pull_request: {branches: [main]}", pr("opened", "feature"), false, "pull_request opened into feature: base branch feature is not in branches [main]"},
		{"pr base branch ignore", "  pull_request: {branches-ignore: ['wip/*']}", pr("opened", "wip/x"), false, "~base branch wip/x is in branches_ignore [wip/*]"},
		{"pr base branch matches", "  pull_request: {branches: ['release/**']}", pr("synchronize", "release/1/2"), true, "pull_request synchronize into release/1/2: base branch release/1/2 is in branches [release/**]"},
		{"pr paths", "  pull_request: {paths: [api/**]}", pr("opened", "main", "web/x.js"), false, "~no changed path is in paths [api/**]"},
		{"pr paths incomplete", "  pull_request: {paths: [api/**]}", incomplete(pr("opened", "main")), true, "~incomplete"},
		{"pr paths_ignore", "  pull_request: {paths-ignore: ['**.md']}", pr("opened", "main", "a/b.md", "c.md"), false, "~every changed path is ignored (**.md)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, reason := Match(compileOn(t, tt.on), tt.ev)
			if got != tt.want {
				t.Errorf("Match = %v (%s), want %v", got, reason, tt.want)
			}
			if part, ok := strings.CutPrefix(tt.reason, "~"); ok {
				if !strings.Contains(reason, part) {
					t.Errorf("reason = %q, want it to contain %q", reason, part)
				}
			} else if reason != tt.reason {
				t.Errorf("reason =\n  %q\nwant\n  %q", reason, tt.reason)
			}
		})
	}
}

// TestMatchHandBuiltTriggers: triggers built in code rather than compiled (a later
// importer of other formats may) are still decided sensibly: no types means the default
// ones, both lists of a pair must pass, and a bad pattern never matches.
func TestMatchHandBuiltTriggers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		tr   *pipeline.Triggers
		ev   Event
		want bool
		part string
	}{
		{"pr without types", &pipeline.Triggers{PullRequest: &pipeline.PullRequestTrigger{}}, pr("opened", "main"), true, ""},
		{"pr without types, closed", &pipeline.Triggers{PullRequest: &pipeline.PullRequestTrigger{}}, pr("closed", "main"), false, "not in types [opened, synchronize, reopened]"},
		{"both lists, included and ignored", &pipeline.Triggers{Push: &pipeline.PushTrigger{Branches: []string{"**"}, BranchesIgnore: []string{"dev"}}}, push("dev"), false, "branch dev is in branches_ignore [dev]"},
		{"both lists, included", &pipeline.Triggers{Push: &pipeline.PushTrigger{Branches: []string{"**"}, BranchesIgnore: []string{"dev"}}}, push("main"), true, "branch main is in branches [**]"},
		{"paths and paths_ignore", &pipeline.Triggers{Push: &pipeline.PushTrigger{Paths: []string{"src/**"}, PathsIgnore: []string{"src/gen/**"}}}, push("main", "src/gen/x.go"), false, "every changed path is ignored (src/gen/**)"},
		{"paths and paths_ignore, one kept", &pipeline.Triggers{Push: &pipeline.PushTrigger{Paths: []string{"src/**"}, PathsIgnore: []string{"src/gen/**"}}}, push("main", "src/gen/x.go", "docs/a", "src/y.go"), true, "changed path src/y.go is not in paths_ignore"},
		{"bad branch pattern", &pipeline.Triggers{Push: &pipeline.PushTrigger{Branches: []string{"["}}}, push("main"), false, "branches filter cannot be applied"},
		{"bad path pattern", &pipeline.Triggers{Push: &pipeline.PushTrigger{Paths: []string{"["}}}, push("main", "a"), false, "paths filter cannot be applied"},
		{"empty triggers", &pipeline.Triggers{}, push("main"), false, "on: has no push (it lists no event)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, reason := Match(tt.tr, tt.ev)
			if got != tt.want || !strings.Contains(reason, tt.part) {
				t.Errorf("Match = %v, %q; want %v and a reason containing %q", got, reason, tt.want, tt.part)
			}
		})
	}
}

// TestPathsMatter: a change matters unless it changed no file or the plan's path filters
// for the event's kind leave out every changed file.
func TestPathsMatter(t *testing.T) {
	t.Parallel()
	filtered := &pipeline.Triggers{
		Push:        &pipeline.PushTrigger{PathsIgnore: []string{"docs/**", "*.md"}},
		PullRequest: &pipeline.PullRequestTrigger{Paths: []string{"src/**"}},
	}
	for _, c := range []struct {
		name    string
		on      *pipeline.Triggers
		kind    Kind
		changed []string
		want    bool
		why     string
	}{
		{"nothing changed", nil, KindPush, nil, false, "no file changed between them"},
		{"nothing changed, filters", filtered, KindPush, []string{}, false, "no file changed between them"},
		{"no filter", nil, KindPush, []string{"README.md"}, true, "1 file changed between them, and the pipeline has no path filter"},
		{"no filter on this kind", &pipeline.Triggers{PullRequest: filtered.PullRequest}, KindPush, []string{"a", "b"}, true,
			"2 files changed between them, and the pipeline has no path filter"},
		{"all ignored", filtered, KindPush, []string{"docs/a.md", "NOTES.md"}, false, "2 files changed between them: every changed path is ignored (docs/**, *.md)"},
		{"one not ignored", filtered, KindPush, []string{"docs/a.md", "main.go"}, true, "2 files changed between them: changed path main.go is not in paths_ignore [docs/**, *.md]"},
		{"schedule reads push filters", filtered, KindSchedule, []string{"docs/a.md"}, false, "1 file changed between them: every changed path is ignored (docs/**, *.md)"},
		{"pull request, outside paths", filtered, KindPullRequest, []string{"docs/a.md"}, false, "1 file changed between them: no changed path is in paths [src/**]"},
		{"pull request, inside paths", filtered, KindPullRequest, []string{"src/x.go"}, true, "1 file changed between them: changed path src/x.go is in paths [src/**]"},
	} {
		got, why := PathsMatter(c.on, c.kind, c.changed)
		if got != c.want || why != c.why {
			t.Errorf("%s: PathsMatter = %v, %q; want %v, %q", c.name, got, why, c.want, c.why)
		}
	}
}
