package api

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// auditRoutes registers the audit log's reader. Only admins read it: it names every
// token, who used it and from where.
func (s *Server) auditRoutes() {
	s.handle("GET /api/v1/audit", admins, s.listAudit)
}

// auditEvent is what a handler says about a security-relevant action it performs; the
// request says who and from where (auditEntry).
type auditEvent struct {
	// Action is a dotted name: token.created, project.updated, secret.set, ...
	Action string
	// Project names the project acted on; empty for server-wide actions.
	Project string
	// Target names what was acted on: a token's id, a project's or a secret's name.
	Target string
	// Details are a few names and ids worth keeping. Never a secret's value: the log is
	// read by people who must not learn them.
	Details map[string]any
}

// auditEntry builds the entry of an action the request performs: the actor is the token
// that authenticated it (anonymous with auth off), the address its connection's.
func auditEntry(r *http.Request, ev auditEvent) store.AuditEntry {
	e := store.AuditEntry{Actor: store.ActorAnonymous, Action: ev.Action, Project: ev.Project,
		Target: ev.Target, RemoteAddr: r.RemoteAddr}
	if tk := tokenFrom(r.Context()); tk != nil {
		e.ActorID, e.Actor = tk.ID.String(), tk.Name
		if e.Actor == "" {
			e.Actor = tk.ID.String() // an actor is required; a token's id names it too
		}
	}
	e.Details = store.AuditDetails(ev.Details)
	return e
}

// withAudit returns the request's context carrying the entry of ev, for a store call
// that records it in the transaction of the action itself (store.Audit names those), so
// the action and its entry commit together or not at all.
func withAudit(r *http.Request, ev auditEvent) context.Context {
	return store.WithAudit(r.Context(), auditEntry(r, ev))
}

// audit records an action the store does not record itself, once the handler has done
// it. A failure is logged and returned: the caller decides whether the request fails.
func (s *Server) audit(r *http.Request, ev auditEvent) error {
	e := auditEntry(r, ev)
	if err := s.store.AppendAudit(r.Context(), &e); err != nil {
		s.log.ErrorContext(r.Context(), "record audit entry", "action", ev.Action, "project", ev.Project,
			"target", ev.Target, "err", err)
		return fmt.Errorf("record audit entry %s: %w", ev.Action, err)
	}
	return nil
}

// auditJSON is an audit entry as the API shows it.
type auditJSON struct {
	ID         string          `json:"id"`
	Time       string          `json:"time"`
	ActorID    string          `json:"actor_id,omitempty"`
	Actor      string          `json:"actor"`
	Action     string          `json:"action"`
	Project    string          `json:"project,omitempty"`
	Target     string          `json:"target,omitempty"`
	Details    json.RawMessage `json:"details"`
	RemoteAddr string          `json:"remote_addr,omitempty"`
}

func newAuditJSON(e *store.AuditEntry) auditJSON {
	details := e.Details
	if len(details) == 0 {
		details = json.RawMessage("{}")
	}
	return auditJSON{ID: e.ID.String(), Time: formatMicros(e.Time), ActorID: e.ActorID, Actor: e.Actor,
		Action: e.Action, Project: e.Project, Target: e.Target, Details: details, RemoteAddr: e.RemoteAddr}
}

// maxAuditFilter bounds the action and actor filters: names, not documents.
const maxAuditFilter = 200

// validAction reports whether a is a dotted name of lowercase letters, digits and
// underscores, or a prefix of one ending in a dot.
func validAction(a string) bool {
	if a == "" || len(a) > maxAuditFilter || strings.HasPrefix(a, ".") || strings.Contains(a, "..") {
		return false
	}
	return !strings.ContainsFunc(a, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '_' && r != '.'
	})
}

func (s *Server) listAudit(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := store.ListAuditParams{Project: q.Get("project"), Action: q.Get("action"), Actor: q.Get("actor"),
		Target: q.Get("target"), Limit: defaultPageSize}
	if msg := checkProjectName(p.Project); msg != "" {
		writeRequestError(w, badRequest("project filter: %s", msg))
		return
	}
	if p.Action != "" && !validAction(p.Action) {
		writeRequestError(w, badRequest("action filter %q: want an action such as token.created, or a prefix of one such as token", p.Action))
		return
	}
	if len(p.Actor) > maxAuditFilter || strings.ContainsFunc(p.Actor, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		writeRequestError(w, badRequest("actor filter: want a token's name or id of at most %d bytes without control characters", maxAuditFilter))
		return
	}
	if msg := checkFilter(p.Target); msg != "" {
		writeRequestError(w, badRequest("target filter: %s", msg))
		return
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeRequestError(w, badRequest("since %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", v))
			return
		}
		p.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > maxPageSize {
			writeRequestError(w, badRequest("bad limit %q: want an integer from 1 to %d", v, maxPageSize))
			return
		}
		p.Limit = n
	}
	// before is the cursor; cursor is accepted too, as GET /api/v1/runs names it.
	before, cursor := q.Get("before"), q.Get("cursor")
	if before != "" && cursor != "" && before != cursor {
		writeRequestError(w, badRequest("before and cursor are the same parameter; give one"))
		return
	}
	if v := cmp.Or(before, cursor); v != "" {
		id, err := uuid.Parse(v)
		if err != nil {
			writeRequestError(w, badRequest("malformed cursor %q: want the id of an audit entry (next_cursor)", v))
			return
		}
		p.Before = id
	}
	entries, err := s.store.ListAudit(r.Context(), p)
	if err != nil {
		s.storeError(w, r, "list audit", err)
		return
	}
	out := struct {
		Entries    []auditJSON `json:"entries"`
		NextCursor string      `json:"next_cursor"`
	}{Entries: make([]auditJSON, len(entries))}
	for i, e := range entries {
		out.Entries[i] = newAuditJSON(e)
	}
	if len(entries) == p.Limit {
		out.NextCursor = entries[len(entries)-1].ID.String()
	}
	writeJSON(w, http.StatusOK, out)
}

// tokenAuditDetails is what the log keeps of a new token: what it may do, never its
// secret or hash.
func tokenAuditDetails(tk *store.Token) map[string]any {
	d := map[string]any{"name": tk.Name, "role": string(tk.Role)}
	if tk.User != "" {
		d["user"] = tk.User
	}
	if len(tk.Labels) > 0 {
		d["labels"] = tk.Labels
	}
	if len(tk.Projects) > 0 {
		d["projects"] = tk.Projects
	}
	if !tk.ExpiresAt.IsZero() {
		d["expires_at"] = formatTime(tk.ExpiresAt)
	}
	return d
}

// projectAuditDetails names the settings of p that differ from old (every one that is
// set, when old is nil). Only names: a repository URL may carry a token as its user, and
// the webhook secret is a secret.
func projectAuditDetails(old, p *store.Project) map[string]any {
	if old == nil {
		old = &store.Project{}
	}
	var changed []string
	for _, f := range []struct {
		name     string
		old, new string
	}{
		{"repo_url", old.RepoURL, p.RepoURL},
		{"provider", old.Provider, p.Provider},
		{"pipeline_path", old.PipelinePath, p.PipelinePath},
		{"default_branch", old.DefaultBranch, p.DefaultBranch},
		{"api_base_url", old.APIBaseURL, p.APIBaseURL},
		{"api_token_file", old.APITokenFile, p.APITokenFile},
		{"webhook_secret", webhookSecretMark(old), webhookSecretMark(p)},
		{"repo_token_secret", old.RepoTokenSecret, p.RepoTokenSecret},
		{"repo_token_user", old.RepoTokenUser, p.RepoTokenUser},
		{"repo_ssh_key_secret", old.RepoSSHKeySecret, p.RepoSSHKeySecret},
		{"repo_known_hosts_secret", old.RepoKnownHostsSecret, p.RepoKnownHostsSecret},
		{"commit_statuses", old.CommitStatuses, p.CommitStatuses},
		{"github_token_secret", old.GitHubTokenSecret, p.GitHubTokenSecret},
	} {
		if f.old != f.new {
			changed = append(changed, f.name)
		}
	}
	// The quota is not secret: its values are recorded with the change.
	details := map[string]any{}
	if old.MaxConcurrentJobs != p.MaxConcurrentJobs {
		changed = append(changed, "max_concurrent_jobs")
		details["max_concurrent_jobs"] = p.MaxConcurrentJobs
	}
	if max(old.FairWeight, store.DefaultFairWeight) != max(p.FairWeight, store.DefaultFairWeight) {
		changed = append(changed, "fair_weight")
		details["fair_weight"] = max(p.FairWeight, store.DefaultFairWeight)
	}
	if changed == nil {
		changed = []string{}
	}
	details["changed"] = changed
	return details
}

// webhookSecretMark stands for a project's webhook secret in a comparison: it changes
// when the secret does, and a sealed secret's never equals a plain one's.
func webhookSecretMark(p *store.Project) string {
	if p.WebhookSecretSealed.IsZero() {
		return p.WebhookSecret
	}
	return "\x00sealed\x00" + string(p.WebhookSecretSealed.Ciphertext)
}
