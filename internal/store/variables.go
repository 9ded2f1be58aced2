package store

import (
	"context"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Variable is a project's configuration variable, which a workflow reads as vars.NAME.
// It is not a secret: its value is stored, shown and logged as it is.
type Variable struct {
	ProjectID uuid.UUID
	Project   string
	// Environment scopes the variable to jobs of that environment; "" is project-wide.
	Environment string
	// Name is stored as given; callers fold it to upper case, as GitHub does, since
	// names are case-insensitive.
	Name      string
	Value     string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// VariableKey names one variable.
type VariableKey struct {
	Project     string
	Environment string
	Name        string
}

// Limits on a project's variables, GitHub's: a value of at most MaxVariableBytes, at most
// MaxProjectVariables project-wide and MaxEnvironmentVariables in each environment, and
// at most MaxVariablesTotal bytes of names and values in all, which bounds what each run
// keeps of them (Trigger.Vars).
const (
	MaxVariableBytes        = 48 << 10
	MaxProjectVariables     = 500
	MaxEnvironmentVariables = 100
	MaxVariablesTotal       = 256 << 10
)

// ProjectVariables keeps projects' configuration variables, per project and optionally
// per environment. PutVariable and DeleteVariable record the audit entry the context
// carries (WithAudit) in their own transaction. CreateRun reads them (see
// CreateRunParams).
type ProjectVariables interface {
	// PutVariable stores v by (project, environment, name), replacing the one there;
	// created says whether it is new. It fills in ProjectID, CreatedAt and UpdatedAt.
	// ErrNotFound when the project does not exist; ErrInvalid without a name or with a
	// value over MaxVariableBytes; ErrConflict when a new variable would pass
	// MaxProjectVariables or MaxEnvironmentVariables, or any would pass
	// MaxVariablesTotal: nothing is changed then.
	PutVariable(ctx context.Context, v *Variable) (created bool, err error)
	// GetVariable returns one variable; ErrNotFound when none.
	GetVariable(ctx context.Context, k VariableKey) (*Variable, error)
	// ListVariables lists a project's variables by name, then environment (project-wide
	// first). ErrNotFound when the project does not exist.
	ListVariables(ctx context.Context, project string) ([]*Variable, error)
	// DeleteVariable deletes one variable; ErrNotFound when none.
	DeleteVariable(ctx context.Context, k VariableKey) error
}

// EnvironmentVariables are configuration variables by environment, then name (a
// Trigger's EnvironmentVars).
type EnvironmentVariables map[string]Variables

// Overlay returns v with over laid on it: a name of over replaces the one of v that is
// the same but for case, as GitHub's names are case-insensitive. Neither is changed.
func (v Variables) Overlay(over Variables) Variables {
	out := make(Variables, len(v)+len(over))
	for k, val := range v {
		out[k] = val
	}
	for k, val := range over {
		for old := range out {
			if strings.EqualFold(old, k) {
				delete(out, old)
			}
		}
		out[k] = val
	}
	return out
}

// JobVars are what a job in environment reads as vars.NAME ("" for a job with none):
// the run's Vars with that environment's over them, as on GitHub an environment's
// variable wins over the repository's. nil when the run has none.
func (t Trigger) JobVars(environment string) Variables {
	var base, env Variables
	if t.Vars != nil {
		base = *t.Vars
	}
	if t.EnvironmentVars != nil && environment != "" {
		env = (*t.EnvironmentVars)[environment]
	}
	if len(env) == 0 {
		return base
	}
	return base.Overlay(env)
}
