package sqlstore

import (
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
)

func TestNetSteps(t *testing.T) {
	t.Parallel()
	r := func(i int, s store.StepStatus) store.StepUpdate { return store.StepUpdate{Index: i, Status: s} }
	tests := []struct {
		name string
		in   []store.StepUpdate
		want []stepChange
	}{
		{"one report", []store.StepUpdate{r(0, store.StepSuccess)},
			[]stepChange{{last: r(0, store.StepSuccess), ended: true, succeeded: true}}},
		{"running then success", []store.StepUpdate{r(0, store.StepRunning), r(0, store.StepSuccess)},
			[]stepChange{{last: r(0, store.StepSuccess), running: true, ended: true, succeeded: true}}},
		{"success then pending keeps the success", []store.StepUpdate{r(0, store.StepSuccess), r(0, store.StepPending)},
			[]stepChange{{last: r(0, store.StepPending), ended: true, succeeded: true}}},
		{"steps in the order first reported", []store.StepUpdate{r(1, store.StepRunning), r(0, store.StepFailed), r(1, store.StepSkipped)},
			[]stepChange{{last: r(1, store.StepSkipped), running: true, ended: true}, {last: r(0, store.StepFailed), ended: true}}},
		{"pending only", []store.StepUpdate{r(2, store.StepPending)},
			[]stepChange{{last: r(2, store.StepPending)}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := netSteps(tc.in)
			if len(got) != len(tc.want) {
				t.Fatalf("netSteps = %+v, want %+v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("change %d = %+v, want %+v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
