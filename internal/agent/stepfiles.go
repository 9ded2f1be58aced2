package agent

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/gantry-ci/gantry/internal/lazyre"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/stepsummary"
)

// maxStepFile bounds what the worker reads of one such file after a step.
const maxStepFile = pipeline.MaxOutputBytes

var envLineName = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// stepFiles are one job's $GANTRY_OUTPUT, $GANTRY_ENV, $GANTRY_PATH and
// $GANTRY_STEP_SUMMARY, emptied after each step is read, and what the steps so far left
// in them.
type stepFiles struct {
	// dir is the files' directory on the worker's disk, stepDir where steps see it.
	dir, stepDir               string
	output, env, path, summary string
	addEnv                     map[string]string
	addPath                    []string // latest first
	// imagePath is the PATH the job's image gives its steps, which addPath goes
	// before; "" when the job has no image or its session does not say.
	imagePath string
	// runner is the job's other files (the event, RUNNER_TEMP, the actions it runs),
	// runnerStep where steps see it; "" until makeRunnerDir (actions.go).
	runner, runnerStep string
	// ws is the job's workspace on the worker's disk.
	ws string
}

// stepFilesInWorkspace is where the files are for a job in a container, which sees
// only its workspace of the worker's disk: a directory of the workspace.
const stepFilesInWorkspace = ".gantry-files"

// newStepFiles gives a job its step files: a finished job's, empty again, on a worker
// that keeps them (jobdirs.go), or new ones.
func (a *Agent) newStepFiles(ws string, inContainer bool) (*stepFiles, error) {
	if !inContainer && a.reuses() {
		if s, ok := a.takeSpare(); ok {
			f := stepFilesIn(s.files, ws)
			f.runner, f.runnerStep = s.runner, s.runner
			return f, nil
		}
	}
	return newStepFiles(a.cfg.WorkDir, ws, inContainer)
}

// newStepFiles makes the files, empty, in a directory of their own in workDir beside the
// job's workspace ws: not in it, where they would show in git status and artifacts. The
// executor binds the directory for the steps (executor.Step.Binds). A job in a container
// (inWorkspace) has them in the workspace instead, the only part of the worker's disk its
// steps see; the caller sets stepDir to where the steps see it.
func newStepFiles(workDir, ws string, inWorkspace bool) (*stepFiles, error) {
	var dir string
	var err error
	if inWorkspace {
		dir = filepath.Join(ws, stepFilesInWorkspace)
		err = os.Mkdir(dir, 0o755)
	} else {
		dir, err = os.MkdirTemp(workDir, "gantry-files-")
	}
	if err != nil {
		return nil, fmt.Errorf("make the directory of the step files: %w", err)
	}
	// The steps may run as another user, who must reach the files.
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, fmt.Errorf("make the directory of the step files: %w", err)
	}
	f := stepFilesIn(dir, ws)
	for _, p := range []string{f.output, f.env, f.path, f.summary} {
		if err := makeStepFile(p); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// stepFilesIn are the step files of directory dir, for the job of workspace ws.
func stepFilesIn(dir, ws string) *stepFiles {
	return &stepFiles{dir: dir, stepDir: dir, output: filepath.Join(dir, "output"), env: filepath.Join(dir, "env"), path: filepath.Join(dir, "path"),
		summary: filepath.Join(dir, "summary"), addEnv: map[string]string{}, ws: ws}
}

// makeStepFile makes an empty step file that any user may write.
func makeStepFile(p string) error {
	if err := os.WriteFile(p, nil, 0o666); err != nil {
		return fmt.Errorf("make %s: %w", p, err)
	}
	// The step may run as another user; umask must not keep it from writing.
	_ = os.Chmod(p, 0o666)
	return nil
}

// vars are the variables that name the files to a step.
//
// GitHub's names for the same files are set too, so a step written for GitHub Actions
// (echo "x=1" >> "$GITHUB_OUTPUT", echo "## Done" >> "$GITHUB_STEP_SUMMARY") runs as it is.
func (f *stepFiles) vars() map[string]string {
	out, env, dirs, summary := path.Join(f.stepDir, "output"), path.Join(f.stepDir, "env"), path.Join(f.stepDir, "path"), path.Join(f.stepDir, "summary")
	return map[string]string{"GANTRY_OUTPUT": out, "GANTRY_ENV": env, "GANTRY_PATH": dirs, "GANTRY_STEP_SUMMARY": summary,
		"GITHUB_OUTPUT": out, "GITHUB_ENV": env, "GITHUB_PATH": dirs, "GITHUB_STEP_SUMMARY": summary}
}

// collect reads what a step wrote, empties the files for the next one, and returns the
// step's outputs. An error says what is wrong with what it wrote; the step then fails,
// and nothing it wrote is taken.
func (f *stepFiles) collect() (map[string]string, error) {
	read := func(p, name string) (string, error) {
		b, err := readAndEmpty(p)
		if err != nil {
			return "", fmt.Errorf("$%s: %w", name, err)
		}
		return string(b), nil
	}
	outText, err1 := read(f.output, "GANTRY_OUTPUT")
	envText, err2 := read(f.env, "GANTRY_ENV")
	pathText, err3 := read(f.path, "GANTRY_PATH")
	if err := errors.Join(err1, err2, err3); err != nil {
		return nil, err
	}
	outputs, err := parseCommandFile(outText)
	if err != nil {
		return nil, fmt.Errorf("$GANTRY_OUTPUT: %w", err)
	}
	if err := pipeline.CheckStepOutputs(outputs); err != nil {
		return nil, fmt.Errorf("$GANTRY_OUTPUT: %w", err)
	}
	env, err := parseCommandFile(envText)
	if err != nil {
		return nil, fmt.Errorf("$GANTRY_ENV: %w", err)
	}
	for name := range env {
		switch {
		case !envLineName.Regexp().MatchString(name):
			return nil, fmt.Errorf("$GANTRY_ENV: variable name %q: use letters, digits and '_', not starting with a digit", name)
		case strings.HasPrefix(strings.ToUpper(name), "GANTRY_"):
			return nil, fmt.Errorf("$GANTRY_ENV: %s: variable names starting with GANTRY_ are reserved for Gantry", name)
		}
	}
	var paths []string
	for _, line := range strings.Split(pathText, "\n") {
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" {
			continue
		}
		if strings.Contains(line, string(os.PathListSeparator)) {
			return nil, fmt.Errorf("$GANTRY_PATH: %q: one directory a line", line)
		}
		paths = append(paths, line)
	}
	for k, v := range env {
		f.addEnv[k] = v
	}
	for _, p := range paths {
		f.addPath = append([]string{p}, f.addPath...)
	}
	return outputs, nil
}

// errSummaryTooLarge is a step summary over stepsummary.MaxBytes; size is the file's.
type errSummaryTooLarge struct{ size int64 }

func (e *errSummaryTooLarge) Error() string {
	return fmt.Sprintf("it is %s, more than the %s a step's summary may be", byteSize(e.size), byteSize(stepsummary.MaxBytes))
}

// takeSummary reads what a step wrote to $GANTRY_STEP_SUMMARY and leaves the file empty
// for the next step, as GitHub gives each step a fresh one. Over stepsummary.MaxBytes
// it is *errSummaryTooLarge and nothing of it is taken. A file the step removed, or
// replaced with a symlink or anything but a file (refused, never followed, as
// readAndEmpty does), is made again for the next step.
func (f *stepFiles) takeSummary() (string, error) {
	fh, err := os.OpenFile(f.summary, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return "", makeStepFile(f.summary)
	case errors.Is(err, syscall.ELOOP):
		return "", errors.Join(errors.New("it is a symlink, not the file the step was given"), f.remakeSummary())
	case err != nil:
		return "", errors.Join(err, f.remakeSummary())
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", errors.Join(fmt.Errorf("it is a %s, not the file the step was given", fi.Mode().Type()), f.remakeSummary())
	}
	b, err := io.ReadAll(io.LimitReader(fh, stepsummary.MaxBytes+1))
	if err != nil {
		return "", err
	}
	if err := fh.Truncate(0); err != nil {
		return "", fmt.Errorf("empty it for the next step: %w", err)
	}
	if len(b) > stepsummary.MaxBytes {
		return "", &errSummaryTooLarge{size: max(fi.Size(), int64(len(b)))}
	}
	return string(b), nil
}

// remakeSummary puts an empty summary file where a step left something else.
func (f *stepFiles) remakeSummary() error {
	if err := os.RemoveAll(f.summary); err != nil {
		return fmt.Errorf("remove it: %w", err)
	}
	return makeStepFile(f.summary)
}

// byteSize says n bytes for people: 512 bytes, 1.5 KiB, 2.0 MiB.
func byteSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n == 1<<20:
		return "1 MiB"
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// remove deletes the files' directory from the workspace.
func (f *stepFiles) remove() error { return os.RemoveAll(f.dir) }

// readAndEmpty reads a step file and empties it for the next step. The file is the
// step's to write, and a step in a container writes it through the workspace: one it
// replaced with a symlink or anything but a file is refused, never followed, so a step
// cannot have the worker read or empty a file of the worker's host.
func readAndEmpty(p string) ([]byte, error) {
	fh, err := os.OpenFile(p, os.O_RDWR|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ELOOP) {
		return nil, errors.New("it is a symlink, not the file the step was given")
	}
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	if fi, err := fh.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("it is a %s, not the file the step was given", fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(fh, maxStepFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxStepFile {
		return nil, fmt.Errorf("more than the limit of %d bytes", maxStepFile)
	}
	if err := fh.Truncate(0); err != nil {
		return nil, fmt.Errorf("empty it for the next step: %w", err)
	}
	return b, nil
}

// parseCommandFile reads NAME=VALUE lines and NAME<<DELIMITER blocks, whose value is
// the lines up to one that is DELIMITER alone, as GitHub Actions' $GITHUB_OUTPUT and
// $GITHUB_ENV are written. Blank lines are ignored; a later NAME wins.
func parseCommandFile(text string) (map[string]string, error) {
	out := map[string]string{}
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if strings.TrimSpace(line) == "" {
			continue
		}
		eq := strings.IndexByte(line, '=')
		heredoc := strings.Index(line, "<<")
		switch {
		case heredoc > 0 && (eq < 0 || heredoc < eq):
			name, delim := line[:heredoc], line[heredoc+2:]
			if delim == "" {
				return nil, fmt.Errorf("line %d: %s<< needs a delimiter after <<", i+1, name)
			}
			if err := checkName(name, i+1); err != nil {
				return nil, err
			}
			var val []string
			closed := false
			for i++; i < len(lines); i++ {
				if lines[i] == delim {
					closed = true
					break
				}
				val = append(val, lines[i])
			}
			if !closed {
				return nil, fmt.Errorf("%s<<%s is not closed by a line %s", name, delim, delim)
			}
			out[name] = strings.Join(val, "\n")
		case eq > 0:
			name := line[:eq]
			if err := checkName(name, i+1); err != nil {
				return nil, err
			}
			out[name] = line[eq+1:]
		default:
			return nil, fmt.Errorf("line %d: %q is neither NAME=VALUE nor NAME<<DELIMITER", i+1, truncate(line, 60))
		}
	}
	return out, nil
}

func checkName(name string, line int) error {
	if name == "" || strings.TrimSpace(name) != name || strings.ContainsAny(name, " \t") {
		return fmt.Errorf("line %d: %q is not a name", line, name)
	}
	return nil
}

func truncate(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "..."
	}
	return s
}

// jobOutputs are the outputs a job sends with its completion: its declared outputs as
// written, for expandOutputs to put the steps' values in, or, when it declares none,
// every output its steps wrote (a later step's value winning).
func jobOutputs(spec *pipeline.Job, written []map[string]string) map[string]string {
	out := map[string]string{}
	if spec.Outputs != nil {
		maps.Copy(out, spec.Outputs)
		return out
	}
	for _, w := range written {
		for k, v := range w {
			out[k] = v
		}
	}
	return out
}
