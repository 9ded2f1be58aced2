package scheduler

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/trigger"
	"github.com/google/uuid"
)

// StartWorkflowRuns starts the runs that one activity of a run (a TopicWorkflowRun
// message, id being the message's) calls for: of each definition of the run's project
// whose on: workflow_run matches it, the project's pipeline file as its default branch
// holds it now and each enabled registered workflow, as GitHub runs a workflow_run
// workflow from the default branch. Each run checks out the default branch's tip (when
// the project has a repository) and reads the triggering run as
// github.event.workflow_run.
//
// It is safe to call again for one message, on any replica: each run is created with an
// idempotency key made of the message id and the definition, so a delivery cut short
// after some runs were made makes the others on the next attempt and no run twice. An
// error is worth another attempt (the repository could not be reached, the store
// failed); a message that can start nothing (its run or project is gone, the run is at
// the end of a chain) is done.
func (c *Cron) StartWorkflowRuns(ctx context.Context, id uuid.UUID, m store.WorkflowRunMessage) error {
	_, err := c.startWorkflowRuns(ctx, id, m)
	return err
}

// startWorkflowRuns is StartWorkflowRuns, returning the runs it made or found made.
func (c *Cron) startWorkflowRuns(ctx context.Context, id uuid.UUID, m store.WorkflowRunMessage) ([]uuid.UUID, error) {
	log := c.cfg.Logger.With("project", m.Project, "run", m.RunID, "workflow", m.Workflow, "action", m.Action)
	src, err := c.cfg.Store.GetRun(ctx, m.RunID)
	if errors.Is(err, store.ErrNotFound) {
		log.Info("workflow_run: the run is gone; nothing to start")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read run %s: %w", m.RunID, err)
	}
	depth := src.Trigger.WorkflowRunDepth()
	if depth >= pipeline.MaxWorkflowRunDepth {
		// Its creation said so already; a message from before a change of the cap ends here.
		log.Info("workflow_run: the run is at the end of a chain of workflow_run; it starts none", "depth", depth)
		return nil, nil
	}
	p, err := c.cfg.Store.GetProjectByName(ctx, src.Project)
	if errors.Is(err, store.ErrNotFound) {
		log.Info("workflow_run: the project is gone; nothing to start")
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read project %q: %w", src.Project, err)
	}
	flows, err := c.cfg.Store.ListWorkflows(ctx, store.ListWorkflowsParams{Project: p.Name, EnabledOnly: true})
	if err != nil {
		return nil, fmt.Errorf("list workflows of project %q: %w", p.Name, err)
	}
	var listeners []scheduleSource
	var tip source.Ref
	var tipFile *cachedFile
	hasRepo := p.RepoURL != "" && p.DefaultBranch != ""
	if hasRepo {
		// Every definition's run checks the default branch out: without it, none runs
		// now, and the message is tried again.
		f, ref, err := c.projectFile(ctx, p)
		if err != nil {
			return nil, fmt.Errorf("workflow_run: %w", err)
		}
		tip, tipFile = ref, f
		if f != nil {
			listeners = append(listeners, scheduleSource{key: store.ListenerFile, file: f})
		}
	}
	for _, wf := range flows {
		if f := c.workflowFile(ctx, wf, log); f != nil {
			listeners = append(listeners, scheduleSource{key: store.WorkflowListenerSource(wf.ID), file: f, workflow: wf})
		}
	}
	ev := trigger.Event{Kind: trigger.KindWorkflowRun, Workflow: m.Workflow, Action: m.Action, Branch: src.Trigger.Branch}
	cause := &store.WorkflowRunCause{RunID: src.ID, Name: src.Name, Number: src.Number, Action: m.Action,
		Conclusion: m.Conclusion, Branch: src.Trigger.Branch, SHA: src.Trigger.SHA, Depth: depth + 1}
	repo := cmp.Or(src.Trigger.Repository, repoFullName(p.RepoURL))
	payload, err := json.Marshal(WorkflowRunEvent(src, m, repo, c.cfg.PublicURL))
	if err != nil {
		return nil, fmt.Errorf("encode the workflow_run event of run %s: %w", src.ID, err)
	}
	raw := json.RawMessage(payload)
	var started []uuid.UUID
	var errs []error
	for _, l := range listeners {
		plan := l.file.plan
		if plan.On == nil || plan.On.WorkflowRun == nil {
			continue
		}
		ok, reason := trigger.Match(plan.On, ev)
		if !ok {
			log.Debug("workflow_run: does not start", "definition", l.key, "reason", reason)
			continue
		}
		if c.cfg.Pin != nil {
			pinned, err := c.cfg.Pin(ctx, plan)
			if err != nil {
				errs = append(errs, fmt.Errorf("workflow_run of %s: %w", l.key, err))
				continue
			}
			plan = pinned
		}
		params := store.CreateRunParams{
			Project: p.Name, Definition: l.file.def, Plan: plan, Env: WorkflowRunEnv(cause),
			// One run per message and definition, however often the message is delivered.
			IdempotencyKey: "workflow_run:" + id.String() + ":" + l.key,
			Trigger: store.Trigger{Event: string(trigger.KindWorkflowRun), Actor: src.Trigger.RunActor(), Repository: repo,
				WorkflowRun: cause, Payload: &raw},
		}
		atTip(&params, hasRepo, tip, tipFile, p.RepoURL, l.workflow)
		run, _, created, err := c.cfg.Store.CreateRun(ctx, params)
		switch {
		case errors.Is(err, store.ErrInvalid):
			// Trying again makes the same plan: said once, and the message is done.
			log.Warn("workflow_run: the definition's run cannot be made", "definition", l.key, "err", err)
		case err != nil:
			errs = append(errs, fmt.Errorf("workflow_run of %s: %w", l.key, err))
		default:
			started = append(started, run.ID)
			if created {
				log.Info("workflow_run: started", "definition", l.key, "new_run", run.ID, "sha", params.Trigger.SHA, "reason", reason)
			}
		}
	}
	return started, errors.Join(errs...)
}

// The variables a run of workflow_run gives its steps, and its if: conditions read as
// env.NAME: what Gantry's own language knows of the run that started it.
const (
	EnvWorkflowRunID         = "GANTRY_WORKFLOW_RUN_ID"
	EnvWorkflowRunName       = "GANTRY_WORKFLOW_RUN_NAME"
	EnvWorkflowRunNumber     = "GANTRY_WORKFLOW_RUN_NUMBER"
	EnvWorkflowRunAction     = "GANTRY_WORKFLOW_RUN_ACTION"
	EnvWorkflowRunConclusion = "GANTRY_WORKFLOW_RUN_CONCLUSION"
	EnvWorkflowRunBranch     = "GANTRY_WORKFLOW_RUN_BRANCH"
	EnvWorkflowRunSHA        = "GANTRY_WORKFLOW_RUN_SHA"
)

// WorkflowRunEnv is the run's env of a run of workflow_run: the variables its steps read
// of the run that started it (cause).
func WorkflowRunEnv(cause *store.WorkflowRunCause) map[string]string {
	return map[string]string{
		EnvWorkflowRunID: cause.RunID.String(), EnvWorkflowRunName: cause.Name, EnvWorkflowRunNumber: strconv.Itoa(cause.Number),
		EnvWorkflowRunAction: cause.Action, EnvWorkflowRunConclusion: cause.Conclusion,
		EnvWorkflowRunBranch: cause.Branch, EnvWorkflowRunSHA: cause.SHA,
	}
}

// WorkflowRunEvent is github.event of a run that m, an activity of the run src, started:
// GitHub's workflow_run payload, with what Gantry knows of src. repo is the project's
// repository (owner/name), publicURL where the dashboard is.
func WorkflowRunEvent(src *store.Run, m store.WorkflowRunMessage, repo, publicURL string) map[string]any {
	repository := repoObject(repo)
	head := repository
	if src.Trigger.Fork {
		// The pull request's head is another repository, which only its payload names.
		head = repoObject(forkName(src.Trigger.Payload))
	}
	status := m.Action
	var concl any // null until it completed, as GitHub sends it
	if m.Action == pipeline.WorkflowRunCompleted {
		concl = m.Conclusion
	}
	var branch any // null for a run of no branch (a tag), as on GitHub
	if src.Trigger.Branch != "" {
		branch = src.Trigger.Branch
	} else if src.Trigger.HeadRef != "" {
		branch = src.Trigger.HeadRef
	}
	pulls := []any{}
	if src.Trigger.PRNumber > 0 {
		pulls = append(pulls, map[string]any{"number": src.Trigger.PRNumber,
			"head": map[string]any{"ref": src.Trigger.HeadRef, "sha": src.Trigger.SHA}, "base": map[string]any{"ref": src.Trigger.BaseRef}})
	}
	actor := map[string]any{"login": src.Trigger.RunActor()}
	htmlURL := strings.TrimRight(publicURL, "/") + "/runs/" + src.ID.String()
	started := src.StartedAt
	if started.IsZero() {
		started = src.CreatedAt
	}
	run := map[string]any{
		"id": src.ID.String(), "name": src.Name, "display_title": cmp.Or(firstLine(src.Trigger.Message), src.Name),
		"run_number": src.Number, "run_attempt": m.Attempt, "event": githubEvent(src.Trigger.Event),
		"status": status, "conclusion": concl, "head_branch": branch, "head_sha": src.Trigger.SHA,
		"html_url": htmlURL, "url": htmlURL,
		"created_at": src.CreatedAt.UTC(), "updated_at": m.At.UTC(), "run_started_at": started.UTC(),
		"actor": actor, "triggering_actor": actor, "pull_requests": pulls,
		"head_commit":     map[string]any{"id": src.Trigger.SHA, "message": src.Trigger.Message, "author": map[string]any{"name": src.Trigger.AuthorName}},
		"repository":      repository,
		"head_repository": head,
	}
	return map[string]any{
		"action": m.Action, "workflow_run": run, "workflow": map[string]any{"name": src.Name},
		"repository": repository, "sender": actor,
	}
}

// githubEvent is GitHub's name of the event a run of Gantry was for.
func githubEvent(e string) string {
	switch e {
	case string(trigger.KindDispatch):
		return "workflow_dispatch"
	case string(trigger.KindTag):
		return "push"
	}
	return e
}

func repoObject(full string) map[string]any {
	owner, name, _ := strings.Cut(full, "/")
	if i := strings.LastIndex(full, "/"); i >= 0 {
		// A GitLab group path: the owner is everything before the name.
		owner, name = full[:i], full[i+1:]
	}
	return map[string]any{"full_name": full, "name": name, "owner": map[string]any{"login": owner}}
}

// forkName is the full name of a pull request's head repository as the forge's payload
// says it; "" when it does not.
func forkName(payload *json.RawMessage) string {
	if payload == nil {
		return ""
	}
	var ev struct {
		PullRequest struct {
			Head struct {
				Repo struct {
					FullName string `json:"full_name"`
				} `json:"repo"`
			} `json:"head"`
		} `json:"pull_request"`
	}
	if json.Unmarshal(*payload, &ev) != nil {
		return ""
	}
	return ev.PullRequest.Head.Repo.FullName
}

// repoFullName is a repository's owner/name from its remote URL (an https or ssh URL, or
// scp-like user@host:path); "" for none.
func repoFullName(remote string) string {
	if remote == "" {
		return ""
	}
	path := remote
	if u, err := url.Parse(remote); err == nil && u.Host != "" {
		path = u.Path
	} else if _, after, ok := strings.Cut(remote, ":"); ok {
		path = after
	}
	return strings.TrimSuffix(strings.Trim(path, "/"), ".git")
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return strings.TrimSpace(line)
}

// syncFileListeners makes the store's record of what the project's pipeline file (f
// at the default branch's tip; nil when it has none, or none that compiles) listens for
// with on: workflow_run what f says. The store is read first, so the write is made only
// when they differ, and a replica that wrote what an older commit said is put right by
// the next pass of any replica that reads the new one.
func (c *Cron) syncFileListeners(ctx context.Context, p *store.Project, f *cachedFile, log *slog.Logger) error {
	var want []store.WorkflowRunListen
	if f != nil && f.plan != nil {
		want = store.WorkflowRunListens(f.plan.On)
	}
	have, err := c.cfg.Store.ListWorkflowRunListeners(ctx, p.ID, store.ListenerFile)
	if err != nil {
		return fmt.Errorf("workflow_run listeners of project %q: %w", p.Name, err)
	}
	// Compared as sets: the database's collation orders the names its own way.
	byName := func(a, b store.WorkflowRunListen) int {
		return cmp.Or(strings.Compare(a.Workflow, b.Workflow), strings.Compare(a.Type, b.Type))
	}
	slices.SortFunc(want, byName)
	want = slices.Compact(want)
	slices.SortFunc(have, byName)
	if slices.Equal(have, want) {
		return nil
	}
	if err := c.cfg.Store.SetWorkflowRunListeners(ctx, store.SetWorkflowRunListenersParams{ProjectID: p.ID, Source: store.ListenerFile, Listens: want}); err != nil {
		return fmt.Errorf("workflow_run listeners of project %q: %w", p.Name, err)
	}
	log.Info("workflow_run: the default branch's pipeline file listens for", "listens", want)
	return nil
}
