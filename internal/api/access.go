package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// accessKind is how a route decides who may call it.
type accessKind int

const (
	accessPublic  accessKind = iota // no credentials
	accessRoles                     // tokens of the listed server roles
	accessGlobal                    // tokens whose role holds on every project (Token.Global)
	accessUsers                     // any user's token; the handler checks the project it names, or lists only visible ones
	accessProject                   // a role on the project of the thing the path names
)

// access is who may call a route.
type access struct {
	kind  accessKind
	roles []store.Role // accessRoles
	need  store.Role   // accessProject: the least role on the thing's project
	thing thing        // accessProject: what the path names
}

// thing is a kind of project-owned thing a path can name.
type thing string

// Things a path names. The project of each is looked up before the handler runs.
const (
	thingRun      thing = "run"      // {id}
	thingJob      thing = "job"      // {id}
	thingArtifact thing = "artifact" // {id}
	thingWorkflow thing = "workflow" // {id}
	thingProject  thing = "project"  // {name}
)

var (
	public      = access{kind: accessPublic}
	admins      = access{kind: accessRoles, roles: []store.Role{store.RoleAdmin}}
	registrars  = access{kind: accessRoles, roles: []store.Role{store.RoleRegister, store.RoleAdmin}}
	agentAccess = access{kind: accessRoles, roles: []store.Role{store.RoleAgent}}
	// globalReaders read what is not any one project's (workers, statistics, metrics),
	// which shows every project's load: only tokens that see every project do.
	globalReaders = access{kind: accessGlobal}
	users         = access{kind: accessUsers}
)

// on is access to a route whose path names a project-owned thing: need on its project.
func on(t thing, need store.Role) access {
	return access{kind: accessProject, need: need, thing: t}
}

// String says who may call, as the route table shows it.
func (a access) String() string {
	switch a.kind {
	case accessPublic:
		return "public"
	case accessRoles:
		s := ""
		for i, r := range a.roles {
			if i > 0 {
				s += ","
			}
			s += string(r)
		}
		return "roles:" + s
	case accessGlobal:
		return "global"
	case accessUsers:
		return "users"
	}
	return fmt.Sprintf("%s:%s", a.thing, a.need)
}

// Route is a registered endpoint and who may call it: Access is "public", "roles:R,...",
// "global" (tokens of every project), "users" (any user token; the handler checks the
// project) or "THING:ROLE" (ROLE on the project of the THING the path names).
type Route struct {
	Pattern string
	Access  string
	// Thing is what the path names, whose project is checked ("" when none).
	Thing string
}

// Routes lists every registered endpoint, for tests that check each one.
func (s *Server) Routes() []Route {
	return slices.Clone(s.routeTable)
}

// allowed checks an authenticated token against a route's access, answering 403 or 404
// itself when it fails.
func (s *Server) allowed(w http.ResponseWriter, r *http.Request, a access, tk *store.Token) bool {
	deny := func() bool {
		writeError(w, http.StatusForbidden, codeForbidden, fmt.Sprintf("a %s token may not do this", tk.Role), nil)
		return false
	}
	switch a.kind {
	case accessRoles:
		if !slices.Contains(a.roles, tk.Role) {
			return deny()
		}
		return true
	case accessGlobal:
		if !tk.Global() {
			writeError(w, http.StatusForbidden, codeForbidden,
				"only a token of every project (admin, or scoped to all projects) may read this", nil)
			return false
		}
		return true
	case accessUsers:
		if tk.Role.ProjectRole() == "" {
			return deny()
		}
		return true
	case accessProject:
		if tk.Role.ProjectRole() == "" {
			return deny()
		}
		if tk.Global() {
			// The role is the same on every project: no need to look the thing up.
			return s.enough(w, store.EffectiveRole(store.Grant{Role: tk.Role, Scope: tk.Projects}), a.need, "")
		}
		pid, name, notFound, ok := s.thingProject(w, r, a.thing)
		if !ok {
			return false
		}
		return s.mayOn(w, r, pid, name, a.need, notFound)
	}
	return deny()
}

// enough answers 403 when role is below need.
func (s *Server) enough(w http.ResponseWriter, role, need store.Role, project string) bool {
	if role.Rank() >= need.Rank() {
		return true
	}
	where := "this project"
	if project != "" {
		where = "project " + project
	}
	writeError(w, http.StatusForbidden, codeForbidden,
		fmt.Sprintf("a %s of %s may not do this: it takes the role %s", role, where, need), nil)
	return false
}

// mayOn checks the caller's role on a project: with none, it answers 404 with notFound,
// exactly as for a thing that does not exist, so that another project's names do not
// leak; with one too low, 403.
func (s *Server) mayOn(w http.ResponseWriter, r *http.Request, projectID uuid.UUID, name string, need store.Role, notFound error) bool {
	role, err := s.roleOn(r.Context(), projectID, name)
	if err != nil {
		s.storeError(w, r, "check access", err)
		return false
	}
	if role == "" {
		s.storeError(w, r, "check access", notFound)
		return false
	}
	return s.enough(w, role, need, name)
}

// mayOnName is mayOn for a project named in a request body. A project that does not exist
// yet may be created on first use (a run, a workflow) by a token whose scope names it
// or every project; to anyone else it does not exist.
func (s *Server) mayOnName(w http.ResponseWriter, r *http.Request, name string, need store.Role) bool {
	c := callerFrom(r.Context())
	if c == nil {
		return true
	}
	if name == "" {
		name = "default"
	}
	notFound := fmt.Errorf("project %q: %w", name, store.ErrNotFound)
	p, err := s.store.GetProjectByName(r.Context(), name)
	if errors.Is(err, store.ErrNotFound) {
		role := store.EffectiveRole(store.Grant{Role: c.tk.Role, Scope: c.tk.Projects, Project: name})
		if role == "" {
			s.storeError(w, r, "check access", notFound)
			return false
		}
		return s.enough(w, role, need, name)
	}
	if err != nil {
		s.storeError(w, r, "get project", err)
		return false
	}
	return s.mayOn(w, r, p.ID, p.Name, need, notFound)
}

// thingProject finds the project of the thing the path names. A thing that does not
// exist is answered 404 here, with the same error a hidden one gets.
func (s *Server) thingProject(w http.ResponseWriter, r *http.Request, t thing) (uuid.UUID, string, error, bool) {
	ctx := r.Context()
	if t == thingProject {
		name, rerr := pathProject(r)
		if rerr != nil {
			writeRequestError(w, rerr)
			return uuid.Nil, "", nil, false
		}
		notFound := fmt.Errorf("project %q: %w", name, store.ErrNotFound)
		p, err := s.store.GetProjectByName(ctx, name)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				err = notFound
			}
			s.storeError(w, r, "get project", err)
			return uuid.Nil, "", nil, false
		}
		return p.ID, p.Name, notFound, true
	}
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return uuid.Nil, "", nil, false
	}
	notFound := fmt.Errorf("%s %s: %w", t, id, store.ErrNotFound)
	var pid uuid.UUID
	var name string
	var err error
	switch t {
	case thingRun:
		var run *store.Run
		if run, err = s.store.GetRun(ctx, id); err == nil {
			pid, name = run.ProjectID, run.Project
		}
	case thingJob:
		var job *store.Job
		if job, err = s.store.GetJob(ctx, id); err == nil {
			pid = job.ProjectID
		}
	case thingArtifact:
		var a *store.Artifact
		if a, err = s.store.GetArtifact(ctx, id); err == nil {
			var job *store.Job
			if job, err = s.store.GetJob(ctx, a.JobID); err == nil {
				pid = job.ProjectID
			}
		}
	case thingWorkflow:
		var wf *store.Workflow
		if wf, err = s.store.GetWorkflow(ctx, id); err == nil {
			pid, name = wf.ProjectID, wf.Project
		}
	default:
		err = fmt.Errorf("no project lookup for %q", t)
	}
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			err = notFound
		}
		s.storeError(w, r, "get "+string(t), err)
		return uuid.Nil, "", nil, false
	}
	return pid, name, notFound, true
}

type callerKey struct{}

// caller is the token of a request with what it may do where, read from the store once
// per request when first needed (never kept longer, so a membership or a revocation
// holds from the next request on).
type caller struct {
	tk *store.Token

	mu     sync.Mutex
	loaded bool
	scope  map[uuid.UUID]string     // a token scoped to named projects: their ids and names
	member map[uuid.UUID]store.Role // a token that follows its user: the user's memberships
}

func callerFrom(ctx context.Context) *caller {
	c, _ := ctx.Value(callerKey{}).(*caller)
	return c
}

// load reads the token's named projects or its user's memberships.
func (c *caller) load(ctx context.Context, st store.Store) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.loaded {
		return nil
	}
	if len(c.tk.Projects) > 0 {
		c.scope = map[uuid.UUID]string{}
		for _, name := range c.tk.Projects {
			p, err := st.GetProjectByName(ctx, name)
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return fmt.Errorf("read the projects of token %s: %w", c.tk.ID, err)
			}
			c.scope[p.ID] = p.Name
		}
	} else {
		ms, err := st.Memberships(ctx, c.tk.Principal())
		if err != nil {
			return fmt.Errorf("read the memberships of %s: %w", c.tk.Principal(), err)
		}
		c.member = make(map[uuid.UUID]store.Role, len(ms))
		for _, m := range ms {
			c.member[m.ProjectID] = m.Role
		}
	}
	c.loaded = true
	return nil
}

// roleOn is the caller's role on a project (EffectiveRole): admin with auth off, "" for
// a project the caller may not see. name may be "" when the caller does not know it.
func (s *Server) roleOn(ctx context.Context, projectID uuid.UUID, name string) (store.Role, error) {
	c := callerFrom(ctx)
	if c == nil {
		return store.RoleAdmin, nil
	}
	tk := c.tk
	if tk.Global() {
		return store.EffectiveRole(store.Grant{Role: tk.Role, Scope: tk.Projects}), nil
	}
	if err := c.load(ctx, s.store); err != nil {
		return "", err
	}
	g := store.Grant{Role: tk.Role, Scope: tk.Projects, Project: name}
	if len(tk.Projects) > 0 {
		n, ok := c.scope[projectID]
		if !ok {
			return "", nil
		}
		g.Project = n
	} else {
		g.Member = c.member[projectID]
	}
	return store.EffectiveRole(g), nil
}

// visibleProjects is the set of projects the caller may see; all is true when that is
// every project (auth off, or a global token), and ids is then nil.
func (s *Server) visibleProjects(ctx context.Context) (ids []uuid.UUID, all bool, err error) {
	c := callerFrom(ctx)
	if c == nil || c.tk.Global() {
		return nil, true, nil
	}
	if err := c.load(ctx, s.store); err != nil {
		return nil, false, err
	}
	ids = []uuid.UUID{}
	for id, name := range c.scope {
		if store.EffectiveRole(store.Grant{Role: c.tk.Role, Scope: c.tk.Projects, Project: name}) != "" {
			ids = append(ids, id)
		}
	}
	for id, role := range c.member {
		if store.EffectiveRole(store.Grant{Role: c.tk.Role, Member: role}) != "" {
			ids = append(ids, id)
		}
	}
	slices.SortFunc(ids, func(a, b uuid.UUID) int { return slices.Compare(a[:], b[:]) })
	return ids, false, nil
}

// canSee reports whether the caller may see a project (for filtering listings).
func (s *Server) canSee(ctx context.Context, projectID uuid.UUID, name string) (bool, error) {
	role, err := s.roleOn(ctx, projectID, name)
	return role != "", err
}

// adminOnlyChange refuses a maintainer's change to the project settings that reach the
// coordinator's own files and network: the repository URL (which the coordinator fetches,
// file:// included), and the forge API's base URL and token file (a file on the
// coordinator whose content is sent there); and to the project's quotas, its share of
// every project's workers. Only the server admin changes those.
func (s *Server) adminOnlyChange(w http.ResponseWriter, r *http.Request, req *projectRequest, p *store.Project) bool {
	tk := tokenFrom(r.Context())
	if tk == nil || tk.Role == store.RoleAdmin {
		return true
	}
	var fields []string
	if req.RepoURL != nil && *req.RepoURL != p.RepoURL {
		fields = append(fields, "repo_url")
	}
	if req.APIBaseURL != nil && *req.APIBaseURL != p.APIBaseURL {
		fields = append(fields, "api_base_url")
	}
	if req.APITokenFile != nil && *req.APITokenFile != p.APITokenFile {
		fields = append(fields, "api_token_file")
	}
	if req.Provider != nil && *req.Provider != p.Provider {
		fields = append(fields, "provider")
	}
	// Quotas share the server's workers between projects: a project's maintainer must
	// not widen their own share.
	if req.MaxConcurrentJobs != nil && *req.MaxConcurrentJobs != p.MaxConcurrentJobs {
		fields = append(fields, "max_concurrent_jobs")
	}
	if req.FairWeight != nil && *req.FairWeight != p.FairWeight {
		fields = append(fields, "fair_weight")
	}
	if len(fields) == 0 {
		return true
	}
	writeError(w, http.StatusForbidden, codeForbidden,
		fmt.Sprintf("only the server admin changes %v: they reach the coordinator's files and network", fields), nil)
	return false
}
