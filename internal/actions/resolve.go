package actions

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source"
)

// DefaultSource is where actions come from unless the server is told otherwise.
const DefaultSource = "https://github.com/{owner}/{repo}"

// MaxDepth bounds how deep composite actions may use other actions, as GitHub does.
const MaxDepth = 10

// Source is where an action's repository is found: a URL template with {owner} and
// {repo}, or a local directory of bare repositories laid out as owner/repo.git (or
// owner/repo).
type Source struct {
	template string
	dir      string
}

// ParseSource reads the --actions-source setting: "" is DefaultSource; a URL with
// {owner} and {repo} is used as it is; any other URL is a base under which owner/repo
// lives (a Gitea or Forgejo mirror: https://git.example.com/mirrors); an absolute path
// is a directory of bare repositories.
func ParseSource(s string) (Source, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Source{template: DefaultSource}, nil
	case filepath.IsAbs(s):
		fi, err := os.Stat(s)
		if err != nil {
			return Source{}, fmt.Errorf("actions source %s: %w", s, err)
		}
		if !fi.IsDir() {
			return Source{}, fmt.Errorf("actions source %s: not a directory", s)
		}
		return Source{dir: filepath.Clean(s)}, nil
	}
	u, err := url.Parse(strings.NewReplacer("{owner}", "owner", "{repo}", "repo").Replace(s))
	if err != nil || u.Scheme == "" || u.Host == "" && u.Scheme != "file" {
		return Source{}, fmt.Errorf("actions source %q: expected a URL (https://host/{owner}/{repo}, or a base URL) or an absolute directory", s)
	}
	switch u.Scheme {
	case "https", "http", "ssh", "git", "file":
	default:
		return Source{}, fmt.Errorf("actions source %q: scheme %s is not one git fetches from (https, http, ssh, git, file)", s, u.Scheme)
	}
	if !strings.Contains(s, "{owner}") || !strings.Contains(s, "{repo}") {
		s = strings.TrimSuffix(s, "/") + "/{owner}/{repo}"
	}
	return Source{template: s}, nil
}

// String is the source as the setting gives it, for messages.
func (s Source) String() string {
	if s.dir != "" {
		return s.dir
	}
	return s.template
}

// URL is the repository of owner/repo in the source.
func (s Source) URL(owner, repo string) string {
	if s.dir != "" {
		p := filepath.Join(s.dir, owner, repo+".git")
		if _, err := os.Stat(p); err != nil {
			p = filepath.Join(s.dir, owner, repo)
		}
		return (&url.URL{Scheme: "file", Path: filepath.ToSlash(p)}).String()
	}
	return strings.NewReplacer("{owner}", owner, "{repo}", repo).Replace(s.template)
}

// Resolved is an action found in the source: where it is, the commit its ref named, and
// its metadata.
type Resolved struct {
	Uses pipeline.Uses
	Pin  pipeline.ActionPin
	Meta *Metadata
}

// Resolver finds actions in a source through a mirror cache (the one checkouts use).
// It is safe for concurrent use.
type Resolver struct {
	Source     Source
	MirrorsDir string
	Logger     *slog.Logger
	// Fresh is how long a ref resolved stays resolved before the source is asked
	// again; 30 seconds when zero. A commit id is resolved once.
	Fresh time.Duration

	mu    sync.Mutex
	cache map[string]cached
	refs  map[string]cachedRef // the commits refs of workflows' repositories named (workflows.go)
}

type cached struct {
	r  *Resolved
	at time.Time
}

// ErrNotAction says that a repository's directory holds no action.yml.
var ErrNotAction = errors.New("no action.yml or action.yaml")

// Resolve finds the action a uses: text names (owner/repo[/dir]@ref) and reads its
// metadata at the commit its ref names.
func (r *Resolver) Resolve(ctx context.Context, uses string) (*Resolved, error) {
	u, err := pipeline.ParseUses(uses)
	if err != nil {
		return nil, err
	}
	if u.Kind != pipeline.UsesRepository {
		return nil, fmt.Errorf("uses %q: only a repository's action is resolved from the source", uses)
	}
	fresh := r.Fresh
	if fresh <= 0 {
		fresh = 30 * time.Second
	}
	r.mu.Lock()
	c, ok := r.cache[uses]
	r.mu.Unlock()
	if ok && (time.Since(c.at) < fresh || strings.EqualFold(c.r.Pin.Commit, u.Ref)) {
		return c.r, nil
	}
	pin := pipeline.ActionPin{URL: r.Source.URL(u.Owner, u.Repo)}
	res, err := r.resolve(ctx, u, pin)
	if err != nil {
		return nil, fmt.Errorf("action %s could not be resolved from %s: %w", uses, redact(pin.URL), err)
	}
	r.mu.Lock()
	if r.cache == nil {
		r.cache = map[string]cached{}
	}
	r.cache[uses] = cached{r: res, at: time.Now()}
	r.mu.Unlock()
	return res, nil
}

func (r *Resolver) resolve(ctx context.Context, u pipeline.Uses, pin pipeline.ActionPin) (*Resolved, error) {
	m, err := source.Open(ctx, source.Config{Dir: r.MirrorsDir, URL: pin.URL, Logger: r.Logger})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	ref, err := m.ResolveRef(ctx, u.Ref)
	if err != nil {
		if errors.Is(err, source.ErrNotFound) {
			return nil, fmt.Errorf("the repository has no branch, tag or commit %q", u.Ref)
		}
		return nil, err
	}
	pin.Commit = ref.SHA
	meta, err := ReadMetadata(ctx, m, ref.SHA, u.Dir)
	if err != nil {
		return nil, err
	}
	return &Resolved{Uses: u, Pin: pin, Meta: meta}, nil
}

// ReadMetadata reads the action.yml (or action.yaml) of directory dir at commit sha.
func ReadMetadata(ctx context.Context, m *source.Mirror, sha, dir string) (*Metadata, error) {
	for _, name := range []string{"action.yml", "action.yaml"} {
		data, err := m.ReadFile(ctx, sha, path.Join(dir, name))
		if errors.Is(err, source.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		return ParseMetadata(data)
	}
	where := "the repository's root"
	if dir != "" {
		where = dir
	}
	return nil, fmt.Errorf("%s at %s has %w", where, sha[:min(12, len(sha))], ErrNotAction)
}

// Uses says whether any step of the plan uses an action of a repository, which Pin
// resolves.
func Uses(plan *pipeline.Plan) bool {
	pinned := func(uses string) bool {
		u, err := pipeline.ParseUses(uses)
		return uses != "" && err == nil && u.Kind == pipeline.UsesRepository && !u.NativeStep()
	}
	for _, j := range plan.Jobs {
		for _, st := range j.Steps {
			if pinned(st.Uses) {
				return true
			}
		}
		if j.DynamicMatrix != nil && slices.ContainsFunc(j.DynamicMatrix.Uses, pinned) {
			return true
		}
	}
	return false
}

// Pin resolves every action the plan's steps use, and those their composite actions
// use in turn, and returns a copy of the plan with each one's repository and commit on
// its step (pipeline.Step.Actions), so every attempt of the run's jobs runs the same
// code; plan itself is not changed. Actions of the workspace (./dir) and docker://
// steps are not pinned: the run's commit and the image name them.
func (r *Resolver) Pin(ctx context.Context, plan *pipeline.Plan) (*pipeline.Plan, error) {
	if !Uses(plan) {
		return plan, nil
	}
	out := *plan
	out.Jobs = make([]*pipeline.Job, len(plan.Jobs))
	for k, j := range plan.Jobs {
		jc := *j
		jc.Steps = append([]pipeline.Step(nil), j.Steps...)
		out.Jobs[k] = &jc
		if dm := j.DynamicMatrix; dm != nil {
			// A placeholder's instances are made later, from the actions pinned now.
			dc := *dm
			dc.Pins, dc.Docker = nil, nil
			pins := map[string]pipeline.ActionPin{}
			for _, uses := range dm.Uses {
				docker, err := r.pinTree(ctx, uses, pins, 0)
				if err != nil {
					return nil, fmt.Errorf("job %s: %w", j.Key, err)
				}
				if docker {
					dc.Docker = append(dc.Docker, uses)
				}
			}
			if len(pins) > 0 {
				dc.Pins = pins
			}
			jc.DynamicMatrix = &dc
		}
		for i := range jc.Steps {
			st := &jc.Steps[i]
			if st.Uses == "" {
				continue
			}
			pins := map[string]pipeline.ActionPin{}
			docker, err := r.pinTree(ctx, st.Uses, pins, 0)
			if err != nil {
				return nil, fmt.Errorf("job %s, step %s: %w", j.Key, st.Name, err)
			}
			if docker && !slices.Contains(jc.RunsOn, pipeline.DockerLabel) {
				// A docker action runs in a container of its own: only a worker with the
				// docker executor can run it.
				jc.RunsOn = append(slices.Clip(jc.RunsOn), pipeline.DockerLabel)
			}
			st.Actions = nil
			if len(pins) > 0 {
				st.Actions = pins
			}
		}
	}
	return &out, nil
}

// pinTree pins uses and the actions it uses in turn, and says whether any of them runs
// in a container (a docker action, a docker:// step).
func (r *Resolver) pinTree(ctx context.Context, uses string, pins map[string]pipeline.ActionPin, depth int) (bool, error) {
	if _, done := pins[uses]; done {
		return false, nil
	}
	u, err := pipeline.ParseUses(uses)
	if err != nil {
		return false, err
	}
	if u.Kind == pipeline.UsesDocker {
		return true, nil
	}
	if u.Kind != pipeline.UsesRepository || u.NativeStep() {
		return false, nil
	}
	if depth >= MaxDepth {
		return false, fmt.Errorf("action %s: composite actions nest more than %d deep", uses, MaxDepth)
	}
	res, err := r.Resolve(ctx, uses)
	if err != nil {
		return false, err
	}
	pins[uses] = res.Pin
	docker := res.Meta.Runs.IsDocker()
	for _, st := range res.Meta.Runs.Steps {
		if st.Uses == "" || strings.Contains(st.Uses, "${{") {
			continue
		}
		d, err := r.pinTree(ctx, st.Uses, pins, depth+1)
		if err != nil {
			return false, err
		}
		docker = docker || d
	}
	return docker, nil
}

// Check resolves the plan's actions and compares each step's with: against its
// action's inputs: errors for what GitHub would refuse, warnings for what it would
// warn of.
func (r *Resolver) Check(ctx context.Context, plan *pipeline.Plan) (errs []error, warnings []string) {
	for _, j := range plan.Jobs {
		for _, st := range j.Steps {
			u, err := pipeline.ParseUses(st.Uses)
			if st.Uses == "" || err != nil || u.Kind != pipeline.UsesRepository || u.NativeStep() {
				continue
			}
			res, err := r.Resolve(ctx, st.Uses)
			if err != nil {
				errs = append(errs, fmt.Errorf("job %s, step %s: %w", j.Key, st.Name, err))
				continue
			}
			e, w := res.Meta.CheckWith(st.With)
			for _, msg := range e {
				errs = append(errs, fmt.Errorf("job %s, step %s: %s: %s", j.Key, st.Name, st.Uses, msg))
			}
			for _, msg := range w {
				warnings = append(warnings, fmt.Sprintf("job %s, step %s: %s: %s", j.Key, st.Name, st.Uses, msg))
			}
		}
	}
	return errs, warnings
}

// redact hides a password a URL may carry, for messages.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}
