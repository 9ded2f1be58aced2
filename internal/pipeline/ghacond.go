package pipeline

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
	"github.com/gantry-ci/gantry/internal/lazyre"
)

// A workflow's if: that Gantry's expression language cannot say (github.event.*,
// github.repository_owner, a function Gantry's language lacks) is kept as GitHub wrote it
// and evaluated with internal/ghaexpr, where and when Gantry decides the job or step:
// the coordinator when the job's needs are done, the worker when the step's turn comes.
// Its source is ghaCondPrefix followed by the expression, base64url-encoded.

const ghaCondPrefix = "gha:"

// GitHubCondition writes a GitHub expression as a condition's source.
func GitHubCondition(expr string) string {
	return ghaCondPrefix + base64.RawURLEncoding.EncodeToString([]byte(expr))
}

// compileGitHubCondition compiles a source GitHubCondition wrote.
func compileGitHubCondition(src string) (*Condition, *exprError) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(src, ghaCondPrefix))
	if err != nil {
		return nil, &exprError{msg: "not a condition Gantry kept: " + err.Error()}
	}
	expr := string(b)
	if _, err := ghaexpr.Parse(expr); err != nil {
		return nil, &exprError{msg: err.Error()}
	}
	return &Condition{Source: src, gha: expr, readsNeeds: strings.Contains(expr, "needs"),
		implicitSuccess: !statusCall.MatchString(expr)}, nil
}

// statusCall finds a call of a status function, as GitHub does before it adds success().
var statusCall = lazyre.New(`(?i)\b(success|failure|always|cancelled)\s*\(`)

// Text is the condition as its author wrote it, for messages.
func (c *Condition) Text() string {
	if c.gha != "" {
		return c.gha
	}
	return c.Source
}

// gantryToGitHubEvents are the names GitHub gives the events Gantry names otherwise.
var gantryToGitHubEvents = map[string]string{"dispatch": "workflow_dispatch", "tag": "push"}

// GitHubResult is GitHub's name for a job's or step's result (failure for failed), which
// GitHub's expressions compare with: needs.X.result, steps.X.outcome.
func GitHubResult(r string) string {
	if r == ResultFailed {
		return "failure"
	}
	return r
}

// evalGitHub evaluates a condition kept as GitHub wrote it.
func (c *Condition) evalGitHub(in ConditionInput, env map[string]string, matrix []MatrixValue, success func() bool) (bool, error) {
	ctx := in.githubContext(env, matrix)
	ctx.Status = func(name string) bool {
		switch name {
		case "success":
			return success()
		case "failure":
			return in.UpstreamFailed
		case "cancelled":
			return in.Cancelled
		}
		return true
	}
	ok, err := ghaexpr.Condition(c.gha, ctx)
	if err != nil {
		return false, fmt.Errorf("evaluate if: %s: %w", c.gha, err)
	}
	return ok, nil
}

// githubContext is what a GitHub expression the coordinator evaluates reads: the github
// context as the trigger tells it, needs, steps, inputs, env, vars, matrix and runner.
func (in ConditionInput) githubContext(env map[string]string, matrix []MatrixValue) *ghaexpr.Context {
	owner, _, _ := strings.Cut(in.Repository, "/")
	event := strings.ToLower(in.Event)
	if e, ok := gantryToGitHubEvents[event]; ok {
		event = e
	}
	refName, refType := in.Branch, "branch"
	if in.Tag != "" {
		refName, refType = in.Tag, "tag"
	}
	gh := map[string]any{
		"sha": in.SHA, "ref": in.Ref, "ref_name": refName, "ref_type": refType, "repository": in.Repository,
		"repository_owner": owner, "event_name": event, "event": in.eventPayload(), "actor": in.Actor,
		"triggering_actor": in.Actor, "base_ref": in.BaseRef, "head_ref": in.HeadRef, "run_id": in.RunID,
	}
	if in.RunNumber > 0 {
		gh["run_number"] = float64(in.RunNumber)
	}
	needs := make(map[string]any, len(in.Needs))
	for name, r := range in.Needs {
		outs := map[string]any{}
		for k, v := range in.NeedOutputs[name] {
			outs[k] = v
		}
		needs[name] = map[string]any{"result": GitHubResult(r), "outputs": outs}
	}
	steps := make(map[string]any, len(in.Steps))
	for id, st := range in.Steps {
		outs := map[string]any{}
		for k, v := range st.Outputs {
			outs[k] = v
		}
		steps[id] = map[string]any{"outcome": GitHubResult(st.Outcome), "conclusion": GitHubResult(st.Conclusion), "outputs": outs}
	}
	inputs := make(map[string]any, len(in.Inputs))
	for k, v := range in.Inputs {
		inputs[k] = v
		if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
			inputs[k] = b
		}
	}
	envCtx := map[string]any{}
	for k, v := range mergeEnv(env, in.Env) {
		envCtx[k] = v
	}
	vars := make(map[string]any, len(in.Vars))
	for k, v := range in.Vars {
		vars[k] = v
	}
	return &ghaexpr.Context{
		Values: map[string]any{"github": gh, "needs": needs, "steps": steps, "inputs": inputs, "env": envCtx, "vars": vars,
			"matrix": MatrixContext(matrix), "runner": map[string]any{"os": "Linux"}},
	}
}

// eventPayload is the event the run is for as GitHub's webhook sent it (Payload), or,
// for a run no webhook started, a payload of the same shape with what Gantry knows.
func (in ConditionInput) eventPayload() map[string]any {
	if len(in.Payload) > 0 {
		var ev map[string]any
		if json.Unmarshal(in.Payload, &ev) == nil {
			return ev
		}
	}
	owner, name, _ := strings.Cut(in.Repository, "/")
	ev := map[string]any{"repository": map[string]any{"full_name": in.Repository, "name": name, "owner": map[string]any{"login": owner}}}
	if in.Ref != "" {
		ev["ref"] = in.Ref
	}
	if in.SHA != "" {
		ev["after"] = in.SHA
		ev["head_commit"] = map[string]any{"id": in.SHA}
	}
	if in.PRNumber > 0 {
		ev["number"] = float64(in.PRNumber)
		ev["pull_request"] = map[string]any{"number": float64(in.PRNumber), "head": map[string]any{"ref": in.HeadRef, "sha": in.SHA},
			"base": map[string]any{"ref": in.BaseRef}}
	}
	if len(in.Inputs) > 0 {
		inputs := map[string]any{}
		for k, v := range in.Inputs {
			inputs[k] = v
		}
		ev["inputs"] = inputs
	}
	return ev
}
