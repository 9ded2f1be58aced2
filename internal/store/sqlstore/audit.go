package sqlstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

const auditCols = `id, time, actor_id, actor, action, project, target, details, remote_addr`

// checkAudit validates an entry before any transaction starts, so a bad entry fails the
// action it would have recorded rather than leaving it unrecorded.
func checkAudit(e *store.AuditEntry) error {
	switch {
	case e.Action == "":
		return fmt.Errorf("audit: an action is required: %w", store.ErrInvalid)
	case e.Actor == "":
		return fmt.Errorf("audit %s: an actor is required: %w", e.Action, store.ErrInvalid)
	case len(e.Details) > store.MaxAuditDetails:
		return fmt.Errorf("audit %s: details are %d bytes, at most %d: %w", e.Action, len(e.Details), store.MaxAuditDetails, store.ErrInvalid)
	}
	if len(e.Details) == 0 {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(e.Details, &obj); err != nil || obj == nil {
		return fmt.Errorf("audit %s: details must be one JSON object: %w", e.Action, store.ErrInvalid)
	}
	return nil
}

// appendAudit inserts e in t, filling in its ID and Time. A nil entry is nothing to
// record. Callers run checkAudit first.
func (t *tx) appendAudit(e *store.AuditEntry) error {
	if e == nil {
		return nil
	}
	if e.ID == uuid.Nil {
		e.ID = store.NewID()
	}
	e.Time = t.e.clock.Now()
	details := "{}"
	if len(e.Details) > 0 {
		var b bytes.Buffer
		if err := json.Compact(&b, e.Details); err != nil {
			return fmt.Errorf("audit %s: compact details: %w", e.Action, err)
		}
		details = b.String()
	}
	if _, err := t.exec(`INSERT INTO audit (`+auditCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, us(e.Time), e.ActorID, e.Actor, e.Action, e.Project, e.Target, details, e.RemoteAddr); err != nil {
		return fmt.Errorf("audit %s: %w", e.Action, err)
	}
	e.Details = json.RawMessage(details)
	return nil
}

// auditOf returns the checked copy of the entry ctx carries, or nil: the entry of the
// action about to be done, recorded in its transaction.
func auditOf(ctx context.Context) (*store.AuditEntry, error) {
	e := store.AuditFrom(ctx)
	if e == nil {
		return nil, nil
	}
	if err := checkAudit(e); err != nil {
		return nil, err
	}
	return e, nil
}

// AppendAudit implements store.Audit.
func (e *Engine) AppendAudit(ctx context.Context, a *store.AuditEntry) error {
	if a == nil {
		return fmt.Errorf("audit: no entry: %w", store.ErrInvalid)
	}
	if err := checkAudit(a); err != nil {
		return err
	}
	id := a.ID
	return e.write(ctx, func(t *tx) error {
		a.ID = id // an operation may run twice, the first run rolled back
		return t.appendAudit(a)
	})
}

func scanAudit(s scanner) (*store.AuditEntry, error) {
	var a store.AuditEntry
	var at int64
	var details string
	if err := s.Scan(&a.ID, &at, &a.ActorID, &a.Actor, &a.Action, &a.Project, &a.Target, &details, &a.RemoteAddr); err != nil {
		return nil, err
	}
	a.Time, a.Details = fromUS(at), json.RawMessage(details)
	return &a, nil
}

// ListAudit implements store.Audit.
func (e *Engine) ListAudit(ctx context.Context, p store.ListAuditParams) ([]*store.AuditEntry, error) {
	var where []string
	var args []any
	if p.Project != "" {
		where, args = append(where, "project = ?"), append(args, p.Project)
	}
	if a := strings.TrimSuffix(p.Action, "."); a != "" {
		// A prefix of whole segments: "token" is token.created, never tokenizer.x. substr
		// rather than LIKE, whose wildcards an action's underscores would be.
		where = append(where, "(action = ? OR substr(action, 1, ?) = ?)")
		args = append(args, a, len(a)+1, a+".")
	}
	if p.Actor != "" {
		where, args = append(where, "(actor = ? OR actor_id = ?)"), append(args, p.Actor, p.Actor)
	}
	if p.Target != "" {
		where, args = append(where, "target = ?"), append(args, p.Target)
	}
	if !p.Since.IsZero() {
		where, args = append(where, "time >= ?"), append(args, us(p.Since))
	}
	if p.Before != uuid.Nil {
		where, args = append(where, "id < ?"), append(args, p.Before)
	}
	limit := p.Limit
	if limit <= 0 {
		limit = 50
	}
	limit = min(limit, 500)
	q := `SELECT ` + auditCols + ` FROM audit `
	if len(where) > 0 {
		q += "WHERE " + strings.Join(where, " AND ")
	}
	q += ` ORDER BY id DESC LIMIT ?`
	rows, err := e.readRows(ctx, q, append(args, limit)...)
	if err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	defer rows.Close()
	out := []*store.AuditEntry{}
	for rows.Next() {
		a, err := scanAudit(rows)
		if err != nil {
			return nil, fmt.Errorf("list audit: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list audit: %w", err)
	}
	return out, nil
}
