package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gantry-ci/gantry/internal/store"
)

// memberRoutes registers a project's members. Everyone who sees the project sees who
// else does; maintainers add, change and remove members, and every change is audited.
func (s *Server) memberRoutes() {
	s.handle("GET /api/v1/projects/{name}/members", on(thingProject, store.RoleViewer), s.listMembers)
	s.handle("PUT /api/v1/projects/{name}/members/{user}", on(thingProject, store.RoleMaintainer), s.putMember)
	s.handle("DELETE /api/v1/projects/{name}/members/{user}", on(thingProject, store.RoleMaintainer), s.deleteMember)
}

type memberJSON struct {
	Project   string `json:"project"`
	User      string `json:"user"`
	Role      string `json:"role"`
	CreatedAt string `json:"created_at"`
	UpdatedAt string `json:"updated_at"`
}

func newMemberJSON(m *store.Member) memberJSON {
	return memberJSON{Project: m.Project, User: m.Principal, Role: string(m.Role),
		CreatedAt: formatTime(m.CreatedAt), UpdatedAt: formatTime(m.UpdatedAt)}
}

func (s *Server) listMembers(w http.ResponseWriter, r *http.Request) {
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	list, err := s.store.ListMembers(r.Context(), p.ID)
	if err != nil {
		s.storeError(w, r, "list members", err)
		return
	}
	out := make([]memberJSON, len(list))
	for i, m := range list {
		out[i] = newMemberJSON(m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"members": out})
}

// pathUser reads and checks the {user} path value.
func pathUser(r *http.Request) (string, *requestError) {
	u := r.PathValue("user")
	if u == "" || len(u) > store.MaxPrincipal || strings.TrimSpace(u) != u || strings.ContainsAny(u, "\x00\r\n") {
		return "", badRequest("user %q: want a name of 1 to %d bytes without spaces around it or control characters", u, store.MaxPrincipal)
	}
	return u, nil
}

type putMemberRequest struct {
	Role string `json:"role"`
}

func (s *Server) putMember(w http.ResponseWriter, r *http.Request) {
	user, rerr := pathUser(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	var req putMemberRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	role := store.Role(req.Role)
	if !role.IsMemberRole() {
		writeRequestError(w, badRequest("role %q: want viewer, developer or maintainer", req.Role))
		return
	}
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	members, err := s.store.ListMembers(r.Context(), p.ID)
	if err != nil {
		s.storeError(w, r, "list members", err)
		return
	}
	ev := auditEvent{Action: "member.added", Project: p.Name, Target: user, Details: map[string]any{"role": string(role)}}
	status := http.StatusCreated
	for _, m := range members {
		if m.Principal == user {
			ev.Action, status = "member.role_changed", http.StatusOK
			ev.Details["previous_role"] = string(m.Role)
		}
	}
	m := &store.Member{ProjectID: p.ID, Principal: user, Role: role}
	if err := s.store.PutMember(withAudit(r, ev), m); err != nil {
		s.storeError(w, r, "put member", err)
		return
	}
	writeJSON(w, status, newMemberJSON(m))
}

func (s *Server) deleteMember(w http.ResponseWriter, r *http.Request) {
	user, rerr := pathUser(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	err := s.store.DeleteMember(withAudit(r, auditEvent{Action: "member.removed", Project: p.Name, Target: user}), p.ID, user)
	if errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusNotFound, codeNotFound, fmt.Sprintf("%s is not a member of project %s", user, p.Name), nil)
		return
	}
	if err != nil {
		s.storeError(w, r, "remove member", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
