package api

import (
	"crypto/sha256"
	"sync"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// compileCache keeps the plans of definitions compiled lately, by the SHA-256 of the
// definition, so that a definition submitted again (a client that submits the same
// pipeline over and over) is not parsed and checked again. Only a compile that read
// nothing but the definition is kept: one that read a reusable workflow could read
// another version of it next time. Plans are shared, so nothing may change a plan it
// is given (pinning actions copies what it changes). Limits are the server's, the
// same for every compile.
type compileCache struct {
	mu    sync.Mutex
	plans map[[sha256.Size]byte]*pipeline.Plan
}

// maxCachedPlans bounds the cache; when full it starts again empty, which costs a compile
// of each definition still in use.
const maxCachedPlans = 256

func (c *compileCache) get(def []byte) (*pipeline.Plan, [sha256.Size]byte) {
	key := sha256.Sum256(def)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.plans[key], key
}

func (c *compileCache) put(key [sha256.Size]byte, p *pipeline.Plan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.plans == nil || len(c.plans) >= maxCachedPlans {
		c.plans = make(map[[sha256.Size]byte]*pipeline.Plan)
	}
	c.plans[key] = p
}

// watchedLoader passes calls to a WorkflowLoader and notes that there were some.
type watchedLoader struct {
	pipeline.WorkflowLoader
	read bool
}

func (l *watchedLoader) LocalWorkflow(file string) ([]byte, error) {
	l.read = true
	return l.WorkflowLoader.LocalWorkflow(file)
}

func (l *watchedLoader) RemoteWorkflow(owner, repo, file, ref string) ([]byte, string, error) {
	l.read = true
	return l.WorkflowLoader.RemoteWorkflow(owner, repo, file, ref)
}

// compileSubmitted compiles a definition submitted without a repository, through the
// cache.
func (s *Server) compileSubmitted(def []byte, workflows pipeline.WorkflowLoader) (*pipeline.Plan, error) {
	plan, key := s.compiled.get(def)
	if plan != nil {
		return plan, nil
	}
	watched := &watchedLoader{WorkflowLoader: workflows}
	opts := pipeline.Options{Limits: s.limits}
	if workflows != nil {
		opts.Workflows = watched
	}
	plan, err := pipeline.Compile(def, opts)
	if err == nil && !watched.read {
		s.compiled.put(key, plan)
	}
	return plan, err
}
