package actions

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source"
)

// ReadWorkflow reads file (.github/workflows/build.yml) of the repository owner/repo at
// ref from the source, through the mirror cache actions are fetched through, and returns
// it with the commit ref named: a reusable workflow another repository's workflow calls.
// A ref is resolved again once it is older than Fresh; a commit id is resolved once.
func (r *Resolver) ReadWorkflow(ctx context.Context, owner, repo, file, ref string) ([]byte, string, error) {
	url := r.Source.URL(owner, repo)
	data, sha, err := r.readWorkflow(ctx, url, file, ref)
	if err != nil {
		return nil, "", fmt.Errorf("%s/%s@%s could not be resolved from %s: %w", owner, repo, ref, redact(url), err)
	}
	return data, sha, nil
}

func (r *Resolver) readWorkflow(ctx context.Context, url, file, ref string) ([]byte, string, error) {
	m, err := source.Open(ctx, source.Config{Dir: r.MirrorsDir, URL: url, Logger: r.Logger})
	if err != nil {
		return nil, "", err
	}
	defer m.Close()
	sha, err := r.resolveRef(ctx, m, url, ref)
	if err != nil {
		return nil, "", err
	}
	data, err := m.ReadFile(ctx, sha, file)
	if errors.Is(err, source.ErrNotFound) {
		return nil, "", fmt.Errorf("there is no %s at %s", file, sha[:min(12, len(sha))])
	}
	if err != nil {
		return nil, "", err
	}
	return data, sha, nil
}

// resolveRef resolves ref in the mirror m of url, or answers from the cache while the
// answer is fresh.
func (r *Resolver) resolveRef(ctx context.Context, m *source.Mirror, url, ref string) (string, error) {
	fresh := r.Fresh
	if fresh <= 0 {
		fresh = 30 * time.Second
	}
	key := url + "\x00" + ref
	r.mu.Lock()
	c, ok := r.refs[key]
	r.mu.Unlock()
	if ok && (time.Since(c.at) < fresh || strings.EqualFold(c.sha, ref)) {
		return c.sha, nil
	}
	resolved, err := m.ResolveRef(ctx, ref)
	if errors.Is(err, source.ErrNotFound) {
		return "", fmt.Errorf("the repository has no branch, tag or commit %q", ref)
	}
	if err != nil {
		return "", err
	}
	r.mu.Lock()
	if r.refs == nil {
		r.refs = map[string]cachedRef{}
	}
	r.refs[key] = cachedRef{sha: resolved.SHA, at: time.Now()}
	r.mu.Unlock()
	return resolved.SHA, nil
}

type cachedRef struct {
	sha string
	at  time.Time
}

// Workflows is the pipeline.WorkflowLoader of one compile: the workflows of the calling
// repository are read by local (at the commit the calling workflow was read at; nil when
// the definition has no repository), those of other repositories from the source, under
// ctx.
func (r *Resolver) Workflows(ctx context.Context, local func(file string) ([]byte, error)) pipeline.WorkflowLoader {
	return &workflowLoader{ctx: ctx, r: r, local: local}
}

// workflowLoader keeps the context of the compile it serves: pipeline.Compile does no
// I/O of its own and takes none.
type workflowLoader struct {
	ctx   context.Context
	r     *Resolver
	local func(file string) ([]byte, error)
}

// ErrNoRepository is what a loader made without a way to read the calling repository
// answers for a workflow of that repository.
var ErrNoRepository = errors.New("the definition was not read from a repository, so there is none to read it from: a workflow of the same repository is called from a project's pipeline file, or with gantry run and gantry validate")

func (w *workflowLoader) LocalWorkflow(file string) ([]byte, error) {
	if w.local == nil {
		return nil, ErrNoRepository
	}
	return w.local(file)
}

func (w *workflowLoader) RemoteWorkflow(owner, repo, file, ref string) ([]byte, string, error) {
	return w.r.ReadWorkflow(w.ctx, owner, repo, file, ref)
}
