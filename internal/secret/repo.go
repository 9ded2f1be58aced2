package secret

import (
	"context"
	"errors"
	"fmt"

	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/store"
)

// CredentialError says why a project's repository credential cannot be had: a secret its
// settings name is not set, cannot be opened, or there is no secrets key. Its text names
// the setting and the secret, never a value, so it may be shown to users and logged.
type CredentialError struct {
	Project string
	Msg     string
}

func (e *CredentialError) Error() string {
	return fmt.Sprintf("repository credential of project %s: %s", e.Project, e.Msg)
}

// GetSecretFunc reads one sealed secret (store.Secrets.GetSecret).
type GetSecretFunc func(ctx context.Context, k store.SecretKey) (*store.Secret, error)

// DefaultTokenUser is the user name a provider's git server accepts with an access token:
// GitHub takes x-access-token, GitLab oauth2, and Gitea and Forgejo the token again.
func DefaultTokenUser(provider, token string) string {
	switch provider {
	case "gitlab":
		return "oauth2"
	case "gitea", "forgejo":
		return token
	}
	return "x-access-token"
}

// RepoCredentials opens the credential the project's settings name (its repo_*_secret
// fields) from its project-wide secrets. A project that names none has the zero
// Credentials. keys may be nil (no secrets key configured): that is a CredentialError
// only for a project that names a secret. A store failure is returned wrapped.
func RepoCredentials(ctx context.Context, get GetSecretFunc, keys *Keyring, p *store.Project) (source.Credentials, error) {
	var c source.Credentials
	if p == nil || (p.RepoTokenSecret == "" && p.RepoSSHKeySecret == "") {
		return c, nil
	}
	if keys == nil {
		return c, &CredentialError{Project: p.Name,
			Msg: "its secrets cannot be opened: the coordinator has no secrets key (--secrets-key-file or GANTRY_SECRETS_KEY)"}
	}
	open := func(setting, name string) (string, error) {
		sc, err := get(ctx, store.SecretKey{Project: p.Name, Name: name})
		if errors.Is(err, store.ErrNotFound) {
			return "", &CredentialError{Project: p.Name,
				Msg: fmt.Sprintf("secret %s (%s) is not set; set it with gantry secret set %s --project %s", name, setting, name, p.Name)}
		}
		if err != nil {
			return "", fmt.Errorf("read secret %s of project %s: %w", name, p.Name, err)
		}
		v, err := keys.Open(Sealed{KeyID: sc.KeyID, WrappedKey: sc.WrappedKey, Ciphertext: sc.Ciphertext},
			Scope{Project: p.Name, Name: name})
		if err != nil {
			return "", &CredentialError{Project: p.Name,
				Msg: fmt.Sprintf("secret %s (%s) cannot be decrypted with this coordinator's secrets key", name, setting)}
		}
		return string(v), nil
	}
	if p.RepoTokenSecret != "" {
		tok, err := open("repo_token_secret", p.RepoTokenSecret)
		if err != nil {
			return c, err
		}
		c.Token = tok
		c.Username = p.RepoTokenUser
		if c.Username == "" {
			c.Username = DefaultTokenUser(p.Provider, tok)
		}
	}
	if p.RepoSSHKeySecret != "" {
		key, err := open("repo_ssh_key_secret", p.RepoSSHKeySecret)
		if err != nil {
			return c, err
		}
		c.SSHKey = []byte(key)
		if p.RepoKnownHostsSecret != "" {
			kh, err := open("repo_known_hosts_secret", p.RepoKnownHostsSecret)
			if err != nil {
				return c, err
			}
			c.KnownHosts = []byte(kh)
		}
	}
	return c, nil
}

// RepoCredentialsFunc is RepoCredentials bound to a store and a keyring, for what opens
// the mirrors of projects (the scheduler's cron).
func RepoCredentialsFunc(get GetSecretFunc, keys *Keyring) func(context.Context, *store.Project) (source.Credentials, error) {
	return func(ctx context.Context, p *store.Project) (source.Credentials, error) {
		return RepoCredentials(ctx, get, keys, p)
	}
}
