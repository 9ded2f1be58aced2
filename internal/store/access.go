package store

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Project roles, lowest first. A member of a project holds one of them there; a token
// carries one as the most it may do (see EffectiveRole).
const (
	// RoleViewer reads a project's runs, jobs, logs, artifacts, workflows and settings.
	RoleViewer Role = "viewer"
	// RoleDeveloper also submits, cancels, retries and dispatches runs.
	RoleDeveloper Role = "developer"
	// RoleMaintainer also manages secrets, settings, environments, webhooks and members.
	RoleMaintainer Role = "maintainer"
)

// ScopeAll is the one entry of a token's Projects that stands for every project, as
// against naming some (or none: the projects its user is a member of).
const ScopeAll = "*"

// Rank orders roles by what they allow on a project: 0 for no access (and for the worker
// roles register and agent), then viewer (or read), developer (or write), maintainer,
// admin.
func (r Role) Rank() int {
	switch r {
	case RoleViewer, RoleRead:
		return 1
	case RoleDeveloper, RoleWrite:
		return 2
	case RoleMaintainer:
		return 3
	case RoleAdmin:
		return 4
	}
	return 0
}

// ProjectRole is the project role of the same rank: read is viewer and write developer
// (the roles of before projects had members), register and agent are none ("").
func (r Role) ProjectRole() Role {
	switch r.Rank() {
	case 1:
		return RoleViewer
	case 2:
		return RoleDeveloper
	case 3:
		return RoleMaintainer
	case 4:
		return RoleAdmin
	}
	return ""
}

// IsMemberRole reports whether a project member may hold r: viewer, developer or
// maintainer. Admin is the server's, never a project's.
func (r Role) IsMemberRole() bool {
	return r == RoleViewer || r == RoleDeveloper || r == RoleMaintainer
}

// Grant is what decides a token's role on one project.
type Grant struct {
	// Role is the token's role.
	Role Role
	// Scope is the token's Projects: empty for a token that follows its user's
	// memberships, [ScopeAll] for every project, or project names.
	Scope []string
	// Project is the project's name.
	Project string
	// Member is the role the token's user holds as a member of the project; "" when the
	// user is not a member.
	Member Role
}

// EffectiveRole is the one rule for what a token may do on a project ("" is nothing: the
// project and everything in it do not exist for the token):
//
//   - admin is the server admin: admin everywhere, whatever else is said.
//   - register and agent tokens are workers' and have no role on any project.
//   - A token whose scope names projects has its role on those and none elsewhere, and
//     one scoped to every project (ScopeAll) has its role everywhere. read and write
//     tokens without a scope are scoped to every project, as they were before
//     projects had members.
//   - A token with no scope follows its user's memberships: on a project where the user
//     is a member, the lower of the token's role and the member's; elsewhere none.
//
// Roles are given as project roles: read comes back as viewer and write as developer.
func EffectiveRole(g Grant) Role {
	role := g.Role.ProjectRole()
	switch {
	case role == "":
		return ""
	case role == RoleAdmin:
		return RoleAdmin
	}
	scope := g.Scope
	if len(scope) == 0 && (g.Role == RoleRead || g.Role == RoleWrite) {
		scope = []string{ScopeAll}
	}
	if len(scope) == 0 {
		member := g.Member.ProjectRole()
		if !g.Member.IsMemberRole() {
			return ""
		}
		if member.Rank() < role.Rank() {
			return member
		}
		return role
	}
	for _, p := range scope {
		if p == ScopeAll || p == g.Project {
			return role
		}
	}
	return ""
}

// Global reports whether the token's role holds on every project, present and future:
// the admin, and user tokens scoped to every project (read and write ones without a
// scope included). Server-wide reads (workers, statistics, metrics) are open to these.
func (t *Token) Global() bool {
	switch {
	case t.Role == RoleAdmin:
		return true
	case t.Role.ProjectRole() == "":
		return false
	case len(t.Projects) == 0:
		return t.Role == RoleRead || t.Role == RoleWrite
	}
	for _, p := range t.Projects {
		if p == ScopeAll {
			return true
		}
	}
	return false
}

// Principal is the user a token acts for: its User, or its name when it has none.
func (t *Token) Principal() string {
	if t.User != "" {
		return t.User
	}
	return t.Name
}

// Member is a user's role in a project.
type Member struct {
	ProjectID uuid.UUID
	Project   string // the project's name, filled in by the store
	// Principal is the user: the User (or, without one, the name) of the tokens that act
	// for them.
	Principal string
	Role      Role // viewer, developer or maintainer
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MaxPrincipal is the longest principal accepted, in bytes.
const MaxPrincipal = 200

// Members keeps who is a member of which project, in what role.
type Members interface {
	// PutMember adds m.Principal to the project m.ProjectID with m.Role, or changes the
	// role of a member; it fills in Project, CreatedAt (kept on change) and UpdatedAt, and
	// records the audit entry the context carries (WithAudit) in the same transaction.
	// ErrInvalid for a role that is not a member role or an empty principal; ErrNotFound
	// when the project does not exist.
	PutMember(ctx context.Context, m *Member) error
	// DeleteMember removes a member, recording the context's audit entry with it;
	// ErrNotFound when the principal is not a member of the project.
	DeleteMember(ctx context.Context, projectID uuid.UUID, principal string) error
	// ListMembers lists a project's members by principal.
	ListMembers(ctx context.Context, projectID uuid.UUID) ([]*Member, error)
	// Memberships lists the projects the principal is a member of, by project name.
	Memberships(ctx context.Context, principal string) ([]*Member, error)
}
