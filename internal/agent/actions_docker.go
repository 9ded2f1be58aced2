package agent

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/ghaexpr"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// actionEngine is an executor that runs the containers of docker actions and
// docker:// steps: the docker executor's engine.
type actionEngine interface {
	RunAction(ctx context.Context, c docker.ActionContainer) (executor.Result, error)
}

// errNoEngine is the error of a docker action on a worker that has no Docker Engine.
var errNoEngine = errors.New("docker actions need a worker with the docker executor")

// Where a docker action's container sees the job's files: where GitHub's runner mounts
// them, so that an action that names these paths runs as it does there.
const (
	ghWorkspace    = "/github/workspace"
	ghFileCommands = "/github/file_commands"
	ghEventPath    = "/github/workflow/event.json"
	ghHome         = "/github/home"
	ghRunnerTemp   = "/github/runner_temp"
)

// dockerAction runs a docker action (runs.using: docker): its image, or the image its
// Dockerfile builds, with the workspace and the step files mounted as GitHub mounts them,
// with the state its pre-entrypoint saved at the job's start (preStep).
func (r *actionRunner) dockerAction(ctx context.Context, st pipeline.Step, key string, loc *actionLoc, inputs, env map[string]string) stepRun {
	d, err := r.dockerPlan(loc, inputs, env)
	if err != nil {
		return stepRun{err: err}
	}
	runs := loc.meta.Runs
	state := r.preState(key, loc, runs.PreEntrypoint != "")
	var entrypoint []string
	if runs.Entrypoint != "" {
		entrypoint = []string{runs.Entrypoint}
	}
	out := r.dockerRun(ctx, "action "+loc.uses, d.image, d.build, entrypoint, d.args, d.env, state)
	if runs.PostEntrypoint != "" && out.err == nil {
		r.registerPost(key, r.dockerPost(st, loc, d, state))
	}
	return out
}

// dockerRuns is how a docker action's containers run: the image, its build, the
// arguments and the env, the action's runs.env put in.
type dockerRuns struct {
	image string
	build *docker.ActionBuild
	args  []string
	env   map[string]string
}

// dockerPlan is how the containers of the docker action loc run, given its inputs, in
// env.
func (r *actionRunner) dockerPlan(loc *actionLoc, inputs, env map[string]string) (*dockerRuns, error) {
	if _, ok := r.a.cfg.Executor.(actionEngine); !ok {
		return nil, fmt.Errorf("action %s: %w", loc.uses, errNoEngine)
	}
	runs := loc.meta.Runs
	inputsCtx := make(map[string]any, len(inputs))
	for k, v := range inputs {
		inputsCtx[k] = v
	}
	// The step runs only while the job succeeds, or when its if: says otherwise; what
	// the action's expressions read of job.status is that it runs.
	ectx := r.exprContext(env, inputsCtx, nil, func() string { return "success" })
	d := &dockerRuns{env: maps.Clone(env)}
	for _, k := range runs.EnvNames {
		v, err := ghaexpr.Interpolate(runs.Env[k], ectx)
		if err != nil {
			return nil, fmt.Errorf("action %s: runs.env.%s: %w", loc.uses, k, err)
		}
		d.env[k] = v
	}
	for i, a := range runs.Args {
		v, err := ghaexpr.Interpolate(a, ectx)
		if err != nil {
			return nil, fmt.Errorf("action %s: runs.args[%d]: %w", loc.uses, i, err)
		}
		d.args = append(d.args, v)
	}
	var err error
	if d.image, d.build, err = r.actionImage(loc); err != nil {
		return nil, err
	}
	return d, nil
}

// dockerPost is the post-entrypoint of the docker action loc the job's step st uses,
// run as d says, with the state the action saved.
func (r *actionRunner) dockerPost(st pipeline.Step, loc *actionLoc, d *dockerRuns, state map[string]string) postStep {
	runs := loc.meta.Runs
	return postStep{step: st, name: "Post " + st.Name, loc: loc, env: d.env, cond: cmp.Or(runs.PostIf, "always()"),
		run: func(ctx context.Context) stepRun {
			return r.dockerRun(ctx, "action "+loc.uses, d.image, d.build, []string{runs.PostEntrypoint}, d.args, d.env, maps.Clone(state))
		}}
}

// dockerStep runs a docker://image step: the image's entrypoint with the step's with:
// args and entrypoint.
func (r *actionRunner) dockerStep(ctx context.Context, _ pipeline.Step, image string, with, env map[string]string) stepRun {
	if _, ok := r.a.cfg.Executor.(actionEngine); !ok {
		return stepRun{err: fmt.Errorf("uses docker://%s: %w", image, errNoEngine)}
	}
	var args, entrypoint []string
	for k, v := range with {
		switch strings.ToLower(k) {
		case "args":
			var err error
			if args, err = splitArgs(v); err != nil {
				return stepRun{err: fmt.Errorf("uses docker://%s: with.args: %w", image, err)}
			}
		case "entrypoint":
			if v != "" {
				entrypoint = []string{v}
			}
		}
	}
	return r.dockerRun(ctx, "docker://"+image, image, nil, entrypoint, args, env, map[string]string{})
}

// actionImage is the image a docker action runs: the one runs.image names
// (docker://image), or the one its Dockerfile builds, named for the action and the hash
// of its build context, so that the worker's engine builds it once for all the jobs that
// run that code (the same commit of the action, or a local action's same files).
func (r *actionRunner) actionImage(loc *actionLoc) (string, *docker.ActionBuild, error) {
	img := loc.meta.Runs.Image
	if ref, ok := strings.CutPrefix(img, "docker://"); ok {
		if ref == "" {
			return "", nil, fmt.Errorf("action %s: runs.image docker:// names no image", loc.uses)
		}
		return ref, nil, nil
	}
	file := filepath.Join(loc.dir, filepath.FromSlash(img))
	if rel, err := filepath.Rel(loc.dir, file); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", nil, fmt.Errorf("action %s: runs.image %s is outside the action", loc.uses, img)
	}
	if fi, err := os.Stat(file); err != nil || !fi.Mode().IsRegular() {
		return "", nil, fmt.Errorf("action %s: runs.image %s: the action has no such Dockerfile", loc.uses, img)
	}
	// The build context is the Dockerfile's directory, as on GitHub.
	dir := filepath.Dir(file)
	sum, err := hashTree(dir)
	if err != nil {
		return "", nil, fmt.Errorf("action %s: read its build context: %w", loc.uses, err)
	}
	name := loc.repository
	if loc.u.Kind == pipeline.UsesRepository {
		name = loc.u.Repository()
		if loc.u.Dir != "" {
			name += "/" + loc.u.Dir
		}
	} else if loc.u.Local != "" {
		name += "/" + loc.u.Local
	}
	return docker.ActionImageName(name, sum[:16]), &docker.ActionBuild{Context: dir, Dockerfile: filepath.Base(file), Uses: loc.uses}, nil
}

// hashTree hashes the names, kinds, permission bits and contents of the tree at dir.
func hashTree(dir string) (string, error) {
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		fi, err := e.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%o\x00", filepath.ToSlash(rel), fi.Mode())
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00", target)
		case fi.Mode().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			fmt.Fprintf(h, "%d\x00", fi.Size())
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// dockerRun runs one container of a docker action or docker:// step (what names it in
// messages) on the worker's engine: the workspace at /github/workspace, its working
// directory, the step files at /github/file_commands, the event, RUNNER_TEMP and a HOME
// where GitHub's runner has them, env with its paths made the container's. state holds
// what $GITHUB_STATE said so far, as STATE_*, and takes what this container says.
func (r *actionRunner) dockerRun(ctx context.Context, what, image string, build *docker.ActionBuild, entrypoint, args []string,
	env, state map[string]string) stepRun {
	eng, ok := r.a.cfg.Executor.(actionEngine)
	if !ok {
		return stepRun{err: fmt.Errorf("%s: %w", what, errNoEngine)}
	}
	statePath := filepath.Join(r.files.dir, "state")
	if err := os.WriteFile(statePath, nil, 0o666); err != nil {
		return stepRun{err: fmt.Errorf("make $GITHUB_STATE: %w", err)}
	}
	_ = os.Chmod(statePath, 0o666)
	home := filepath.Join(r.files.runner, "github-home")
	if err := os.MkdirAll(home, 0o777); err != nil {
		return stepRun{err: fmt.Errorf("make the action's HOME: %w", err)}
	}
	// The container may run as any user, who must write it.
	_ = os.Chmod(home, 0o777)
	env = r.containerEnv(env)
	for k, v := range state {
		env["STATE_"+k] = v
	}
	stdout, stderr := r.rec.Writer(logs.Stdout), r.rec.Writer(logs.Stderr)
	defer stdout.Close()
	defer stderr.Close()
	if build != nil {
		b := *build
		b.Output = stdout
		build = &b
	}
	res, err := eng.RunAction(ctx, docker.ActionContainer{
		WorkerID: r.a.workerID, JobID: r.j.ID, Attempt: r.j.Attempt,
		Image: image, Build: build, Entrypoint: entrypoint, Args: args,
		Env: envList(env), WorkingDir: ghWorkspace,
		Mounts: []docker.ActionMount{
			{Source: r.ws, Target: ghWorkspace},
			{Source: r.files.dir, Target: ghFileCommands},
			{Source: filepath.Join(r.files.runner, "event.json"), Target: ghEventPath, ReadOnly: true},
			{Source: filepath.Join(r.files.runner, "tmp"), Target: ghRunnerTemp},
			{Source: home, Target: ghHome},
		},
		Stdout: stdout, Stderr: stderr, Grace: r.grace,
	})
	if ctx.Err() != nil {
		// The step was stopped, or never started (an image still pulling or building
		// when the job was cancelled): the step's timeout fails it, any other end is
		// the job's cancel.
		if errors.Is(context.Cause(ctx), errStepTimeout) {
			res.Cancelled, res.TimedOut = false, true
		} else {
			res.Cancelled = true
		}
		if res.ExitCode == 0 {
			res.ExitCode = -1
		}
		return stepRun{res: res}
	}
	out := stepRun{res: res, err: err}
	if err != nil {
		return out
	}
	if b, rerr := readAndEmpty(statePath); rerr != nil {
		r.rec.System(fmt.Sprintf("%s: $GITHUB_STATE: %v", what, rerr))
	} else if saved, perr := parseCommandFile(string(b)); perr != nil {
		r.rec.System(fmt.Sprintf("%s: $GITHUB_STATE: %v", what, perr))
	} else {
		maps.Copy(state, saved)
	}
	return r.collect(out, what)
}

// containerEnv is a step's env as a docker action's container sees it: the paths of the
// workspace and of the job's files made the container's, and nothing of the worker's
// own environment (its PATH, HOME, LANG, TMPDIR): the image has its own, as on GitHub,
// where a container action does not get the runner's PATH either.
func (r *actionRunner) containerEnv(env map[string]string) map[string]string {
	out := maps.Clone(env)
	if r.host {
		for _, k := range stepInherits {
			if v, ok := os.LookupEnv(k); ok && out[k] == v {
				delete(out, k)
			}
		}
	}
	// A PATH set here is the worker's or the job container's, with what $GITHUB_PATH
	// added: neither is the image's.
	delete(out, "PATH")
	// The action's files are in its image.
	delete(out, "GITHUB_ACTION_PATH")
	for k, v := range r.files.vars() {
		out[k] = path.Join(ghFileCommands, path.Base(v))
	}
	out["GITHUB_STATE"] = path.Join(ghFileCommands, "state")
	out["GITHUB_WORKSPACE"] = ghWorkspace
	out["GANTRY_WORKSPACE"] = ghWorkspace
	out["GITHUB_EVENT_PATH"] = ghEventPath
	out["RUNNER_TEMP"] = ghRunnerTemp
	out["HOME"] = ghHome
	return out
}

// splitArgs splits a docker:// step's with.args into arguments as a shell would, without
// expanding anything: words separated by blanks, 'single' and "double" quotes (in which
// a backslash escapes " and \) grouping, and a backslash outside quotes escaping the next
// character.
func splitArgs(s string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			if inWord {
				args = append(args, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			inWord = true
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("a ' is not closed")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
		case c == '"':
			inWord = true
			closed := false
			for i++; i < len(s); i++ {
				if s[i] == '\\' && i+1 < len(s) && (s[i+1] == '"' || s[i+1] == '\\') {
					i++
					cur.WriteByte(s[i])
					continue
				}
				if s[i] == '"' {
					closed = true
					break
				}
				cur.WriteByte(s[i])
			}
			if !closed {
				return nil, errors.New(`a " is not closed`)
			}
		case c == '\\' && i+1 < len(s):
			inWord = true
			i++
			cur.WriteByte(s[i])
		default:
			inWord = true
			cur.WriteByte(c)
		}
	}
	if inWord {
		args = append(args, cur.String())
	}
	return args, nil
}
