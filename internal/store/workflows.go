package store

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Workflow is a registered workflow: a named pipeline definition kept in a project and
// started by dispatch (or by its own on: schedule), rather than read from a repository.
type Workflow struct {
	ID        uuid.UUID
	ProjectID uuid.UUID
	Project   string
	Name      string
	// Version counts the definitions the workflow has had: 1 when created, one more at
	// each new definition.
	Version    int
	Definition []byte
	// Enabled workflows may be dispatched and their schedules fire; a disabled one keeps
	// its definition and does neither.
	Enabled   bool
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Workflows keeps registered workflows.
type Workflows interface {
	// CreateWorkflow stores w as version 1, enabled; it fills in ID, ProjectID, Version,
	// Enabled, CreatedAt and UpdatedAt. The project is made on first use, as a run makes
	// it. ErrConflict when the project already has a workflow of that name; ErrInvalid
	// without a name or a definition.
	CreateWorkflow(ctx context.Context, w *Workflow) error
	// GetWorkflow returns the workflow with its current definition; ErrNotFound when id
	// names none.
	GetWorkflow(ctx context.Context, id uuid.UUID) (*Workflow, error)
	// ListWorkflows lists workflows by project, then name.
	ListWorkflows(ctx context.Context, p ListWorkflowsParams) ([]*Workflow, error)
	// UpdateWorkflow changes a workflow and returns it as it now is: a new definition
	// (one that differs from the current) makes version + 1; Enabled sets it. When
	// IfVersion is set and is not the current version, it is ErrConflict and nothing
	// changes, so two editors never overwrite each other unseen. ErrNotFound when ID
	// names none.
	UpdateWorkflow(ctx context.Context, p UpdateWorkflowParams) (*Workflow, error)
	// DeleteWorkflow deletes a workflow; its runs stay. ErrNotFound when id names none.
	DeleteWorkflow(ctx context.Context, id uuid.UUID) error
}

// ListWorkflowsParams filter ListWorkflows. Zero values do not filter.
type ListWorkflowsParams struct {
	Project string
	// EnabledOnly leaves out disabled workflows (the schedule loop's view).
	EnabledOnly bool
}

// UpdateWorkflowParams describe a change to a workflow; nil fields stay as they are.
type UpdateWorkflowParams struct {
	ID         uuid.UUID
	Definition []byte
	Enabled    *bool
	IfVersion  int
}
