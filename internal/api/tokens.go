package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

// tokenRoutes registers token management. Secrets are shown once, in the answer that
// creates them; listings never carry a secret or its hash. An admin manages every
// token; a maintainer those of the projects it maintains (tokenManager).
func (s *Server) tokenRoutes() {
	s.handle("GET /api/v1/tokens", users, s.listTokens)
	s.handle("POST /api/v1/tokens", users, s.createToken)
	s.handle("DELETE /api/v1/tokens/{id}", users, s.revokeToken)
}

// tokenManager decides which tokens a caller may make, see and revoke: an admin (or
// anyone with auth off) every token; anyone else the user tokens (viewer, developer or
// maintainer) scoped to named projects that it maintains, all of them. It remembers the
// answer per project for one request.
type tokenManager struct {
	s     *Server
	ctx   context.Context
	admin bool
	roles map[string]bool // project name -> the caller maintains it
}

func (s *Server) tokenManager(ctx context.Context) *tokenManager {
	tk := tokenFrom(ctx)
	return &tokenManager{s: s, ctx: ctx, admin: tk == nil || tk.Role == store.RoleAdmin, roles: map[string]bool{}}
}

// maintains reports whether the caller is a maintainer (or more) of the named project.
func (m *tokenManager) maintains(name string) (bool, error) {
	if ok, seen := m.roles[name]; seen {
		return ok, nil
	}
	p, err := m.s.store.GetProjectByName(m.ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		m.roles[name] = false
		return false, nil
	}
	if err != nil {
		return false, err
	}
	role, err := m.s.roleOn(m.ctx, p.ID, p.Name)
	if err != nil {
		return false, err
	}
	m.roles[name] = role.Rank() >= store.RoleMaintainer.Rank()
	return m.roles[name], nil
}

// may reports whether the caller may manage tk; why says what it lacks when not.
func (m *tokenManager) may(tk *store.Token) (ok bool, why string, err error) {
	if m.admin {
		return true, "", nil
	}
	switch {
	case tk.Role != store.RoleViewer && tk.Role != store.RoleDeveloper && tk.Role != store.RoleMaintainer:
		return false, fmt.Sprintf("a maintainer manages viewer, developer and maintainer tokens of its projects; a %s token is an admin's", tk.Role), nil
	case len(tk.Projects) == 0 || slices.Contains(tk.Projects, store.ScopeAll):
		return false, "a maintainer manages tokens scoped to projects it maintains: name them (projects)", nil
	}
	for _, p := range tk.Projects {
		ok, err := m.maintains(p)
		if err != nil || !ok {
			return false, fmt.Sprintf("you do not maintain project %s", p), err
		}
	}
	return true, "", nil
}

// identify decides whom a new token acts for (store.Token.Principal), which is what
// approvals, self-review and memberships go by: the admin vouches for any user it names;
// a maintainer's tokens act for the maintainer, whatever they are called, so that
// nobody but the admin can make an identity (two approvers out of one person, or the
// admin's name on a maintainer's token). It fills in tk.User, and says why when the
// request names another user.
func (m *tokenManager) identify(tk *store.Token) string {
	if m.admin {
		return ""
	}
	self := tokenFrom(m.ctx).Principal()
	if tk.User != "" && tk.User != self {
		return fmt.Sprintf("only the admin makes tokens for another user: the tokens you make act for you (%s); leave user out or give %q", self, self)
	}
	tk.User = self
	return ""
}

// Scope limits: a register token names a fleet's few labels and projects.
const (
	maxScopeEntries = 100
	maxScopeEntry   = 200
)

type tokenJSON struct {
	ID       string   `json:"id"`
	Name     string   `json:"name"`
	Role     string   `json:"role"`
	Labels   []string `json:"labels"`
	Projects []string `json:"projects"`
	// User is whom the token acts for (its name when it was given none); Scope says in
	// words which projects it reaches.
	User       string `json:"user,omitempty"`
	Scope      string `json:"scope"`
	WorkerID   string `json:"worker_id,omitempty"`
	ParentID   string `json:"parent_id,omitempty"`
	CreatedAt  string `json:"created_at"`
	ExpiresAt  string `json:"expires_at,omitempty"`
	RevokedAt  string `json:"revoked_at,omitempty"`
	LastUsedAt string `json:"last_used_at,omitempty"`
}

func viewToken(tk *store.Token) tokenJSON {
	out := tokenJSON{ID: tk.ID.String(), Name: tk.Name, Role: string(tk.Role), Labels: tk.Labels, Projects: tk.Projects,
		WorkerID: tk.WorkerID, CreatedAt: formatTime(tk.CreatedAt), ExpiresAt: formatTime(tk.ExpiresAt),
		RevokedAt: formatTime(tk.RevokedAt), LastUsedAt: formatTime(tk.LastUsedAt)}
	if out.Labels == nil {
		out.Labels = []string{}
	}
	if out.Projects == nil {
		out.Projects = []string{}
	}
	out.User = tk.Principal()
	out.Scope = tokenScope(tk)
	if tk.ParentID != [16]byte{} {
		out.ParentID = tk.ParentID.String()
	}
	return out
}

func (s *Server) listTokens(w http.ResponseWriter, r *http.Request) {
	agents := false
	switch v := r.URL.Query().Get("agents"); v {
	case "", "false":
	case "true":
		agents = true
	default:
		writeError(w, http.StatusBadRequest, codeBadRequest, fmt.Sprintf("agents=%q: want true or false", v), nil)
		return
	}
	tks, err := s.store.ListTokens(r.Context(), store.ListTokensParams{Agents: agents})
	if err != nil {
		s.storeError(w, r, "list tokens", err)
		return
	}
	m := s.tokenManager(r.Context())
	out := make([]tokenJSON, 0, len(tks))
	for _, tk := range tks {
		ok, _, err := m.may(tk)
		if err != nil {
			s.storeError(w, r, "list tokens", err)
			return
		}
		if ok {
			out = append(out, viewToken(tk))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"tokens": out})
}

type createTokenRequest struct {
	Name string `json:"name"`
	// User is whom the token acts for, matched against project members and approvers;
	// empty: the name.
	User     string   `json:"user"`
	Role     string   `json:"role"`
	Labels   []string `json:"labels"`
	Projects []string `json:"projects"`
	// ExpiresIn is how long the token lasts, as a duration ("720h"); empty: forever.
	ExpiresIn string `json:"expires_in"`
}

type createTokenResponse struct {
	tokenJSON
	// Token is the secret, shown this once.
	Token string `json:"token"`
}

func (s *Server) createToken(w http.ResponseWriter, r *http.Request) {
	var req createTokenRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	tk, msg := s.tokenFromRequest(req)
	if msg != "" {
		writeError(w, http.StatusBadRequest, codeBadRequest, msg, nil)
		return
	}
	m := s.tokenManager(r.Context())
	if ok, why, err := m.may(tk); err != nil {
		s.storeError(w, r, "create token", err)
		return
	} else if !ok {
		writeError(w, http.StatusForbidden, codeForbidden, why, nil)
		return
	}
	if why := m.identify(tk); why != "" {
		writeError(w, http.StatusForbidden, codeForbidden, why, nil)
		return
	}
	// The id is chosen here so that the audit entry, written with the token, names it.
	tk.ID = store.NewID()
	ctx := withAudit(r, auditEvent{Action: "token.created", Target: tk.ID.String(), Details: tokenAuditDetails(tk)})
	secret, err := IssueScopedToken(ctx, s.store, tk)
	if err != nil {
		s.storeError(w, r, "create token", err)
		return
	}
	writeJSON(w, http.StatusCreated, createTokenResponse{tokenJSON: viewToken(tk), Token: secret})
}

// tokenFromRequest validates a create request; the message says what is wrong.
func (s *Server) tokenFromRequest(req createTokenRequest) (*store.Token, string) {
	if req.Name == "" || len(req.Name) > 200 {
		return nil, "name is required (at most 200 bytes): say what the token is for"
	}
	if len(req.User) > store.MaxPrincipal || strings.TrimSpace(req.User) != req.User || strings.ContainsAny(req.User, "\x00\r\n") {
		return nil, fmt.Sprintf("user %q: want a name of at most %d bytes without spaces around it or control characters",
			req.User, store.MaxPrincipal)
	}
	tk := &store.Token{Name: req.Name, User: req.User, Role: store.Role(req.Role)}
	switch tk.Role {
	case store.RoleAdmin, store.RoleMaintainer, store.RoleDeveloper, store.RoleViewer, store.RoleWrite, store.RoleRead, store.RoleRegister:
	case "":
		return nil, "role is required: admin, maintainer, developer, viewer or register (write and read are developer and viewer of every project)"
	default:
		// Worker credentials are only ever issued by registering.
		return nil, fmt.Sprintf("role %q: want admin, maintainer, developer, viewer or register (or write, read)", req.Role)
	}
	if len(req.Labels) > 0 && tk.Role != store.RoleRegister {
		return nil, "labels scope register tokens only"
	}
	if len(req.Projects) > 0 && tk.Role == store.RoleAdmin {
		return nil, "an admin token is the server's: it cannot be scoped to projects (give maintainer for a project's)"
	}
	if tk.Role != store.RoleRegister {
		// "all" (or "*") is every project, present and future; no projects at all is the
		// projects the user is a member of.
		for i, p := range req.Projects {
			if p == "all" || p == store.ScopeAll {
				if len(req.Projects) > 1 {
					return nil, "projects: all stands alone; it already names every project"
				}
				req.Projects[i] = store.ScopeAll
			}
		}
	}
	var msg string
	if tk.Labels, msg = scopeList("labels", req.Labels); msg != "" {
		return nil, msg
	}
	if tk.Projects, msg = scopeList("projects", req.Projects); msg != "" {
		return nil, msg
	}
	if req.ExpiresIn != "" {
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d <= 0 {
			return nil, fmt.Sprintf("expires_in %q: want a positive duration such as 720h", req.ExpiresIn)
		}
		tk.ExpiresAt = s.clock.Now().Add(d)
	}
	return tk, ""
}

// scopeList checks a token's labels or projects: a few plain names.
func scopeList(field string, l []string) ([]string, string) {
	if len(l) > maxScopeEntries {
		return nil, fmt.Sprintf("%s: at most %d", field, maxScopeEntries)
	}
	for i, v := range l {
		if v == "" || len(v) > maxScopeEntry || strings.ContainsAny(v, ",\x00\r\n") || strings.TrimSpace(v) != v {
			return nil, fmt.Sprintf("%s[%d] %q: want a name of 1 to %d bytes without commas, spaces around it or control characters",
				field, i, v, maxScopeEntry)
		}
	}
	return l, ""
}

func (s *Server) revokeToken(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if m := s.tokenManager(r.Context()); !m.admin {
		// A token the caller may not manage is answered as one that does not exist.
		tks, err := s.store.ListTokens(r.Context(), store.ListTokensParams{})
		if err != nil {
			s.storeError(w, r, "revoke token", err)
			return
		}
		i := slices.IndexFunc(tks, func(tk *store.Token) bool { return tk.ID == id })
		ok := false
		if i >= 0 {
			if ok, _, err = m.may(tks[i]); err != nil {
				s.storeError(w, r, "revoke token", err)
				return
			}
		}
		if !ok {
			writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no token %s", id), nil)
			return
		}
	}
	if err := s.store.RevokeToken(withAudit(r, auditEvent{Action: "token.revoked", Target: id.String()}), id); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("no token %s", id), nil)
			return
		}
		s.storeError(w, r, "revoke token", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// tokenScope says in words which projects a token reaches.
func tokenScope(tk *store.Token) string {
	switch {
	case tk.Role == store.RoleAgent || tk.Role == store.RoleRegister:
		if len(tk.Projects) == 0 {
			return "jobs of every project"
		}
		return "jobs of " + strings.Join(tk.Projects, ", ")
	case tk.Role == store.RoleAdmin:
		return "server"
	case tk.Global():
		return "all projects"
	case len(tk.Projects) == 0:
		return "projects " + tk.Principal() + " is a member of"
	}
	return strings.Join(tk.Projects, ", ")
}
