package pipeline

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"
)

const oneJob = "\njobs: {a: {steps: [{run: x}]}}"

func ptr[T any](v T) *T { return &v }

func TestCompileOn(t *testing.T) {
	t.Parallel()
	defaultPR := &PullRequestTrigger{Types: []string{"opened", "synchronize", "reopened"}}
	tests := []struct {
		name string
		src  string
		want *Triggers
	}{
		{"absent", "name: x", nil},
		{"one event", "on: push", &Triggers{Push: &PushTrigger{}}},
		{"list of events", "on: [push, pull_request]", &Triggers{Push: &PushTrigger{}, PullRequest: defaultPR}},
		{"dispatch short", "on: [dispatch]", &Triggers{Dispatch: &DispatchTrigger{}}},
		{"github's dispatch name", "on: workflow_dispatch", &Triggers{Dispatch: &DispatchTrigger{}}},
		{"mapping with null events", "on:\n  push:\n  pull_request:\n  workflow_dispatch:", &Triggers{Push: &PushTrigger{}, PullRequest: defaultPR, Dispatch: &DispatchTrigger{}}},
		{"push filters", `on:
  push:
    branches: [main, 'release/**', '!release/**-alpha']
    tags: v*
    paths_ignore: [docs/**, '*.md']`, &Triggers{Push: &PushTrigger{
			Branches:    []string{"main", "release/**", "!release/**-alpha"},
			Tags:        []string{"v*"},
			PathsIgnore: []string{"docs/**", "*.md"},
		}}},
		{"github's hyphenated filters", `on:
  push: {branches-ignore: [dev], tags-ignore: [nightly*], paths-ignore: [docs/**]}
  pull_request: {branches-ignore: [wip/*], paths-ignore: [a]}`, &Triggers{
			Push:        &PushTrigger{BranchesIgnore: []string{"dev"}, TagsIgnore: []string{"nightly*"}, PathsIgnore: []string{"docs/**"}},
			PullRequest: &PullRequestTrigger{Types: defaultPR.Types, BranchesIgnore: []string{"wip/*"}, PathsIgnore: []string{"a"}},
		}},
		{"pull request filters", `on:
  pull_request:
    types: [opened, closed]
    branches: main
    paths: [src/**]`, &Triggers{PullRequest: &PullRequestTrigger{Types: []string{"opened", "closed"}, Branches: []string{"main"}, Paths: []string{"src/**"}}}},
		{"schedules", `on:
  schedule:
    - cron: "0 3 * * 1-5"
      timezone: Europe/Berlin
      missed: run_once
    - cron: '@daily'
    - cron: " 30 2 * * MON "
      timezone: UTC`, &Triggers{Schedule: []Schedule{
			{Cron: "0 3 * * 1-5", Timezone: "Europe/Berlin", Missed: MissedRunOnce},
			{Cron: "@daily", Missed: MissedSkip},
			{Cron: "30 2 * * MON", Timezone: "UTC", Missed: MissedSkip},
		}}},
		{"equal schedules are one", `on:
  schedule:
    - cron: "* * * * *"
    - cron: "*/1 * * * *"
    - cron: "0-59  *  * * *"
    - cron: "* * 1-31 * *"
      timezone: UTC
      missed: run_once
    - cron: "0 0 * * *"
    - cron: "@daily"
    - cron: "@daily"
      timezone: Europe/Berlin
    - cron: "* * * * *"`, &Triggers{Schedule: []Schedule{
			{Cron: "* * * * *", Missed: MissedRunOnce},
			{Cron: "0 0 * * *", Missed: MissedSkip},
			{Cron: "@daily", Timezone: "Europe/Berlin", Missed: MissedSkip},
		}}},
		{"days of month and of week that are not alike", `on:
  schedule:
    - cron: "0 0 1 * 1"
    - cron: "0 0 1 * *"
    - cron: "0 0 * * 1"`, &Triggers{Schedule: []Schedule{
			{Cron: "0 0 1 * 1", Missed: MissedSkip},
			{Cron: "0 0 1 * *", Missed: MissedSkip},
			{Cron: "0 0 * * 1", Missed: MissedSkip},
		}}},
		{"dispatch inputs", `on:
  dispatch:
    inputs:
      target:
        type: choice
        options: [staging, production]
        default: staging
        required: true
        description: where to deploy
      dry_run: {type: boolean, default: TRUE}
      replicas: {type: number, default: 1e1}
      note: {}
      count: {default: 3}`, &Triggers{Dispatch: &DispatchTrigger{Inputs: []Input{
			{Name: "target", Type: InputChoice, Options: []string{"staging", "production"}, Default: ptr("staging"), Required: true, Description: "where to deploy"},
			{Name: "dry_run", Type: InputBoolean, Default: ptr("true")},
			{Name: "replicas", Type: InputNumber, Default: ptr("10")},
			{Name: "note", Type: InputString},
			{Name: "count", Type: InputString, Default: ptr("3")},
		}}}},
		{"workflow_run with every filter", `on:
  workflow_run:
    workflows: [Build Docs, test]
    types: [completed]
    branches: [main, 'release/**']`, &Triggers{WorkflowRun: &WorkflowRunTrigger{Workflows: []string{"Build Docs", "test"},
			Types: []string{"completed"}, Branches: []string{"main", "release/**"}}}},
		{"workflow_run types default to all, one name as a string", "on:\n  workflow_run: {workflows: build, branches-ignore: [dev]}",
			&Triggers{WorkflowRun: &WorkflowRunTrigger{Workflows: []string{"build"}, Types: []string{"requested", "in_progress", "completed"},
				BranchesIgnore: []string{"dev"}}}},
		{"json", `{"on": {"push": {"branches": ["main"]}, "schedule": [{"cron": "*/5 * * * *"}]}, "jobs": {"a": {"steps": [{"run": "x"}]}}}`,
			&Triggers{Push: &PushTrigger{Branches: []string{"main"}}, Schedule: []Schedule{{Cron: "*/5 * * * *", Missed: MissedSkip}}}},
		{"merge keys", "x-filters: &f {branches: [main]}\non:\n  push: {<<: *f, tags: [v*]}", &Triggers{Push: &PushTrigger{Branches: []string{"main"}, Tags: []string{"v*"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src := tt.src
			if !strings.HasPrefix(src, "{") {
				src += oneJob
			}
			p, err := Compile([]byte(src), Options{})
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if !reflect.DeepEqual(p.On, tt.want) {
				got, _ := json.Marshal(p.On)
				want, _ := json.Marshal(tt.want)
				t.Errorf("On =\n%s\nwant\n%s", got, want)
			}
			// The plan is stored as JSON: the triggers must survive it.
			b, err := json.Marshal(p)
			if err != nil {
				t.Fatal(err)
			}
			var back Plan
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(back.On, p.On) {
				t.Errorf("On after a JSON round trip = %+v, want %+v", back.On, p.On)
			}
		})
	}
}

// TestCompileOnErrors checks every mistake in on: is reported with its path, line and
// column and says what was expected.
func TestCompileOnErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		src        string
		kind       ErrorKind
		path       string
		line, col  int
		msgContain string
	}{
		{"unknown event in a mapping", "on:\n  pusj: {}", ErrUnknownKey, "on.pusj", 2, 3, `unknown event "pusj" in on; expected one of push, pull_request, schedule, dispatch, workflow_run; did you mean "push"?`},
		{"unknown event as a string", "on: pull-request", ErrInvalid, "on", 1, 5, `did you mean "pull_request"?`},
		{"unknown event in a list", "on: [push, wokflow_dispatch]", ErrInvalid, "on[1]", 1, 12, `did you mean "workflow_dispatch"?`},
		{"unknown event far from any", "on: [release]", ErrInvalid, "on[0]", 1, 6, `unknown event "release"; expected one of push, pull_request, schedule, dispatch, workflow_run`},
		{"event listed twice", "on: [push, push]", ErrDuplicateKey, "on[1]", 1, 12, "event push is given twice"},
		{"dispatch under two names", "on:\n  dispatch:\n  workflow_dispatch:", ErrDuplicateKey, "on.workflow_dispatch", 3, 3, "first on line 2"},
		{"empty list", "on: []", ErrRequired, "on", 1, 5, "names no event"},
		{"empty mapping", "on: {}", ErrRequired, "on", 1, 5, "names no event"},
		{"null", "on:", ErrType, "on", 1, 4, "expected an event name"},
		{"number", "on: 3", ErrInvalid, "on", 1, 5, `unknown event "3"`},
		{"unknown push filter", "on:\n  push:\n    branch: [main]", ErrUnknownKey, "on.push.branch", 3, 5, `did you mean "branches"?`},
		{"unknown pull request filter", "on:\n  pull_request:\n    tags: [v1]", ErrUnknownKey, "on.pull_request.tags", 3, 5, "unknown key \"tags\" in on.pull_request filters"},
		{"filter as mapping", "on:\n  push:\n    branches: {main: 1}", ErrType, "on.push.branches", 3, 15, "expected a list of patterns, found a mapping"},
		{"branches with branches_ignore", "on:\n  push:\n    branches: [main]\n    branches_ignore: [dev]", ErrInvalid, "on.push.branches_ignore", 4, 5, "branches and branches_ignore cannot filter one event together"},
		{"ignore first, then branches", "on:\n  pull_request:\n    branches-ignore: [dev]\n    branches: [main]", ErrInvalid, "on.pull_request.branches", 4, 5, "add patterns starting with ! to branches"},
		{"tags with tags_ignore", "on:\n  push: {tags: [v*], tags-ignore: [v0*]}", ErrInvalid, "on.push.tags-ignore", 2, 22, "tags and tags_ignore"},
		{"paths with paths_ignore", "on:\n  push:\n    paths_ignore: [docs/**]\n    paths: [src/**]", ErrInvalid, "on.push.paths", 4, 5, "paths and paths_ignore"},
		{"both spellings", "on:\n  push:\n    paths_ignore: [a]\n    paths-ignore: [b]", ErrDuplicateKey, "on.push.paths-ignore", 4, 5, "paths_ignore is given twice (first on line 3, as paths_ignore)"},
		{"unclosed class", "on:\n  push:\n    branches: [main, 'release/[0-9']", ErrInvalid, "on.push.branches[1]", 3, 31, `bad pattern "release/[0-9": [ without a matching ]`},
		{"bad range", "on:\n  push:\n    tags: [\"v[9-0]\"]", ErrInvalid, "on.push.tags[0]", 3, 15, "bad range 9-0"},
		{"dangling quantifier", "on:\n  push:\n    paths: ['+x']", ErrInvalid, "on.push.paths[0]", 3, 14, "+ must follow a character"},
		{"escaped pattern keeps the node position", "on:\n  push:\n    paths: [\"a\\\\\"]", ErrInvalid, "on.push.paths[0]", 3, 13, `trailing \`},
		{"only negations", "on:\n  push:\n    branches: ['!main', '!dev']", ErrInvalid, "on.push.branches", 3, 15, "only patterns starting with !, which match nothing; use branches_ignore"},
		{"empty filter list", "on:\n  push:\n    paths: []", ErrRequired, "on.push.paths", 3, 12, "paths is empty and would match nothing"},
		{"empty pattern", "on:\n  push:\n    paths: ['']", ErrInvalid, "on.push.paths[0]", 3, 14, "empty pattern"},
		{"unknown pull request type", "on:\n  pull_request:\n    types: [opend]", ErrInvalid, "on.pull_request.types[0]", 3, 13, `did you mean "opened"?`},
		{"pull request type twice", "on:\n  pull_request:\n    types: [opened, opened]", ErrInvalid, "on.pull_request.types[1]", 3, 21, "listed twice"},
		{"empty types", "on:\n  pull_request:\n    types: []", ErrRequired, "on.pull_request.types", 3, 12, "leave it out for opened, synchronize, reopened"},
		{"schedule short form", "on: [push, schedule]", ErrRequired, "on[1]", 1, 12, "schedule needs a list of cron lines"},
		{"schedule as mapping", "on:\n  schedule: {cron: '* * * * *'}", ErrType, "on.schedule", 2, 13, "expected a list of schedules"},
		{"schedule empty", "on:\n  schedule: []", ErrRequired, "on.schedule", 2, 13, "lists no cron line"},
		{"schedule without cron", "on:\n  schedule:\n    - timezone: UTC", ErrRequired, "on.schedule[0].cron", 3, 7, "needs a cron line"},
		{"cron with four fields", "on:\n  schedule:\n    - cron: '0 3 * *'", ErrInvalid, "on.schedule[0].cron", 3, 13, `cron "0 3 * *": expected exactly 5 fields, found 4`},
		{"cron with seconds", "on:\n  schedule:\n    - cron: '0 0 3 * * *'", ErrInvalid, "on.schedule[0].cron", 3, 13, "expected exactly 5 fields, found 6"},
		{"cron out of range", "on:\n  schedule:\n    - cron: '0 25 * * *'", ErrInvalid, "on.schedule[0].cron", 3, 13, "above maximum"},
		{"cron never fires", "on:\n  schedule:\n    - cron: '0 0 30 2 *'", ErrInvalid, "on.schedule[0].cron", 3, 13, "never fires"},
		{"cron unknown descriptor", "on:\n  schedule:\n    - cron: '@dayly'", ErrInvalid, "on.schedule[0].cron", 3, 13, "unrecognized descriptor"},
		{"cron @every", "on:\n  schedule:\n    - cron: '@every 5m'", ErrInvalid, "on.schedule[0].cron", 3, 13, "@every is not supported"},
		{"cron with a time zone inside", "on:\n  schedule:\n    - cron: 'CRON_TZ=Europe/Berlin 0 3 * * *'", ErrInvalid, "on.schedule[0].cron", 3, 13, "set the time zone with timezone:"},
		{"cron TZ without a space", "on:\n  schedule:\n    - cron: 'TZ=x'", ErrInvalid, "on.schedule[0].cron", 3, 13, "set the time zone with timezone:"},
		{"cron empty", "on:\n  schedule:\n    - cron: ' '", ErrInvalid, "on.schedule[0].cron", 3, 13, "cron line is empty"},
		{"unknown time zone", "on:\n  schedule:\n    - cron: '@daily'\n      timezone: Europe/Berlni", ErrInvalid, "on.schedule[0].timezone", 4, 17, `unknown time zone "Europe/Berlni"; use an IANA name`},
		{"local time zone", "on:\n  schedule:\n    - cron: '@daily'\n      timezone: Local", ErrInvalid, "on.schedule[0].timezone", 4, 17, "depends on the server"},
		{"empty time zone", "on:\n  schedule:\n    - cron: '@daily'\n      timezone: ''", ErrInvalid, "on.schedule[0].timezone", 4, 17, "leave it out for UTC"},
		{"unknown missed policy", "on:\n  schedule:\n    - cron: '@daily'\n      missed: run-once", ErrInvalid, "on.schedule[0].missed", 4, 15, `did you mean "run_once"?`},
		{"too many schedules", "on:\n  schedule:" + manySchedules(MaxSchedules+1), ErrLimit, "on.schedule", 3, 5, "at most 20 distinct schedules, not 21"},
		{"unknown schedule key", "on:\n  schedule:\n    - cron: '@daily'\n      tz: UTC", ErrUnknownKey, "on.schedule[0].tz", 4, 7, `unknown key "tz" in a schedule`},
		{"unknown dispatch key", "on:\n  dispatch:\n    input: {}", ErrUnknownKey, "on.dispatch.input", 3, 5, `did you mean "inputs"?`},
		{"bad input name", "on:\n  dispatch:\n    inputs:\n      'a b': {}", ErrInvalid, "on.dispatch.inputs.a b", 4, 7, "input name"},
		{"unknown input type", "on:\n  dispatch:\n    inputs:\n      x: {type: bool}", ErrInvalid, "on.dispatch.inputs.x.type", 4, 17, "expected one of string, boolean, choice, number"},
		{"unknown input key", "on:\n  dispatch:\n    inputs:\n      x: {requried: true}", ErrUnknownKey, "on.dispatch.inputs.x.requried", 4, 11, `did you mean "required"?`},
		{"boolean default not a boolean", "on:\n  dispatch:\n    inputs:\n      x:\n        type: boolean\n        default: yes", ErrInvalid, "on.dispatch.inputs.x.default", 6, 18, `default does not fit type boolean: expected true or false, found "yes"`},
		{"default before type is still checked", "on:\n  dispatch:\n    inputs:\n      x:\n        default: many\n        type: number", ErrInvalid, "on.dispatch.inputs.x.default", 5, 18, `expected a number, found "many"`},
		{"number default infinite", "on:\n  dispatch:\n    inputs:\n      x: {type: number, default: .inf}", ErrInvalid, "on.dispatch.inputs.x.default", 4, 34, "expected a number"},
		{"choice default not an option", "on:\n  dispatch:\n    inputs:\n      env:\n        type: choice\n        options: [staging, production]\n        default: prodution", ErrInvalid, "on.dispatch.inputs.env.default", 7, 18, `"prodution" is not one of the options (staging, production); did you mean "production"?`},
		{"choice without options", "on:\n  dispatch:\n    inputs:\n      env: {type: choice}", ErrRequired, "on.dispatch.inputs.env.options", 4, 7, "needs a list of options"},
		{"choice with empty options", "on:\n  dispatch:\n    inputs:\n      env: {type: choice, options: []}", ErrRequired, "on.dispatch.inputs.env.options", 4, 36, "needs a list of options"},
		{"options on a string", "on:\n  dispatch:\n    inputs:\n      env: {options: [a]}", ErrInvalid, "on.dispatch.inputs.env.options", 4, 13, "only for inputs of type choice; this one is string"},
		{"option twice", "on:\n  dispatch:\n    inputs:\n      env: {type: choice, options: [a, a]}", ErrInvalid, "on.dispatch.inputs.env.options[1]", 4, 40, `option "a" is listed twice`},
		{"required not a boolean", "on:\n  dispatch:\n    inputs:\n      env: {required: 'yes'}", ErrType, "on.dispatch.inputs.env.required", 4, 23, "expected true or false"},
		{"workflow_run short form", "on: [push, workflow_run]", ErrRequired, "on[1]", 1, 12, "workflow_run needs the workflows whose runs start this one"},
		{"workflow_run without workflows", "on:\n  workflow_run:\n    types: [completed]", ErrRequired, "on.workflow_run.workflows", 3, 5, "needs the workflows"},
		{"workflow_run empty workflows", "on:\n  workflow_run: {workflows: []}", ErrRequired, "on.workflow_run.workflows", 2, 29, "workflows is empty"},
		{"workflow_run workflow twice", "on:\n  workflow_run: {workflows: [a, a]}", ErrInvalid, "on.workflow_run.workflows[1]", 2, 33, `"a" is listed twice`},
		{"workflow_run empty name", "on:\n  workflow_run: {workflows: ['']}", ErrInvalid, "on.workflow_run.workflows[0]", 2, 30, "a workflow name is empty"},
		{"workflow_run unknown type", "on:\n  workflow_run: {workflows: [a], types: [complete]}", ErrInvalid, "on.workflow_run.types[0]", 2, 42, `did you mean "completed"?`},
		{"workflow_run unknown key", "on:\n  workflow_run: {workflows: [a], paths: [x]}", ErrUnknownKey, "on.workflow_run.paths", 2, 34, `unknown key "paths" in on.workflow_run`},
		{"workflow_run branches and ignore", "on:\n  workflow_run:\n    workflows: [a]\n    branches: [main]\n    branches-ignore: [dev]", ErrInvalid, "on.workflow_run.branches-ignore", 5, 5, "branches and branches_ignore cannot filter one event together"},
		{"workflow_run bad branch pattern", "on:\n  workflow_run: {workflows: [a], branches: ['[x']}", ErrInvalid, "on.workflow_run.branches[0]", 2, 46, "bad pattern"},
		{"null default", "on:\n  dispatch:\n    inputs:\n      env: {default: }", ErrType, "on.dispatch.inputs.env.default", 4, 22, "expected a default value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := compileErrs(t, tt.src+oneJob)
			for _, e := range errs {
				if e.Kind == tt.kind && e.Path == tt.path {
					if e.Line != tt.line || e.Column != tt.col || !strings.Contains(e.Message, tt.msgContain) {
						t.Errorf("got %s %q at %d:%d: %s\nwant at %d:%d containing %q", e.Kind, e.Path, e.Line, e.Column, e.Message, tt.line, tt.col, tt.msgContain)
					}
					return
				}
			}
			t.Errorf("no %s error at %q; got:\n%v", tt.kind, tt.path, errs)
		})
	}
}

// TestCompileOnCollectsEveryError: mistakes in on: are all reported together with the
// job mistakes, in document order, as elsewhere in the definition.
// manySchedules returns n distinct schedule entries, each on a line of its own.
func manySchedules(n int) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "\n    - cron: \"%d * * * *\"", i)
	}
	return b.String()
}

// TestCompileManyEqualSchedules: two hundred entries of one minutely schedule are one
// schedule, not a cap exceeded, and the cap counts distinct schedules only.
func TestCompileManyEqualSchedules(t *testing.T) {
	t.Parallel()
	src := "on:\n  schedule:" + strings.Repeat("\n    - cron: \"* * * * *\"", 200) + manySchedules(MaxSchedules-1) + oneJob
	p, err := Compile([]byte(src), Options{})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	if n := len(p.On.Schedule); n != MaxSchedules {
		t.Errorf("compiled %d schedules, want %d: the minutely one once and %d hourly ones", n, MaxSchedules, MaxSchedules-1)
	}
}

func TestCompileOnCollectsEveryError(t *testing.T) {
	t.Parallel()
	errs := compileErrs(t, `on:
  push:
    branches: ['x[']
  schedule:
    - cron: nope
      timezone: Mars/Olympus
jobs:
  a: {needs: [b], steps: [{run: x}]}`)
	var paths []string
	for _, e := range errs {
		paths = append(paths, e.Path)
	}
	want := []string{"on.push.branches[0]", "on.schedule[0].cron", "on.schedule[0].timezone", "jobs.a.needs[0]"}
	if !reflect.DeepEqual(paths, want) {
		t.Errorf("error paths = %q, want %q\n%v", paths, want, errs)
	}
}

func TestScheduleParse(t *testing.T) {
	t.Parallel()
	sched, loc, err := Schedule{Cron: "0 3 * * 1-5", Timezone: "Europe/Berlin"}.Parse()
	if err != nil {
		t.Fatal(err)
	}
	if loc.String() != "Europe/Berlin" {
		t.Errorf("location = %s, want Europe/Berlin", loc)
	}
	// Friday 2026-11-20 12:00 UTC: the next tick is Monday 03:00 in Berlin (UTC+1 in winter).
	got := sched.Next(time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC).In(loc))
	if want := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC); !got.Equal(want) {
		t.Errorf("next tick = %s, want %s", got.UTC(), want)
	}
	if _, loc, err := (Schedule{Cron: "@hourly"}).Parse(); err != nil || loc != time.UTC {
		t.Errorf("Parse without a time zone = %v, %v; want UTC", loc, err)
	}
	for _, bad := range []Schedule{{Cron: "x"}, {Cron: "@daily", Timezone: "Nowhere/Never"}} {
		if _, _, err := bad.Parse(); err == nil {
			t.Errorf("Parse(%+v) succeeded, want an error", bad)
		}
	}
}

func TestInputParse(t *testing.T) {
	t.Parallel()
	choice := Input{Name: "env", Type: InputChoice, Options: []string{"staging", "production"}}
	tests := []struct {
		in      Input
		v, want string
		err     string
	}{
		{Input{Type: InputString}, " any thing ", " any thing ", ""},
		{Input{Type: InputBoolean}, "True", "true", ""},
		{Input{Type: InputBoolean}, "false", "false", ""},
		{Input{Type: InputBoolean}, "1", "", "expected true or false"},
		{Input{Type: InputNumber}, "1e3", "1000", ""},
		{Input{Type: InputNumber}, "-2.50", "-2.5", ""},
		{Input{Type: InputNumber}, " 7 ", "7", ""},
		{Input{Type: InputNumber}, "NaN", "", "expected a number"},
		{Input{Type: InputNumber}, "1e999", "", "expected a number"},
		{Input{Type: InputNumber}, "", "", "expected a number"},
		{choice, "production", "production", ""},
		{choice, "Production", "", `did you mean "production"?`},
	}
	for _, tt := range tests {
		got, err := tt.in.Parse(tt.v)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("%s Parse(%q) = %q, %v; want %q", tt.in.Type, tt.v, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("%s Parse(%q) error = %v, want one containing %q", tt.in.Type, tt.v, err, tt.err)
		}
	}
}
