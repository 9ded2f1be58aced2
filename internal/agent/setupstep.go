package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/toolchain"
)

// maxProbeOutput bounds what the worker reads of a setup step's probe and version file.
const maxProbeOutput = 1 << 20

// setupStep does what actions/setup-go, setup-node and setup-python do, except
// downloading: it finds the version the step asks for among the toolchains installed
// where the job's steps run (on the worker, in its container or pod), by the action's
// rules (internal/toolchain), puts its directory first on the PATH of the later steps,
// and sets the action's outputs. A version not installed fails the step, naming what was
// found. The toolchains are listed by a shell script run through the job's executor, so
// that what is found is what the steps will run; the choice is made here.
func (r *actionRunner) setupStep(ctx context.Context, st pipeline.Step, tool toolchain.Tool, with, env map[string]string) stepRun {
	stdout, stderr := r.rec.StepWriter(logs.Stdout, st.Index), r.rec.StepWriter(logs.Stderr, st.Index)
	defer func() {
		_ = stdout.Close()
		_ = stderr.Close()
	}()
	fail := func(format string, args ...any) stepRun {
		fmt.Fprintf(stderr, tool.Action+": "+format+"\n", args...)
		return stepRun{res: executor.Result{ExitCode: 1}}
	}
	specs, from, err := r.setupVersions(ctx, st, tool, with, env, stdout)
	switch {
	case errors.Is(err, errStepStopped):
		return stepRun{res: executor.Result{Cancelled: true, ExitCode: -1}}
	case err != nil:
		return fail("%v", err)
	}
	allowPre := strings.EqualFold(strings.TrimSpace(with["allow-prereleases"]), "true")

	out, res, err := r.capture(ctx, st, tool.Probe(), env, stderr)
	if err != nil || res.Cancelled || res.TimedOut {
		return stepRun{res: res, err: err}
	}
	if res.ExitCode != 0 {
		return fail("listing the installed toolchains failed (exit code %d)", res.ExitCode)
	}
	found, skipped := tool.Parse(out)
	for _, s := range skipped {
		fmt.Fprintf(stdout, "skipped %s\n", s)
	}
	if len(specs) == 0 {
		specs = []string{""}
	}
	var chosen []toolchain.Installed
	for _, spec := range specs {
		inst, err := tool.Choose(spec, allowPre, found)
		if err != nil {
			hint := ""
			if errors.Is(err, toolchain.ErrNotInstalled) {
				hint = fmt.Sprintf("; Gantry does not download toolchains: install %s %s on the worker or in the job's image", tool.Label, strings.TrimSpace(spec))
			}
			return fail("%v%s%s", err, from, hint)
		}
		chosen = append(chosen, inst)
		fmt.Fprintf(stdout, "%s %s at %s\n", tool.Label, inst, inst.Path)
	}

	// The later steps find the chosen toolchain first on their PATH: each directory is
	// put before the others, so with several (python-version lists) the last one comes
	// first, as setup-python leaves it. One already first on PATH is left where it is.
	var dirs []string
	for _, inst := range chosen {
		if len(chosen) == 1 && inst.OnPath {
			break
		}
		dirs = append(dirs, path.Dir(inst.Path))
	}
	last := chosen[len(chosen)-1]
	outputs := map[string]string{tool.Output: last.String()}
	vars := map[string]string{}
	if tool.Action == toolchain.Python.Action {
		outputs["python-path"] = last.Path
		// pythonLocation is where setup-python's Python is installed: its prefix.
		vars["pythonLocation"] = path.Dir(path.Dir(last.Path))
	}
	if err := r.files.add(outputs, vars, dirs); err != nil {
		return stepRun{err: err}
	}
	if v := strings.TrimSpace(with["pip-version"]); v != "" && tool.Action == toolchain.Python.Action {
		if run := r.pipVersion(ctx, st, last, v, env, stdout, stderr); run.err != nil || run.res.ExitCode != 0 || run.res.Cancelled {
			return run
		}
	}
	if strings.TrimSpace(with["package-manager-cache"]) != "" || strings.TrimSpace(with["cache"]) != "" {
		fmt.Fprintf(stdout, "%s caches nothing here: Gantry's caches are configured with actions/cache (a job's cache:)\n", tool.Action)
	}
	return r.collect(stepRun{}, tool.Action)
}

// errStepStopped says a process of a setup step was cancelled or timed out.
var errStepStopped = errors.New("the step was stopped")

// setupVersions reads the versions a setup step asks for: the lines of the version input
// (several for setup-python, the first for the others), else those of the version file
// it names, else, for setup-python, those of .python-version when there is one. from
// says where they came from, for messages.
func (r *actionRunner) setupVersions(ctx context.Context, st pipeline.Step, tool toolchain.Tool, with, env map[string]string, log io.Writer) (specs []string, from string, err error) {
	for _, l := range strings.Split(with[tool.VersionInput], "\n") {
		if l = strings.TrimSpace(l); l != "" {
			specs = append(specs, l)
		}
	}
	if len(specs) > 0 {
		if tool.Action != toolchain.Python.Action {
			specs = specs[:1]
		}
		return specs, "", nil
	}
	file := strings.TrimSpace(with[tool.FileInput])
	optional := false
	if file == "" {
		if tool.Action != toolchain.Python.Action {
			return nil, "", nil
		}
		file, optional = ".python-version", true
	}
	// The file is read where the steps run, as they see the workspace.
	vars := maps.Clone(env)
	vars["GANTRY_VERSION_FILE"] = file
	content, res, err := r.capture(ctx, st, `if [ -f "$GANTRY_VERSION_FILE" ]; then cat -- "$GANTRY_VERSION_FILE"; else exit 3; fi`, vars, io.Discard)
	switch {
	case err != nil:
		return nil, "", err
	case res.Cancelled || res.TimedOut:
		return nil, "", errStepStopped
	case res.ExitCode == 3 && optional:
		return nil, "", nil
	case res.ExitCode != 0:
		return nil, "", fmt.Errorf("the version file %s is not in the workspace", file)
	}
	specs, err = tool.FromFile(file, []byte(content))
	if err != nil {
		return nil, "", err
	}
	fmt.Fprintf(log, "%s asks for %s %s\n", file, tool.Label, strings.Join(specs, ", "))
	return specs, " (asked for by " + file + ")", nil
}

// pipVersion does setup-python's pip-version: pip install pip==VERSION with the Python
// set up, when pip is not that version already. A sandboxed job without network cannot
// reach the package index: it gets a notice, and the pip it has.
func (r *actionRunner) pipVersion(ctx context.Context, st pipeline.Step, python toolchain.Installed, version string, env map[string]string, stdout, stderr io.Writer) stepRun {
	vars := maps.Clone(env)
	vars["GANTRY_PYTHON"], vars["GANTRY_PIP_VERSION"] = python.Path, version
	have, res, err := r.capture(ctx, st, `"$GANTRY_PYTHON" -m pip --version 2>/dev/null | cut -d ' ' -f 2`, vars, io.Discard)
	if err != nil || res.Cancelled || res.TimedOut {
		return stepRun{res: res, err: err}
	}
	have = strings.TrimSpace(have)
	if have != "" && (have == version || have == version+".0" || have == version+".0.0") {
		fmt.Fprintf(stdout, "pip %s is installed\n", have)
		return stepRun{}
	}
	if _, sandboxed := r.a.cfg.Executor.(executor.Sandbox); sandboxed && !r.j.Spec.Network && r.host {
		fmt.Fprintf(stdout, "::notice::actions/setup-python: pip-version %s not installed: the job runs in the sandbox without network (network: true lets it reach the package index); pip is %s\n", version, cmpOr(have, "not installed"))
		return stepRun{}
	}
	fmt.Fprintf(stdout, "installing pip %s (pip is %s)\n", version, cmpOr(have, "not installed"))
	return stepRun{res: mustRun(r.runTo(ctx, st, `"$GANTRY_PYTHON" -m pip install --upgrade "pip==$GANTRY_PIP_VERSION" --disable-pip-version-check --no-warn-script-location`, vars, stdout, stderr))}
}

func cmpOr(s, or string) string {
	if s == "" {
		return or
	}
	return s
}

func mustRun(res executor.Result, err error) executor.Result {
	if err != nil && res.ExitCode == 0 {
		res.ExitCode = 1
	}
	return res
}

// capture runs a script of a step through the job's executor, as the step's processes
// run, and returns what it printed on stdout (up to maxProbeOutput); its stderr goes to
// errOut.
func (r *actionRunner) capture(ctx context.Context, st pipeline.Step, script string, env map[string]string, errOut io.Writer) (string, executor.Result, error) {
	var buf limitedBuffer
	buf.max = maxProbeOutput
	res, err := r.runTo(ctx, st, script, env, &buf, errOut)
	return buf.String(), res, err
}

func (r *actionRunner) runTo(ctx context.Context, _ pipeline.Step, script string, env map[string]string, stdout, stderr io.Writer) (executor.Result, error) {
	return r.run(ctx, executor.Step{Shell: "sh", Script: script, Env: envList(env), Dir: r.ws,
		Stdout: stdout, Stderr: stderr, Grace: r.grace, Network: r.j.Spec.Network, Binds: r.files.binds()})
}

// limitedBuffer keeps the first max bytes written to it and drops the rest.
type limitedBuffer struct {
	bytes.Buffer
	max int
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.Len(); room > 0 {
		if len(p) > room {
			b.Buffer.Write(p[:room])
		} else {
			b.Buffer.Write(p)
		}
	}
	return len(p), nil
}

// add writes outputs, variables and PATH directories for the step files to take, as a
// step's process would write them.
func (f *stepFiles) add(outputs, vars map[string]string, dirs []string) error {
	write := func(file string, lines []string) error {
		if len(lines) == 0 {
			return nil
		}
		fh, err := os.OpenFile(file, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("write the step files: %w", err)
		}
		_, err = io.WriteString(fh, strings.Join(lines, "\n")+"\n")
		if cerr := fh.Close(); err == nil {
			err = cerr
		}
		return err
	}
	pairs := func(m map[string]string) []string {
		var out []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			out = append(out, k+"="+m[k])
		}
		return out
	}
	return errors.Join(write(f.output, pairs(outputs)), write(f.env, pairs(vars)), write(f.path, dirs))
}
