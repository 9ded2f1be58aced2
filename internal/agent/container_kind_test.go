package agent

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gantry-ci/gantry/internal/executor"
)

func TestBeginFailureKind(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{fmt.Errorf("pod not scheduled: %w", executor.ErrUnschedulable), "timeout"},
		{fmt.Errorf("image: %w", executor.ErrImage), "failure"},
		{fmt.Errorf("evicted: %w", executor.ErrEnvironmentLost), "lost"},
		{errors.New("engine down"), "failure"},
	} {
		if got := beginFailureKind(tt.err); got != tt.want {
			t.Errorf("beginFailureKind(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
