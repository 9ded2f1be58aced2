package agent

import (
	"testing"

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
