package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/store"
)

// codeRepoCredential answers a request that needed a project's repository and could not
// have the credential its settings name (a secret not set, or no secrets key).
const codeRepoCredential = "repo_credential"

// repoCredentials opens the credential of proj's repository from its secrets: the zero
// Credentials for a public one. A *secret.CredentialError names what is missing.
func (s *Server) repoCredentials(ctx context.Context, proj *store.Project) (source.Credentials, error) {
	c, err := secret.RepoCredentials(ctx, s.store.GetSecret, s.secrets, proj)
	c.AllowPlainHTTP = s.plainHTTPAllowed(proj.RepoURL)
	return c, err
}

// plainHTTPAllowed reports whether the admin lets a repository token go to repo, an
// http:// URL, in clear (Config.AllowPlainHTTP names its host, or its host and port).
func (s *Server) plainHTTPAllowed(repo string) bool {
	return source.PlainHTTPAllowed(repo, s.hooks.plainHTTP)
}

// checkPlainHTTPToken refuses a repository token for an http:// repo_url whose host the
// admin did not allow plain HTTP for.
func (s *Server) checkPlainHTTPToken(p *store.Project, problems *projectProblems) {
	if p.RepoTokenSecret == "" || !strings.HasPrefix(strings.ToLower(p.RepoURL), "http://") || s.plainHTTPAllowed(p.RepoURL) {
		return
	}
	host := p.RepoURL
	if u, err := url.Parse(p.RepoURL); err == nil {
		host = u.Hostname()
	}
	problems.add("repo_token_secret", "repo_url %s is plain http, which would carry the token in clear: use an https:// repo_url, "+
		"or have the admin start the server with --allow-plain-http %s", p.RepoURL, host)
}

// repoCredentialsError is the answer for an error of repoCredentials: 422 naming the
// missing secret, or 500 for a store failure (logged, not shown).
func (s *Server) repoCredentialsError(ctx context.Context, proj *store.Project, err error) *apiError {
	var ce *secret.CredentialError
	if errors.As(err, &ce) {
		return &apiError{status: http.StatusUnprocessableEntity, code: codeRepoCredential, msg: ce.Error()}
	}
	s.log.ErrorContext(ctx, "open a project's repository credential", "project", proj.Name, "err", err)
	return &apiError{status: http.StatusInternalServerError, code: codeInternal,
		msg: fmt.Sprintf("project %q: the repository credential could not be read: internal error", proj.Name)}
}

// repoCredentialsJSON is a claimed job's repository credential, sent only to the worker
// holding the lease of a job that checks the repository out.
type repoCredentialsJSON struct {
	Token      string `json:"token,omitempty"`
	Username   string `json:"username,omitempty"`
	SSHKey     string `json:"ssh_key,omitempty"`
	KnownHosts string `json:"known_hosts,omitempty"`
	// AllowPlainHTTP passes the admin's allowance (Config.AllowPlainHTTP) for the
	// repository's http:// host on to the worker, which refuses the token there without it.
	AllowPlainHTTP bool `json:"allow_plain_http,omitempty"`
}

// values are what the logs mask.
func (c *repoCredentialsJSON) values() []string {
	if c == nil {
		return nil
	}
	var out []string
	for _, v := range []string{c.Token, c.SSHKey} {
		if v != "" {
			out = append(out, v)
		}
	}
	return out
}

// jobRepoCredentials is the repository credential a claimed job is given: none when its
// run checks out no repository of its project (no clone URL, another URL than the
// project's, or checkout: false), so a credential never goes to another host; none
// either for a run from a fork that forkTrust does not trust, and then withheld says
// why, for the worker to tell should the checkout need one. failure, when set, fails
// the job before its first step.
func (s *Server) jobRepoCredentials(ctx context.Context, c *store.Claim) (creds *repoCredentialsJSON, withheld, failure string, err error) {
	if c.Run == nil || c.Job == nil || c.Job.Spec == nil {
		return nil, "", "", nil
	}
	if co := c.Job.Spec.Checkout; co != nil && co.Skip {
		return nil, "", "", nil
	}
	if c.Run.Trigger.CloneURL == "" || c.Run.Trigger.SHA == "" {
		return nil, "", "", nil
	}
	run := c.Run
	if run.Project == "" {
		// A claim's run carries no project name.
		full, err := s.store.GetRun(ctx, run.ID)
		if err != nil {
			return nil, "", "", fmt.Errorf("read the run's project: %w", err)
		}
		run = full
	}
	proj, err := s.store.GetProjectByName(ctx, run.Project)
	if errors.Is(err, store.ErrNotFound) {
		return nil, "", "", nil
	}
	if err != nil {
		return nil, "", "", fmt.Errorf("read project %s: %w", run.Project, err)
	}
	if proj.RepoURL == "" || proj.RepoURL != run.Trigger.CloneURL {
		return nil, "", "", nil
	}
	if proj.RepoTokenSecret == "" && proj.RepoSSHKeySecret == "" {
		return nil, "", "", nil
	}
	trusted, why, err := s.forkTrust(ctx, run, c.Job)
	if err != nil {
		return nil, "", "", err
	}
	if !trusted {
		return nil, why, "", nil
	}
	cr, err := s.repoCredentials(ctx, proj)
	var ce *secret.CredentialError
	if errors.As(err, &ce) {
		return nil, "", ce.Error(), nil
	}
	if err != nil {
		return nil, "", "", err
	}
	if cr.Token == "" && len(cr.SSHKey) == 0 {
		return nil, "", "", nil
	}
	return &repoCredentialsJSON{Token: cr.Token, Username: cr.Username, SSHKey: string(cr.SSHKey), KnownHosts: string(cr.KnownHosts),
		AllowPlainHTTP: cr.Token != "" && cr.AllowPlainHTTP}, "", "", nil
}

// addRepoCredentials puts a claimed job's repository credential into its claim answer
// and js (so the logs mask it); a credential it cannot have fails the job like a
// missing secret does.
func (s *Server) addRepoCredentials(ctx context.Context, c *store.Claim, js *jobSecrets, out *claimedJSON) {
	creds, withheld, failure, err := s.jobRepoCredentials(ctx, c)
	if err != nil {
		s.log.ErrorContext(ctx, "resolve a claimed job's repository credential", "job", c.Job.ID, "err", err)
		failure = "the coordinator could not read this job's repository credential; retry the job"
	}
	if failure != "" && js.failure == "" {
		js.failure = failure
	}
	if out != nil {
		out.RepoCredentials, out.RepoCredentialsWithheld = creds, withheld
	}
	js.repo = creds.values()
}

// repoCredentialNote says, in a failed fetch's message, which secret's credential the
// fetch used, so a refused token or key points at what to fix ("" for a public one).
func repoCredentialNote(p *store.Project) string {
	switch {
	case p.RepoTokenSecret != "":
		return fmt.Sprintf(" with the token in secret %s (repo_token_secret; is it current, and may it read the repository?)", p.RepoTokenSecret)
	case p.RepoSSHKeySecret != "":
		return fmt.Sprintf(" with the deploy key in secret %s (repo_ssh_key_secret; is it the repository's, and does the host match?)", p.RepoSSHKeySecret)
	}
	return ""
}
