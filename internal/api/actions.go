package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/store"
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

// workflows is what pipeline.Compile reads the reusable workflows a pipeline calls
// through: those of its own repository with read (nil for a definition sent without
// one), those of other repositories from the actions source, as actions are. The
// called jobs are then part of the run, so every attempt runs what was read here.
func (s *Server) workflows(ctx context.Context, read func(file string) ([]byte, error)) pipeline.WorkflowLoader {
	return s.actions.Workflows(ctx, read)
}

// readAt reads a file of the mirror m at the commit sha, for a workflow the pipeline
// calls.
func readAt(ctx context.Context, m *source.Mirror, sha, file string) ([]byte, error) {
	data, err := m.ReadFile(ctx, sha, file)
	if errors.Is(err, source.ErrNotFound) {
		return nil, fmt.Errorf("there is no %s at %s", file, sha)
	}
	return data, err
}

// repoFiles reads files of a project's repository at the commit sha, opening its mirror
// for each: the reusable workflows its pipeline calls, when the pipeline file was read
// through a mirror since closed.
func (s *Server) repoFiles(ctx context.Context, proj *store.Project, sha string) func(file string) ([]byte, error) {
	return func(file string) ([]byte, error) {
		m, err := s.openMirror(ctx, proj)
		if err != nil {
			return nil, err
		}
		defer m.Close()
		return readAt(ctx, m, sha, file)
	}
}

// openMirror opens the coordinator's mirror of the project's repository with the
// project's credentials; the caller closes it.
func (s *Server) openMirror(ctx context.Context, proj *store.Project) (*source.Mirror, error) {
	creds, err := s.repoCredentials(ctx, proj)
	if err != nil {
		return nil, fmt.Errorf("project %q: %w", proj.Name, err)
	}
	return source.Open(ctx, source.Config{Dir: s.hooks.mirrors, URL: proj.RepoURL, Credentials: creds, Logger: s.log})
}
