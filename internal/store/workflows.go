package store

import (
	"context"
	"time"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/pipeline"
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
	// Listens is what the definition's on: workflow_run listens for, given with a new
	// definition by whoever compiled it (WorkflowRunListens): the store keeps it with
	// the project's listeners, which decide what a run's activities put in the outbox,
	// and does not compile definitions itself. Reads leave it nil.
	Listens []WorkflowRunListen
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
	// Listens replaces what the workflow listens for with on: workflow_run; it is read
	// only with a Definition, of which it is part.
	Listens   []WorkflowRunListen
	Enabled   *bool
	IfVersion int
}

// WorkflowRunListen is one pipeline name and activity type that a definition of a
// project listens for with on: workflow_run: a run of the project with that name, when it
// is requested, starts or ends (Type), is to be told to the definition.
type WorkflowRunListen struct {
	Workflow string
	Type     string // pipeline.WorkflowRunRequested, WorkflowRunInProgress or WorkflowRunCompleted
}

// WorkflowRunListens lists what a compiled on: listens for with workflow_run: each of its
// workflows with each of its types; nil when it has no workflow_run.
func WorkflowRunListens(on *pipeline.Triggers) []WorkflowRunListen {
	if on == nil || on.WorkflowRun == nil {
		return nil
	}
	var out []WorkflowRunListen
	for _, w := range on.WorkflowRun.Workflows {
		for _, ty := range on.WorkflowRun.Types {
			out = append(out, WorkflowRunListen{Workflow: w, Type: ty})
		}
	}
	return out
}

// WorkflowRunListeners keeps, by project, which runs' activities its definitions listen
// for with on: workflow_run. A run reads them when it is created: what its project's
// definitions listen for then is what its requests, starts and ends put in the outbox
// (TopicWorkflowRun), in the transactions that make them, so none is lost to a crash.
// Registered workflows keep theirs with their definition (Workflow.Listens); the
// project's pipeline file is read on its default branch by the schedule loop, which
// sets its listeners here.
type WorkflowRunListeners interface {
	// SetWorkflowRunListeners replaces what the definition named source (ListenerFile
	// for the project's pipeline file) of the project listens for.
	SetWorkflowRunListeners(ctx context.Context, p SetWorkflowRunListenersParams) error
	// ListWorkflowRunListeners lists what the definition named source of the project
	// listens for, by workflow then type.
	ListWorkflowRunListeners(ctx context.Context, projectID uuid.UUID, source string) ([]WorkflowRunListen, error)
}

// SetWorkflowRunListenersParams name a definition of a project and what it listens for.
type SetWorkflowRunListenersParams struct {
	ProjectID uuid.UUID
	Source    string
	Listens   []WorkflowRunListen
}

// ListenerFile is the source of the listeners of a project's pipeline file, as its
// default branch holds it; a registered workflow's are WorkflowListenerSource's.
const ListenerFile = "file"

// WorkflowListenerSource is the source of a registered workflow's listeners.
func WorkflowListenerSource(id uuid.UUID) string { return "workflow:" + id.String() }
