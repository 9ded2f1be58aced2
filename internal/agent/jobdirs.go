package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// A job on the worker's host gets two directories beside its workspace: its step files
// ($GANTRY_OUTPUT and the rest, newStepFiles) and its runner directory (the event file
// and RUNNER_TEMP, makeRunnerDir). Making them and removing them again is most of what a
// short job costs the filesystem, so a worker whose executor kills every process a step
// leaves behind keeps the two of a job that left them as they were made, and gives them
// to its next job: no step of the last job can still write in them, and they hold
// nothing of it.

// containedExecutor is an executor that says whether every process a step starts ends
// with the step (executor.Shell and executor.Sandbox with a containment).
type containedExecutor interface {
	Contained() bool
}

// spareDirs are a finished job's step-file and runner directories, empty again.
type spareDirs struct {
	files, runner string
}

// stepFileNames are the files of a step-file directory, sorted as os.ReadDir lists them.
var stepFileNames = []string{"env", "output", "path", "summary"}

// takeSpare returns directories a finished job left for reuse, if there are any.
func (a *Agent) takeSpare() (spareDirs, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.spares)
	if n == 0 {
		return spareDirs{}, false
	}
	s := a.spares[n-1]
	a.spares = a.spares[:n-1]
	return s, true
}

// reuses says whether this worker keeps a host job's directories for the next job.
func (a *Agent) reuses() bool {
	c, ok := a.cfg.Executor.(containedExecutor)
	return ok && c.Contained()
}

// releaseDirs keeps a host job's step-file and runner directories for the next job when
// they are as they were made, empty, and the worker reuses them and has room for them;
// otherwise it removes them.
func (a *Agent) releaseDirs(files *stepFiles) error {
	if a.reuses() && files.dir != "" && files.runner != "" && pristineFiles(files.dir) && pristineRunner(files.runner) &&
		// The last job's event goes; pristineRunner saw a file, not a link to follow.
		os.Truncate(filepath.Join(files.runner, "event.json"), 0) == nil {
		a.mu.Lock()
		keep := len(a.spares) < a.cfg.MaxJobs
		if keep {
			a.spares = append(a.spares, spareDirs{files: files.dir, runner: files.runner})
		}
		a.mu.Unlock()
		if keep {
			return nil
		}
	}
	var errs []error
	for _, d := range []string{files.dir, files.runner} {
		if d != "" {
			errs = append(errs, os.RemoveAll(d))
		}
	}
	return errors.Join(errs...)
}

// dropSpares removes the directories kept for a next job, when the worker stops.
func (a *Agent) dropSpares() {
	a.mu.Lock()
	spares := a.spares
	a.spares = nil
	a.mu.Unlock()
	for _, s := range spares {
		for _, d := range []string{s.files, s.runner} {
			if err := os.RemoveAll(d); err != nil {
				a.log.Warn("remove a job's directory", "dir", d, "err", err)
			}
		}
	}
}

// pristineFiles says whether dir holds the four step files alone, each an empty file any
// user may write, as newStepFiles makes them and a step's collection leaves them.
func pristineFiles(dir string) bool {
	if !hasMode(dir, fs.ModeDir|0o755) {
		return false
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != len(stepFileNames) {
		return false
	}
	for i, e := range entries {
		if e.Name() != stepFileNames[i] {
			return false
		}
		info, err := e.Info()
		if err != nil || info.Mode() != 0o666 || info.Size() != 0 {
			return false
		}
	}
	return true
}

// pristineRunner says whether dir holds the event file and an empty RUNNER_TEMP alone,
// as makeRunnerDir makes them; the event is emptied, and the next job writes its own.
func pristineRunner(dir string) bool {
	if !hasMode(dir, fs.ModeDir|0o755) {
		return false
	}
	entries, err := os.ReadDir(dir)
	if err != nil || !slices.EqualFunc(entries, []string{"event.json", "tmp"}, func(e fs.DirEntry, name string) bool { return e.Name() == name }) {
		return false
	}
	if !entries[0].Type().IsRegular() {
		return false // a symlink the next job's event would be written through
	}
	tmp := filepath.Join(dir, "tmp")
	if !hasMode(tmp, fs.ModeDir|fs.ModeSticky|0o777) {
		return false
	}
	left, err := os.ReadDir(tmp)
	return err == nil && len(left) == 0
}

// hasMode says whether p, not followed, is of exactly that type and permissions.
func hasMode(p string, mode fs.FileMode) bool {
	info, err := os.Lstat(p)
	return err == nil && info.Mode() == mode
}
