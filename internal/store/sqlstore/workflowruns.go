package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// The notify bits of a run whose activities a definition of its project listens for
// with on: workflow_run (projectReportsCols reads them from workflow_run_listeners).
const (
	notifyWorkflowRunCompleted  = 16
	notifyWorkflowRunRequested  = 32
	notifyWorkflowRunInProgress = 64
	notifyWorkflowRun           = notifyWorkflowRunCompleted | notifyWorkflowRunRequested | notifyWorkflowRunInProgress
)

// workflowRunBits is the SQL that reads, for a project p and a run's name (its one
// parameter), the notify bits of the activity types listened for: SUM of the distinct
// bits is their OR.
const workflowRunBits = `COALESCE((SELECT SUM(DISTINCT CASE l.type WHEN 'completed' THEN 16 WHEN 'requested' THEN 32
		WHEN 'in_progress' THEN 64 ELSE 0 END) FROM workflow_run_listeners l WHERE l.project_id = p.id AND l.workflow = ?), 0)`

// SetWorkflowRunListeners implements store.WorkflowRunListeners.
func (e *Engine) SetWorkflowRunListeners(ctx context.Context, p store.SetWorkflowRunListenersParams) error {
	if p.Source == "" {
		return fmt.Errorf("set workflow_run listeners: a source is required: %w", store.ErrInvalid)
	}
	for _, l := range p.Listens {
		if err := checkListen(l); err != nil {
			return fmt.Errorf("set workflow_run listeners of %s: %w", p.Source, err)
		}
	}
	err := e.write(ctx, func(t *tx) error {
		return t.setListeners(p.ProjectID, p.Source, p.Listens)
	})
	if err != nil {
		return fmt.Errorf("set workflow_run listeners of %s: %w", p.Source, err)
	}
	return nil
}

// ListWorkflowRunListeners implements store.WorkflowRunListeners.
func (e *Engine) ListWorkflowRunListeners(ctx context.Context, projectID uuid.UUID, source string) ([]store.WorkflowRunListen, error) {
	rows, err := e.readRows(ctx, `SELECT workflow, type FROM workflow_run_listeners WHERE project_id = ? AND source = ?
		ORDER BY workflow, type`, projectID, source)
	if err != nil {
		return nil, fmt.Errorf("list workflow_run listeners of %s: %w", source, err)
	}
	defer rows.Close()
	var out []store.WorkflowRunListen
	for rows.Next() {
		var l store.WorkflowRunListen
		if err := rows.Scan(&l.Workflow, &l.Type); err != nil {
			return nil, fmt.Errorf("list workflow_run listeners of %s: %w", source, err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list workflow_run listeners of %s: %w", source, err)
	}
	return out, nil
}

func checkListen(l store.WorkflowRunListen) error {
	switch l.Type {
	case pipeline.WorkflowRunRequested, pipeline.WorkflowRunInProgress, pipeline.WorkflowRunCompleted:
	default:
		return fmt.Errorf("activity type %q is not one of requested, in_progress, completed: %w", l.Type, store.ErrInvalid)
	}
	if l.Workflow == "" {
		return fmt.Errorf("a workflow name is required: %w", store.ErrInvalid)
	}
	return nil
}

// setListeners replaces the listeners of one definition of a project, in the caller's
// transaction.
func (t *tx) setListeners(projectID uuid.UUID, source string, listens []store.WorkflowRunListen) error {
	if _, err := t.exec(`DELETE FROM workflow_run_listeners WHERE project_id = ? AND source = ?`, projectID, source); err != nil {
		return fmt.Errorf("delete listeners: %w", err)
	}
	seen := map[store.WorkflowRunListen]bool{}
	for _, l := range listens {
		if seen[l] {
			continue
		}
		seen[l] = true
		if _, err := t.exec(`INSERT INTO workflow_run_listeners (project_id, workflow, type, source) VALUES (?, ?, ?, ?)`,
			projectID, l.Workflow, l.Type, source); err != nil {
			return fmt.Errorf("insert listener: %w", err)
		}
	}
	return nil
}

// workflowRunNotify keeps of bits, a run's listened-for activities, those it may report:
// none for a run at the end of a chain of workflow_run.
func workflowRunNotify(bits int, tr store.Trigger) int {
	if tr.WorkflowRunDepth() >= pipeline.MaxWorkflowRunDepth {
		return 0
	}
	return bits & notifyWorkflowRun
}

// reportWorkflowRun enqueues what happened to a run (a pipeline.WorkflowRun* action) for
// the definitions of its project that listen for it, in the transaction that made it
// happen: a coordinator that stops after the commit leaves the message to another.
func (t *tx) reportWorkflowRun(runID uuid.UUID, action string, nowUS int64) error {
	r, err := t.readRunReport(runID)
	if err != nil {
		return err
	}
	// The highest attempt is what github.run_attempt reads in the run's steps; a run whose
	// every job was skipped is one GitHub calls skipped.
	var attempt, ran, total int
	if err := t.row(`SELECT COALESCE(MAX(attempt), 0), COUNT(CASE WHEN status <> 'skipped' THEN 1 END), COUNT(*)
		FROM jobs WHERE run_id = ?`, runID).Scan(&attempt, &ran, &total); err != nil {
		return fmt.Errorf("read the jobs of run %s to report it: %w", runID, err)
	}
	m := store.WorkflowRunMessage{RunID: r.id, ProjectID: r.projectID, Project: r.project, Workflow: r.name, Action: action,
		Attempt: max(attempt, 1), At: fromUS(nowUS)}
	if action == pipeline.WorkflowRunCompleted {
		m.Conclusion = conclusion(r.status, total > 0 && ran == 0)
	}
	payload, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("encode workflow_run of run %s: %w", runID, err)
	}
	return t.enqueueOutbox(store.TopicWorkflowRun, payload, nowUS)
}

// conclusion is GitHub's word for how a run ended.
func conclusion(s store.RunStatus, allSkipped bool) string {
	switch {
	case s == store.RunSuccess && allSkipped:
		return "skipped"
	case s == store.RunSuccess:
		return "success"
	case s == store.RunCancelled:
		return "cancelled"
	}
	return "failure"
}
