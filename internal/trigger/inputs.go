package trigger

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// InputError is one problem with the inputs given to a dispatch.
type InputError struct {
	Input   string // the input's name
	Message string
}

// Error implements error.
func (e *InputError) Error() string { return fmt.Sprintf("input %s: %s", e.Input, e.Message) }

// ValidateInputs checks the inputs given to a dispatch against the pipeline's declared
// ones (spec nil: it declares none) and returns every declared input with its value in
// canonical form (see pipeline.Input.Parse). An input that is not given takes its
// default; without one it is an error when required, and otherwise "" ("false" for a
// boolean, so that an expression can always read it as one). Unknown names are errors: a
// misspelt input silently ignored would run the pipeline with the wrong value.
//
// On any error the map is nil and the errors list every problem, declared inputs in
// declaration order, then unknown names sorted.
func ValidateInputs(spec *pipeline.DispatchTrigger, given map[string]string) (map[string]string, []error) {
	var declared []pipeline.Input
	if spec != nil {
		declared = spec.Inputs
	}
	out := make(map[string]string, len(declared))
	var errs []error
	names := make([]string, 0, len(declared))
	for _, in := range declared {
		names = append(names, in.Name)
		v, ok := given[in.Name]
		switch {
		case ok && !(v == "" && in.Required):
			canon, err := in.Parse(v)
			if err != nil {
				errs = append(errs, &InputError{Input: in.Name, Message: err.Error()})
				continue
			}
			out[in.Name] = canon
		case in.Default != nil:
			out[in.Name] = *in.Default
		case in.Required:
			msg := "is required"
			if in.Type == pipeline.InputChoice {
				msg += "; one of " + strings.Join(in.Options, ", ")
			}
			errs = append(errs, &InputError{Input: in.Name, Message: msg})
		case in.Type == pipeline.InputBoolean:
			out[in.Name] = "false"
		default:
			out[in.Name] = ""
		}
	}
	var unknown []string
	for name := range given {
		if _, ok := spec.Input(name); !ok {
			unknown = append(unknown, name)
		}
	}
	sort.Strings(unknown)
	for _, name := range unknown {
		msg := "this pipeline declares no such input"
		switch {
		case len(names) == 0:
			msg = "this pipeline declares no inputs"
		default:
			msg += " (it has " + strings.Join(names, ", ") + ")"
		}
		errs = append(errs, &InputError{Input: name, Message: msg})
	}
	if len(errs) > 0 {
		return nil, errs
	}
	return out, nil
}
