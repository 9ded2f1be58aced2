package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"sync"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

// fileWorkflows reads the reusable workflows a workflow file on disk calls, for gantry
// validate, plan, convert and run: those of its own repository from the working tree the
// file lies in (as the file itself is read), those of other repositories from the actions
// source when there is a resolver, and none otherwise.
type fileWorkflows struct {
	ctx  context.Context
	root string // the repository's top directory, found on first use
	from string // the file calling, as the command line gave it
	// remote reads other repositories' workflows; nil leaves them unread
	// (pipeline.ErrWorkflowNotRead), or refuses them when refuse says why.
	remote  *actions.Resolver
	refuse  string
	maxRead int64

	mu sync.Mutex
	// read are the files read, by the name errors give them (pipeline.Error.File), so a
	// report can show their lines; skipped are the remote ones left unread.
	read    map[string]source
	skipped []string
	rootErr error
	found   bool
}

func (a *app) workflowsOf(ctx context.Context, src source, remote *actions.Resolver) *fileWorkflows {
	return &fileWorkflows{ctx: ctx, from: src.name, remote: remote, maxRead: a.maxRead, read: map[string]source{}}
}

// repoRoot is the top of the repository the calling file lies in: the directory above
// its .github/workflows, else the git work tree it is in, else its directory (standard
// input: the working directory's).
func (w *fileWorkflows) repoRoot() (string, error) {
	if w.found {
		return w.root, w.rootErr
	}
	w.found = true
	p := filepath.ToSlash(w.from)
	if w.from == stdinName {
		p = "./-"
	}
	if i := strings.LastIndex("/"+p, "/.github/workflows/"); i >= 0 {
		w.root = filepath.FromSlash(p[:i])
		if w.root == "" {
			w.root = "."
		}
		return w.root, nil
	}
	dir := filepath.Dir(filepath.FromSlash(p))
	top, err := gitTopLevel(w.ctx, dir)
	switch {
	case err != nil:
		w.rootErr = err
	case top != "":
		w.root = top
	default:
		w.root = dir
	}
	return w.root, w.rootErr
}

func (w *fileWorkflows) LocalWorkflow(file string) ([]byte, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	root, err := w.repoRoot()
	if err != nil {
		return nil, fmt.Errorf("find the repository of %s: %w", w.from, err)
	}
	p := filepath.Join(root, filepath.FromSlash(file))
	data, err := readFile(p, w.maxRead)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("there is no %s", p)
	}
	if err != nil {
		return nil, err
	}
	w.read[file] = source{name: p, data: data}
	return data, nil
}

func (w *fileWorkflows) RemoteWorkflow(owner, repo, file, ref string) ([]byte, string, error) {
	name := owner + "/" + repo + "/" + file + "@" + ref
	if w.remote == nil {
		if w.refuse != "" {
			return nil, "", errors.New(w.refuse)
		}
		w.mu.Lock()
		w.skipped = append(w.skipped, name)
		w.mu.Unlock()
		return nil, "", fmt.Errorf("%s: %w", name, pipeline.ErrWorkflowNotRead)
	}
	data, commit, err := w.remote.ReadWorkflow(w.ctx, owner, repo, file, ref)
	if err != nil {
		return nil, "", err
	}
	w.mu.Lock()
	w.read[name] = source{name: name, data: data}
	w.mu.Unlock()
	return data, commit, nil
}

// sourceOf is the source an error is in: the file compiled, or a workflow it calls.
func (w *fileWorkflows) sourceOf(top source, e *pipeline.Error) source {
	if e.File == "" {
		return top
	}
	if w != nil {
		w.mu.Lock()
		defer w.mu.Unlock()
		if s, ok := w.read[e.File]; ok {
			return s
		}
	}
	return source{name: e.File}
}

// skippedWarnings says which reusable workflows of other repositories were not read,
// so the report does not pass for more than it checked.
func (w *fileWorkflows) skippedWarnings(how string) []validateWarning {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []validateWarning
	seen := map[string]bool{}
	for _, name := range w.skipped {
		if !seen[name] {
			seen[name] = true
			out = append(out, validateWarning{message: fmt.Sprintf("the reusable workflow %s was not read (%s): only the jobs calling it were checked", name, how)})
		}
	}
	return out
}
