// Package actions runs GitHub Actions' actions in Gantry: it reads an action's metadata
// (action.yml), finds its code in the source the server is configured with, and pins
// every action a run uses to a commit when the run is created. The worker runs them
// (internal/agent).
package actions

import (
	"fmt"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Metadata is an action's action.yml: what it takes, what it gives, and how it runs.
type Metadata struct {
	Name        string
	Description string
	// Inputs and Outputs are by name as action.yml writes them; InputNames keeps
	// their order.
	Inputs     map[string]Input
	InputNames []string
	Outputs    map[string]Output
	Runs       Runs
}

// Input is one of an action's inputs.
type Input struct {
	Description string
	Required    bool
	// Default is the value when the step gives none, expressions and all; HasDefault
	// tells "" from no default.
	Default            string
	HasDefault         bool
	DeprecationMessage string
}

// Output is one of an action's outputs; Value is set for a composite action's.
type Output struct {
	Description string
	Value       string
}

// Runs says how an action runs.
type Runs struct {
	// Using is node12, node16, node20, node24, composite or docker.
	Using string
	// Main, Pre and Post are a JavaScript action's files; PreIf and PostIf their
	// conditions (post-if defaults to always()).
	Main, Pre, Post string
	PreIf, PostIf   string
	// Steps are a composite action's steps.
	Steps []Step
	// Image, Entrypoint, Args, Env, PreEntrypoint and PostEntrypoint are a docker
	// action's: Image is docker://image or a Dockerfile's path in the action.
	Image                     string
	Entrypoint, PreEntrypoint string
	PostEntrypoint            string
	Args                      []string
	Env                       map[string]string
	EnvNames                  []string

	usingNode, usingComposite, usingDocker bool
}

// Step is one of a composite action's steps.
type Step struct {
	Name, ID, If     string
	Run, Shell       string
	Uses             string
	With             map[string]string
	WithNames        []string
	Env              map[string]string
	EnvNames         []string
	WorkingDirectory string
	// ContinueOnError is its text: true, false or an expression.
	ContinueOnError string
}

// IsNode says whether the action is a JavaScript action.
func (r Runs) IsNode() bool { return r.usingNode }

// IsComposite says whether the action is a composite action.
func (r Runs) IsComposite() bool { return r.usingComposite }

// IsDocker says whether the action is a container action.
func (r Runs) IsDocker() bool { return r.usingDocker }

// nodeVersions are the runs.using values of JavaScript actions; node12 and node16 ones
// run on the node found, as GitHub now runs them on node20.
var nodeVersions = []string{"node12", "node16", "node20", "node24"}

// ParseMetadata reads an action.yml. It is strict about what decides how the action
// runs and lenient about the rest (branding, author), as GitHub is.
func ParseMetadata(data []byte) (*Metadata, error) {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, fmt.Errorf("action.yml: %w", err)
	}
	if len(root.Content) == 0 || root.Content[0].Kind != yaml.MappingNode {
		return nil, fmt.Errorf("action.yml: expected a mapping at the top")
	}
	m := &Metadata{Inputs: map[string]Input{}, Outputs: map[string]Output{}}
	var runs *yaml.Node
	err := eachKey(root.Content[0], func(k string, v *yaml.Node) error {
		var err error
		switch k {
		case "name":
			m.Name, err = scalar(v, "name")
		case "description":
			m.Description, _ = scalar(v, "description")
		case "inputs":
			err = eachKey(v, func(name string, in *yaml.Node) error {
				i, err := parseInput(name, in)
				if err == nil {
					m.Inputs[name] = i
					m.InputNames = append(m.InputNames, name)
				}
				return err
			})
		case "outputs":
			err = eachKey(v, func(name string, out *yaml.Node) error {
				var o Output
				err := eachKey(out, func(k string, v *yaml.Node) error {
					var err error
					switch k {
					case "description":
						o.Description, _ = scalar(v, "outputs."+name+".description")
					case "value":
						o.Value, err = scalar(v, "outputs."+name+".value")
					}
					return err
				})
				m.Outputs[name] = o
				return err
			})
		case "runs":
			runs = v
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("action.yml: %w", err)
	}
	if runs == nil {
		return nil, fmt.Errorf("action.yml: no runs: says how the action runs")
	}
	if m.Runs, err = parseRuns(runs); err != nil {
		return nil, fmt.Errorf("action.yml: runs: %w", err)
	}
	return m, nil
}

func parseInput(name string, n *yaml.Node) (Input, error) {
	var in Input
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return in, nil
	}
	err := eachKey(n, func(k string, v *yaml.Node) error {
		var err error
		switch k {
		case "description":
			in.Description, _ = scalar(v, "inputs."+name+".description")
		case "required":
			var s string
			if s, err = scalar(v, "inputs."+name+".required"); err == nil {
				in.Required = strings.EqualFold(s, "true")
			}
		case "default":
			in.Default, err = scalar(v, "inputs."+name+".default")
			in.HasDefault = err == nil
		case "deprecationMessage":
			in.DeprecationMessage, _ = scalar(v, "inputs."+name+".deprecationMessage")
		}
		return err
	})
	return in, err
}

func parseRuns(n *yaml.Node) (Runs, error) {
	var r Runs
	var steps *yaml.Node
	err := eachKey(n, func(k string, v *yaml.Node) error {
		var err error
		switch k {
		case "using":
			r.Using, err = scalar(v, "using")
		case "main":
			r.Main, err = scalar(v, "main")
		case "pre":
			r.Pre, err = scalar(v, "pre")
		case "post":
			r.Post, err = scalar(v, "post")
		case "pre-if":
			r.PreIf, err = scalar(v, "pre-if")
		case "post-if":
			r.PostIf, err = scalar(v, "post-if")
		case "steps":
			steps = v
		case "image":
			r.Image, err = scalar(v, "image")
		case "entrypoint":
			r.Entrypoint, err = scalar(v, "entrypoint")
		case "pre-entrypoint":
			r.PreEntrypoint, err = scalar(v, "pre-entrypoint")
		case "post-entrypoint":
			r.PostEntrypoint, err = scalar(v, "post-entrypoint")
		case "args":
			if v.Kind != yaml.SequenceNode {
				return fmt.Errorf("args: expected a list")
			}
			for _, a := range v.Content {
				s, err := scalar(a, "args")
				if err != nil {
					return err
				}
				r.Args = append(r.Args, s)
			}
		case "env":
			r.Env = map[string]string{}
			err = eachKey(v, func(name string, v *yaml.Node) error {
				s, err := scalar(v, "env."+name)
				r.Env[name] = s
				r.EnvNames = append(r.EnvNames, name)
				return err
			})
		}
		return err
	})
	if err != nil {
		return r, err
	}
	using := strings.ToLower(r.Using)
	switch {
	case slices.Contains(nodeVersions, using):
		r.usingNode = true
		if r.Main == "" {
			return r, fmt.Errorf("a %s action needs main: its JavaScript file", r.Using)
		}
		if r.PostIf == "" && r.Post != "" {
			r.PostIf = "always()"
		}
	case using == "composite":
		r.usingComposite = true
		if steps == nil {
			return r, fmt.Errorf("a composite action needs steps")
		}
		if steps.Kind != yaml.SequenceNode {
			return r, fmt.Errorf("steps: expected a list")
		}
		for i, s := range steps.Content {
			st, err := parseStep(s)
			if err != nil {
				return r, fmt.Errorf("steps[%d]: %w", i, err)
			}
			r.Steps = append(r.Steps, st)
		}
	case using == "docker":
		r.usingDocker = true
		if r.Image == "" {
			return r, fmt.Errorf("a docker action needs image: docker://image or a Dockerfile")
		}
		if r.PostIf == "" && r.PostEntrypoint != "" {
			r.PostIf = "always()"
		}
	case using == "":
		return r, fmt.Errorf("no using: says how the action runs (node20, composite or docker)")
	default:
		return r, fmt.Errorf("using: %q is not a way actions run (node20, node24, composite, docker)", r.Using)
	}
	return r, nil
}

func parseStep(n *yaml.Node) (Step, error) {
	var st Step
	err := eachKey(n, func(k string, v *yaml.Node) error {
		var err error
		switch k {
		case "name":
			st.Name, err = scalar(v, "name")
		case "id":
			st.ID, err = scalar(v, "id")
		case "if":
			st.If, err = scalar(v, "if")
		case "run":
			st.Run, err = scalar(v, "run")
		case "shell":
			st.Shell, err = scalar(v, "shell")
		case "uses":
			st.Uses, err = scalar(v, "uses")
		case "working-directory":
			st.WorkingDirectory, err = scalar(v, "working-directory")
		case "continue-on-error":
			st.ContinueOnError, err = scalar(v, "continue-on-error")
		case "with":
			st.With = map[string]string{}
			err = eachKey(v, func(name string, v *yaml.Node) error {
				s, err := scalar(v, "with."+name)
				st.With[name] = s
				st.WithNames = append(st.WithNames, name)
				return err
			})
		case "env":
			st.Env = map[string]string{}
			err = eachKey(v, func(name string, v *yaml.Node) error {
				s, err := scalar(v, "env."+name)
				st.Env[name] = s
				st.EnvNames = append(st.EnvNames, name)
				return err
			})
		}
		return err
	})
	if err != nil {
		return st, err
	}
	switch {
	case st.Run != "" && st.Uses != "":
		return st, fmt.Errorf("a step has either run or uses, not both")
	case st.Run != "" && st.Shell == "":
		return st, fmt.Errorf("a run step of a composite action needs a shell")
	case st.Run == "" && st.Uses == "":
		return st, fmt.Errorf("a step needs run or uses")
	}
	return st, nil
}

// eachKey calls fn for each key of a mapping; a null is an empty mapping.
func eachKey(n *yaml.Node, fn func(k string, v *yaml.Node) error) error {
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil
	}
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return fmt.Errorf("line %d: expected a mapping", n.Line)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if err := fn(n.Content[i].Value, n.Content[i+1]); err != nil {
			return err
		}
	}
	return nil
}

// scalar reads a scalar as text; null is "".
func scalar(n *yaml.Node, what string) (string, error) {
	if n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	if n.Kind != yaml.ScalarNode {
		return "", fmt.Errorf("%s (line %d): expected a value, not a list or mapping", what, n.Line)
	}
	if n.Tag == "!!null" {
		return "", nil
	}
	return n.Value, nil
}

// CheckWith compares a step's with: against the action's inputs as GitHub does: a
// required input without a default that the step does not give is an error; an input
// the action does not declare is a warning. Names are compared without regard to case.
func (m *Metadata) CheckWith(with map[string]string) (errs, warnings []string) {
	given := map[string]bool{}
	for k := range with {
		given[strings.ToLower(k)] = true
	}
	declared := map[string]bool{}
	for _, name := range m.InputNames {
		declared[strings.ToLower(name)] = true
		in := m.Inputs[name]
		if in.Required && !in.HasDefault && !given[strings.ToLower(name)] {
			errs = append(errs, fmt.Sprintf("input %q is required", name))
		}
		if in.DeprecationMessage != "" && given[strings.ToLower(name)] {
			warnings = append(warnings, fmt.Sprintf("input %q is deprecated: %s", name, in.DeprecationMessage))
		}
	}
	keys := make([]string, 0, len(with))
	for k := range with {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !declared[strings.ToLower(k)] {
			warnings = append(warnings, fmt.Sprintf("unexpected input %q; valid inputs are %s", k, quotedList(m.InputNames)))
		}
	}
	return errs, warnings
}

func quotedList(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	return strings.Join(q, ", ")
}
