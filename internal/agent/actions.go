package agent

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/ghaexpr"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/toolchain"
)

// actionRunner runs the steps of one job that use actions, as GitHub's runner does: a
// JavaScript action's main with node (its pre at the job's start, its post at the job's
// end), a composite action's steps one by one, an action of the workspace (./dir) like
// one of a repository.
// The runtime contract actions rely on is kept: INPUT_*, GITHUB_ACTION, GITHUB_ACTION_PATH,
// GITHUB_ACTION_REPOSITORY, $GITHUB_STATE and STATE_*, and the step files.
type actionRunner struct {
	a     *Agent
	j     claimedJob
	log   *slog.Logger
	rec   *logs.Recorder
	run   func(context.Context, executor.Step) (executor.Result, error)
	files *stepFiles
	// ws is the workspace on the worker's disk, stepWS as the steps see it.
	ws, stepWS string
	host       bool
	grace      time.Duration
	// fetched maps a pinned repository and commit to its tree on the worker's disk.
	fetched map[string]string
	posts   []postStep
	// pres are the uses of actions whose pre the job's start ran or skipped (preStep),
	// by use (useKey).
	pres    map[string]*preRun
	scripts int
	// collector, when set, brings the workspace back from where the steps run: the
	// worker's copy is stale until it did (kubernetes).
	collector executor.Collector
	// phaseEnded, when set, is called after each pre and post that ran, whatever its
	// outcome: st is the job's step whose action it is, name what the log calls it.
	phaseEnded func(st pipeline.Step, name string)
}

// preRun is what the job's start did of the pre of one use of an action.
type preRun struct {
	// state is what the pre saved with $GITHUB_STATE: its main and post read it, and
	// what the main saves joins it.
	state map[string]string
	// ran is whether the pre ran (its pre-if held); post is the index in posts of the
	// post it registered, -1 for none.
	ran  bool
	post int
}

// useKey names one use of an action in a job: the job step's index, and for an action a
// composite action's step uses, that step's index after a slash (3/1, 3/1/0).
func useKey(parent string, i int) string {
	if parent == "" {
		return strconv.Itoa(i)
	}
	return parent + "/" + strconv.Itoa(i)
}

// postStep is a JavaScript action's post:, run when the job's steps are done.
type postStep struct {
	step  pipeline.Step
	name  string
	loc   *actionLoc
	env   map[string]string
	state map[string]string
	cond  string
	// run, when set, runs the post in place of a JavaScript action's post file: a
	// docker action's post-entrypoint (actions_docker.go).
	run func(ctx context.Context) stepRun
}

// actionLoc is an action found for a step: where its files are and what it says.
type actionLoc struct {
	uses string
	u    pipeline.Uses
	// dir is the action's directory on the worker's disk, stepDir as steps see it.
	dir, stepDir string
	meta         *actions.Metadata
	// repository and ref are GITHUB_ACTION_REPOSITORY and GITHUB_ACTION_REF.
	repository, ref string
}

// stepRun is what an action step did: as a run step's process would say it.
type stepRun struct {
	res     executor.Result
	outputs map[string]string
	err     error
}

func newActionRunner(a *Agent, j claimedJob, log *slog.Logger, rec *logs.Recorder, run func(context.Context, executor.Step) (executor.Result, error),
	files *stepFiles, ws, stepWS string, host bool, grace time.Duration) *actionRunner {
	return &actionRunner{a: a, j: j, log: log, rec: rec, run: run, files: files, ws: ws, stepWS: stepWS, host: host, grace: grace,
		fetched: map[string]string{}, pres: map[string]*preRun{}}
}

// stepView is where a path of the runner's directory or of the workspace is as steps
// see it.
func (r *actionRunner) stepView(p string) string {
	for _, d := range [][2]string{{r.files.runner, r.files.runnerStep}, {r.ws, r.stepWS}} {
		if rel, err := filepath.Rel(d[0], p); err == nil && rel != ".." && !strings.HasPrefix(rel, "../") {
			return path.Join(d[1], filepath.ToSlash(rel))
		}
	}
	return p
}

// runProcess runs one process of an action step through the job's executor, its output
// to the step's log.
func (r *actionRunner) runProcess(ctx context.Context, st pipeline.Step, s executor.Step) (executor.Result, error) {
	out, errOut := r.rec.StepWriter(logs.Stdout, st.Index), r.rec.StepWriter(logs.Stderr, st.Index)
	defer func() {
		_ = out.Close()
		_ = errOut.Close()
	}()
	s.Stdout, s.Stderr, s.Grace, s.Network, s.Binds = out, errOut, r.grace, r.j.Spec.Network, r.files.binds()
	return r.run(ctx, s)
}

// binds are the directories the job's steps write outside their workspace.
func (f *stepFiles) binds() []string {
	if f.runner == "" || f.runnerStep != f.runner {
		return []string{f.dir}
	}
	return []string{f.dir, f.runner}
}

// locate finds the action uses names: a repository's at the commit the run pinned, or
// a directory of the workspace.
func (r *actionRunner) locate(ctx context.Context, uses string, pins map[string]pipeline.ActionPin) (*actionLoc, error) {
	u, err := pipeline.ParseUses(uses)
	if err != nil {
		return nil, err
	}
	loc := &actionLoc{uses: uses, u: u}
	switch u.Kind {
	case pipeline.UsesLocal:
		loc.dir = filepath.Join(r.ws, filepath.FromSlash(u.Local))
		loc.stepDir = path.Join(r.stepWS, u.Local)
		loc.repository = r.j.Trigger.Repository
		loc.ref = r.j.Trigger.Ref
	case pipeline.UsesSelf:
		root, err := r.selfTree(ctx)
		if err != nil {
			return nil, fmt.Errorf("action %s: %w", uses, err)
		}
		loc.dir = filepath.Join(root, filepath.FromSlash(u.Local))
		loc.stepDir = r.stepView(loc.dir)
		loc.repository = r.j.Trigger.Repository
		loc.ref = r.j.Trigger.Ref
	case pipeline.UsesRepository:
		pin, ok := pins[uses]
		if !ok || pin.Commit == "" {
			return nil, fmt.Errorf("action %s was not pinned to a commit when the run was created, so this worker cannot tell which code to run", uses)
		}
		root, err := r.fetch(ctx, uses, pin)
		if err != nil {
			return nil, err
		}
		loc.dir = filepath.Join(root, filepath.FromSlash(u.Dir))
		loc.stepDir = r.stepView(loc.dir)
		loc.repository, loc.ref = u.Repository(), u.Ref
	default:
		return nil, fmt.Errorf("uses %s: a docker:// step runs only on a worker with the docker executor", uses)
	}
	var data []byte
	for _, name := range []string{"action.yml", "action.yaml"} {
		data, err = os.ReadFile(filepath.Join(loc.dir, name))
		if err == nil || !errors.Is(err, os.ErrNotExist) {
			break
		}
	}
	switch {
	case errors.Is(err, os.ErrNotExist) && u.Kind == pipeline.UsesSelf:
		return nil, fmt.Errorf("action %s: the run's repository has no %s/action.yml at %s", uses, u.Local, cmp.Or(r.j.Trigger.SHA, "its commit"))
	case errors.Is(err, os.ErrNotExist) && u.Kind == pipeline.UsesLocal:
		return nil, fmt.Errorf("action %s: the workspace has no %s/action.yml (is the repository checked out before this step?)", uses, u.Local)
	case errors.Is(err, os.ErrNotExist):
		return nil, fmt.Errorf("action %s: %w", uses, actions.ErrNotAction)
	case err != nil:
		return nil, fmt.Errorf("action %s: %w", uses, err)
	}
	if loc.meta, err = actions.ParseMetadata(data); err != nil {
		return nil, fmt.Errorf("action %s: %w", uses, err)
	}
	return loc, nil
}

// fetch puts the pinned commit of an action's repository in the job's runner directory,
// once per job: a directory every executor shows the steps, and the job's own, so no
// step can change the code another job runs. The tree is exported from the mirror once
// per worker (actionTrees) and copied from there.
func (r *actionRunner) fetch(ctx context.Context, uses string, pin pipeline.ActionPin) (string, error) {
	sum := sha256.Sum256([]byte(pin.URL + "\x00" + pin.Commit))
	key := hex.EncodeToString(sum[:8])
	if dir, ok := r.fetched[key]; ok {
		return dir, nil
	}
	began := time.Now()
	trees := filepath.Join(r.a.cfg.WorkDir, actionTreesDir)
	if err := ownCacheDir(trees); err != nil {
		return "", err
	}
	tree := filepath.Join(trees, key+"-"+pin.Commit)
	from := "cached"
	if _, err := os.Stat(tree); err != nil {
		mirrors := r.a.mirrorsDir()
		if err := ownCacheDir(mirrors); err != nil {
			return "", err
		}
		m, err := source.Open(ctx, source.Config{Dir: mirrors, URL: pin.URL, Logger: r.log})
		if err != nil {
			return "", fmt.Errorf("action %s: %w", uses, err)
		}
		defer m.Close()
		// Export renames a finished tree into place, so a tree that is there is whole.
		if err := m.Export(ctx, pin.Commit, "", tree); err != nil {
			if errors.Is(err, source.ErrCommitNotFound) {
				return "", fmt.Errorf("action %s: %s has no commit %s any more", uses, pin.URL, pin.Commit)
			}
			return "", fmt.Errorf("action %s from %s: %w", uses, pin.URL, err)
		}
		from = "fetched"
	}
	dir := filepath.Join(r.files.runner, "actions", key)
	if err := copyTree(tree, dir); err != nil {
		return "", fmt.Errorf("action %s: copy it for the job: %w", uses, err)
	}
	r.fetched[key] = dir
	r.rec.System(fmt.Sprintf("action %s: %s at %s (%s, %d ms)", uses, pin.URL, pin.Commit, from, time.Since(began).Milliseconds()))
	return dir, nil
}

// actionTreesDir is the directory of the work dir where the worker keeps the trees of the
// actions it ran, one per repository and commit, read only by the worker.
const actionTreesDir = "action-trees"

// copyTree copies the files, directories and symbolic links of src into dst, which must
// not exist, keeping executable bits.
func copyTree(src, dst string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			info, err := d.Info()
			if err != nil {
				return err
			}
			return copyTreeFile(p, target, info.Mode().Perm()|0o644)
		}
		return nil
	})
}

func copyTreeFile(src, dst string, mode fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}

// stepContext is ctx ended by the step's timeout-minutes, if it has one.
func stepContext(ctx context.Context, st pipeline.Step) (context.Context, context.CancelFunc) {
	if st.Timeout > 0 {
		return context.WithTimeoutCause(ctx, time.Duration(st.Timeout), errStepTimeout)
	}
	return ctx, func() {}
}

// stepWith is a copy of the step's with: inputs, in which expandStep has put what they
// read.
func stepWith(st pipeline.Step) map[string]string {
	with := maps.Clone(st.With)
	if with == nil {
		with = map[string]string{}
	}
	return with
}

// runStep runs a job's step that uses an action. steps are the job's steps so far.
func (r *actionRunner) runStep(ctx context.Context, st pipeline.Step, steps map[string]pipeline.StepState, base map[string]string, jobStatus func() string) stepRun {
	ctx, cancel := stepContext(ctx, st)
	defer cancel()
	with := stepWith(st)
	out := r.invoke(ctx, st, useKey("", st.Index), st.Uses, st.ID, with, base, st.Actions, 0, jobStatus)
	if errors.Is(context.Cause(ctx), errStepTimeout) {
		// The executor saw its context end: for the step that is its timeout, not a
		// cancel of the job.
		out.res.TimedOut, out.res.Cancelled = true, false
		if out.res.ExitCode == 0 {
			out.res.ExitCode = -1
		}
	}
	return out
}

var errStepTimeout = errors.New("the step's timeout")

// invoke runs one action with its inputs given (with), in env: the job step's own, or
// one of a composite action's. key names this use of it (useKey), id is GITHUB_ACTION.
func (r *actionRunner) invoke(ctx context.Context, st pipeline.Step, key, uses, id string, with, env map[string]string,
	pins map[string]pipeline.ActionPin, depth int, jobStatus func() string) stepRun {
	if depth >= actions.MaxDepth {
		return stepRun{err: fmt.Errorf("action %s: composite actions nest more than %d deep", uses, actions.MaxDepth)}
	}
	if u, err := pipeline.ParseUses(uses); err == nil && u.NativeStep() {
		if u.IsTestReport() {
			return r.testReportStep(ctx, with, depth, jobStatus)
		}
		if tool, ok := toolchain.ForAction(u.Repository()); ok && u.Dir == "" {
			return r.setupStep(ctx, st, tool, with, env)
		}
		return r.nativeStep(ctx, st, u.NativeAction(), with)
	}
	if u, err := pipeline.ParseUses(uses); err == nil && u.Kind == pipeline.UsesDocker {
		env = maps.Clone(env)
		for k, v := range with {
			env["INPUT_"+strings.ToUpper(strings.ReplaceAll(k, " ", "_"))] = v
		}
		return r.dockerStep(ctx, st, u.Image, with, env)
	}
	loc, err := r.locate(ctx, uses, pins)
	if err != nil {
		return stepRun{err: err}
	}
	inputs, env := r.actionEnv(loc, id, with, env, jobStatus)
	runs := loc.meta.Runs
	switch {
	case runs.IsNode():
		return r.node(ctx, st, key, loc, env)
	case runs.IsComposite():
		return r.composite(ctx, st, key, loc, inputs, env, pins, depth, jobStatus)
	}
	return r.dockerAction(ctx, st, key, loc, inputs, env)
}

// actionEnv is the inputs of the action loc, given with, and the env its processes have:
// env with INPUT_* and GITHUB_ACTION (id, or one made of the action's name) and the
// action's other variables.
func (r *actionRunner) actionEnv(loc *actionLoc, id string, with, env map[string]string, jobStatus func() string) (map[string]string, map[string]string) {
	if id == "" {
		id = "__" + strings.NewReplacer("/", "_", "@", "_", ".", "_").Replace(strings.TrimPrefix(loc.uses, "./"))
	}
	ectx := r.exprContext(env, nil, nil, jobStatus)
	inputs := r.inputs(loc, with, ectx)
	env = maps.Clone(env)
	for k, v := range inputs {
		env["INPUT_"+strings.ToUpper(strings.ReplaceAll(k, " ", "_"))] = v
	}
	env["GITHUB_ACTION"] = id
	env["GITHUB_ACTION_PATH"] = loc.stepDir
	env["GITHUB_ACTION_REPOSITORY"] = loc.repository
	env["GITHUB_ACTION_REF"] = loc.ref
	return inputs, env
}

// inputs are an action's inputs: what the step gives, else the action's default with its
// expressions put in. Names the step gives that the action does not declare are passed
// too, as GitHub does (with a warning at validate).
func (r *actionRunner) inputs(loc *actionLoc, with map[string]string, ectx *ghaexpr.Context) map[string]string {
	out := map[string]string{}
	given := map[string]string{}
	for k, v := range with {
		given[strings.ToLower(k)] = v
		out[k] = v
	}
	for _, name := range loc.meta.InputNames {
		in := loc.meta.Inputs[name]
		if v, ok := given[strings.ToLower(name)]; ok {
			delete(out, name)
			for k := range out {
				if strings.EqualFold(k, name) {
					delete(out, k)
				}
			}
			out[name] = v
			continue
		}
		if !in.HasDefault {
			continue
		}
		v, err := ghaexpr.Interpolate(in.Default, ectx)
		if err != nil {
			r.rec.System(fmt.Sprintf("action %s: the default of input %s: %v", loc.uses, name, err))
			v = ""
		}
		out[name] = v
	}
	return out
}

// node runs a JavaScript action's main, with the state its pre saved at the job's start,
// and registers its post for when the job's steps are done (post-if, always() by default,
// decides then), unless its pre did.
func (r *actionRunner) node(ctx context.Context, st pipeline.Step, key string, loc *actionLoc, env map[string]string) stepRun {
	runs := loc.meta.Runs
	state := r.preState(key, loc, runs.Pre != "")
	out := r.nodeFile(ctx, st, loc, runs.Main, env, state)
	if runs.Post != "" && out.err == nil && out.res.ExitCode != exitNoNode {
		r.registerPost(key, postStep{step: st, name: "Post " + st.Name, loc: loc, env: env, state: state, cond: runs.PostIf})
	}
	return out
}

// preState is the state the main of the use key of loc starts with: what its pre saved
// at the job's start. hasPre says the action has a pre; when the job's start did not
// see to it (a local action, or one a local composite action uses, whose files are not
// there before the steps run), the log says it is not run, as GitHub's runner does not
// run it either.
func (r *actionRunner) preState(key string, loc *actionLoc, hasPre bool) map[string]string {
	if pre := r.pres[key]; pre != nil {
		return pre.state
	}
	if hasPre {
		r.rec.System(fmt.Sprintf("action %s: its pre is not run: a pre runs at the job's start, only for an action of a repository "+
			"(not a local one, ./path, nor one a local composite action uses), as on GitHub", loc.uses))
	}
	return map[string]string{}
}

// registerPost registers the post of the use key of an action, when its main ran: in
// the place the post its pre registered has, if it did, as GitHub registers a post once,
// when the action's pre or main runs first, and runs the posts the last registered first.
func (r *actionRunner) registerPost(key string, p postStep) {
	if pre := r.pres[key]; pre != nil && pre.post >= 0 {
		r.posts[pre.post] = p
		return
	}
	r.posts = append(r.posts, p)
}

// exitNoNode is the exit code of an action step that found no node: the shell's for a
// command not found. Its post is not run, as its main never started.
const exitNoNode = 127

// nodeFile runs one file of a JavaScript action with node, found on the PATH the step
// has, as setup-node leaves it. state holds what $GITHUB_STATE said so far, as STATE_*,
// and takes what this file says.
func (r *actionRunner) nodeFile(ctx context.Context, st pipeline.Step, loc *actionLoc, file string, env, state map[string]string) stepRun {
	env = maps.Clone(env)
	for k, v := range state {
		env["STATE_"+k] = v
	}
	statePath := filepath.Join(r.files.runner, "state")
	if err := os.WriteFile(statePath, nil, 0o666); err != nil {
		return stepRun{err: fmt.Errorf("make $GITHUB_STATE: %w", err)}
	}
	_ = os.Chmod(statePath, 0o666)
	env["GITHUB_STATE"] = r.stepView(statePath)
	preload, err := r.passEnvNames(env)
	if err != nil {
		return stepRun{err: err}
	}
	script := fmt.Sprintf(`if ! command -v node >/dev/null 2>&1; then
  printf 'gantry: %%s is a JavaScript action (runs.using: %%s) and needs Node.js, but no node is on the step'"'"'s PATH (%%s). Install Node.js 20 or later on the worker (or in the job'"'"'s image), or set it up in a step before this one.\n' %[1]s %[2]s "$PATH" >&2
  exit %[4]d
fi
exec node %[5]s%[3]s
`, shellWord(loc.uses), shellWord(loc.meta.Runs.Using), shellWord(path.Join(loc.stepDir, file)), exitNoNode, preload)
	res, err := r.runProcess(ctx, st, executor.Step{Shell: "sh", Script: script, Env: envList(env), Dir: r.ws})
	out := stepRun{res: res, err: err}
	if err != nil || res.Cancelled {
		return out
	}
	if b, rerr := readAndEmpty(statePath); rerr != nil {
		r.rec.System(fmt.Sprintf("action %s: $GITHUB_STATE: %v", loc.uses, rerr))
	} else if saved, perr := parseCommandFile(string(b)); perr != nil {
		r.rec.System(fmt.Sprintf("action %s: $GITHUB_STATE: %v", loc.uses, perr))
	} else {
		maps.Copy(state, saved)
	}
	return r.collect(out, "step "+st.Name)
}

// envNamesPrefix starts the names under which the variables whose names sh cannot pass
// on reach a JavaScript action's node (passEnvNames): the hex of the name follows.
const envNamesPrefix = "GANTRY_ENV_NAMED_"

// envNamesJS is the script node requires before a JavaScript action's file: it puts the
// variables passEnvNames renamed back under their own names.
const envNamesJS = `const prefix = '` + envNamesPrefix + `';
for (const k of Object.keys(process.env)) {
  if (k.startsWith(prefix)) {
    process.env[Buffer.from(k.slice(prefix.length), 'hex').toString()] = process.env[k];
    delete process.env[k];
  }
}
`

// passEnvNames renames in env the variables whose names sh, which starts the action's
// node, would drop (an input's INPUT_WHO-TO-GREET keeps its '-', as on GitHub, where
// core.getInput reads it so), and returns the node arguments that put them back: a
// script, written once per job, to require first; "" when no name needs it.
func (r *actionRunner) passEnvNames(env map[string]string) (string, error) {
	var odd []string
	for k := range env {
		if !envLineName.Regexp().MatchString(k) {
			odd = append(odd, k)
		}
	}
	if len(odd) == 0 {
		return "", nil
	}
	for _, k := range odd {
		env[envNamesPrefix+hex.EncodeToString([]byte(k))] = env[k]
		delete(env, k)
	}
	file := filepath.Join(r.files.runner, "env-names.js")
	if _, err := os.Stat(file); err != nil {
		if err := os.WriteFile(file, []byte(envNamesJS), 0o644); err != nil {
			return "", fmt.Errorf("write the script that passes the action's variables: %w", err)
		}
	}
	return "--require " + shellWord(r.stepView(file)) + " ", nil
}

// composite runs a composite action's steps, each with its if:, env, and inputs.X and
// steps.X (its own steps) to read; its outputs are what its outputs: say.
func (r *actionRunner) composite(ctx context.Context, st pipeline.Step, key string, loc *actionLoc, inputs, env map[string]string,
	pins map[string]pipeline.ActionPin, depth int, jobStatus func() string) stepRun {
	inputsCtx := map[string]any{}
	for k, v := range inputs {
		inputsCtx[k] = v
	}
	stepsCtx := map[string]any{}
	failed := false
	var last stepRun
	for i, cs := range loc.meta.Runs.Steps {
		status := func(name string) bool {
			switch name {
			case "success":
				return !failed && ctx.Err() == nil && jobStatus() == "success"
			case "failure":
				return failed || jobStatus() == "failed"
			case "cancelled":
				return ctx.Err() != nil
			}
			return true
		}
		ectx := r.exprContext(env, inputsCtx, stepsCtx, jobStatus)
		ectx.Status = status
		name := cs.Name
		if name == "" {
			name = cmp.Or(cs.Uses, firstLine(cs.Run))
		}
		if n, err := ghaexpr.Interpolate(name, ectx); err == nil {
			name = n
		}
		ok, err := ghaexpr.Condition(cmp.Or(cs.If, "success()"), ectx)
		if err != nil {
			r.rec.System(fmt.Sprintf("%s: step %s: if: %v", loc.uses, name, err))
			ok = false
			failed = true
			last = stepRun{res: executor.Result{ExitCode: 1}}
		}
		if !ok {
			r.recordComposite(stepsCtx, cs.ID, "skipped", nil, false)
			continue
		}
		r.rec.System(fmt.Sprintf("%s: step %d: %s", loc.uses, i+1, name))
		stepEnv := maps.Clone(env)
		for _, k := range cs.EnvNames {
			v, err := ghaexpr.Interpolate(cs.Env[k], ectx)
			if err != nil {
				return stepRun{err: fmt.Errorf("%s: step %s: env.%s: %w", loc.uses, name, k, err)}
			}
			stepEnv[k] = v
		}
		ectx.Values["env"] = anyMap(stepEnv)
		var out stepRun
		if cs.Uses != "" {
			with := map[string]string{}
			for _, k := range cs.WithNames {
				v, err := ghaexpr.Interpolate(cs.With[k], ectx)
				if err != nil {
					return stepRun{err: fmt.Errorf("%s: step %s: with.%s: %w", loc.uses, name, k, err)}
				}
				with[k] = v
			}
			uses := cs.Uses
			if pu, err := pipeline.ParseUses(uses); err == nil && pu.Kind == pipeline.UsesLocal && strings.HasPrefix(uses, "./") {
				// ./ in a composite action is the workspace's, as on GitHub.
				uses = "./" + pu.Local
			}
			out = r.invoke(ctx, st, useKey(key, i), uses, cs.ID, with, stepEnv, pins, depth+1, jobStatus)
		} else {
			out = r.script(ctx, st, loc, cs, ectx, stepEnv)
		}
		if out.err != nil {
			return out
		}
		if out.res.Cancelled {
			return out
		}
		bad := out.res.ExitCode != 0 || out.res.TimedOut
		coe := false
		if cs.ContinueOnError != "" {
			if v, err := ghaexpr.Interpolate(cs.ContinueOnError, ectx); err == nil {
				coe = strings.EqualFold(strings.TrimSpace(v), "true")
			}
		}
		outcome := pipeline.ResultSuccess
		if bad {
			outcome = pipeline.ResultFailed
			r.rec.System(fmt.Sprintf("%s: step %s failed with exit code %d", loc.uses, name, out.res.ExitCode))
		}
		r.recordComposite(stepsCtx, cs.ID, outcome, out.outputs, coe)
		if bad && !coe {
			failed = true
			last = out
		}
	}
	if failed {
		last.outputs = nil
		return last
	}
	ectx := r.exprContext(env, inputsCtx, stepsCtx, jobStatus)
	outputs := map[string]string{}
	for name, o := range loc.meta.Outputs {
		v, err := ghaexpr.Interpolate(o.Value, ectx)
		if err != nil {
			r.rec.System(fmt.Sprintf("%s: output %s: %v", loc.uses, name, err))
			return stepRun{res: executor.Result{ExitCode: 1}}
		}
		outputs[name] = v
	}
	return stepRun{outputs: outputs}
}

func (r *actionRunner) recordComposite(steps map[string]any, id, outcome string, outputs map[string]string, continueOnError bool) {
	if id == "" {
		return
	}
	conclusion := outcome
	if outcome == pipeline.ResultFailed && continueOnError {
		conclusion = pipeline.ResultSuccess
	}
	outs := map[string]any{}
	for k, v := range outputs {
		outs[k] = v
	}
	steps[id] = map[string]any{"outputs": outs, "outcome": outcome, "conclusion": conclusion}
}

// compositeShells are the shells a composite action's run step may name, as the step's
// interpreter and its arguments; {0} is the script's file.
var compositeShells = map[string]string{
	"bash":   "bash --noprofile --norc -eo pipefail {0}",
	"sh":     "sh -e {0}",
	"python": "python3 {0}",
	"pwsh":   "pwsh -command \". '{0}'\"",
}

// script runs one run step of a composite action in its shell.
func (r *actionRunner) script(ctx context.Context, st pipeline.Step, loc *actionLoc, cs actions.Step, ectx *ghaexpr.Context, env map[string]string) stepRun {
	body, err := ghaexpr.Interpolate(cs.Run, ectx)
	if err != nil {
		return stepRun{err: fmt.Errorf("%s: run: %w", loc.uses, err)}
	}
	shell, err := ghaexpr.Interpolate(cs.Shell, ectx)
	if err != nil {
		return stepRun{err: fmt.Errorf("%s: shell: %w", loc.uses, err)}
	}
	dir := ""
	if cs.WorkingDirectory != "" {
		if dir, err = ghaexpr.Interpolate(cs.WorkingDirectory, ectx); err != nil {
			return stepRun{err: fmt.Errorf("%s: working-directory: %w", loc.uses, err)}
		}
	}
	command, ok := compositeShells[shell]
	if !ok {
		if !strings.Contains(shell, "{0}") {
			return stepRun{err: fmt.Errorf("%s: shell %q is not one Gantry knows (bash, sh, python, pwsh) nor a command with {0}", loc.uses, shell)}
		}
		command = shell
	}
	ext := map[string]string{"python": ".py", "pwsh": ".ps1"}[shell]
	r.scripts++
	file := filepath.Join(r.files.runner, "scripts", strconv.Itoa(r.scripts)+ext)
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return stepRun{err: err}
	}
	if err := os.WriteFile(file, []byte(body), 0o644); err != nil {
		return stepRun{err: err}
	}
	line := strings.ReplaceAll(command, "{0}", shellWord(r.stepView(file)))
	if dir != "" {
		line = "cd -- " + shellWord(dir) + " && " + line
	}
	res, err := r.runProcess(ctx, st, executor.Step{Shell: "sh", Script: line, Env: envList(env), Dir: r.ws})
	out := stepRun{res: res, err: err}
	if err != nil || res.Cancelled {
		return out
	}
	return r.collect(out, loc.uses)
}

// collect takes what a process of an action step left in the step files: its outputs,
// or, when what it wrote is wrong, a failure of the step that says so (as for run steps).
func (r *actionRunner) collect(out stepRun, who string) stepRun {
	outputs, err := r.files.collect()
	if err != nil {
		r.rec.System(fmt.Sprintf("%s: %v", who, err))
		if out.res.ExitCode == 0 {
			out.res.ExitCode = 1
		}
		return out
	}
	out.outputs = outputs
	return out
}

// runPosts runs the post: of the JavaScript actions the job ran, the last one first,
// each when its post-if holds for how the job did (read as it is: actionCondition). It
// returns false when one failed.
func (r *actionRunner) runPosts(ctx context.Context, jobStatus func() string) bool {
	ok := true
	for i := len(r.posts) - 1; i >= 0; i-- {
		p := r.posts[i]
		ectx := r.exprContext(p.env, nil, nil, jobStatus)
		run, err := actionCondition(p.cond, ectx)
		if err != nil {
			r.rec.System(fmt.Sprintf("%s: post-if: %v; its post does not run", p.name, err))
			continue
		}
		if !run {
			r.rec.System(fmt.Sprintf("%s: skipped, post-if: %s was false", p.name, p.cond))
			continue
		}
		r.rec.System("step " + p.name)
		var out stepRun
		if p.run != nil {
			out = p.run(ctx)
		} else {
			out = r.nodeFile(ctx, p.step, p.loc, p.loc.meta.Runs.Post, p.env, p.state)
		}
		if r.phaseEnded != nil {
			r.phaseEnded(p.step, p.name)
		}
		switch {
		case out.err != nil:
			r.rec.System(fmt.Sprintf("%s could not run: %v", p.name, out.err))
			ok = false
		case out.res.ExitCode != 0:
			r.rec.System(fmt.Sprintf("%s failed with exit code %d", p.name, out.res.ExitCode))
			ok = false
		}
	}
	r.posts = nil
	return ok
}

// exprContext is what expressions of actions (inputs' defaults, composite steps) read.
func (r *actionRunner) exprContext(env map[string]string, inputs, steps map[string]any, jobStatus func() string) *ghaexpr.Context {
	return r.a.exprContext(r.j, r.ws, r.stepWS, env, inputs, steps, jobStatus)
}

// exprContext is what GitHub expressions the worker evaluates read: the github context
// (with the event the run is for), env as the step has it, matrix, needs, runner, job,
// secrets (the job's), and inputs and steps where given. ws is the workspace on the
// worker's disk (hashFiles reads it), stepWS as the steps see it.
func (a *Agent) exprContext(j claimedJob, ws, stepWS string, env map[string]string, inputs, steps map[string]any, jobStatus func() string) *ghaexpr.Context {
	// A workflow's mapping values (build: {cc: gcc}) are objects again, as GitHub has them.
	matrix := pipeline.MatrixContext(j.Spec.Matrix)
	needs := map[string]any{}
	for name, n := range j.Needs {
		outs := map[string]any{}
		for k, v := range n.Outputs {
			outs[k] = v
		}
		// GitHub's word for the result, as the coordinator's conditions read it.
		needs[name] = map[string]any{"result": pipeline.GitHubResult(n.Result), "outputs": outs}
	}
	gh := map[string]any{}
	for k, v := range githubContext(j, stepWS) {
		gh[k] = v
	}
	gh["event"] = map[string]any{}
	if p := env["GITHUB_EVENT_PATH"]; p != "" {
		if ev, err := readEvent(ws, stepWS, p); err == nil {
			gh["event"] = ev
		}
	}
	if p := env["GITHUB_ACTION_PATH"]; p != "" {
		gh["action_path"] = p
		gh["action"] = env["GITHUB_ACTION"]
		gh["action_repository"] = env["GITHUB_ACTION_REPOSITORY"]
		gh["action_ref"] = env["GITHUB_ACTION_REF"]
	}
	secrets := map[string]any{}
	for k, v := range j.Secrets {
		secrets[k] = v
	}
	job := map[string]any{}
	maps.Copy(job, j.jobContext)
	job["status"] = githubResult(jobStatus())
	vals := map[string]any{
		"github":   gh,
		"vars":     anyMap(j.Trigger.Vars),
		"env":      anyMap(env),
		"runner":   anyMap(runnerContext(env)),
		"job":      job,
		"matrix":   matrix,
		"needs":    needs,
		"secrets":  secrets,
		"strategy": map[string]any{},
	}
	if inputs == nil {
		inputs = map[string]any{}
		for k, v := range j.Trigger.Inputs {
			inputs[k] = v
		}
	}
	vals["inputs"] = inputs
	if steps != nil {
		vals["steps"] = steps
	}
	return &ghaexpr.Context{Values: vals, HashFiles: func(patterns []string) (string, error) { return hashFiles(ws, patterns) },
		Status: func(name string) bool { return statusHolds(name, jobStatus()) }}
}

// statusHolds answers GitHub's status function name (success, failure, cancelled,
// always) for a job whose steps so far ended as status says (pipeline's results).
func statusHolds(name, status string) bool {
	switch name {
	case "always":
		return true
	case "success":
		return status == pipeline.ResultSuccess
	case "failure":
		return status == pipeline.ResultFailed
	case "cancelled":
		return status == pipeline.ResultCancelled
	}
	return false
}

// githubResult writes a result of a job or step (pipeline's results) as GitHub's
// job.status and steps.<id>.outcome read it: failure for failed.
func githubResult(r string) string {
	if r == pipeline.ResultFailed {
		return "failure"
	}
	return r
}

// readEvent reads the event payload the job's steps see (GITHUB_EVENT_PATH, as steps
// see it: in the runner directory).
func readEvent(ws, stepWS, p string) (map[string]any, error) {
	disk := p
	if rel, err := filepath.Rel(stepWS, p); err == nil && !strings.HasPrefix(rel, "..") {
		disk = filepath.Join(ws, rel)
	}
	b, err := os.ReadFile(disk)
	if err != nil {
		return nil, err
	}
	var ev map[string]any
	return ev, json.Unmarshal(b, &ev)
}

// stepsContext is the steps context of the job's steps so far.
func stepsContext(steps map[string]pipeline.StepState) map[string]any {
	out := make(map[string]any, len(steps))
	for id, st := range steps {
		outs := make(map[string]any, len(st.Outputs))
		for k, v := range st.Outputs {
			outs[k] = v
		}
		out[id] = map[string]any{"outputs": outs, "outcome": githubResult(st.Outcome), "conclusion": githubResult(st.Conclusion)}
	}
	return out
}

// runValues are what a step's text reads when it runs (pipeline.RunValues): the steps
// so far, secrets when given, and the expressions kept for the worker, evaluated in the
// context ctx makes when one is first needed.
func runValues(steps map[string]pipeline.StepState, secrets map[string]string, ctx func() *ghaexpr.Context) pipeline.RunValues {
	var c *ghaexpr.Context
	return pipeline.RunValues{Steps: steps, Secrets: secrets, Eval: func(expr string) (string, error) {
		if c == nil {
			c = ctx()
		}
		v, err := ghaexpr.EvalString(expr, c)
		if err != nil {
			return "", fmt.Errorf("${{ %s }}: %w", expr, err)
		}
		return ghaexpr.ToString(v), nil
	}}
}

// expandStep puts in what a step's run, name and with: read when it runs: the steps
// before it and the expressions kept for the worker, with env as the step has it, and
// the secrets with: values name. Each text is expanded in one pass, so no value put in
// is read again (pipeline.RunValues.Expand).
func (a *Agent) expandStep(j claimedJob, st pipeline.Step, ws, stepWS string, env map[string]string, steps map[string]pipeline.StepState,
	jobStatus func() string) (pipeline.Step, error) {
	mkctx := func() *ghaexpr.Context { return a.exprContext(j, ws, stepWS, env, nil, stepsContext(steps), jobStatus) }
	text := runValues(steps, nil, mkctx)
	var errs []error
	expand := func(vals pipeline.RunValues, s string) string {
		v, err := vals.Expand(s)
		if err != nil {
			errs = append(errs, err)
		}
		return v
	}
	st.Run, st.Name = expand(text, st.Run), expand(text, st.Name)
	if len(st.With) > 0 {
		withVals := text
		withVals.Secrets = j.Secrets
		with := make(map[string]string, len(st.With))
		for k, v := range st.With {
			with[k] = expand(withVals, v)
		}
		st.With = with
	}
	return st, errors.Join(errs...)
}

// githubContext is what the github context and GitHub's GITHUB_* variables say of the
// job's run.
func githubContext(j claimedJob, ws string) map[string]string {
	tr := j.Trigger
	owner, _, _ := strings.Cut(tr.Repository, "/")
	refType, refName := "", ""
	switch {
	case tr.Tag != "":
		refType, refName = "tag", tr.Tag
	case tr.Branch != "":
		refType, refName = "branch", tr.Branch
	case tr.PRNumber > 0:
		refName = strconv.Itoa(tr.PRNumber) + "/merge"
	}
	ref := tr.Ref
	if ref == "" && refType == "branch" {
		ref = "refs/heads/" + refName
	}
	server := "https://github.com"
	if host := cloneHost(tr.CloneURL); host != "" && host != "github.com" {
		server = "https://" + host
	}
	api := "https://api.github.com"
	if server != "https://github.com" {
		api = server + "/api/v3"
	}
	gh := map[string]string{
		"sha": tr.SHA, "ref": ref, "ref_name": refName, "ref_type": refType,
		"repository": tr.Repository, "repository_owner": owner, "event_name": tr.Event,
		"run_id": j.RunID, "run_attempt": strconv.Itoa(j.Attempt), "job": j.Spec.Name,
		"workspace": ws, "server_url": server, "api_url": api, "graphql_url": api + "/graphql",
		"token": j.Secrets[pipeline.GitHubTokenSecret], "actor": tr.Actor, "triggering_actor": tr.Actor,
		"base_ref": tr.BaseRef, "head_ref": tr.HeadRef,
	}
	if j.RunNumber > 0 {
		// As GITHUB_RUN_NUMBER: only from a coordinator that numbers runs.
		gh["run_number"] = strconv.FormatInt(j.RunNumber, 10)
	}
	return gh
}

// cloneHost is the host of a clone URL, "" when it has none.
func cloneHost(raw string) string {
	if i := strings.Index(raw, "://"); i >= 0 {
		rest := raw[i+3:]
		if at := strings.LastIndex(strings.SplitN(rest, "/", 2)[0], "@"); at >= 0 {
			rest = rest[at+1:]
		}
		host := strings.SplitN(rest, "/", 2)[0]
		if h, _, ok := strings.Cut(host, ":"); ok {
			host = h
		}
		return host
	}
	return ""
}

// runnerContext is the runner context, from the step's RUNNER_* variables.
func runnerContext(env map[string]string) map[string]string {
	return map[string]string{"os": env["RUNNER_OS"], "arch": env["RUNNER_ARCH"], "temp": env["RUNNER_TEMP"],
		"tool_cache": env["RUNNER_TOOL_CACHE"], "name": env["RUNNER_NAME"], "environment": "self-hosted",
		"debug": env["RUNNER_DEBUG"]}
}

// githubEnv are GitHub's default variables, which every step sees: what the github
// context says, in GITHUB_* form, and the runner's RUNNER_*.
func (a *Agent) githubEnv(j claimedJob, ws string, files *stepFiles) map[string]string {
	gh := githubContext(j, ws)
	vars := map[string]string{
		"CI": "true", "GITHUB_ACTIONS": "true", "GITHUB_WORKSPACE": ws,
		"GITHUB_SHA": gh["sha"], "GITHUB_REF": gh["ref"], "GITHUB_REF_NAME": gh["ref_name"], "GITHUB_REF_TYPE": gh["ref_type"],
		"GITHUB_REPOSITORY": gh["repository"], "GITHUB_REPOSITORY_OWNER": gh["repository_owner"],
		"GITHUB_RUN_ID": j.RunID, "GITHUB_RUN_ATTEMPT": gh["run_attempt"],
		"GITHUB_EVENT_NAME": gh["event_name"], "GITHUB_JOB": gh["job"], "GITHUB_WORKFLOW": j.Spec.Name,
		"GITHUB_ACTOR": gh["actor"], "GITHUB_TRIGGERING_ACTOR": gh["actor"],
		"GITHUB_SERVER_URL": gh["server_url"], "GITHUB_API_URL": gh["api_url"], "GITHUB_GRAPHQL_URL": gh["graphql_url"],
		"GITHUB_RETENTION_DAYS": "90",
		"RUNNER_OS":             runnerOS(), "RUNNER_ARCH": runnerArch(), "RUNNER_NAME": a.cfg.Name, "RUNNER_ENVIRONMENT": "self-hosted",
	}
	vars["GITHUB_RUN_NUMBER"] = gh["run_number"]
	if files != nil && files.runner != "" {
		vars["RUNNER_TEMP"] = path.Join(files.runnerStep, "tmp")
		vars["GITHUB_EVENT_PATH"] = path.Join(files.runnerStep, "event.json")
	}
	vars["RUNNER_TOOL_CACHE"] = a.toolCache()
	for k, v := range vars {
		if v == "" {
			delete(vars, k)
		}
	}
	// Set for every event, empty but for a pull request's, as GitHub's runner sets them:
	// a script under set -u may read them.
	vars["GITHUB_BASE_REF"], vars["GITHUB_HEAD_REF"] = gh["base_ref"], gh["head_ref"]
	return vars
}

// toolCache is where setup actions keep the tools they install (RUNNER_TOOL_CACHE):
// the one GitHub's images use when the worker has it, else one in the work directory.
// It is looked for once: every step's environment names it.
func (a *Agent) toolCache() string {
	a.toolCacheOnce.Do(func() {
		a.toolCacheDir = filepath.Join(a.cfg.WorkDir, "tool-cache")
		if fi, err := os.Stat("/opt/hostedtoolcache"); err == nil && fi.IsDir() {
			a.toolCacheDir = "/opt/hostedtoolcache"
		}
	})
	return a.toolCacheDir
}

func runnerOS() string {
	switch runtime.GOOS {
	case "darwin":
		return "macOS"
	case "windows":
		return "Windows"
	}
	return "Linux"
}

func runnerArch() string {
	switch runtime.GOARCH {
	case "amd64":
		return "X64"
	case "386":
		return "X86"
	case "arm64":
		return "ARM64"
	case "arm":
		return "ARM"
	}
	return strings.ToUpper(runtime.GOARCH)
}

func anyMap(m map[string]string) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out
}

// shellWord quotes s for sh.
func shellWord(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// runnerDirInWorkspace is where a job in a container has its runner files: in its
// workspace, the only part of the worker's disk its steps see.
const runnerDirInWorkspace = ".gantry-runner"

// makeRunnerDir makes the directory of the job's runner files beside its step files (not
// in it: that one holds only the files read back after each step) and writes the event
// the run is for where $GITHUB_EVENT_PATH names it, in the shape GitHub's webhook payload
// has: actions read the pull request, the ref and the repository from it. RUNNER_TEMP is
// made in it. stepWS is the workspace as the steps see it.
func makeRunnerDir(files *stepFiles, workDir, ws, stepWS string, inContainer bool, j claimedJob) error {
	if files.runner != "" {
		// A finished job's, kept for this one (jobdirs.go): its RUNNER_TEMP is there, empty.
		return writeEvent(files, j)
	}
	if inContainer {
		files.runner = filepath.Join(ws, runnerDirInWorkspace)
		files.runnerStep = path.Join(stepWS, runnerDirInWorkspace)
		if err := os.Mkdir(files.runner, 0o755); err != nil {
			return fmt.Errorf("make the runner directory: %w", err)
		}
	} else {
		dir, err := os.MkdirTemp(workDir, "gantry-runner-")
		if err != nil {
			return fmt.Errorf("make the runner directory: %w", err)
		}
		files.runner, files.runnerStep = dir, dir
	}
	if err := os.Chmod(files.runner, 0o755); err != nil {
		return fmt.Errorf("make the runner directory: %w", err)
	}
	tmp := filepath.Join(files.runner, "tmp")
	if err := os.Mkdir(tmp, 0o777); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("make RUNNER_TEMP: %w", err)
	}
	// The steps may run as another user, who must write it.
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil {
		return fmt.Errorf("make RUNNER_TEMP: %w", err)
	}
	return writeEvent(files, j)
}

// writeEvent writes the job's event file in its runner directory.
func writeEvent(files *stepFiles, j claimedJob) error {
	tr := j.Trigger
	if len(tr.Payload) > 0 && json.Valid(tr.Payload) {
		// The forge's own payload, laid out as GitHub gives it to the steps.
		var b bytes.Buffer
		if err := json.Indent(&b, tr.Payload, "", "  "); err != nil {
			return fmt.Errorf("write the event file: %w", err)
		}
		return writeEventFile(files, b.Bytes())
	}
	owner, name, _ := strings.Cut(tr.Repository, "/")
	repo := map[string]any{"full_name": tr.Repository, "name": name, "owner": map[string]any{"login": owner, "name": owner}}
	if tr.CloneURL != "" {
		repo["clone_url"] = tr.CloneURL
	}
	ev := map[string]any{"repository": repo}
	gh := githubContext(j, "")
	if tr.SHA != "" {
		ev["after"] = tr.SHA
		ev["head_commit"] = map[string]any{"id": tr.SHA}
	}
	if gh["ref"] != "" {
		ev["ref"] = gh["ref"]
	}
	if tr.PRNumber > 0 {
		ev["number"] = tr.PRNumber
		ev["pull_request"] = map[string]any{"number": tr.PRNumber, "head": map[string]any{"ref": tr.HeadRef, "sha": tr.SHA},
			"base": map[string]any{"ref": tr.BaseRef}, "head_repo_fork": tr.Fork}
	}
	if len(tr.Inputs) > 0 {
		ev["inputs"] = tr.Inputs
	}
	b, err := json.MarshalIndent(ev, "", "  ")
	if err != nil {
		return err
	}
	return writeEventFile(files, b)
}

// writeEventFile writes b as the event file.
func writeEventFile(files *stepFiles, b []byte) error {
	if err := os.WriteFile(filepath.Join(files.runner, "event.json"), b, 0o644); err != nil {
		return fmt.Errorf("write the event file: %w", err)
	}
	return nil
}

// endValues are what the job's outputs and its environment's url read when the job ends
// (pipeline.RunValues): the steps' values and the expressions kept for the worker.
func (a *Agent) endValues(j claimedJob, ws, stepWS string, files *stepFiles, steps map[string]pipeline.StepState, jobStatus func() string) pipeline.RunValues {
	return runValues(steps, nil, func() *ghaexpr.Context {
		env := map[string]string{}
		maps.Copy(env, a.githubEnv(j, stepWS, files))
		maps.Copy(env, j.Spec.Env)
		return a.exprContext(j, ws, stepWS, env, nil, stepsContext(steps), jobStatus)
	})
}

// expandOutputs puts in what the job's declared outputs read (endValues), each in one
// pass. Outputs a job that declares none passes on as its steps wrote them: text.
func (a *Agent) expandOutputs(j claimedJob, ws, stepWS string, files *stepFiles, outputs map[string]string, steps map[string]pipeline.StepState, jobStatus func() string) error {
	if j.Spec.Outputs == nil {
		return nil
	}
	vals := a.endValues(j, ws, stepWS, files, steps, jobStatus)
	var errs []error
	for k, v := range outputs {
		out, err := vals.Expand(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("output %s: %w", k, err))
		}
		outputs[k] = out
	}
	return errors.Join(errs...)
}

// selfTree is the run's own repository at the run's commit, for $/ actions: exported
// from the mirror (with the run's credential) into the job's runner directory once per
// job. A run that names no repository (a definition posted, or gantry run of a
// directory) reads the workspace instead.
func (r *actionRunner) selfTree(ctx context.Context) (string, error) {
	const key = "$self"
	if dir, ok := r.fetched[key]; ok {
		return dir, nil
	}
	tr := r.j.Trigger
	if tr.CloneURL == "" || tr.SHA == "" {
		r.rec.System("$/ actions: the run names no repository and commit; they are read from the workspace")
		r.fetched[key] = r.ws
		return r.ws, nil
	}
	began := time.Now()
	dir := r.a.mirrorsDir()
	if r.j.RepoCredentialsWithheld != "" {
		dir = filepath.Join(dir, "anonymous")
	}
	if err := ownCacheDir(dir); err != nil {
		return "", err
	}
	m, err := source.Open(ctx, source.Config{Dir: dir, URL: tr.CloneURL, Credentials: r.j.RepoCredentials.source(), Logger: r.log})
	if err != nil {
		return "", err
	}
	defer m.Close()
	tree := filepath.Join(r.files.runner, "self")
	if err := m.Export(ctx, tr.SHA, "", tree); err != nil {
		return "", fmt.Errorf("the run's repository %s at %s: %w", tr.CloneURL, tr.SHA, err)
	}
	r.fetched[key] = tree
	r.rec.System(fmt.Sprintf("$/ actions: %s at %s (%d ms)", tr.CloneURL, tr.SHA, time.Since(began).Milliseconds()))
	return tree, nil
}
