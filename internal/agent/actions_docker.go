package agent

import (
	"context"
	"fmt"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// dockerAction runs a docker action (runs.using: docker): its image, or the image its
// Dockerfile builds, with the workspace and the step files mounted as GitHub mounts them.
func (r *actionRunner) dockerAction(_ context.Context, _ pipeline.Step, loc *actionLoc, _, _ map[string]string) stepRun {
	return stepRun{err: fmt.Errorf("action %s is a docker action, which this worker cannot run yet", loc.uses)}
}

// dockerStep runs a docker://image step: the image's entrypoint with the step's with:
// args and entrypoint.
func (r *actionRunner) dockerStep(_ context.Context, _ pipeline.Step, image string, _, _ map[string]string) stepRun {
	return stepRun{err: fmt.Errorf("uses docker://%s: this worker cannot run docker:// steps yet", image)}
}
