package trigger

import (
	"errors"
	"reflect"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

func TestValidateInputs(t *testing.T) {
	t.Parallel()
	spec := compileOn(t, `  dispatch:
    inputs:
      target: {type: choice, options: [staging, production], required: true}
      dry_run: {type: boolean, default: true}
      replicas: {type: number, default: 2}
      force: {type: boolean}
      note: {}
      tag: {required: true, default: latest}`).Dispatch

	tests := []struct {
		name  string
		given map[string]string
		want  map[string]string
		errs  []string // the errors' texts, in order
	}{
		{
			name:  "defaults fill in",
			given: map[string]string{"target": "staging"},
			want:  map[string]string{"target": "staging", "dry_run": "true", "replicas": "2", "force": "false", "note": "", "tag": "latest"},
		},
		{
			name:  "values are typed and canonical",
			given: map[string]string{"target": "production", "dry_run": "FALSE", "replicas": "1.50", "force": "True", "note": " x ", "tag": "v1"},
			want:  map[string]string{"target": "production", "dry_run": "false", "replicas": "1.5", "force": "true", "note": " x ", "tag": "v1"},
		},
		{
			name:  "required given empty takes its default",
			given: map[string]string{"target": "staging", "tag": ""},
			want:  map[string]string{"target": "staging", "dry_run": "true", "replicas": "2", "force": "false", "note": "", "tag": "latest"},
		},
		{
			name:  "required without default must be given",
			given: map[string]string{},
			errs:  []string{"input target: is required; one of staging, production"},
		},
		{
			name:  "required given empty",
			given: map[string]string{"target": ""},
			errs:  []string{"input target: is required; one of staging, production"},
		},
		{
			name:  "every problem at once",
			given: map[string]string{"target": "prod", "dry_run": "yes", "replicas": "two", "tagg": "v1", "colour": "red"},
			errs: []string{
				`input target: "prod" is not one of the options (staging, production)`,
				`input dry_run: expected true or false, found "yes"`,
				`input replicas: expected a number, found "two"`,
				"input colour: this pipeline declares no such input (it has target, dry_run, replicas, force, note, tag)",
				"input tagg: this pipeline declares no such input (it has target, dry_run, replicas, force, note, tag)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, errs := ValidateInputs(spec, tt.given)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("values = %v, want %v", got, tt.want)
			}
			var texts []string
			for _, err := range errs {
				var ie *InputError
				if !errors.As(err, &ie) || ie.Input == "" {
					t.Errorf("error %v is not an *InputError naming its input", err)
				}
				texts = append(texts, err.Error())
			}
			if !reflect.DeepEqual(texts, tt.errs) {
				t.Errorf("errors =\n%q\nwant\n%q", texts, tt.errs)
			}
		})
	}
}

func TestValidateInputsWithoutInputs(t *testing.T) {
	t.Parallel()
	for _, spec := range []*struct{ name, on string }{{"no dispatch", ""}, {"dispatch without inputs", "  dispatch:"}} {
		var d *pipeline.DispatchTrigger
		if tr := compileOn(t, spec.on); tr != nil {
			d = tr.Dispatch
		}
		got, errs := ValidateInputs(d, nil)
		if len(errs) != 0 || len(got) != 0 {
			t.Errorf("%s, nothing given: %v, %v; want no values and no errors", spec.name, got, errs)
		}
		_, errs = ValidateInputs(d, map[string]string{"x": "1"})
		if len(errs) != 1 || errs[0].Error() != "input x: this pipeline declares no inputs" {
			t.Errorf("%s, x given: errors %v; want one saying the pipeline declares no inputs", spec.name, errs)
		}
	}
}
