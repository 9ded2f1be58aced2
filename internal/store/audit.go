package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
)

// Actors that are not a token: the caller when the server runs without auth, the
// coordinator acting on its own (a timeout, a schedule), and an operator acting on the
// store directly, not through the API (gantry token --db).
const (
	ActorAnonymous = "anonymous"
	ActorSystem    = "system"
	ActorLocal     = "local"
)

// MaxAuditDetails bounds an audit entry's details: a few names and ids, never a payload.
const MaxAuditDetails = 4 << 10

// AuditEntry is one security-relevant action: who did what to what, and from where.
// Entries are only ever appended; nothing updates or deletes one.
type AuditEntry struct {
	ID   uuid.UUID // time-ordered; filled in by the store when zero
	Time time.Time // the store's now; filled in by the store
	// ActorID is the id of the token that made the request; empty for ActorAnonymous
	// and ActorSystem.
	ActorID string
	// Actor is the token's name, ActorAnonymous or ActorSystem.
	Actor string
	// Action is a dotted name: token.created, project.deleted, secret.set, ...
	Action string
	// Project names the project acted on; empty for server-wide actions (tokens).
	Project string
	// Target names what was acted on: a token's id, a project's or a secret's name.
	Target string
	// Details is a small JSON object (at most MaxAuditDetails bytes) of what else
	// matters, such as a new token's role. Never a secret's value.
	Details json.RawMessage
	// RemoteAddr is the address the request came from; empty for ActorSystem.
	RemoteAddr string
}

// Audit keeps the append-only audit log. The database itself refuses to update or delete
// its rows, so not even a bug in Gantry can rewrite history.
//
// An action the store performs records its entry in the same transaction when the
// context carries one (WithAudit): CreateToken, RevokeToken, CreateProject, UpdateProject
// and DeleteProject do, so an action is never done without its entry nor logged without
// being done. Other actions are recorded with AppendAudit once they are done.
type Audit interface {
	// AppendAudit stores e; it fills in ID and Time. ErrInvalid without an action or an
	// actor, or with details that are not one JSON object of at most MaxAuditDetails.
	AppendAudit(ctx context.Context, e *AuditEntry) error
	// ListAudit lists entries newest first.
	ListAudit(ctx context.Context, p ListAuditParams) ([]*AuditEntry, error)
}

// ListAuditParams filter and page ListAudit. Zero values do not filter.
type ListAuditParams struct {
	Project string
	// Action is an action or a prefix of dotted segments: "token" matches token.created
	// and token.revoked, "token.created" only itself.
	Action string
	// Actor matches the actor's name or token id.
	Actor string
	// Target matches what was acted on exactly (a run's id for run.cancelled).
	Target string
	// Since keeps entries at or after it.
	Since time.Time
	// Before pages: only entries whose id sorts before it (ids are time-ordered).
	Before uuid.UUID
	Limit  int // default 50, at most 500
}

// maxAuditValue is the longest a single detail is kept; a longer one is replaced by a note
// of its size.
const maxAuditValue = 512

// AuditDetails encodes details for an entry within MaxAuditDetails. A value too long to
// keep (a token scoped to a hundred labels) is replaced by a note of its size, so a large
// action is recorded rather than refused. Nil or empty details are none.
func AuditDetails(d map[string]any) json.RawMessage {
	if len(d) == 0 {
		return nil
	}
	b, err := json.Marshal(d)
	if err == nil && len(b) <= MaxAuditDetails {
		return b
	}
	short := make(map[string]any, len(d))
	for k, v := range d {
		vb, err := json.Marshal(v)
		switch {
		case err != nil:
			short[k] = "(not recorded: " + err.Error() + ")"
		case len(vb) > maxAuditValue:
			short[k] = fmt.Sprintf("(%d bytes, not recorded)", len(vb))
		default:
			short[k] = v
		}
	}
	if b, err = json.Marshal(short); err != nil || len(b) > MaxAuditDetails {
		return json.RawMessage(fmt.Sprintf(`{"details":"(%d keys, too large to record)"}`, len(d)))
	}
	return b
}

type auditKey struct{}

// WithAudit returns ctx carrying e, for a store call that records it in the transaction
// of the action it performs (see Audit). The entry is who asked and from where: request
// scoped, as the context is, and it passes unchanged through the store's wrappers.
func WithAudit(ctx context.Context, e AuditEntry) context.Context {
	return context.WithValue(ctx, auditKey{}, &e)
}

// AuditFrom returns a copy of the entry ctx carries, or nil.
func AuditFrom(ctx context.Context) *AuditEntry {
	e, _ := ctx.Value(auditKey{}).(*AuditEntry)
	if e == nil {
		return nil
	}
	c := *e
	return &c
}
