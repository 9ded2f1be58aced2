package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// nativeStep does what an action the worker knows does, at the step's place, with no
// code fetched (pipeline.Uses.NativeAction): checkout where it is not the job's one
// checkout, actions/cache where it cannot be one of the job's caches (an if:, an id whose
// outputs are read, values known only when the step runs) and its restore and save,
// and every upload-artifact and download-artifact.
func (r *actionRunner) nativeStep(ctx context.Context, st pipeline.Step, action string, with map[string]string) stepRun {
	switch action {
	case pipeline.NativeCheckout:
		return r.checkoutStep(ctx, with)
	case pipeline.NativeCache, pipeline.NativeCacheRestore:
		return r.cacheRestoreStep(ctx, st, action, with)
	case pipeline.NativeCacheSave:
		return r.cacheSaveStep(ctx, with)
	case pipeline.NativeUpload:
		return r.uploadStep(ctx, with)
	case pipeline.NativeDownload:
		return r.downloadStep(ctx, with)
	}
	return stepRun{err: fmt.Errorf("the worker does not do actions/%s itself", action)}
}

// nativeFailed is a native step that ran and failed, saying why in the job's log as a
// process would on its stderr.
func (r *actionRunner) nativeFailed(what string, err error) stepRun {
	r.rec.System(fmt.Sprintf("%s: %v", what, err))
	return stepRun{res: executor.Result{ExitCode: 1}}
}

// inputLines reads a multi-line input as actions read it: one value a line, blank lines
// and surrounding spaces dropped.
func inputLines(v string) []string {
	var out []string
	for _, line := range strings.Split(v, "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, line)
		}
	}
	return out
}

// inputBool reads a boolean input as actions do: "true" in any case is true, anything
// else false.
func inputBool(v string) bool { return strings.EqualFold(strings.TrimSpace(v), "true") }

// nativeCache reads the inputs of an actions/cache step as one of Gantry's caches.
func (r *actionRunner) nativeCache(with map[string]string) (*jobCache, []string, string, error) {
	key := strings.TrimSpace(with["key"])
	if msg := pipeline.CheckCacheKey(key); msg != "" {
		return nil, nil, "", fmt.Errorf("key %q %s", key, msg)
	}
	var restoreKeys []string
	for _, rk := range inputLines(with["restore-keys"]) {
		if msg := pipeline.CheckCacheKey(rk); msg != "" {
			return nil, nil, "", fmt.Errorf("restore key %q %s", rk, msg)
		}
		restoreKeys = append(restoreKeys, rk)
	}
	spec := pipeline.Cache{Key: key}
	home := false
	for _, p := range inputLines(with["path"]) {
		if msg := pipeline.CheckCachePath(p); msg != "" {
			return nil, nil, "", fmt.Errorf("path %q %s", p, msg)
		}
		home = home || strings.HasPrefix(p, "~")
		if p = path.Clean(p); !slices.Contains(spec.Paths, p) {
			spec.Paths = append(spec.Paths, p)
		}
	}
	if len(spec.Paths) == 0 {
		return nil, nil, "", errors.New("path names no file or directory")
	}
	dir := ""
	switch {
	case home && !r.host:
		// The home directory of a job's container is not on the worker's disk while
		// its steps run; the job's own caches (a cache: of the job) copy it out at the
		// end.
		return nil, nil, "", errors.New("a path under ~ is not reachable from a step of a job in a container; cache a directory of the workspace")
	case home:
		dir = r.a.stepHome(r.j, r.ws)
	}
	return &jobCache{jobID: r.j.ID, token: r.j.Lease.Token, spec: spec, key: key}, restoreKeys, dir, nil
}

// cacheRestoreStep restores a cache at the step's place, as actions/cache and
// actions/cache/restore do, with their outputs: cache-hit ("true" for the exact key,
// "false" for a restore key, unset on a miss), cache-primary-key and cache-matched-key.
// actions/cache saves the paths after the job's steps, when they succeeded (or always,
// with save-always) and the exact key was not restored. Like the action, a cache that
// cannot be restored is a warning, not a failure, unless fail-on-cache-miss says so.
func (r *actionRunner) cacheRestoreStep(ctx context.Context, st pipeline.Step, action string, with map[string]string) stepRun {
	what := "actions/" + action
	c, restoreKeys, home, err := r.nativeCache(with)
	if err != nil {
		return r.nativeFailed(what, err)
	}
	if r.collector != nil {
		return r.nativeFailed(what, errors.New("this worker's steps run on a copy of the workspace, which a cache cannot be restored into between steps; use the job's cache: or an actions/cache step with no if: or id"))
	}
	c.lookupOnly = inputBool(with["lookup-only"])
	outputs := map[string]string{"cache-primary-key": c.key}
	if err := r.a.restoreCache(ctx, c, restoreKeys, r.ws, home, r.rec); err != nil {
		r.rec.System(fmt.Sprintf("cache %s: not restored: %v", c.key, err))
		c.matched = ""
	}
	if c.matched != "" {
		outputs["cache-hit"] = strconv.FormatBool(c.hit)
		outputs["cache-matched-key"] = c.matched
	} else if inputBool(with["fail-on-cache-miss"]) {
		r.rec.System(fmt.Sprintf("%s: no cache entry of the key %s%s; failing, as fail-on-cache-miss asks", what, c.key, restoreKeysSaid(restoreKeys)))
		return stepRun{res: executor.Result{ExitCode: 1}, outputs: outputs}
	}
	if action == pipeline.NativeCache && c.key != "" {
		cond := "success()"
		if inputBool(with["save-always"]) {
			cond = "always()"
		}
		r.posts = append(r.posts, postStep{step: st, name: "Post " + st.Name, cond: cond, run: func(ctx context.Context) stepRun {
			if c.hit {
				r.rec.System(fmt.Sprintf("cache %s: not saved: restored from this exact key", c.key))
				return stepRun{}
			}
			r.saveNative(ctx, c, home)
			return stepRun{}
		}})
	}
	return stepRun{outputs: outputs}
}

// cacheSaveStep saves a cache at the step's place, as actions/cache/save does. A save
// that fails, or finds the key taken, is a warning, as it is for the action.
func (r *actionRunner) cacheSaveStep(ctx context.Context, with map[string]string) stepRun {
	c, _, home, err := r.nativeCache(with)
	if err != nil {
		return r.nativeFailed("actions/cache/save", err)
	}
	r.saveNative(ctx, c, home)
	return stepRun{}
}

// saveNative saves a cache of a native step, once the workspace is back from where the
// steps ran.
func (r *actionRunner) saveNative(ctx context.Context, c *jobCache, home string) {
	if r.collector != nil {
		if err := r.collector.Collect(ctx); err != nil {
			r.rec.System(fmt.Sprintf("cache %s: not saved: the workspace could not be copied back from the job's environment: %v", c.key, err))
			return
		}
	}
	if err := r.a.saveCache(ctx, c, r.ws, home, r.rec); err != nil {
		r.log.Warn("save cache", "cache", c.key, "err", err)
		r.rec.System(fmt.Sprintf("cache %s: not saved: %v", c.key, err))
	}
}

// maxRetentionDays bounds an upload step's retention-days.
const maxRetentionDays = 3650

// uploadStep keeps files of the workspace as the job's artifacts at the step's place, as
// actions/upload-artifact does: path lists files, directories and globs, one a line,
// and lines starting with ! leave files out; hidden files (a segment starting with .)
// are left out unless include-hidden-files is true; if-no-files-found says whether
// finding nothing warns (the default), fails the step or is ignored. The files are kept
// at their paths in the workspace, as a job's artifacts are, for the jobs that need
// this one.
func (r *actionRunner) uploadStep(ctx context.Context, with map[string]string) stepRun {
	const what = "actions/upload-artifact"
	started := time.Now()
	name := strings.TrimSpace(with["name"])
	if name == "" {
		name = "artifact"
	}
	var include, exclude []string
	for _, p := range inputLines(with["path"]) {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(p, "!")
		rel, err := r.workspacePath(p)
		if err != nil {
			return r.nativeFailed(what, err)
		}
		if neg {
			exclude = append(exclude, rel)
		} else {
			include = append(include, rel)
		}
	}
	if len(include) == 0 {
		return r.nativeFailed(what, errors.New("path names no file to upload"))
	}
	missing := strings.ToLower(strings.TrimSpace(with["if-no-files-found"]))
	switch missing {
	case "":
		missing = "warn"
	case "warn", "error", "ignore":
	default:
		return r.nativeFailed(what, fmt.Errorf("if-no-files-found is %q: want warn, error or ignore", with["if-no-files-found"]))
	}
	days := 0
	if v := strings.TrimSpace(with["retention-days"]); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > maxRetentionDays {
			return r.nativeFailed(what, fmt.Errorf("retention-days is %q: want a number of days, 1 to %d (0 for the default)", v, maxRetentionDays))
		}
		days = n
	}
	if r.collector != nil {
		if err := r.collector.Collect(ctx); err != nil {
			return r.nativeFailed(what, fmt.Errorf("copy the workspace back from the job's environment: %w", err))
		}
	}
	found, err := collectArtifacts(r.ws, &pipeline.Artifacts{Paths: include}, r.rec)
	if err != nil {
		return r.nativeFailed(what, err)
	}
	hidden := inputBool(with["include-hidden-files"])
	files := found[:0]
	for _, f := range found {
		switch {
		case matchesAny(exclude, f.Name):
		case !hidden && isHidden(f.Name):
		default:
			files = append(files, f)
		}
	}
	if len(files) == 0 {
		msg := fmt.Sprintf("%s: no files were found with the path %s; no artifact %s is kept", what, strings.Join(include, ", "), name)
		switch missing {
		case "error":
			r.rec.System(msg)
			return stepRun{res: executor.Result{ExitCode: 1}}
		case "warn":
			r.rec.System("warning: " + msg)
		}
		return stepRun{}
	}
	root := uploadRoot(r.ws, include)
	inSet(files, root)
	r.rec.System(fmt.Sprintf("%s: artifact %s: %d %s of %s", what, name, len(files), plural(len(files), "file", "files"), pathOrRoot(root)))
	if err := r.a.keepFiles(ctx, r.log, r.j, files, name, started, days, r.rec); err != nil {
		return r.nativeFailed(what, err)
	}
	// The artifact's id is its name: download-artifact's artifact-ids reads it so.
	return stepRun{outputs: map[string]string{"artifact-id": name}}
}

// workspacePath reads a path of a step's input as the workspace-relative, slash-separated
// path it names: relative to the workspace, or absolute under the workspace as the steps
// see it.
func (r *actionRunner) workspacePath(p string) (string, error) {
	p = strings.TrimSpace(p)
	if strings.HasPrefix(p, "~") {
		return "", fmt.Errorf("path %q is under the home directory, outside the workspace; Gantry keeps and puts files of the workspace", p)
	}
	if strings.HasPrefix(p, "/") {
		rel, ok := strings.CutPrefix(path.Clean(p), strings.TrimSuffix(r.stepWS, "/")+"/")
		if !ok {
			return "", fmt.Errorf("path %q is outside the workspace (%s); Gantry keeps files of the workspace", p, r.stepWS)
		}
		p = rel
	}
	p = strings.TrimPrefix(path.Clean(p), "./")
	if p == ".." || strings.HasPrefix(p, "../") {
		return "", fmt.Errorf("path %q is outside the workspace; Gantry keeps files of the workspace", p)
	}
	if p == "." {
		p = "**"
	}
	return p, nil
}

// matchesAny reports whether name, or a directory it is in, matches one of the patterns.
func matchesAny(patterns []string, name string) bool {
	for _, pat := range patterns {
		pat = strings.TrimSuffix(pat, "/")
		for n := name; n != "."; n = path.Dir(n) {
			if pipeline.MatchArtifactPath(pat, n) {
				return true
			}
		}
	}
	return false
}

// isHidden reports whether a slash-separated path has a segment starting with a dot.
func isHidden(name string) bool {
	for _, seg := range strings.Split(name, "/") {
		if strings.HasPrefix(seg, ".") {
			return true
		}
	}
	return false
}

// uploadRoot is the directory of the workspace an upload's files are kept relative to,
// as upload-artifact finds it: where the search paths meet (the part of each before its
// first glob), or for a single path naming one file, its directory. "" is the
// workspace itself.
func uploadRoot(ws string, patterns []string) string {
	var bases [][]string
	for _, p := range patterns {
		p = strings.TrimSuffix(path.Clean(p), "/")
		var segs []string
		for _, seg := range strings.Split(p, "/") {
			if strings.ContainsAny(seg, "*?[") {
				break
			}
			segs = append(segs, seg)
		}
		if len(patterns) == 1 && len(segs) == len(strings.Split(p, "/")) {
			if st, err := os.Stat(filepath.Join(ws, filepath.FromSlash(p))); err == nil && !st.IsDir() {
				segs = segs[:len(segs)-1]
			}
		}
		bases = append(bases, segs)
	}
	if len(bases) == 0 {
		return ""
	}
	common := bases[0]
	for _, b := range bases[1:] {
		n := 0
		for n < len(common) && n < len(b) && common[n] == b[n] {
			n++
		}
		common = common[:n]
	}
	if root := strings.Join(common, "/"); root != "." {
		return root
	}
	return ""
}

// inSet gives each file its path in a set whose files are kept relative to root.
func inSet(files []keptFile, root string) {
	for i := range files {
		files[i].SetPath = files[i].Name
		if root != "" {
			files[i].SetPath = strings.TrimPrefix(files[i].Name, root+"/")
		}
	}
}

// downloadStep gets sets of artifacts the jobs of the run kept, as
// actions/download-artifact does: the one name names (or those artifact-ids name: an
// upload step's artifact-id is its name) into path, the workspace unless it says
// otherwise; without a name, every set (or those pattern matches) into a directory of
// its name under path, or all into path with merge-multiple. Each file is placed by its
// path in the set, its digest checked. Its output download-path is where they are.
func (r *actionRunner) downloadStep(ctx context.Context, with map[string]string) stepRun {
	const what = "actions/download-artifact"
	var names []string
	if n := strings.TrimSpace(with["name"]); n != "" {
		names = []string{n}
	}
	for _, id := range strings.FieldsFunc(with["artifact-ids"], func(c rune) bool { return c == ',' || c == '\n' }) {
		if id = strings.TrimSpace(id); id != "" && !slices.Contains(names, id) {
			names = append(names, id)
		}
	}
	pattern := strings.TrimSpace(with["pattern"])
	if len(names) > 0 && pattern != "" {
		pattern = "" // as the action does: a name wins over a pattern
	}
	dest := ""
	if p := strings.TrimSpace(with["path"]); p != "" {
		rel, err := r.workspacePath(p)
		if err != nil {
			return r.nativeFailed(what, err)
		}
		if rel != "**" {
			dest = rel
		}
	}
	if r.collector != nil {
		return r.nativeFailed(what, errors.New("this worker's steps run on a copy of the workspace, which artifacts cannot be put into between steps"))
	}
	var ans struct {
		Sets []struct {
			Name  string `json:"name"`
			Job   string `json:"job"`
			Files []struct {
				Path     string  `json:"path"`
				SHA256   string  `json:"sha256"`
				Size     int64   `json:"size"`
				Mode     uint32  `json:"mode"`
				Download *signed `json:"download"`
			} `json:"files"`
			Pending int `json:"pending"`
		} `json:"sets"`
		Missing []string `json:"missing"`
	}
	body := map[string]any{"token": r.j.Lease.Token, "names": names, "pattern": pattern}
	// Another run's artifacts (run-id), which the coordinator gives only of a run of the
	// job's own project; repository, with it, must name the project's repository.
	theRun := "this run"
	if id := strings.TrimSpace(with["run-id"]); id != "" {
		body["run_id"], theRun = id, "run "+id
	}
	if repo := strings.TrimSpace(with["repository"]); repo != "" {
		body["repository"] = repo
	}
	if err := r.a.retryPost(ctx, "/api/v1/agent/jobs/"+r.j.ID+"/artifact-sets", body, &ans); err != nil {
		return r.nativeFailed(what, fmt.Errorf("list the artifacts of %s: %w", theRun, err))
	}
	if len(ans.Missing) > 0 {
		return r.nativeFailed(what, fmt.Errorf("no job of %s kept an artifact named %s", theRun, strings.Join(ans.Missing, ", ")))
	}
	base, err := r.a.baseURL()
	if err != nil {
		return r.nativeFailed(what, err)
	}
	// One set asked for by name goes into path itself, as do several merged.
	flat := len(names) == 1 || inputBool(with["merge-multiple"])
	for _, set := range ans.Sets {
		dir := dest
		if !flat {
			dir = path.Join(dest, set.Name)
		}
		if set.Pending > 0 {
			r.rec.System(fmt.Sprintf("%s: %d %s of %s (job %s) are still being uploaded; not downloaded", what, set.Pending, plural(set.Pending, "file", "files"), set.Name, set.Job))
		}
		for _, f := range set.Files {
			name := path.Join(dir, f.Path)
			if msg := pipeline.CheckArtifactName(name); msg != "" || f.Download == nil {
				return r.nativeFailed(what, fmt.Errorf("artifact %s: file %q %s", set.Name, f.Path, cmp.Or(msg, "has no download URL")))
			}
			if err := insideWorkspace(r.ws, name); err != nil {
				return r.nativeFailed(what, fmt.Errorf("artifact %s: %w", set.Name, err))
			}
			if err := download(ctx, r.a.blobHTTP, base, f.Download.blob(), r.ws, name, f.SHA256, f.Size, fs.FileMode(f.Mode)); err != nil {
				return r.nativeFailed(what, fmt.Errorf("artifact %s: %s: %w", set.Name, f.Path, err))
			}
			r.a.cfg.Metrics.ArtifactDownloaded(f.Size)
		}
		r.rec.System(fmt.Sprintf("%s: artifact %s of job %s: %d %s into %s", what, set.Name, set.Job, len(set.Files), plural(len(set.Files), "file", "files"), pathOrRoot(dir)))
	}
	if len(ans.Sets) == 0 && pattern != "" {
		r.rec.System(fmt.Sprintf("%s: %s has no artifacts matching %s", what, theRun, pattern))
	} else if len(ans.Sets) == 0 {
		r.rec.System(fmt.Sprintf("%s: %s has no artifacts to download", what, theRun))
	}
	return stepRun{outputs: map[string]string{"download-path": path.Join(r.stepWS, dest)}}
}
