package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/ghaexpr"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// preCall is the pre of the action of one job step, at the job's start.
type preCall struct {
	st pipeline.Step
	// name is what the log calls it: Pre and the step's name (Pre Run owner/repo@ref).
	name      string
	jobStatus func() string
	// fail fails the job, with the kind of failure and the exit code.
	fail func(kind string, code *int)
}

// preStep runs, at the job's start, the pre of the action the job's step st uses (a
// JavaScript action's pre:, a docker action's pre-entrypoint:), and for a composite
// action the pres of the actions its steps use, as GitHub's runner does before the job's
// first step: whatever st's if: will say, each when its pre-if holds (always() by
// default) for how the job is doing, with the step's with: as INPUT_* and its env, under
// the step's timeout; what it saves with $GITHUB_STATE is the STATE_* of the action's
// main and post. env, st's with: and name are as the job's start has them: what they
// read of steps.* is empty, as on GitHub. A pre that fails fails the job (unless the step
// may fail: continue-on-error), so the steps that run only while it succeeds do not;
// the post of an action whose pre ran runs at the job's end all the same.
//
// A local action (./path) has no pre run, nor has an action a local composite action
// uses: their files are not there before the steps run, and GitHub runs neither. An
// action that cannot be found is left to its step, which fails saying so.
func (r *actionRunner) preStep(ctx context.Context, st pipeline.Step, env map[string]string, jobStatus func() string, fail func(kind string, code *int)) {
	ctx, cancel := stepContext(ctx, st)
	defer cancel()
	with := stepWith(st)
	c := &preCall{st: st, name: "Pre " + st.Name, jobStatus: jobStatus, fail: fail}
	r.pre(ctx, c, useKey("", st.Index), st.Uses, st.ID, with, env, st.Actions, 0)
}

// pre runs the pre of the use key of the action uses names, with its inputs given (with)
// in env, or for a composite action those of the actions its steps use.
func (r *actionRunner) pre(ctx context.Context, c *preCall, key, uses, id string, with, env map[string]string,
	pins map[string]pipeline.ActionPin, depth int) {
	u, err := pipeline.ParseUses(uses)
	if err != nil || depth >= actions.MaxDepth || u.NativeStep() || u.Kind == pipeline.UsesDocker || u.Kind == pipeline.UsesLocal {
		return
	}
	loc, err := r.locate(ctx, uses, pins)
	if err != nil {
		return
	}
	inputs, env := r.actionEnv(loc, id, with, env, c.jobStatus)
	runs := loc.meta.Runs
	switch {
	case runs.IsNode() && runs.Pre != "":
		r.runPre(ctx, c, key, loc, depth, env, func(state map[string]string) (stepRun, *postStep) {
			out := r.nodeFile(ctx, c.st, loc, runs.Pre, env, state)
			if runs.Post == "" || out.err != nil || out.res.ExitCode == exitNoNode {
				return out, nil
			}
			return out, &postStep{step: c.st, name: "Post " + c.st.Name, loc: loc, env: env, state: state, cond: runs.PostIf}
		})
	case runs.IsDocker() && runs.PreEntrypoint != "":
		d, err := r.dockerPlan(loc, inputs, env)
		if err != nil {
			return
		}
		r.runPre(ctx, c, key, loc, depth, env, func(state map[string]string) (stepRun, *postStep) {
			out := r.dockerRun(ctx, "action "+loc.uses, d.image, d.build, []string{runs.PreEntrypoint}, d.args, d.env, state)
			if runs.PostEntrypoint == "" || out.err != nil {
				return out, nil
			}
			p := r.dockerPost(c.st, loc, d, state)
			return out, &p
		})
	case runs.IsComposite():
		r.preComposite(ctx, c, key, loc, inputs, env, pins, depth)
	}
}

// preComposite runs the pres of the actions the steps of the composite action loc use,
// their with: and env read with its inputs, as its steps would at the job's start.
func (r *actionRunner) preComposite(ctx context.Context, c *preCall, key string, loc *actionLoc, inputs, env map[string]string,
	pins map[string]pipeline.ActionPin, depth int) {
	inputsCtx := anyMap(inputs)
	for i, cs := range loc.meta.Runs.Steps {
		if cs.Uses == "" {
			continue
		}
		ectx := r.exprContext(env, inputsCtx, map[string]any{}, c.jobStatus)
		stepEnv := maps.Clone(env)
		ok := true
		for _, k := range cs.EnvNames {
			v, err := ghaexpr.Interpolate(cs.Env[k], ectx)
			ok = ok && err == nil
			stepEnv[k] = v
		}
		ectx.Values["env"] = anyMap(stepEnv)
		with := map[string]string{}
		for _, k := range cs.WithNames {
			v, err := ghaexpr.Interpolate(cs.With[k], ectx)
			ok = ok && err == nil
			with[k] = v
		}
		if ok {
			// One that does not evaluate fails its step when it runs, saying so.
			r.pre(ctx, c, useKey(key, i), cs.Uses, cs.ID, with, stepEnv, pins, depth+1)
		}
	}
}

// runPre runs one pre of the use key of the action loc when its pre-if holds, env what
// the pre-if reads, and registers the post run gives, as GitHub's runner registers an
// action's post as soon as its pre runs.
func (r *actionRunner) runPre(ctx context.Context, c *preCall, key string, loc *actionLoc, depth int, env map[string]string,
	run func(state map[string]string) (stepRun, *postStep)) {
	pre := &preRun{state: map[string]string{}, post: -1}
	r.pres[key] = pre
	name := c.name
	if depth > 0 {
		name += " (" + loc.uses + ")"
	}
	if ctx.Err() != nil {
		return
	}
	cond := cmp.Or(loc.meta.Runs.PreIf, "always()")
	ok, err := actionCondition(cond, r.exprContext(env, nil, nil, c.jobStatus))
	switch {
	case err != nil:
		// A condition that cannot be evaluated fails its step, as GitHub's runner has it.
		r.rec.System(fmt.Sprintf("step %s: pre-if: %s could not be evaluated: %v", name, cond, err))
		c.fail(executor.KindFailure, nil)
		return
	case !ok:
		r.rec.System(fmt.Sprintf("step %s: skipped, pre-if: %s was false", name, cond))
		return
	}
	r.rec.System("step " + name)
	pre.ran = true
	out, post := run(pre.state)
	if post != nil {
		pre.post = len(r.posts)
		r.posts = append(r.posts, *post)
	}
	if r.phaseEnded != nil {
		r.phaseEnded(c.st, name)
	}
	if errors.Is(context.Cause(ctx), errStepTimeout) {
		out.res.TimedOut, out.res.Cancelled = true, false
		if out.res.ExitCode == 0 {
			out.res.ExitCode = -1
		}
	}
	code := out.res.ExitCode
	continuing := ""
	if c.st.ContinueOnError {
		continuing = "; continuing (continue_on_error)"
	}
	switch {
	case out.err != nil:
		r.rec.System(fmt.Sprintf("step %s could not run: %v%s", name, out.err, continuing))
		if !c.st.ContinueOnError {
			c.fail(executor.KindFailure, nil)
		}
	case out.res.Cancelled && errors.Is(context.Cause(ctx), errTimeout):
		// The job's timeout stopped it.
		c.fail(executor.KindTimeout, &code)
	case out.res.Cancelled:
		// The job was cancelled: its steps say so.
	case out.res.TimedOut:
		r.rec.System(fmt.Sprintf("step %s timed out after %s%s", name, time.Duration(c.st.Timeout), continuing))
		if !c.st.ContinueOnError {
			c.fail(executor.KindTimeout, &code)
		}
	case code != 0:
		r.rec.System(fmt.Sprintf("step %s failed with exit code %d%s", name, code, continuing))
		if !c.st.ContinueOnError {
			c.fail(executor.KindFailure, &code)
		}
	}
}

// actionCondition evaluates an action's pre-if or post-if as GitHub's runner does: as it
// is. Only a step's if: is read as success() && (expr) when it calls no status function;
// a pre-if of runner.os == 'Linux' holds after a failure too.
func actionCondition(cond string, c *ghaexpr.Context) (bool, error) {
	text := strings.TrimSpace(cond)
	if inner, ok := strings.CutPrefix(text, "${{"); ok && strings.HasSuffix(inner, "}}") && !strings.Contains(inner, "${{") {
		text = strings.TrimSpace(strings.TrimSuffix(inner, "}}"))
	}
	if text == "" || strings.Contains(text, "${{") {
		return ghaexpr.Condition(cond, c)
	}
	return ghaexpr.Condition("always() && ("+text+")", c)
}
