package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/glob"
	"github.com/google/uuid"
)

// JobWaitingApproval is the status of a job that is ready to run but whose environment
// needs approvals first (DESIGN.md §4): it waits here before queued.
const JobWaitingApproval JobStatus = "waiting_approval"

// Failure kinds of jobs an environment stopped.
const (
	// FailureRejected: an approver rejected the job, or nobody approved it in time.
	FailureRejected FailureKind = "rejected"
	// FailureNotAllowed: the run's branch or tag may not deploy to the environment.
	FailureNotAllowed FailureKind = "not_allowed"
)

// DefaultApprovalTimeout is how long a job waits for approval when its environment
// names no timeout.
const DefaultApprovalTimeout = 24 * time.Hour

// RolePrefix marks an approvers entry that names a role rather than a token: "role:admin"
// lets any caller with the admin role approve.
const RolePrefix = "role:"

// Environment is a project's deployment target: which refs may deploy to it and who must
// approve a deploy first. A job naming an environment its project does not define runs
// with no rules.
type Environment struct {
	ProjectID uuid.UUID
	Name      string
	// Branches and Tags are glob patterns (as on: push filters use); when either is set,
	// a run deploys only from a branch matching Branches or a tag matching Tags. Both
	// empty: any ref.
	Branches []string
	Tags     []string
	// RequiredApprovals is how many distinct approvers must approve; 0 needs none.
	RequiredApprovals int
	// Approvers are token names, and roles written "role:NAME", who may approve or reject.
	Approvers []string
	// ApprovalTimeout is how long a job waits for approval before it is rejected;
	// DefaultApprovalTimeout when zero.
	ApprovalTimeout time.Duration
	// PreventSelfReview refuses the approval of the run's author (SelfReview); off, as on
	// GitHub, an approver may approve a run they started.
	PreventSelfReview bool
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// Validate checks what a user gave: the patterns compile, the count and timeout are not
// negative, approvals have approvers to give them. Errors wrap ErrInvalid.
func (e *Environment) Validate() error {
	for _, list := range [][]string{e.Branches, e.Tags} {
		for _, p := range list {
			if _, err := glob.Compile(p); err != nil {
				return fmt.Errorf("environment %s: %w: %w", e.Name, err, ErrInvalid)
			}
		}
	}
	switch {
	case e.RequiredApprovals < 0:
		return fmt.Errorf("environment %s: required approvals must not be negative: %w", e.Name, ErrInvalid)
	case e.RequiredApprovals > 0 && len(e.Approvers) == 0:
		return fmt.Errorf("environment %s: %d approvals are required but no approver is named: %w", e.Name, e.RequiredApprovals, ErrInvalid)
	case e.ApprovalTimeout < 0:
		return fmt.Errorf("environment %s: approval timeout must not be negative: %w", e.Name, ErrInvalid)
	}
	for _, a := range e.Approvers {
		if role, ok := strings.CutPrefix(a, RolePrefix); ok {
			if Role(role).Rank() == 0 {
				return fmt.Errorf("environment %s: approver %q: a role is admin, maintainer, developer, viewer, write or read: %w", e.Name, a, ErrInvalid)
			}
		} else if strings.TrimSpace(a) == "" {
			return fmt.Errorf("environment %s: an approver name is empty: %w", e.Name, ErrInvalid)
		}
	}
	return nil
}

// Timeout is the approval timeout in effect.
func (e *Environment) Timeout() time.Duration {
	if e.ApprovalTimeout <= 0 {
		return DefaultApprovalTimeout
	}
	return e.ApprovalTimeout
}

// Gate is what an environment makes of a job its if: lets run.
type Gate struct {
	// Fail is why the job may not run at all (its ref is not allowed); "" when it may.
	Fail string
	// Wait: the job waits for approvals before it is queued.
	Wait bool
}

// Gate is the one policy for a job entering the environment, for root jobs when their run
// is created and for every other job when its needs are done: a ref the environment does
// not allow fails it, and so does one that is not verified (Trigger.RefVerified) when the
// environment names branches or tags; one that needs approvals waits. A nil environment
// (one the project does not define) lets every job run.
func (e *Environment) Gate(tr Trigger) Gate {
	if e == nil {
		return Gate{}
	}
	if len(e.Branches) > 0 || len(e.Tags) > 0 {
		ok := false
		switch {
		case tr.Tag != "":
			ok = matchAny(e.Tags, tr.Tag)
		case tr.Branch != "":
			ok = matchAny(e.Branches, tr.Branch)
		}
		switch {
		case !ok:
			return Gate{Fail: fmt.Sprintf("%s may not deploy to %s", refWords(tr), e.Name)}
		case !tr.RefVerified():
			return Gate{Fail: fmt.Sprintf("%s is not verified (it came from no signed webhook, no read of the repository and no admin) and may not deploy to %s",
				refWords(tr), e.Name)}
		}
	}
	return Gate{Wait: e.RequiredApprovals > 0}
}

// NoRules says what Gantry tells whoever runs or checks a job that names environment
// name in project, given env, the project's environment of that name (nil when the
// project does not define it): Gate lets every job of an undefined environment run, so
// naming one protects nothing, and a misspelt or not yet defined name must not pass in
// silence. "" when env is defined or no environment is named.
func NoRules(project, name string, env *Environment) string {
	if name == "" || env != nil {
		return ""
	}
	return fmt.Sprintf("environment %s is not defined in project %s: it has no rules", name, project)
}

func refWords(tr Trigger) string {
	switch {
	case tr.Tag != "":
		return "tag " + tr.Tag
	case tr.Branch != "":
		return "branch " + tr.Branch
	}
	return "a run with no branch or tag"
}

func matchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		// Patterns were validated when stored; one that no longer compiles matches nothing.
		if g, err := glob.Compile(p); err == nil && g.Match(s) {
			return true
		}
	}
	return false
}

// MayApprove reports whether a caller with this identity and role may decide on the
// environment's jobs: it is named among the approvers, or holds (or outranks) a role
// named there. The role is the caller's on the job's project (EffectiveRole); read ranks
// with viewer and write with developer.
func (e *Environment) MayApprove(identity string, role Role) bool {
	for _, a := range e.Approvers {
		if r, ok := strings.CutPrefix(a, RolePrefix); ok {
			if role.Rank() >= Role(r).Rank() && Role(r).Rank() > 0 {
				return true
			}
		} else if a == identity {
			return true
		}
	}
	return false
}

// WhoMayApprove names, for a refusal, who may decide on the environment's jobs: "alice,
// bob, or anyone with the maintainer role or higher on the project".
func (e *Environment) WhoMayApprove() string {
	var names, roles []string
	for _, a := range e.Approvers {
		if r, ok := strings.CutPrefix(a, RolePrefix); ok {
			roles = append(roles, r)
		} else {
			names = append(names, a)
		}
	}
	for _, r := range roles {
		names = append(names, "anyone with the "+r+" role or higher on the project")
	}
	switch len(names) {
	case 0:
		return "nobody (the environment names no approvers)"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// SelfReview reports whether approver approving a job of a run started by tr is a
// self-review the environment refuses: it prevents self-review and approver is the run's
// author (Trigger.Author). Rejecting one's own run is never refused, nor is anything when
// the author is not known.
func (e *Environment) SelfReview(d Decision, approver string, tr Trigger) bool {
	if e == nil || !e.PreventSelfReview || d != Approved {
		return false
	}
	author := tr.Author()
	return author != "" && author == approver
}

// Decision is an approver's answer.
type Decision string

// Decisions.
const (
	Approved Decision = "approved"
	Rejected Decision = "rejected"
)

// Approval is one approver's decision on one attempt of a job waiting for approval.
type Approval struct {
	JobID    uuid.UUID
	Attempt  int
	Approver string
	Decision Decision
	Comment  string
	At       time.Time
}

// Environments keeps projects' environments and the approvals of jobs waiting on them.
type Environments interface {
	// PutEnvironment creates or replaces the project's environment of e.Name; it fills
	// in CreatedAt (kept on replace) and UpdatedAt. ErrInvalid when Validate fails.
	PutEnvironment(ctx context.Context, e *Environment) error
	// GetEnvironment returns the project's environment; ErrNotFound when it has none.
	GetEnvironment(ctx context.Context, projectID uuid.UUID, name string) (*Environment, error)
	// ListEnvironments lists the project's environments by name.
	ListEnvironments(ctx context.Context, projectID uuid.UUID) ([]*Environment, error)
	// DeleteEnvironment deletes it; ErrNotFound when there is none. Jobs waiting on it
	// keep waiting until decided or timed out: their rules are the ones they started with
	// except that, with no environment left to name approvers, only the timeout or a
	// cancel ends the wait.
	DeleteEnvironment(ctx context.Context, projectID uuid.UUID, name string) error
	// DecideJob records an approver's decision on a job waiting for approval. A rejection
	// fails the job (FailureRejected, reason "rejected by NAME"); an approval that makes
	// the environment's required count of distinct approvers queues it. The same approver
	// deciding twice changes nothing the second time. ErrNotFound when there is no such
	// job; ErrConflict when it is not waiting for approval; ErrForbidden when the approver
	// may not decide on it, or approves a run of their own in an environment that prevents
	// self-review (Environment.SelfReview).
	DecideJob(ctx context.Context, p DecideJobParams) (*Job, error)
	// ListApprovals returns the decisions on the job's current attempt, oldest first.
	ListApprovals(ctx context.Context, jobID uuid.UUID) ([]*Approval, error)
	// ExpireApprovals rejects (FailureRejected) jobs that waited for approval past their
	// environment's timeout and returns how many; safe from several replicas at once.
	ExpireApprovals(ctx context.Context) (int, error)
}

// DecideJobParams describe an approver's decision.
type DecideJobParams struct {
	JobID    uuid.UUID
	Approver string // the caller's token name ("anonymous" with auth off)
	Role     Role   // the caller's role, for approvers named by role
	// Anyone lets the caller decide whoever they are: the API sets it when auth is off.
	Anyone   bool
	Decision Decision
	Comment  string
}
