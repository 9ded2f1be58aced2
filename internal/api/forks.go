package api

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantry-ci/gantry/internal/store"
)

// forkTrust is whether a job of a run may have what only the project's own people may
// have: its secrets and its repository credential. A pull request from a fork runs code
// its author wrote, so, as on GitHub and GitLab, its jobs get neither unless the project
// says every fork may (secrets_for_forks), or an approver of the job's environment
// approved this attempt. This is the one place that decides it. why, when trusted is
// false, says so in words a job log may show.
func (s *Server) forkTrust(ctx context.Context, run *store.Run, job *store.Job) (trusted bool, why string, err error) {
	if run == nil || !run.Trigger.Fork {
		return true, "", nil
	}
	allow, err := s.store.SecretsForForks(ctx, run.Project)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, "", fmt.Errorf("read secrets_for_forks of project %s: %w", run.Project, err)
	}
	if allow {
		return true, "", nil
	}
	if job != nil && job.Spec != nil && job.Spec.Environment != nil {
		as, err := s.store.ListApprovals(ctx, job.ID)
		if err != nil {
			return false, "", fmt.Errorf("read the approvals of job %s: %w", job.ID, err)
		}
		// ListApprovals holds the decisions of the job's current wait only: a retried
		// attempt that waits again needs a new approval.
		approved, rejected := false, false
		for _, a := range as {
			switch a.Decision {
			case store.Approved:
				approved = true
			case store.Rejected:
				rejected = true
			}
		}
		if approved && !rejected {
			return true, "", nil
		}
	}
	return false, fmt.Sprintf("this run is of a pull request from a fork: project %s gives forks no secrets and no repository credential "+
		"(allow it with gantry secret forks --project %s on, or put the job in an environment that needs approval)", run.Project, run.Project), nil
}
