package api

import (
	"context"
	"fmt"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// pinActions resolves the actions the plan's steps use and returns the plan with each
// pinned to a commit, so every attempt of the run runs the same code. It waits for git
// as long as a webhook would. An action that cannot be resolved is an error naming it and
// the source tried.
func (s *Server) pinActions(ctx context.Context, plan *pipeline.Plan) (*pipeline.Plan, error) {
	if !actions.Uses(plan) {
		return plan, nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.hooks.fetchTimeout)
	defer cancel()
	pinned, err := s.actions.Pin(ctx, plan)
	if err != nil {
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%w (gave up after %s)", err, s.hooks.fetchTimeout)
		}
		return nil, err
	}
	return pinned, nil
}
