package secret_test

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/store"
)

// sealedStore seals values as the API does and reads them back as the store would.
type sealedStore struct {
	t    *testing.T
	keys *secret.Keyring
	rows map[string]*store.Secret
}

func (s *sealedStore) put(project, name, value string) {
	s.t.Helper()
	sealed, err := s.keys.Seal([]byte(value), secret.Scope{Project: project, Name: name})
	if err != nil {
		s.t.Fatal(err)
	}
	s.rows[project+"/"+name] = &store.Secret{Project: project, Name: name, KeyID: sealed.KeyID,
		WrappedKey: sealed.WrappedKey, Ciphertext: sealed.Ciphertext}
}

func (s *sealedStore) get(_ context.Context, k store.SecretKey) (*store.Secret, error) {
	if k.Environment != "" || k.Scope != "" {
		s.t.Errorf("a repository credential was read from %+v; want the project-wide secret", k)
	}
	if sc, ok := s.rows[k.Project+"/"+k.Name]; ok {
		return sc, nil
	}
	return nil, store.ErrNotFound
}

func TestRepoCredentials(t *testing.T) {
	t.Parallel()
	k := make([]byte, secret.KeySize)
	if _, err := rand.Read(k); err != nil {
		t.Fatal(err)
	}
	keys, err := secret.NewKeyring(k)
	if err != nil {
		t.Fatal(err)
	}
	st := &sealedStore{t: t, keys: keys, rows: map[string]*store.Secret{}}
	st.put("web", "TOKEN", "tok-1")
	st.put("web", "KEY", "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----\n")
	st.put("web", "HOSTS", "git.example.com ssh-ed25519 AAAA")
	st.put("other", "MOVED", "x")
	// A sealed value copied under another name does not open.
	st.rows["web/COPIED"] = st.rows["other/MOVED"]

	for _, c := range []struct {
		name     string
		p        store.Project
		token    string
		user     string
		key, kh  bool
		errMatch string
	}{
		{name: "public", p: store.Project{Name: "web"}},
		{name: "github default user", p: store.Project{Name: "web", Provider: "github", RepoTokenSecret: "TOKEN"}, token: "tok-1", user: "x-access-token"},
		{name: "gitlab default user", p: store.Project{Name: "web", Provider: "gitlab", RepoTokenSecret: "TOKEN"}, token: "tok-1", user: "oauth2"},
		{name: "gitea default user", p: store.Project{Name: "web", Provider: "gitea", RepoTokenSecret: "TOKEN"}, token: "tok-1", user: "tok-1"},
		{name: "given user", p: store.Project{Name: "web", Provider: "gitlab", RepoTokenSecret: "TOKEN", RepoTokenUser: "bot"}, token: "tok-1", user: "bot"},
		{name: "deploy key", p: store.Project{Name: "web", RepoSSHKeySecret: "KEY", RepoKnownHostsSecret: "HOSTS"}, key: true, kh: true},
		{name: "missing", p: store.Project{Name: "web", RepoTokenSecret: "NOPE"}, errMatch: "secret NOPE (repo_token_secret) is not set"},
		{name: "missing known hosts", p: store.Project{Name: "web", RepoSSHKeySecret: "KEY", RepoKnownHostsSecret: "NOPE"}, errMatch: "secret NOPE (repo_known_hosts_secret) is not set"},
		{name: "moved row", p: store.Project{Name: "web", RepoTokenSecret: "COPIED"}, errMatch: "cannot be decrypted"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := secret.RepoCredentials(t.Context(), st.get, keys, &c.p)
			if c.errMatch != "" {
				var ce *secret.CredentialError
				if !errors.As(err, &ce) || !strings.Contains(err.Error(), c.errMatch) {
					t.Fatalf("err = %v; want a CredentialError saying %q", err, c.errMatch)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Token != c.token || got.Username != c.user || (len(got.SSHKey) > 0) != c.key || (len(got.KnownHosts) > 0) != c.kh {
				t.Errorf("credentials = token %q user %q key %v known_hosts %v", got.Token, got.Username, len(got.SSHKey) > 0, len(got.KnownHosts) > 0)
			}
		})
	}

	// No secrets key: only a project that names a secret needs one.
	if _, err := secret.RepoCredentials(t.Context(), st.get, nil, &store.Project{Name: "web"}); err != nil {
		t.Errorf("public project without a key: %v", err)
	}
	_, err = secret.RepoCredentials(t.Context(), st.get, nil, &store.Project{Name: "web", RepoTokenSecret: "TOKEN"})
	if ce := (*secret.CredentialError)(nil); !errors.As(err, &ce) || !strings.Contains(err.Error(), "no secrets key") {
		t.Errorf("private project without a key: %v", err)
	}
}
