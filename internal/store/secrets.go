package store

import (
	"context"
	"time"

	"github.com/google/uuid"
)

// Secret is an encrypted secret as the store keeps it. The store never sees a value: it
// keeps what package secret sealed (the key id, the wrapped data key, the ciphertext).
type Secret struct {
	ProjectID uuid.UUID
	Project   string
	// Environment scopes the secret to jobs of that environment; "" is project-wide.
	Environment string
	// Scope, when set, makes the secret a run's own env value (gantry submit
	// --secret-env) rather than one of the project's named secrets; the run's env names
	// it. Project secrets have Scope "".
	Scope string
	Name  string
	// KeyID names the key-encryption key that wrapped WrappedKey.
	KeyID      string
	WrappedKey []byte
	Ciphertext []byte
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// SecretKey names one secret.
type SecretKey struct {
	Project     string
	Environment string
	Scope       string
	Name        string
}

// Secrets keeps encrypted secrets, per project and optionally per environment.
// PutSecret, DeleteSecret and SetSecretsForForks record the audit entry the context
// carries (WithAudit) in their own transaction.
type Secrets interface {
	// PutSecret stores s by (project, environment, scope, name), replacing the one there;
	// created says whether it is new. It fills in ProjectID, CreatedAt and UpdatedAt.
	// ErrNotFound when the project does not exist.
	PutSecret(ctx context.Context, s *Secret) (created bool, err error)
	// GetSecret returns one secret with its sealed value; ErrNotFound when none.
	GetSecret(ctx context.Context, k SecretKey) (*Secret, error)
	// ListSecrets lists a project's named secrets (Scope "") by name, then environment,
	// without their sealed values. ErrNotFound when the project does not exist.
	ListSecrets(ctx context.Context, project string) ([]*Secret, error)
	// DeleteSecret deletes one secret; ErrNotFound when none.
	DeleteSecret(ctx context.Context, k SecretKey) error
	// SealedSecrets lists every secret of every project, sealed values included, whose
	// data key is not wrapped by keyID: what a key rotation still has to rewrap.
	SealedSecrets(ctx context.Context, notKeyID string) ([]*Secret, error)
	// RewrapSecret replaces a secret's key id and wrapped data key, only while it is
	// still wrapped by oldKeyID with oldWrapped (ErrConflict otherwise: it was set or
	// rewrapped meanwhile). The ciphertext and UpdatedAt are unchanged.
	RewrapSecret(ctx context.Context, k SecretKey, oldKeyID string, oldWrapped []byte, newKeyID string, newWrapped []byte) error
	// SecretsForForks reports whether the project gives secrets to runs of pull requests
	// from forks; ErrNotFound when the project does not exist.
	SecretsForForks(ctx context.Context, project string) (bool, error)
	// SetSecretsForForks sets that setting.
	SetSecretsForForks(ctx context.Context, project string, allow bool) error
}
