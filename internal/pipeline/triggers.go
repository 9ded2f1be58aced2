package pipeline

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	// Time zones of schedules are checked when a definition is compiled; a coordinator
	// built into a minimal container image has no /usr/share/zoneinfo, and without the
	// embedded copy every timezone: but UTC would be refused there and accepted elsewhere.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"
	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/glob"
)

// Triggers is a pipeline's compiled `on:`: the events that start a run of it. A plan
// whose On is nil (a definition without on:) runs on every push, of branches and of
// tags, and on nothing else. internal/trigger decides whether an event matches.
type Triggers struct {
	Push        *PushTrigger        `json:"push,omitempty"`
	PullRequest *PullRequestTrigger `json:"pull_request,omitempty"`
	Schedule    []Schedule          `json:"schedule,omitempty"`
	Dispatch    *DispatchTrigger    `json:"dispatch,omitempty"`
	WorkflowRun *WorkflowRunTrigger `json:"workflow_run,omitempty"`
}

// PushTrigger filters pushes. Every list holds patterns of package trigger/glob. Without
// Branches, BranchesIgnore, Tags and TagsIgnore a push of any branch or tag matches; with
// only branch filters tag pushes do not match, and with only tag filters branch pushes do
// not. Paths and PathsIgnore apply to branch pushes only, as on GitHub.
type PushTrigger struct {
	Branches       []string `json:"branches,omitempty"`
	BranchesIgnore []string `json:"branches_ignore,omitempty"`
	Tags           []string `json:"tags,omitempty"`
	TagsIgnore     []string `json:"tags_ignore,omitempty"`
	Paths          []string `json:"paths,omitempty"`
	PathsIgnore    []string `json:"paths_ignore,omitempty"`
}

// PullRequestTrigger filters pull (merge) requests. Branches and BranchesIgnore match the
// request's base branch, the one it would merge into.
type PullRequestTrigger struct {
	// Types lists the actions that match; never empty (DefaultPullRequestTypes when the
	// definition names none).
	Types          []string `json:"types"`
	Branches       []string `json:"branches,omitempty"`
	BranchesIgnore []string `json:"branches_ignore,omitempty"`
	Paths          []string `json:"paths,omitempty"`
	PathsIgnore    []string `json:"paths_ignore,omitempty"`
}

// The pull request actions `types:` may name.
const (
	PullRequestOpened      = "opened"
	PullRequestSynchronize = "synchronize" // new commits were pushed to the head
	PullRequestReopened    = "reopened"
	PullRequestClosed      = "closed"
)

// DefaultPullRequestTypes are the actions a pull_request trigger reacts to when it names
// none: the ones after which the head holds code nobody has built yet.
var DefaultPullRequestTypes = []string{PullRequestOpened, PullRequestSynchronize, PullRequestReopened}

var pullRequestTypes = []string{PullRequestOpened, PullRequestSynchronize, PullRequestReopened, PullRequestClosed}

// Schedule is one cron line of `on: schedule`.
type Schedule struct {
	// Cron is five fields (minute hour day-of-month month day-of-week) or a descriptor
	// such as @daily.
	Cron string `json:"cron"`
	// Timezone is the IANA zone the cron line is read in; "" means UTC.
	Timezone string       `json:"timezone,omitempty"`
	Missed   MissedPolicy `json:"missed"`
}

// MissedPolicy says what a schedule does about ticks that passed while no coordinator
// could fire them.
type MissedPolicy string

// The missed-tick policies.
const (
	MissedSkip    MissedPolicy = "skip"     // the default: only fire ticks that are due now
	MissedRunOnce MissedPolicy = "run_once" // fire the latest missed tick once
)

// cronParser reads the standard five fields and the fixed descriptors. Seconds are not
// offered: a schedule starts whole pipelines, and minute resolution is what every other
// CI system gives.
var cronParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// Parse compiles the schedule's cron line and loads its time zone. Ticks are computed by
// passing times in that location to the returned schedule's Next.
func (s Schedule) Parse() (cron.Schedule, *time.Location, error) {
	sched, err := parseCron(s.Cron)
	if err != nil {
		return nil, nil, err
	}
	loc, err := loadZone(s.Timezone)
	if err != nil {
		return nil, nil, err
	}
	return sched, loc, nil
}

// parseCron rejects what the cron library would accept but a schedule must not mean: a
// time zone inside the line (it has its own key) and @every, whose ticks depend on when
// counting started, so two coordinators would not agree on them.
func parseCron(line string) (sched cron.Schedule, err error) {
	l := strings.TrimSpace(line)
	switch {
	case l == "":
		return nil, errors.New("cron line is empty")
	case strings.HasPrefix(l, "TZ=") || strings.HasPrefix(l, "CRON_TZ="):
		return nil, errors.New("set the time zone with timezone:, not inside the cron line")
	case strings.HasPrefix(l, "@every"):
		return nil, errors.New("@every is not supported: ticks must fall at fixed times so that every coordinator agrees on them; write a cron line such as */15 * * * *")
	}
	defer func() {
		// The library indexes into the line in places; a line from the network must not
		// crash the coordinator.
		if r := recover(); r != nil {
			sched, err = nil, fmt.Errorf("cannot parse cron line: %v", r)
		}
	}()
	sched, err = cronParser.Parse(l)
	if err != nil {
		return nil, err
	}
	// The library looks up to five years ahead; a line such as "0 0 30 2 *" (February
	// 30th) finds nothing and would silently never run.
	if sched.Next(time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)).IsZero() {
		return nil, errors.New("this cron line never fires")
	}
	return sched, nil
}

func loadZone(name string) (*time.Location, error) {
	switch name {
	case "", "UTC":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`time zone "Local" depends on the server; name the zone, such as Europe/Berlin`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q; use an IANA name such as Europe/Berlin, America/New_York or UTC", name)
	}
	return loc, nil
}

// WorkflowRunTrigger starts a run when a run of another pipeline of the same project (or
// of this one) is requested, starts or ends: GitHub's workflow_run. Workflows are the
// names (a definition's name:) whose runs count; Branches and BranchesIgnore match the
// branch the triggering run was for (patterns of package trigger/glob).
type WorkflowRunTrigger struct {
	Workflows []string `json:"workflows"`
	// Types lists the activity types that match; never empty (every one of
	// WorkflowRunTypes when the definition names none, as on GitHub).
	Types          []string `json:"types"`
	Branches       []string `json:"branches,omitempty"`
	BranchesIgnore []string `json:"branches_ignore,omitempty"`
}

// The activity types of workflow_run `types:` may name.
const (
	WorkflowRunRequested  = "requested"   // the run was created
	WorkflowRunInProgress = "in_progress" // its first job started
	WorkflowRunCompleted  = "completed"   // it ended: success, failed or cancelled
)

// WorkflowRunTypes are the activity types of workflow_run, which are also what it reacts
// to when it names none (GitHub's default).
var WorkflowRunTypes = []string{WorkflowRunRequested, WorkflowRunInProgress, WorkflowRunCompleted}

// MaxWorkflowRunDepth is how many runs of workflow_run may follow one another from a run
// that was not itself started by one: a run that far down the chain starts none, as on
// GitHub, so definitions that name each other (or themselves) cannot run forever.
const MaxWorkflowRunDepth = 3

// DispatchTrigger allows starting a run by hand (`gantry dispatch`, REST, the dashboard).
type DispatchTrigger struct {
	// Inputs in the order the definition declares them, which is the order a form shows.
	Inputs []Input `json:"inputs,omitempty"`
}

// Input returns the input with the given name, or false.
func (d *DispatchTrigger) Input(name string) (Input, bool) {
	if d != nil {
		for _, in := range d.Inputs {
			if in.Name == name {
				return in, true
			}
		}
	}
	return Input{}, false
}

// InputType is the type of a dispatch input.
type InputType string

// The input types.
const (
	InputString  InputType = "string"
	InputBoolean InputType = "boolean"
	InputChoice  InputType = "choice"
	InputNumber  InputType = "number"
)

var inputTypes = []string{string(InputString), string(InputBoolean), string(InputChoice), string(InputNumber)}

// Input is one typed parameter of a manual dispatch.
type Input struct {
	Name        string    `json:"name"`
	Type        InputType `json:"type"`
	Description string    `json:"description,omitempty"`
	Required    bool      `json:"required,omitempty"`
	// Default is the canonical text of the default value (see Parse); nil when there is none.
	Default *string `json:"default,omitempty"`
	// Options are the allowed values of a choice input.
	Options []string `json:"options,omitempty"`
}

// Parse checks a value given for the input and returns its canonical text: booleans as
// true or false, numbers in shortest decimal form (1e3 is 1000), strings and choices as
// given.
func (in Input) Parse(v string) (string, error) {
	switch in.Type {
	case InputBoolean:
		switch strings.ToLower(strings.TrimSpace(v)) {
		case "true":
			return "true", nil
		case "false":
			return "false", nil
		}
		return "", fmt.Errorf("expected true or false, found %q", v)
	case InputNumber:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
			return "", fmt.Errorf("expected a number, found %q", v)
		}
		return strconv.FormatFloat(f, 'f', -1, 64), nil
	case InputChoice:
		if !contains(in.Options, v) {
			return "", fmt.Errorf("%q is not one of the options (%s)%s", v, strings.Join(in.Options, ", "), suggest(v, in.Options))
		}
		return v, nil
	}
	return v, nil
}

// The event names `on:` understands, and the other spellings accepted for them (GitHub's,
// so that a workflow file reads the same).
var (
	onEvents     = []string{"push", "pull_request", "schedule", "dispatch", "workflow_run"}
	onEventAlias = map[string]string{"workflow_dispatch": "dispatch"}
	onCandidates = append(append([]string(nil), onEvents...), "workflow_dispatch")

	pushKeys        = []string{"branches", "branches_ignore", "tags", "tags_ignore", "paths", "paths_ignore", "branches-ignore", "tags-ignore", "paths-ignore"}
	pullRequestKeys = []string{"types", "branches", "branches_ignore", "paths", "paths_ignore", "branches-ignore", "paths-ignore"}
	scheduleKeys    = []string{"cron", "timezone", "missed"}
	dispatchKeys    = []string{"inputs"}
	workflowRunKeys = []string{"workflows", "types", "branches", "branches_ignore", "branches-ignore"}
	inputKeys       = []string{"type", "description", "required", "default", "options"}
	missedPolicies  = []string{string(MissedSkip), string(MissedRunOnce)}

	inputNamePattern = jobNamePattern
)

// filterKey maps GitHub's hyphenated filter names to Gantry's.
func filterKey(k string) string { return strings.ReplaceAll(k, "-", "_") }

// on decodes the top-level on: in its three shapes: one event name, a list of names, or a
// mapping of names to their filters.
func (d *decoder) on(n *yaml.Node, p string) *Triggers {
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	t := &Triggers{}
	seen := map[string]*yaml.Node{}
	// claim records an event as given once, whatever its spelling.
	claim := func(name string, at *yaml.Node, path string, mapping bool) (string, bool) {
		ev := name
		if alias, ok := onEventAlias[name]; ok {
			ev = alias
		}
		if !contains(onEvents, ev) {
			if mapping {
				d.add(ErrUnknownKey, at, path, "unknown event %q in on; expected one of %s%s", name, strings.Join(onEvents, ", "), suggest(name, onCandidates))
			} else {
				d.add(ErrInvalid, at, path, "unknown event %q; expected one of %s%s", name, strings.Join(onEvents, ", "), suggest(name, onCandidates))
			}
			return "", false
		}
		if first, dup := seen[ev]; dup {
			d.add(ErrDuplicateKey, at, path, "event %s is given twice (first on line %d)", ev, first.Line)
			return "", false
		}
		seen[ev] = at
		return ev, true
	}
	switch r.Kind {
	case yaml.MappingNode:
		fs := d.fields(n, p, "a mapping of events")
		if len(fs) == 0 && !d.abort {
			d.add(ErrRequired, n, p, "on: names no event; leave on: out to run on every push")
			return nil
		}
		for _, f := range fs {
			if d.abort {
				return nil
			}
			if ev, ok := claim(f.key, f.keyNode, f.path, true); ok {
				d.onEvent(t, ev, f.keyNode, f.val, f.path)
			}
		}
	default:
		items := d.items(n, p, "an event name, a list of event names or a mapping of events to their filters", true)
		if items == nil {
			if r.Kind == yaml.SequenceNode {
				d.add(ErrRequired, n, p, "on: names no event; leave on: out to run on every push")
			}
			return nil
		}
		for i, item := range items {
			ip := p // on: push names its one event at on itself
			if r.Kind == yaml.SequenceNode {
				ip = indexPath(p, i)
			}
			v, ok := d.str(item, ip, "an event name")
			if !ok {
				continue
			}
			if ev, ok := claim(v, d.resolve(item), ip, false); ok {
				d.onEvent(t, ev, d.resolve(item), nil, ip)
			}
		}
	}
	return t
}

// onEvent decodes one event's settings; val is nil for the short forms (on: push).
func (d *decoder) onEvent(t *Triggers, ev string, at, val *yaml.Node, p string) {
	if val != nil {
		if r := d.resolve(val); r == nil {
			return
		} else if r.Kind == yaml.ScalarNode && r.Tag == "!!null" {
			val = nil // push: with nothing after it means the same as on: [push]
		}
	}
	switch ev {
	case "push":
		t.Push = &PushTrigger{}
		if val != nil {
			f := d.filters(val, p, "on.push filters", pushKeys)
			t.Push.Branches, t.Push.BranchesIgnore = f["branches"], f["branches_ignore"]
			t.Push.Tags, t.Push.TagsIgnore = f["tags"], f["tags_ignore"]
			t.Push.Paths, t.Push.PathsIgnore = f["paths"], f["paths_ignore"]
		}
	case "pull_request":
		t.PullRequest = &PullRequestTrigger{Types: append([]string(nil), DefaultPullRequestTypes...)}
		if val != nil {
			f := d.filters(val, p, "on.pull_request filters", pullRequestKeys)
			if types, ok := f["types"]; ok {
				t.PullRequest.Types = types
			}
			t.PullRequest.Branches, t.PullRequest.BranchesIgnore = f["branches"], f["branches_ignore"]
			t.PullRequest.Paths, t.PullRequest.PathsIgnore = f["paths"], f["paths_ignore"]
		}
	case "schedule":
		if val == nil {
			d.add(ErrRequired, at, p, `schedule needs a list of cron lines, such as schedule: [{cron: "0 3 * * *"}]`)
			return
		}
		t.Schedule = d.schedules(val, p)
	case "dispatch":
		t.Dispatch = &DispatchTrigger{}
		if val != nil {
			d.object(val, p, "on.dispatch", dispatchKeys, func(f field) {
				t.Dispatch.Inputs = d.inputs(f.val, f.path)
			})
		}
	case "workflow_run":
		t.WorkflowRun = d.workflowRun(at, val, p)
	}
}

// workflowRun decodes on: workflow_run. It must name the workflows whose runs start this
// one: GitHub refuses it without, and a run of every pipeline of the project is never
// what is meant.
func (d *decoder) workflowRun(at, val *yaml.Node, p string) *WorkflowRunTrigger {
	const need = "workflow_run needs the workflows whose runs start this one, such as workflow_run: {workflows: [build]}"
	if val == nil {
		d.add(ErrRequired, at, p, need)
		return nil
	}
	w := &WorkflowRunTrigger{Types: append([]string(nil), WorkflowRunTypes...)}
	var named bool
	keyAt := map[string]*yaml.Node{}
	d.object(val, p, "on.workflow_run", workflowRunKeys, func(f field) {
		k := filterKey(f.key)
		if first, dup := keyAt[k]; dup {
			d.add(ErrDuplicateKey, f.keyNode, f.path, "%s is given twice (first on line %d, as %s)", k, first.Line, first.Value)
			return
		}
		keyAt[k] = f.keyNode
		switch k {
		case "workflows":
			named = true
			w.Workflows = d.workflowNames(f.val, f.path)
		case "types":
			if types := d.workflowRunTypes(f.val, f.path); types != nil {
				w.Types = types
			}
		case "branches":
			w.Branches, _ = d.patterns(f.val, f.path, k)
		case "branches_ignore":
			w.BranchesIgnore, _ = d.patterns(f.val, f.path, k)
		}
	})
	if pos, neg := keyAt["branches"], keyAt["branches_ignore"]; pos != nil && neg != nil {
		later := neg
		if pos.Line > neg.Line || (pos.Line == neg.Line && pos.Column > neg.Column) {
			later = pos
		}
		d.add(ErrInvalid, later, joinPath(p, later.Value), "branches and branches_ignore cannot filter one event together; to exclude some branches, add patterns starting with ! to branches")
	}
	if r := d.resolve(val); !named && r != nil && r.Kind == yaml.MappingNode && !d.abort {
		d.add(ErrRequired, val, p+".workflows", need)
	}
	return w
}

// workflowNames decodes the names of workflow_run's workflows: a pipeline's name: as
// written, compared exactly.
func (d *decoder) workflowNames(n *yaml.Node, p string) []string {
	items := d.items(n, p, "a list of workflow names", true)
	if items == nil {
		if r := d.resolve(n); r != nil && r.Kind == yaml.SequenceNode {
			d.add(ErrRequired, n, p, "workflows is empty; name the workflows whose runs start this one")
		}
		return nil
	}
	var out []string
	for i, item := range items {
		ip := indexPath(p, i)
		v, ok := d.str(item, ip, "a workflow name")
		if !ok {
			continue
		}
		if strings.TrimSpace(v) == "" {
			d.add(ErrInvalid, item, ip, "a workflow name is empty")
			continue
		}
		if contains(out, v) {
			d.add(ErrInvalid, item, ip, "%q is listed twice", v)
			continue
		}
		out = append(out, v)
	}
	return out
}

func (d *decoder) workflowRunTypes(n *yaml.Node, p string) []string {
	return d.activityTypes(n, p, "workflow_run activity type", WorkflowRunTypes, WorkflowRunTypes)
}

// filters decodes an event's filter lists, keyed by Gantry's name of each filter (types
// included for pull requests). A list given as both a filter and its _ignore twin is an
// error, as on GitHub: which one wins would be a guess.
func (d *decoder) filters(n *yaml.Node, p, what string, known []string) map[string][]string {
	out := map[string][]string{}
	keyAt := map[string]*yaml.Node{}
	d.object(n, p, what, known, func(f field) {
		k := filterKey(f.key)
		if first, dup := keyAt[k]; dup {
			d.add(ErrDuplicateKey, f.keyNode, f.path, "%s is given twice (first on line %d, as %s)", k, first.Line, first.Value)
			return
		}
		keyAt[k] = f.keyNode
		if k == "types" {
			out[k] = d.prTypes(f.val, f.path)
			return
		}
		if list, ok := d.patterns(f.val, f.path, k); ok {
			out[k] = list
		}
	})
	for _, base := range []string{"branches", "tags", "paths"} {
		pos, neg := keyAt[base], keyAt[base+"_ignore"]
		if pos == nil || neg == nil {
			continue
		}
		// Report at whichever was written second: that is the line to change.
		later := neg
		if pos.Line > neg.Line || (pos.Line == neg.Line && pos.Column > neg.Column) {
			later = pos
		}
		d.add(ErrInvalid, later, joinPath(p, later.Value), "%s and %s cannot filter one event together; to exclude some %s, add patterns starting with ! to %s", base, base+"_ignore", base, base)
	}
	return out
}

// patterns decodes a list of glob patterns (a single pattern reads as a list of one).
func (d *decoder) patterns(n *yaml.Node, p, key string) ([]string, bool) {
	items := d.items(n, p, "a list of patterns", true)
	if items == nil {
		if r := d.resolve(n); r != nil && r.Kind == yaml.SequenceNode {
			d.add(ErrRequired, n, p, "%s is empty and would match nothing; leave it out to match everything", key)
		}
		return nil, false
	}
	out := make([]string, 0, len(items))
	positive := false
	ok := true
	for i, item := range items {
		ip := indexPath(p, i)
		v, good := d.str(item, ip, "a pattern")
		if !good {
			ok = false
			continue
		}
		if _, err := glob.CompileList([]string{v}); err != nil {
			ok = false
			var se *glob.SyntaxError
			t := text{v: v, node: d.resolve(item), path: ip}
			if errors.As(err, &se) && !strings.ContainsAny(v, `\'`) {
				d.addAt(ErrInvalid, t, se.Offset, "bad pattern %q: %s", v, se.Msg)
			} else {
				d.add(ErrInvalid, t.node, ip, "bad pattern %q: %v", v, err)
			}
			continue
		}
		if !strings.HasPrefix(v, "!") {
			positive = true
		}
		out = append(out, v)
	}
	if ok && !positive && !strings.HasSuffix(key, "_ignore") {
		d.add(ErrInvalid, n, p, "%s has only patterns starting with !, which match nothing; use %s_ignore to exclude", key, key)
		return nil, false
	}
	return out, ok
}

func (d *decoder) prTypes(n *yaml.Node, p string) []string {
	return d.activityTypes(n, p, "pull request action", pullRequestTypes, DefaultPullRequestTypes)
}

// activityTypes decodes an event's types, each a what (a noun): each one of known, none
// twice; an empty list is refused, naming the defaults that leaving it out gives.
func (d *decoder) activityTypes(n *yaml.Node, p, what string, known, defaults []string) []string {
	items := d.items(n, p, "a list of "+what+"s", true)
	if items == nil {
		if r := d.resolve(n); r != nil && r.Kind == yaml.SequenceNode {
			d.add(ErrRequired, n, p, "types is empty; leave it out for %s", strings.Join(defaults, ", "))
		}
		return nil
	}
	var out []string
	for i, item := range items {
		ip := indexPath(p, i)
		v, ok := d.enum(item, ip, "a "+what, known)
		if !ok {
			continue
		}
		if contains(out, v) {
			d.add(ErrInvalid, item, ip, "%q is listed twice", v)
			continue
		}
		out = append(out, v)
	}
	return out
}

func (d *decoder) schedules(n *yaml.Node, p string) []Schedule {
	items := d.items(n, p, `a list of schedules, such as - cron: "0 3 * * *"`, false)
	if items == nil {
		if r := d.resolve(n); r != nil && r.Kind == yaml.SequenceNode {
			d.add(ErrRequired, n, p, "schedule lists no cron line")
		}
		return nil
	}
	var out []Schedule
	for i, item := range items {
		ip := indexPath(p, i)
		s := Schedule{Missed: MissedSkip}
		var cronNode *yaml.Node
		good := true
		d.object(item, ip, "a schedule", scheduleKeys, func(f field) {
			switch f.key {
			case "cron":
				cronNode = f.val
				v, ok := d.str(f.val, f.path, "a cron line")
				if !ok {
					good = false
					return
				}
				if _, err := parseCron(v); err != nil {
					d.add(ErrInvalid, f.val, f.path, "cron %q: %v", v, err)
					good = false
					return
				}
				s.Cron = strings.TrimSpace(v)
			case "timezone":
				v, ok := d.str(f.val, f.path, "a time zone")
				if !ok {
					good = false
					return
				}
				if v == "" {
					d.add(ErrInvalid, f.val, f.path, "timezone is empty; leave it out for UTC")
					good = false
					return
				}
				if _, err := loadZone(v); err != nil {
					d.add(ErrInvalid, f.val, f.path, "%v", err)
					good = false
					return
				}
				s.Timezone = v
			case "missed":
				v, ok := d.enum(f.val, f.path, "a missed-tick policy", missedPolicies)
				if !ok {
					good = false
					return
				}
				s.Missed = MissedPolicy(v)
			}
		})
		if r := d.resolve(item); cronNode == nil && r != nil && r.Kind == yaml.MappingNode && !d.abort {
			d.add(ErrRequired, item, ip+".cron", "a schedule needs a cron line")
			good = false
		}
		if good && cronNode != nil {
			out = append(out, s)
		}
	}
	return d.distinctSchedules(out, n, p)
}

// MaxSchedules is how many distinct schedules one definition's on: schedule may hold.
// Each may start a run at every one of its ticks, so the cap bounds what one file or
// workflow costs; twenty covers any calendar a person writes by hand.
const MaxSchedules = 20

// distinctSchedules merges equal schedules, which would fire at the same ticks: a
// definition whose schedules are alike runs once per tick, not once per line. The first
// of equal lines is kept, with missed: run_once if any of them says so. More than
// MaxSchedules distinct ones are refused.
func (d *decoder) distinctSchedules(in []Schedule, n *yaml.Node, p string) []Schedule {
	var out []Schedule
	at := map[string]int{}
	for _, s := range in {
		id, err := s.Identity()
		if err != nil {
			continue // checked as each line was read
		}
		if i, ok := at[id]; ok {
			if s.Missed == MissedRunOnce {
				out[i].Missed = MissedRunOnce
			}
			continue
		}
		at[id] = len(out)
		out = append(out, s)
	}
	if len(out) > MaxSchedules {
		d.add(ErrLimit, n, p, "a definition may have at most %d distinct schedules, not %d", MaxSchedules, len(out))
		return nil
	}
	return out
}

// Identity names what the schedule fires at: the ticks its cron line means, whatever
// the spelling ("* * * * *", "*/1 * * * *" and "0-59 * * * *" are one), and its time
// zone ("" is UTC). Two schedules with one identity fire at the same moments.
func (s Schedule) Identity() (string, error) {
	sched, err := parseCron(s.Cron)
	if err != nil {
		return "", err
	}
	zone := s.Timezone
	if zone == "" {
		zone = "UTC"
	}
	spec, ok := sched.(*cron.SpecSchedule)
	if !ok {
		return strings.Join(strings.Fields(s.Cron), " ") + " " + zone, nil
	}
	// A star in day of month or day of week makes a day match both fields, else either
	// (cron's rule); the star bit means nothing more, so it is folded into that choice.
	const star = 1 << 63
	days := "either"
	if (spec.Dom|spec.Dow)&star != 0 {
		days = "both"
	}
	return fmt.Sprintf("m%x h%x dom%x mon%x dow%x %s %s", spec.Minute&^star, spec.Hour&^star, spec.Dom&^star,
		spec.Month&^star, spec.Dow&^star, days, zone), nil
}

func (d *decoder) inputs(n *yaml.Node, p string) []Input {
	var out []Input
	for _, f := range d.fields(n, p, "a mapping of input names to inputs") {
		if d.abort {
			return nil
		}
		if !inputNamePattern.MatchString(f.key) {
			d.add(ErrInvalid, f.keyNode, f.path, "input name %q: use letters, digits, '-' and '_'", f.key)
			continue
		}
		if in, ok := d.input(f); ok {
			out = append(out, in)
		}
	}
	return out
}

// input decodes one input. Its keys may come in any order, so type, options and default
// are checked against each other once all are read.
func (d *decoder) input(f field) (Input, bool) {
	in := Input{Name: f.key, Type: InputString}
	var defNode, optionsNode, optionsKey *yaml.Node
	var def string
	good := true
	d.object(f.val, f.path, "input "+f.key, inputKeys, func(g field) {
		switch g.key {
		case "type":
			v, ok := d.enum(g.val, g.path, "an input type", inputTypes)
			if !ok {
				good = false
				return
			}
			in.Type = InputType(v)
		case "description":
			in.Description, _ = d.str(g.val, g.path, "a description")
		case "required":
			in.Required, _ = d.boolean(g.val, g.path)
		case "default":
			v, ok := d.str(g.val, g.path, "a default value")
			if !ok {
				good = false
				return
			}
			def, defNode = v, g.val
		case "options":
			optionsNode, optionsKey = g.val, g.keyNode
			items := d.items(g.val, g.path, "a list of options", false)
			for i, item := range items {
				ip := indexPath(g.path, i)
				v, ok := d.str(item, ip, "an option")
				if !ok {
					good = false
					continue
				}
				if contains(in.Options, v) {
					d.add(ErrInvalid, item, ip, "option %q is listed twice", v)
					good = false
					continue
				}
				in.Options = append(in.Options, v)
			}
		}
	})
	if !good || d.abort {
		return in, false
	}
	if r := d.resolve(f.val); r == nil || r.Kind != yaml.MappingNode {
		return in, false
	}
	switch {
	case in.Type == InputChoice && len(in.Options) == 0:
		at := f.keyNode
		if optionsNode != nil {
			at = optionsNode
		}
		d.add(ErrRequired, at, f.path+".options", "a choice input needs a list of options")
		return in, false
	case in.Type != InputChoice && optionsKey != nil:
		d.add(ErrInvalid, optionsKey, f.path+".options", "options are only for inputs of type choice; this one is %s", in.Type)
		return in, false
	}
	if defNode != nil {
		v, err := in.Parse(def)
		if err != nil {
			d.add(ErrInvalid, defNode, f.path+".default", "default does not fit type %s: %v", in.Type, err)
			return in, false
		}
		in.Default = &v
	}
	return in, true
}
