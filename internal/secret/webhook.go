package secret

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
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

// webhookSubscriptionScope is what the secret of an outbound webhook subscription of the
// project is sealed for. The project is named by id, which is what a subscription holds.
func webhookSubscriptionScope(projectID uuid.UUID) Scope {
	return Scope{Project: projectID.String(), Name: "webhook-subscription-secret"}
}

// SealWebhookSubscriptionSecret seals w's plain-text secret in place: afterwards w.Secret
// is "" and w.SecretSealed holds it. A subscription without a plain-text secret is left
// as it is.
func (k *Keyring) SealWebhookSubscriptionSecret(w *store.Webhook) error {
	if w.Secret == "" {
		return nil
	}
	s, err := k.Seal([]byte(w.Secret), webhookSubscriptionScope(w.ProjectID))
	if err != nil {
		return fmt.Errorf("seal the secret of a webhook subscription of project %s: %w", w.ProjectID, err)
	}
	w.Secret, w.SecretSealed = "", fromSealed(s)
	return nil
}

// WebhookSubscriptionSecret is the secret w's deliveries are signed with: its plain text,
// kept by a coordinator without a secrets key or from before sealing, or its sealed value
// opened with keys (which may be nil when it is plain).
func WebhookSubscriptionSecret(keys *Keyring, w *store.Webhook) ([]byte, error) {
	if w.SecretSealed.IsZero() {
		return []byte(w.Secret), nil
	}
	if keys == nil {
		return nil, fmt.Errorf("webhook subscription %s: %w", w.ID, ErrNoWebhookKey)
	}
	v, err := keys.Open(toSealed(w.SecretSealed), webhookSubscriptionScope(w.ProjectID))
	if err != nil {
		return nil, fmt.Errorf("open the secret of webhook subscription %s: %w", w.ID, err)
	}
	return v, nil
}

// WebhookSecretStore is what SealWebhookSecrets needs of the store.
type WebhookSecretStore interface {
	ListProjects(ctx context.Context) ([]*store.Project, error)
	SealWebhookSecret(ctx context.Context, p store.SealWebhookSecretParams) error
	ListWebhooks(ctx context.Context, projectID uuid.UUID) ([]*store.Webhook, error)
	SealWebhookSubscriptionSecret(ctx context.Context, p store.SealWebhookSubscriptionSecretParams) error
}

// SealWebhookSecrets brings every webhook secret under the keyring's primary key: each
// project's (inbound) and each of its outbound subscriptions'. A plain-text one (from
// before sealing, or stored by a coordinator without a key) is sealed, and one sealed
// under an older key of the keyring is rewrapped. A secret changed meanwhile is left to
// whoever changed it. failed counts secrets the keyring cannot open, left as they are.
func (k *Keyring) SealWebhookSecrets(ctx context.Context, st WebhookSecretStore) (sealed, rewrapped, failed int, err error) {
	var n sealCount
	projects, err := st.ListProjects(ctx)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("seal webhook secrets: %w", err)
	}
	for _, p := range projects {
		err := k.bringUnderPrimary(&n, p.WebhookSecret, p.WebhookSecretSealed, webhookScope(p.Name), func(next store.SealedValue) error {
			return st.SealWebhookSecret(ctx, store.SealWebhookSecretParams{
				Project: p.Name, OldPlain: p.WebhookSecret, OldSealed: p.WebhookSecretSealed, Sealed: next})
		})
		if err != nil {
			return n.sealed, n.rewrapped, n.failed, fmt.Errorf("seal webhook secrets: %w", err)
		}
		hooks, err := st.ListWebhooks(ctx, p.ID)
		if err != nil {
			return n.sealed, n.rewrapped, n.failed, fmt.Errorf("seal webhook secrets: %w", err)
		}
		for _, w := range hooks {
			err := k.bringUnderPrimary(&n, w.Secret, w.SecretSealed, webhookSubscriptionScope(w.ProjectID), func(next store.SealedValue) error {
				return st.SealWebhookSubscriptionSecret(ctx, store.SealWebhookSubscriptionSecretParams{
					ID: w.ID, OldPlain: w.Secret, OldSealed: w.SecretSealed, Sealed: next})
			})
			if err != nil {
				return n.sealed, n.rewrapped, n.failed, fmt.Errorf("seal webhook secrets: %w", err)
			}
		}
	}
	return n.sealed, n.rewrapped, n.failed, nil
}

// sealCount counts what SealWebhookSecrets did.
type sealCount struct{ sealed, rewrapped, failed int }

// bringUnderPrimary seals a secret held in plain text, or rewraps one sealed under an
// older key, and stores the result with put, counting it in n. put's ErrConflict or
// ErrNotFound (the secret changed or went meanwhile) leaves it uncounted; a sealed value
// the keyring cannot open is counted as failed and left.
func (k *Keyring) bringUnderPrimary(n *sealCount, plain string, sealed store.SealedValue, scope Scope, put func(store.SealedValue) error) error {
	var next Sealed
	switch {
	case plain != "":
		s, err := k.Seal([]byte(plain), scope)
		if err != nil {
			return err
		}
		next = s
	case !sealed.IsZero():
		s, changed, err := k.Rewrap(toSealed(sealed), scope)
		if err != nil {
			n.failed++
			return nil
		}
		if !changed {
			return nil
		}
		next = s
	default:
		return nil
	}
	err := put(fromSealed(next))
	switch {
	case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
		return nil
	case err != nil:
		return err
	case plain != "":
		n.sealed++
	default:
		n.rewrapped++
	}
	return nil
}
