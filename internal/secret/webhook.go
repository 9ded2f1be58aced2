package secret

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantry-ci/gantry/internal/store"
)

// webhookScope is what a project's webhook secret is sealed for. Its name has a dash,
// which no secret name may have, so it cannot be confused with a project secret's.
func webhookScope(project string) Scope { return Scope{Project: project, Name: "webhook-secret"} }

func toSealed(v store.SealedValue) Sealed {
	return Sealed{KeyID: v.KeyID, WrappedKey: v.WrappedKey, Ciphertext: v.Ciphertext}
}

func fromSealed(s Sealed) store.SealedValue {
	return store.SealedValue{KeyID: s.KeyID, WrappedKey: s.WrappedKey, Ciphertext: s.Ciphertext}
}

// SealProjectWebhookSecret seals p's plain-text webhook secret in place: afterwards
// p.WebhookSecret is "" and p.WebhookSecretSealed holds it. A project without a plain-text
// secret is left as it is.
func (k *Keyring) SealProjectWebhookSecret(p *store.Project) error {
	if p.WebhookSecret == "" {
		return nil
	}
	s, err := k.Seal([]byte(p.WebhookSecret), webhookScope(p.Name))
	if err != nil {
		return fmt.Errorf("seal the webhook secret of project %s: %w", p.Name, err)
	}
	p.WebhookSecret, p.WebhookSecretSealed = "", fromSealed(s)
	return nil
}

// ErrNoWebhookKey means a project's webhook secret is sealed and there is no keyring to
// open it with.
var ErrNoWebhookKey = errors.New("the webhook secret is sealed and this coordinator has no secrets key (--secrets-key-file or GANTRY_SECRETS_KEY)")

// ProjectWebhookSecret is the secret p's webhooks are verified with: its plain text,
// kept by a coordinator without a secrets key or from before sealing, or its sealed value
// opened with keys (which may be nil when it is plain). "" when it has none.
func ProjectWebhookSecret(keys *Keyring, p *store.Project) ([]byte, error) {
	if p.WebhookSecretSealed.IsZero() {
		return []byte(p.WebhookSecret), nil
	}
	if keys == nil {
		return nil, fmt.Errorf("project %s: %w", p.Name, ErrNoWebhookKey)
	}
	v, err := keys.Open(toSealed(p.WebhookSecretSealed), webhookScope(p.Name))
	if err != nil {
		return nil, fmt.Errorf("open the webhook secret of project %s: %w", p.Name, err)
	}
	return v, nil
}

// WebhookSecretStore is what SealWebhookSecrets needs of the store.
type WebhookSecretStore interface {
	ListProjects(ctx context.Context) ([]*store.Project, error)
	SealWebhookSecret(ctx context.Context, p store.SealWebhookSecretParams) error
}

// SealWebhookSecrets brings every project's webhook secret under the keyring's primary
// key: a plain-text one (from before sealing, or stored by a coordinator without a key)
// is sealed, and one sealed under an older key of the keyring is rewrapped. A project
// changed meanwhile is left to whoever changed it. failed counts secrets the keyring
// cannot open, left as they are.
func (k *Keyring) SealWebhookSecrets(ctx context.Context, st WebhookSecretStore) (sealed, rewrapped, failed int, err error) {
	projects, err := st.ListProjects(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("seal webhook secrets: %w", err)
	}
	for _, p := range projects {
		params := store.SealWebhookSecretParams{Project: p.Name, OldPlain: p.WebhookSecret, OldSealed: p.WebhookSecretSealed}
		switch {
		case p.WebhookSecret != "":
			cp := *p
			if err := k.SealProjectWebhookSecret(&cp); err != nil {
				return sealed, rewrapped, failed, err
			}
			params.Sealed = cp.WebhookSecretSealed
		case !p.WebhookSecretSealed.IsZero():
			next, changed, err := k.Rewrap(toSealed(p.WebhookSecretSealed), webhookScope(p.Name))
			if err != nil {
				failed++
				continue
			}
			if !changed {
				continue
			}
			params.Sealed = fromSealed(next)
		default:
			continue
		}
		err := st.SealWebhookSecret(ctx, params)
		switch {
		case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
			continue
		case err != nil:
			return sealed, rewrapped, failed, fmt.Errorf("seal webhook secrets: %w", err)
		case p.WebhookSecret != "":
			sealed++
		default:
			rewrapped++
		}
	}
	return sealed, rewrapped, failed, nil
}
