package sqlstore

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

const variableCols = `v.project_id, p.name, v.environment, v.name, v.value, v.created_at, v.updated_at`

func scanVariable(r scanner) (*store.Variable, error) {
	var v store.Variable
	var created, updated int64
	if err := r.Scan(&v.ProjectID, &v.Project, &v.Environment, &v.Name, &v.Value, &created, &updated); err != nil {
		return nil, err
	}
	v.CreatedAt, v.UpdatedAt = fromUS(created), fromUS(updated)
	return &v, nil
}

// PutVariable implements store.ProjectVariables.
func (e *Engine) PutVariable(ctx context.Context, v *store.Variable) (bool, error) {
	switch {
	case v == nil || v.Project == "" || v.Name == "":
		return false, fmt.Errorf("put variable: a project and a name are required: %w", store.ErrInvalid)
	case len(v.Value) > store.MaxVariableBytes:
		return false, fmt.Errorf("put variable %s: the value is %d bytes; the most is %d: %w", v.Name, len(v.Value), store.MaxVariableBytes, store.ErrInvalid)
	}
	audit, err := auditOf(ctx)
	if err != nil {
		return false, fmt.Errorf("put variable %s: %w", v.Name, err)
	}
	created := false
	err = e.write(ctx, func(t *tx) error {
		// The project's row is locked so that two puts at once cannot both pass a limit.
		var id uuid.UUID
		err := t.row(`SELECT id FROM projects WHERE name = ?`+e.d.ForUpdate, v.Project).Scan(&id)
		if isNoRows(err) {
			return fmt.Errorf("put variable %s: project %q: %w", v.Name, v.Project, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("put variable %s: look up project %q: %w", v.Name, v.Project, err)
		}
		now := us(e.clock.Now())
		first := now
		err = t.row(`SELECT created_at FROM variables WHERE project_id = ? AND environment = ? AND name = ?`,
			id, v.Environment, v.Name).Scan(&first)
		created = isNoRows(err)
		if err != nil && !created {
			return fmt.Errorf("put variable %s of project %q: %w", v.Name, v.Project, err)
		}
		if err := t.checkVariableLimits(id, v, created); err != nil {
			return err
		}
		if created {
			_, err = t.exec(`INSERT INTO variables (project_id, environment, name, value, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?)`, id, v.Environment, v.Name, v.Value, now, now)
		} else {
			_, err = t.exec(`UPDATE variables SET value = ?, updated_at = ? WHERE project_id = ? AND environment = ? AND name = ?`,
				v.Value, now, id, v.Environment, v.Name)
		}
		if err != nil {
			return fmt.Errorf("put variable %s of project %q: %w", v.Name, v.Project, err)
		}
		v.ProjectID, v.CreatedAt, v.UpdatedAt = id, fromUS(first), fromUS(now)
		return t.appendAudit(audit)
	})
	return created, err
}

// checkVariableLimits refuses a put that would take the project past a limit on its
// variables: their number in v's scope (for a new one) and their bytes in all.
func (t *tx) checkVariableLimits(projectID uuid.UUID, v *store.Variable, created bool) error {
	if created {
		limit, scope := store.MaxProjectVariables, "project-wide"
		if v.Environment != "" {
			limit, scope = store.MaxEnvironmentVariables, "in environment "+v.Environment
		}
		var n int
		if err := t.row(`SELECT COUNT(*) FROM variables WHERE project_id = ? AND environment = ?`, projectID, v.Environment).Scan(&n); err != nil {
			return fmt.Errorf("put variable %s: count variables: %w", v.Name, err)
		}
		if n >= limit {
			return fmt.Errorf("put variable %s: project %q has %d variables %s, the most it may have; delete one first: %w",
				v.Name, v.Project, n, scope, store.ErrConflict)
		}
	}
	var others int64
	if err := t.row(`SELECT COALESCE(SUM(OCTET_LENGTH(name) + OCTET_LENGTH(value)), 0) FROM variables
		WHERE project_id = ? AND NOT (environment = ? AND name = ?)`, projectID, v.Environment, v.Name).Scan(&others); err != nil {
		return fmt.Errorf("put variable %s: size variables: %w", v.Name, err)
	}
	if total := others + int64(len(v.Name)+len(v.Value)); total > store.MaxVariablesTotal {
		return fmt.Errorf("put variable %s: project %q's variables would be %d bytes (names and values), over the most of %d: %w",
			v.Name, v.Project, total, store.MaxVariablesTotal, store.ErrConflict)
	}
	return nil
}

// GetVariable implements store.ProjectVariables.
func (e *Engine) GetVariable(ctx context.Context, k store.VariableKey) (*store.Variable, error) {
	v, err := scanVariable(e.readRow(ctx, `SELECT `+variableCols+` FROM variables v JOIN projects p ON p.id = v.project_id
		WHERE p.name = ? AND v.environment = ? AND v.name = ?`, k.Project, k.Environment, k.Name))
	if isNoRows(err) {
		return nil, fmt.Errorf("variable %s of project %q: %w", k.Name, k.Project, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get variable %s of project %q: %w", k.Name, k.Project, err)
	}
	return v, nil
}

// ListVariables implements store.ProjectVariables.
func (e *Engine) ListVariables(ctx context.Context, project string) ([]*store.Variable, error) {
	var id uuid.UUID
	err := e.readRow(ctx, `SELECT id FROM projects WHERE name = ?`, project).Scan(&id)
	if isNoRows(err) {
		return nil, fmt.Errorf("list variables: project %q: %w", project, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("list variables of project %q: %w", project, err)
	}
	rows, err := e.readRows(ctx, `SELECT `+variableCols+` FROM variables v JOIN projects p ON p.id = v.project_id
		WHERE v.project_id = ? ORDER BY v.name, v.environment`, id)
	if err != nil {
		return nil, fmt.Errorf("list variables of project %q: %w", project, err)
	}
	defer rows.Close()
	out := []*store.Variable{}
	for rows.Next() {
		v, err := scanVariable(rows)
		if err != nil {
			return nil, fmt.Errorf("list variables of project %q: %w", project, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list variables of project %q: %w", project, err)
	}
	return out, nil
}

// DeleteVariable implements store.ProjectVariables.
func (e *Engine) DeleteVariable(ctx context.Context, k store.VariableKey) error {
	audit, err := auditOf(ctx)
	if err != nil {
		return fmt.Errorf("delete variable %s: %w", k.Name, err)
	}
	return e.write(ctx, func(t *tx) error {
		res, err := t.exec(`DELETE FROM variables WHERE project_id = (SELECT id FROM projects WHERE name = ?)
			AND environment = ? AND name = ?`, k.Project, k.Environment, k.Name)
		if err != nil {
			return fmt.Errorf("delete variable %s of project %q: %w", k.Name, k.Project, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("delete variable %s of project %q: %w", k.Name, k.Project, store.ErrNotFound)
		}
		return t.appendAudit(audit)
	})
}

// runVariables is what a run of project keeps of its variables (see
// store.CreateRunParams): the project-wide ones with given over them, and those of each
// environment a job of plan names, without the names given has. A project that does not
// exist yet has none.
func (e *Engine) runVariables(ctx context.Context, project string, plan *pipeline.Plan, given *store.Variables) (*store.Variables, *store.EnvironmentVariables, error) {
	envs := map[string]bool{}
	for _, j := range plan.Jobs {
		if j.Environment != nil {
			envs[j.Environment.Name] = true
		}
	}
	rows, err := e.readRows(ctx, `SELECT v.environment, v.name, v.value FROM variables v JOIN projects p ON p.id = v.project_id
		WHERE p.name = ?`, project)
	if err != nil {
		return nil, nil, fmt.Errorf("read the variables of project %q: %w", project, err)
	}
	defer rows.Close()
	vars := store.Variables{}
	byEnv := store.EnvironmentVariables{}
	for rows.Next() {
		var env, name, value string
		if err := rows.Scan(&env, &name, &value); err != nil {
			return nil, nil, fmt.Errorf("read the variables of project %q: %w", project, err)
		}
		switch {
		case env == "":
			vars[name] = value
		case envs[env]:
			if byEnv[env] == nil {
				byEnv[env] = store.Variables{}
			}
			byEnv[env][name] = value
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("read the variables of project %q: %w", project, err)
	}
	if given != nil {
		vars = vars.Overlay(*given)
		// What gantry run --var gives wins over an environment's too.
		for _, ev := range byEnv {
			maps.DeleteFunc(ev, func(k, _ string) bool {
				return slices.ContainsFunc(slices.Collect(maps.Keys(*given)), func(g string) bool { return strings.EqualFold(g, k) })
			})
		}
	}
	var outVars *store.Variables
	if len(vars) > 0 || given != nil {
		outVars = &vars
	}
	var outEnv *store.EnvironmentVariables
	for env, ev := range byEnv {
		if len(ev) == 0 {
			delete(byEnv, env)
		}
	}
	if len(byEnv) > 0 {
		outEnv = &byEnv
	}
	return outVars, outEnv, nil
}
