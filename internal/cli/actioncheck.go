package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// actionsCheck is how validate checks the actions steps use against their action.yml.
// Resolving reaches the actions' source, so it happens only when asked for (Resolve, or a
// Source given): by default validate stays offline and checks the uses: syntax only.
type actionsCheck struct {
	Source  string // --actions-source; "" is actions.DefaultSource
	Resolve bool   // --resolve-actions
	Mirrors string // --mirrors; "" is gantry/mirrors in the user's cache directory
}

// actionResolveTimeout bounds resolving one step's action: a fetch of its repository
// into an empty mirror and a read of its action.yml.
const actionResolveTimeout = 2 * time.Minute

// errKindAction is the code of a mistake in a step's use of an action (one that cannot be
// resolved, a required input not given) in validate's report.
const errKindAction pipeline.ErrorKind = "action"

func (c *actionsCheck) flags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.BoolVar(&c.Resolve, "resolve-actions", false, "resolve the actions steps use (from --actions-source) and check their with: against each action.yml")
	f.StringVar(&c.Source, "actions-source", "", actionsSourceUsage+"; giving it implies --resolve-actions")
	f.StringVar(&c.Mirrors, "mirrors", "", "with --resolve-actions: git mirror cache of the actions (default: gantry/mirrors in the user's cache directory, kept between runs)")
}

// resolver is the resolver c asks for; nil when c does not ask to resolve.
func (c *actionsCheck) resolver(log *slog.Logger) (*actions.Resolver, error) {
	if !c.Resolve && c.Source == "" {
		return nil, nil
	}
	src, err := actions.ParseSource(c.Source)
	if err != nil {
		return nil, usagef("--actions-source: %v", err)
	}
	dir := c.Mirrors
	if dir == "" {
		cache, err := os.UserCacheDir()
		if err != nil {
			return nil, usagef("no cache directory for the mirrors of actions (%v): give --mirrors", err)
		}
		dir = filepath.Join(cache, "gantry", "mirrors")
	}
	return &actions.Resolver{Source: src, MirrorsDir: dir, Logger: log}, nil
}

// validateWarning is what validate warns of: a line and column of the source when known.
type validateWarning struct {
	line, column int
	message      string
	// file is the reusable workflow it is in, as a pipeline.Error names it; "" for the
	// file validated.
	file string
}

// checkActions resolves the action of each step of plan that uses one and returns what
// Resolver.Check says of it, each at the line of the step's uses: in src when it can be
// told which one that is: errors (an action that cannot be resolved, a required input not
// given) and warnings (an input the action does not declare).
func checkActions(ctx context.Context, r *actions.Resolver, src source, plan *pipeline.Plan) ([]*pipeline.Error, []validateWarning, error) {
	var (
		errs  []*pipeline.Error
		warns []validateWarning
		found = usesNodes(src.data)
	)
	for _, j := range plan.Jobs {
		seen := map[string]int{} // uses text: steps of j so far that use it
		for _, st := range j.Steps {
			if st.Uses == "" {
				continue
			}
			line, col := found.at(j, st.Uses, seen[st.Uses])
			seen[st.Uses]++
			// One step at a time, so that each finding is known to be this step's; the
			// resolver remembers what it resolved, so a repeated action is fetched once.
			one := &pipeline.Plan{Jobs: []*pipeline.Job{{Key: j.Key, Name: j.Name, Steps: []pipeline.Step{st}}}}
			sctx, cancel := context.WithTimeout(ctx, actionResolveTimeout)
			e, w := r.Check(sctx, one)
			cancel()
			if err := ctx.Err(); err != nil {
				return nil, nil, fmt.Errorf("check the actions of %s: %w", src.name, err)
			}
			for _, err := range e {
				errs = append(errs, &pipeline.Error{Kind: errKindAction, Line: line, Column: col, Message: err.Error()})
			}
			for _, msg := range w {
				warns = append(warns, validateWarning{line: line, column: col, message: msg})
			}
		}
	}
	return errs, warns, nil
}

// usesNode is a uses: value of the source document, at its path (jobs.build.steps[1].uses).
type usesNode struct {
	path, value  string
	line, column int
}

// usesIndex is every uses: of a document, and the ids of its jobs.
type usesIndex struct {
	nodes []usesNode
	jobs  map[string]bool
}

// usesNodes finds every uses: of the document; none when it cannot be read (the
// compiler read it, so that does not happen but for what yaml.v3 reads differently).
func usesNodes(data []byte) usesIndex {
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return usesIndex{}
	}
	out := usesIndex{jobs: map[string]bool{}}
	if len(doc.Content) == 1 && doc.Content[0].Kind == yaml.MappingNode {
		top := doc.Content[0].Content
		for i := 0; i+1 < len(top); i += 2 {
			if jobs := top[i+1]; top[i].Value == "jobs" && jobs.Kind == yaml.MappingNode {
				for k := 0; k+1 < len(jobs.Content); k += 2 {
					out.jobs[jobs.Content[k].Value] = true
				}
			}
		}
	}
	var walk func(n *yaml.Node, path string)
	walk = func(n *yaml.Node, path string) {
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				p := k.Value
				if path != "" {
					p = path + "." + k.Value
				}
				if k.Value == "uses" && v.Kind == yaml.ScalarNode {
					out.nodes = append(out.nodes, usesNode{path: p, value: strings.TrimSpace(v.Value), line: v.Line, column: v.Column})
					continue
				}
				walk(v, p)
			}
		case yaml.SequenceNode:
			for i, c := range n.Content {
				walk(c, fmt.Sprintf("%s[%d]", path, i))
			}
		}
		// Aliases are not followed: what they point at is walked where it is written.
	}
	walk(&doc, "")
	return out
}

// at is the line and column of the nth (from 0) step of job j that uses uses: among the
// steps written under the job's own name when they match the plan's one for one, else
// the one uses: of that text in the document; 0, 0 when it cannot be told (a template, a
// definition written so that the plan's steps do not map onto its own).
func (x usesIndex) at(j *pipeline.Job, uses string, nth int) (line, column int) {
	uses = strings.TrimSpace(uses)
	var inJob, all []usesNode
	prefix := "jobs." + j.Name + ".steps["
	for _, n := range x.nodes {
		if n.value != uses {
			continue
		}
		all = append(all, n)
		if strings.HasPrefix(n.path, prefix) {
			inJob = append(inJob, n)
		}
	}
	planned := 0
	for _, st := range j.Steps {
		if strings.TrimSpace(st.Uses) == uses {
			planned++
		}
	}
	switch {
	case len(inJob) == planned && nth < len(inJob):
		return inJob[nth].line, inJob[nth].column
	case len(all) == 1 && x.jobs[j.Name]:
		// Not for a job of a reusable workflow the document calls: that uses: is in
		// another file.
		return all[0].line, all[0].column
	}
	return 0, 0
}
