package agent

import (
	"reflect"
	"testing"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

func TestStepDebug(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		j    claimedJob
		want bool
	}{
		{name: "not set", j: claimedJob{Spec: &pipeline.Job{}}},
		{name: "job env", j: claimedJob{Spec: &pipeline.Job{Env: map[string]string{"ACTIONS_STEP_DEBUG": "true"}}}, want: true},
		{name: "job env TRUE", j: claimedJob{Spec: &pipeline.Job{Env: map[string]string{"ACTIONS_STEP_DEBUG": "TRUE"}}}, want: true},
		{name: "job env false", j: claimedJob{Spec: &pipeline.Job{Env: map[string]string{"ACTIONS_STEP_DEBUG": "false"}}}},
		{name: "run env over the job's", j: claimedJob{RunEnv: map[string]string{"ACTIONS_STEP_DEBUG": "false"},
			Spec: &pipeline.Job{Env: map[string]string{"ACTIONS_STEP_DEBUG": "true"}}}},
		{name: "run env", j: claimedJob{RunEnv: map[string]string{"ACTIONS_STEP_DEBUG": "1"}, Spec: &pipeline.Job{}}, want: true},
		{name: "secret", j: claimedJob{Secrets: map[string]string{"ACTIONS_STEP_DEBUG": "true"}, Spec: &pipeline.Job{}}, want: true},
		{name: "no spec", j: claimedJob{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := stepDebug(tc.j); got != tc.want {
				t.Errorf("stepDebug = %v, want %v", got, tc.want)
			}
			if got := recorderOptions(tc.j).Debug; got != tc.want {
				t.Errorf("recorderOptions().Debug = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestPlainLines: for a coordinator without logs.commands, the lines of workflow commands
// lose their fields and say what they were in their text; the shipper's lines stay as
// they were.
func TestPlainLines(t *testing.T) {
	t.Parallel()
	plain := []logs.Line{{Seq: 1, Stream: logs.Stdout, Text: "a"}}
	if got := plainLines(plain); &got[0] != &plain[0] {
		t.Error("lines with nothing to rewrite were copied")
	}
	in := []logs.Line{
		{Seq: 1, Stream: logs.Stdout, Text: "a"},
		{Seq: 2, Stream: logs.Stdout, Text: "Build", Group: logs.GroupStart},
		{Seq: 3, Stream: logs.Stdout, Text: "bad", Level: logs.LevelError, Annotation: &logs.Annotation{Step: 1, File: "f"}},
		{Seq: 4, Stream: logs.Stdout, Group: logs.GroupEnd},
		{Seq: 5, Stream: logs.Stdout, Text: "d", Level: logs.LevelDebug},
	}
	orig := append([]logs.Line(nil), in...)
	want := []logs.Line{
		{Seq: 1, Stream: logs.Stdout, Text: "a"},
		{Seq: 2, Stream: logs.Stdout, Text: "▸ Build"},
		{Seq: 3, Stream: logs.Stdout, Text: "error: bad"},
		{Seq: 4, Stream: logs.Stdout},
		{Seq: 5, Stream: logs.Stdout, Text: "debug: d"},
	}
	if got := plainLines(in); !reflect.DeepEqual(got, want) {
		t.Errorf("plainLines =\n%+v\nwant\n%+v", got, want)
	}
	if !reflect.DeepEqual(in, orig) {
		t.Errorf("plainLines changed its input: %+v", in)
	}
}
