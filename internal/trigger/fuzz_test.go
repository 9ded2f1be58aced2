package trigger

import (
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// FuzzTriggers compiles arbitrary on: blocks and puts arbitrary events and times to what
// compiles. Whatever the definition: Match never panics and its reason starts with the
// event; a schedule the compiler accepted always parses, and Due's tick lies after the
// last fired one and not after now, with Next after now; asked again with the schedule
// made halfway between, its tick lies after that too.
func FuzzTriggers(f *testing.F) {
	f.Add("  push: {branches: [main, '!x/**'], paths-ignore: ['docs/**']}", "main", "docs/a.md", int64(0), int64(3600))
	f.Add("  pull_request: {types: [closed], branches: ['release/*']}", "release/1", "", int64(1e9), int64(60))
	f.Add("  schedule: [{cron: '*/7 3-5 * * MON-FRI', timezone: Europe/Berlin, missed: run_once}]", "", "", int64(1.7e9), int64(86400*40))
	f.Add("  schedule: [{cron: '@monthly'}]\n  dispatch:", "x", "y", int64(0), int64(1))
	f.Add("  push: {tags: ['v[0-9]+.*']}", "v1.2", "", int64(-5), int64(-5))
	f.Fuzz(func(t *testing.T, on, name, path string, lastUnix, gap int64) {
		p, err := pipeline.Compile([]byte("on:\n"+on+"\njobs: {a: {steps: [{run: x}]}}"), pipeline.Options{Limits: pipeline.Limits{MaxNodes: 10_000}})
		if err != nil {
			return
		}
		var paths []string
		if path != "" {
			paths = strings.Split(path, ",")
		}
		for _, ev := range []Event{
			{Kind: KindPush, Branch: name, ChangedPaths: paths},
			{Kind: KindTag, Tag: name},
			{Kind: KindPullRequest, Action: name, BaseBranch: name, ChangedPaths: paths, ChangedPathsIncomplete: len(paths) == 1},
			{Kind: KindSchedule},
			{Kind: KindDispatch},
		} {
			_, reason := Match(p.On, ev)
			if !strings.HasPrefix(reason, ev.describe()+": ") {
				t.Fatalf("reason %q does not start with the event %q", reason, ev.describe())
			}
		}
		if p.On == nil {
			return
		}
		// Times within a few centuries, so that the cron library's five-year search and
		// time arithmetic stay in range.
		last := time.Unix(lastUnix%(1<<33), 0).UTC()
		now := last.Add(time.Duration(gap%(1<<30)) * time.Second)
		for _, s := range p.On.Schedule {
			d, err := Due(s, last, time.Time{}, now)
			if err != nil {
				t.Fatalf("compiled schedule %+v: %v", s, err)
			}
			if !d.Tick.IsZero() && (!d.Tick.After(last) || d.Tick.After(now)) {
				t.Fatalf("schedule %+v, last %s, now %s: tick %s outside (last, now]", s, last, now, d.Tick)
			}
			if d.Fire && d.Tick.IsZero() {
				t.Fatalf("fires without a tick: %+v", d)
			}
			if !d.Next.IsZero() && !d.Next.After(now) {
				t.Fatalf("next %s is not after now %s", d.Next, now)
			}
			since := last.Add(now.Sub(last) / 2)
			d, err = Due(s, last, since, now)
			if err != nil {
				t.Fatalf("compiled schedule %+v: %v", s, err)
			}
			if !d.Tick.IsZero() && (!d.Tick.After(since) || d.Tick.After(now)) {
				t.Fatalf("schedule %+v made at %s, now %s: tick %s outside (made, now]", s, since, now, d.Tick)
			}
		}
	})
}
