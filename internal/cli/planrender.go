package cli

import (
	"fmt"
	"io"
	"strings"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// collapseNeedsAbove is how many instances of one job a needs list may name before the
// text plan shows them as "name ×N": a fan-in from a large matrix would otherwise bury
// the line, while a handful of keys is still worth reading in full.
const collapseNeedsAbove = 4

// writePlanText prints the plan for a person: a header, then each wave with its jobs, what
// they need and what is unusual about them.
//
//	diamond: 4 jobs in 3 waves
//	wave 1:
//	  lint
//	  unit
//	wave 2:
//	  build  <- needs: lint, unit
func writePlanText(w io.Writer, p *pipeline.Plan) error {
	ew := &errWriter{w: w}
	jobs := jobsByKey(p)
	fmt.Fprintf(ew, "%s: %s in %s\n", planName(p),
		countOf(len(p.Jobs), "job", "jobs"), countOf(len(p.Waves), "wave", "waves"))
	writeTriggers(ew, p.On)
	for i, wave := range p.Waves {
		// Waves are numbered from 1 for people; Job.Wave stays 0-based in JSON.
		fmt.Fprintf(ew, "wave %d:\n", i+1)
		for _, key := range wave {
			var b strings.Builder
			b.WriteString("  ")
			b.WriteString(key)
			if j := jobs[key]; j != nil {
				if len(j.Needs) > 0 {
					b.WriteString("  <- needs: ")
					b.WriteString(summarizeNeeds(j.Needs, jobs))
				}
				for _, note := range annotations(j) {
					b.WriteString("  [")
					b.WriteString(note)
					b.WriteString("]")
				}
			}
			b.WriteByte('\n')
			io.WriteString(ew, b.String())
		}
	}
	return ew.err
}

// writeTriggers lists the events of on:, one line each with its filters, in the
// style of job annotations. A plan without on: prints nothing: it runs on every push, the
// same as before on: existed.
//
//	on:
//	  push  [branches: main, release/**]  [paths_ignore: docs/**]
//	  schedule  [cron: 0 3 * * 1-5]  [timezone: Europe/Berlin]  [missed: run_once]
func writeTriggers(w io.Writer, t *pipeline.Triggers) {
	if t == nil {
		return
	}
	io.WriteString(w, "on:\n")
	line := func(event string, notes ...string) {
		var b strings.Builder
		b.WriteString("  ")
		b.WriteString(event)
		for _, n := range notes {
			if n != "" {
				b.WriteString("  [")
				b.WriteString(n)
				b.WriteString("]")
			}
		}
		b.WriteByte('\n')
		io.WriteString(w, b.String())
	}
	filter := func(key string, patterns []string) string {
		if len(patterns) == 0 {
			return ""
		}
		return key + ": " + strings.Join(patterns, ", ")
	}
	if p := t.Push; p != nil {
		line("push", filter("branches", p.Branches), filter("branches_ignore", p.BranchesIgnore),
			filter("tags", p.Tags), filter("tags_ignore", p.TagsIgnore),
			filter("paths", p.Paths), filter("paths_ignore", p.PathsIgnore))
	}
	if pr := t.PullRequest; pr != nil {
		line("pull_request", filter("types", pr.Types), filter("branches", pr.Branches),
			filter("branches_ignore", pr.BranchesIgnore), filter("paths", pr.Paths), filter("paths_ignore", pr.PathsIgnore))
	}
	for _, s := range t.Schedule {
		tz := ""
		if s.Timezone != "" {
			tz = "timezone: " + s.Timezone
		}
		missed := ""
		if s.Missed != "" && s.Missed != pipeline.MissedSkip {
			missed = "missed: " + string(s.Missed)
		}
		line("schedule", "cron: "+s.Cron, tz, missed)
	}
	if d := t.Dispatch; d != nil {
		var inputs []string
		for _, in := range d.Inputs {
			note := in.Name + " (" + string(in.Type)
			if in.Required {
				note += ", required"
			}
			inputs = append(inputs, note+")")
		}
		line("dispatch", filter("inputs", inputs))
	}
	if wr := t.WorkflowRun; wr != nil {
		line("workflow_run", filter("workflows", wr.Workflows), filter("types", wr.Types),
			filter("branches", wr.Branches), filter("branches_ignore", wr.BranchesIgnore))
	}
}

func planName(p *pipeline.Plan) string {
	if p.Name == "" {
		return "pipeline"
	}
	return p.Name
}

func jobsByKey(p *pipeline.Plan) map[string]*pipeline.Job {
	m := make(map[string]*pipeline.Job, len(p.Jobs))
	for _, j := range p.Jobs {
		m[j.Key] = j
	}
	return m
}

// summarizeNeeds lists needed keys in order, except that the instances of one job are
// shown as "name ×N" (at the place of the first one) when there are more than
// collapseNeedsAbove of them.
func summarizeNeeds(needs []string, jobs map[string]*pipeline.Job) string {
	base := func(key string) string {
		if j := jobs[key]; j != nil && j.Name != "" {
			return j.Name
		}
		return key
	}
	count := make(map[string]int)
	for _, key := range needs {
		count[base(key)]++
	}
	parts := make([]string, 0, len(needs))
	shown := make(map[string]bool)
	for _, key := range needs {
		name := base(key)
		if count[name] <= collapseNeedsAbove {
			parts = append(parts, key)
			continue
		}
		if !shown[name] {
			shown[name] = true
			parts = append(parts, fmt.Sprintf("%s ×%d", name, count[name]))
		}
	}
	return strings.Join(parts, ", ")
}

// annotations are the facts about a job that change when or where it runs, and the test
// reports it keeps, where they differ from the defaults; defaults are left out so
// unusual jobs stand out.
func annotations(j *pipeline.Job) []string {
	var notes []string
	if j.If != nil && j.If.Source != "" {
		notes = append(notes, "if: "+j.If.Text())
	}
	if j.Priority != "" && j.Priority != pipeline.PriorityNormal {
		notes = append(notes, "priority: "+string(j.Priority))
	}
	if len(j.RunsOn) > 0 {
		notes = append(notes, "runs_on: "+strings.Join(j.RunsOn, ", "))
	}
	if j.Image != "" {
		notes = append(notes, "image: "+j.Image)
	}
	if len(j.Services) > 0 {
		names := make([]string, len(j.Services))
		for i, s := range j.Services {
			names[i] = s.Name
		}
		notes = append(notes, "services: "+strings.Join(names, ", "))
	}
	if j.Concurrency != nil && j.Concurrency.Group != "" {
		note := "concurrency: " + j.Concurrency.Group
		if j.Concurrency.CancelInProgress {
			note += ", cancel_in_progress"
		}
		notes = append(notes, note)
	}
	if j.ContinueOnError {
		notes = append(notes, "continue_on_error")
	}
	if formats := j.Reports.ByFormat(); len(formats) > 0 {
		parts := make([]string, len(formats))
		for i, f := range formats {
			parts[i] = f.Format + " " + strings.Join(f.Paths, ", ")
		}
		notes = append(notes, "reports: "+strings.Join(parts, "; "))
	}
	return notes
}

// writePlanDot prints the plan as a Graphviz digraph: one node per job key, an edge from
// each need to the job that waits for it, and each wave on one rank so the picture reads
// left to right in the order jobs can run. The order of lines follows the plan, so the same
// plan always gives the same text and diffs of it are meaningful.
func writePlanDot(w io.Writer, p *pipeline.Plan) error {
	ew := &errWriter{w: w}
	fmt.Fprintf(ew, "digraph %s {\n", dotQuote(planName(p)))
	io.WriteString(ew, "  rankdir=LR;\n  node [shape=box];\n")
	seen := make(map[string]bool, len(p.Jobs))
	for i, wave := range p.Waves {
		fmt.Fprintf(ew, "  // wave %d\n  {rank=same;", i+1)
		for _, key := range wave {
			seen[key] = true
			fmt.Fprintf(ew, " %s;", dotQuote(key))
		}
		io.WriteString(ew, "}\n")
	}
	// A job missing from every wave would be a compiler bug; still draw it rather than
	// hide it.
	for _, j := range p.Jobs {
		if !seen[j.Key] {
			seen[j.Key] = true
			fmt.Fprintf(ew, "  %s;\n", dotQuote(j.Key))
		}
	}
	for _, j := range p.Jobs {
		for _, need := range j.Needs {
			fmt.Fprintf(ew, "  %s -> %s;\n", dotQuote(need), dotQuote(j.Key))
		}
	}
	io.WriteString(ew, "}\n")
	return ew.err
}

var dotEscaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`, "\r", `\r`)

// dotQuote makes s a quoted DOT identifier. Backslashes are doubled as well as quotes
// escaped, because Graphviz reads escapes such as \n in the label it derives from the
// identifier.
func dotQuote(s string) string {
	return `"` + dotEscaper.Replace(s) + `"`
}
