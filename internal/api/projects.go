package api

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/forge"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/store"
)

// codeInvalidProject answers a project whose settings are wrong; its details name each
// field and what is wrong with it.
const codeInvalidProject = "invalid_project"

// discoverTimeout bounds asking a remote for its default branch when a project is made.
const discoverTimeout = 30 * time.Second

// maxWebhookSecret bounds a given webhook secret; forges accept far less.
const maxWebhookSecret = 256

func (s *Server) projectRoutes() {
	// Project settings name a file on the coordinator (the API token) and where statuses
	// are sent with it, so only admins change them; anyone who may read sees them, but
	// never the webhook secret.
	s.handle("POST /api/v1/projects", admins, s.createProject)
	s.handle("GET /api/v1/projects", users, s.listProjects)
	s.handle("GET /api/v1/projects/{name}", on(thingProject, store.RoleViewer), s.getProject)
	// Maintainers change settings; what reaches the coordinator's own files and network
	// (repo_url, api_base_url, api_token_file) stays the admin's (adminOnlyChange).
	s.handle("PATCH /api/v1/projects/{name}", on(thingProject, store.RoleMaintainer), s.updateProject)
	// Only the server admin deletes a project; to anyone else a project they cannot see
	// is missing (404), one they can is forbidden.
	s.handle("DELETE /api/v1/projects/{name}", on(thingProject, store.RoleAdmin), s.deleteProject)
	// A forge signs its webhooks with the project's secret: that, not a bearer token or
	// an Origin, is what authenticates the hook route.
	s.handle("POST /api/v1/hooks/{provider}/{project}", public, s.hook)
}

// projectJSON is a project as the API shows it: never its webhook secret, except once in
// the answer that set it.
type projectJSON struct {
	Name          string `json:"name"`
	RepoURL       string `json:"repo_url"`
	Provider      string `json:"provider"`
	PipelinePath  string `json:"pipeline_path"`
	DefaultBranch string `json:"default_branch"`
	APIBaseURL    string `json:"api_base_url,omitempty"`
	APITokenFile  string `json:"api_token_file,omitempty"`
	// The Repo*Secret fields name the project secrets holding its repository's
	// credential (names only: the values stay sealed).
	RepoTokenSecret      string `json:"repo_token_secret,omitempty"`
	RepoTokenUser        string `json:"repo_token_user,omitempty"`
	RepoSSHKeySecret     string `json:"repo_ssh_key_secret,omitempty"`
	RepoKnownHostsSecret string `json:"repo_known_hosts_secret,omitempty"`
	// GitHubTokenSecret names the project secret a workflow's secrets.GITHUB_TOKEN and
	// github.token read (pipeline.GitHubTokenSecret unless set otherwise).
	GitHubTokenSecret string `json:"github_token_secret"`
	// CommitStatuses is what runs report to the forge: "jobs" or "run".
	CommitStatuses string `json:"commit_statuses"`
	// WebhookSecretSet says whether hooks can be verified; a project without a secret
	// refuses every hook.
	WebhookSecretSet bool `json:"webhook_secret_set"`
	// HookPath is where the forge sends webhooks, relative to the server's address.
	HookPath string `json:"hook_path,omitempty"`
	// WebhookSecret is set only in the answer to a create or update that set it.
	WebhookSecret string `json:"webhook_secret,omitempty"`
	// MaxConcurrentJobs bounds the project's leased jobs (0 = no limit); FairWeight is its
	// share in fair queueing.
	MaxConcurrentJobs int    `json:"max_concurrent_jobs"`
	FairWeight        int    `json:"fair_weight"`
	CreatedAt         string `json:"created_at"`
	UpdatedAt         string `json:"updated_at"`
}

func newProjectJSON(p *store.Project) projectJSON {
	out := projectJSON{
		Name: p.Name, RepoURL: p.RepoURL, Provider: p.Provider, PipelinePath: p.PipelinePath,
		DefaultBranch: p.DefaultBranch, APIBaseURL: p.APIBaseURL, APITokenFile: p.APITokenFile,
		RepoTokenSecret: p.RepoTokenSecret, RepoTokenUser: p.RepoTokenUser,
		RepoSSHKeySecret: p.RepoSSHKeySecret, RepoKnownHostsSecret: p.RepoKnownHostsSecret,
		GitHubTokenSecret: p.GitHubToken(),
		WebhookSecretSet:  p.WebhookSecret != "" || !p.WebhookSecretSealed.IsZero(),
		CommitStatuses:    cmp.Or(p.CommitStatuses, store.CommitStatusesJobs),
		MaxConcurrentJobs: p.MaxConcurrentJobs, FairWeight: max(p.FairWeight, store.DefaultFairWeight),
		CreatedAt: formatTime(p.CreatedAt), UpdatedAt: formatTime(p.UpdatedAt),
	}
	if p.RepoURL != "" && p.Provider != "" {
		out.HookPath = "/api/v1/hooks/" + url.PathEscape(p.Provider) + "/" + url.PathEscape(p.Name)
	}
	return out
}

// projectRequest is the body of POST /api/v1/projects and PATCH /api/v1/projects/{name}.
// Absent fields are left as they are (PATCH) or take their defaults (POST).
type projectRequest struct {
	Name          *string `json:"name"`
	RepoURL       *string `json:"repo_url"`
	Provider      *string `json:"provider"`
	PipelinePath  *string `json:"pipeline_path"`
	DefaultBranch *string `json:"default_branch"`
	WebhookSecret *string `json:"webhook_secret"`
	APIBaseURL    *string `json:"api_base_url"`
	APITokenFile  *string `json:"api_token_file"`
	// The secrets holding the repository's credential ("" clears one).
	RepoTokenSecret      *string `json:"repo_token_secret"`
	RepoTokenUser        *string `json:"repo_token_user"`
	RepoSSHKeySecret     *string `json:"repo_ssh_key_secret"`
	RepoKnownHostsSecret *string `json:"repo_known_hosts_secret"`
	// GitHubTokenSecret names the secret secrets.GITHUB_TOKEN and github.token read;
	// "" goes back to the default, the secret named GITHUB_TOKEN.
	GitHubTokenSecret *string `json:"github_token_secret"`
	// CommitStatuses is what runs report to the forge: "jobs" (default) or "run".
	CommitStatuses *string `json:"commit_statuses"`
	// RotateWebhookSecret (PATCH) makes a new secret and returns it once.
	RotateWebhookSecret bool `json:"rotate_webhook_secret"`
	// The quota: the most jobs leased at once (0 = no limit) and the fair-share weight.
	MaxConcurrentJobs *int `json:"max_concurrent_jobs"`
	FairWeight        *int `json:"fair_weight"`
}

// needsNoRepository reports whether the request changes nothing but settings that need
// no repository (the quota, the GitHub token's secret), so it applies to a project made
// on first use by a run too.
func (req *projectRequest) needsNoRepository() bool {
	return (req.MaxConcurrentJobs != nil || req.FairWeight != nil || req.GitHubTokenSecret != nil) &&
		req.Name == nil && req.RepoURL == nil && req.Provider == nil && req.PipelinePath == nil &&
		req.DefaultBranch == nil && req.WebhookSecret == nil && req.APIBaseURL == nil && req.APITokenFile == nil &&
		req.RepoTokenSecret == nil && req.RepoTokenUser == nil && req.RepoSSHKeySecret == nil &&
		req.RepoKnownHostsSecret == nil && !req.RotateWebhookSecret
}

// applyQuota copies the request's quota onto p, checking it.
func (req *projectRequest) applyQuota(p *store.Project, problems *projectProblems) {
	if req.MaxConcurrentJobs != nil {
		p.MaxConcurrentJobs = *req.MaxConcurrentJobs
		if p.MaxConcurrentJobs < 0 || p.MaxConcurrentJobs > store.MaxConcurrentJobsLimit {
			problems.add("max_concurrent_jobs", "%d is not between 0 (no limit) and %d", p.MaxConcurrentJobs, store.MaxConcurrentJobsLimit)
		}
	}
	if req.FairWeight != nil {
		p.FairWeight = *req.FairWeight
		if p.FairWeight < 1 || p.FairWeight > store.MaxFairWeight {
			problems.add("fair_weight", "%d is not between 1 and %d", p.FairWeight, store.MaxFairWeight)
		}
	}
}

// decodeProjectRequest reads a project request: one JSON object, no unknown fields.
func decodeProjectRequest(body []byte) (*projectRequest, *requestError) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req projectRequest
	if err := dec.Decode(&req); err != nil {
		return nil, badRequest("decode project request: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, badRequest("decode project request: unexpected data after the JSON object")
	}
	return &req, nil
}

// projectProblems collects what is wrong with a project's settings, field by field.
type projectProblems []errorDetail

func (p *projectProblems) add(field, format string, args ...any) {
	*p = append(*p, errorDetail{Path: field, Message: fmt.Sprintf(format, args...), Code: codeInvalidProject})
}

func (p projectProblems) write(w http.ResponseWriter) {
	msg := fmt.Sprintf("the project has %d problems", len(p))
	if len(p) == 1 {
		msg = p[0].Path + ": " + p[0].Message
	}
	writeError(w, http.StatusUnprocessableEntity, codeInvalidProject, msg, p)
}

// apply copies the request's fields onto p, checking each; secret is the webhook secret
// to show once, when the request set or rotated it.
func (req *projectRequest) apply(p *store.Project, problems *projectProblems) (secret string) {
	if req.RepoURL != nil {
		p.RepoURL = strings.TrimSpace(*req.RepoURL)
	}
	if req.Provider != nil {
		p.Provider = strings.ToLower(strings.TrimSpace(*req.Provider))
	}
	if req.PipelinePath != nil {
		p.PipelinePath = strings.TrimSpace(*req.PipelinePath)
	}
	if req.DefaultBranch != nil {
		p.DefaultBranch = strings.TrimPrefix(strings.TrimSpace(*req.DefaultBranch), "refs/heads/")
	}
	if req.APIBaseURL != nil {
		p.APIBaseURL = strings.TrimSpace(*req.APIBaseURL)
	}
	if req.APITokenFile != nil {
		p.APITokenFile = strings.TrimSpace(*req.APITokenFile)
	}
	if req.CommitStatuses != nil {
		switch v := strings.TrimSpace(*req.CommitStatuses); v {
		case "", store.CommitStatusesJobs:
			p.CommitStatuses = ""
		case store.CommitStatusesRun:
			p.CommitStatuses = v
		default:
			problems.add("commit_statuses", "%q is not %s (a status per job beside the run's, the default) or %s (the run's only)",
				v, store.CommitStatusesJobs, store.CommitStatusesRun)
		}
	}
	for _, f := range []struct {
		in  *string
		out *string
	}{
		{req.RepoTokenSecret, &p.RepoTokenSecret}, {req.RepoTokenUser, &p.RepoTokenUser},
		{req.RepoSSHKeySecret, &p.RepoSSHKeySecret}, {req.RepoKnownHostsSecret, &p.RepoKnownHostsSecret},
	} {
		if f.in != nil {
			*f.out = strings.TrimSpace(*f.in)
		}
	}
	if req.GitHubTokenSecret != nil {
		p.GitHubTokenSecret = strings.TrimSpace(*req.GitHubTokenSecret)
		if p.GitHubTokenSecret == pipeline.GitHubTokenSecret {
			p.GitHubTokenSecret = "" // the default, stored as such
		}
		if p.GitHubTokenSecret != "" && !pipeline.ValidSecretName(p.GitHubTokenSecret) {
			problems.add("github_token_secret", "%q is not a secret name: use upper case letters, digits and _, not starting with a digit", p.GitHubTokenSecret)
		}
	}
	req.applyQuota(p, problems)
	switch {
	case req.WebhookSecret != nil && req.RotateWebhookSecret:
		problems.add("webhook_secret", "give a webhook_secret or rotate_webhook_secret, not both")
	case req.WebhookSecret != nil:
		p.WebhookSecret, p.WebhookSecretSealed = *req.WebhookSecret, store.SealedValue{}
		switch {
		case p.WebhookSecret == "":
			problems.add("webhook_secret", "is empty: a hook anyone can sign is refused; leave it out to have one generated")
		case len(p.WebhookSecret) > maxWebhookSecret:
			problems.add("webhook_secret", "is %d bytes long; the most is %d", len(p.WebhookSecret), maxWebhookSecret)
		case strings.ContainsFunc(p.WebhookSecret, func(r rune) bool { return r < 0x20 || r == 0x7f }):
			problems.add("webhook_secret", "holds a control character; forges cannot send it")
		}
		secret = p.WebhookSecret
	case req.RotateWebhookSecret:
		p.WebhookSecret, p.WebhookSecretSealed = newWebhookSecret(), store.SealedValue{}
		secret = p.WebhookSecret
	}
	return secret
}

// sealWebhookSecret seals p's new webhook secret before it is stored, when the coordinator
// has a secrets key: the store then never holds it in plain text. Without a key it is
// stored as given, and sealed by the first coordinator that has one (SealWebhookSecrets).
func (s *Server) sealWebhookSecret(w http.ResponseWriter, r *http.Request, p *store.Project) bool {
	if s.secrets == nil {
		return true
	}
	if err := s.secrets.SealProjectWebhookSecret(p); err != nil {
		s.log.ErrorContext(r.Context(), "seal a webhook secret", "project", p.Name, "err", err)
		writeError(w, http.StatusInternalServerError, codeInternal, "the webhook secret could not be sealed: internal error", nil)
		return false
	}
	return true
}

// newWebhookSecret returns 32 random bytes in hex: easy to paste into a forge's form.
func newWebhookSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on Linux; it panics rather than return short
	return hex.EncodeToString(b)
}

// check validates a project's settings (all but the default branch, which may need the
// remote) and fills their defaults.
func checkProjectSettings(p *store.Project, problems *projectProblems) {
	if p.RepoURL == "" {
		problems.add("repo_url", "is required: the git remote to build (https://, ssh://, user@host:path or file://)")
	} else if strings.ContainsAny(p.RepoURL, "\x00\n\r") {
		problems.add("repo_url", "holds a control character")
	}
	if p.Provider == "" {
		p.Provider = guessProvider(p.RepoURL)
	}
	if _, err := forge.Lookup(p.Provider, forge.Config{}); err != nil {
		problems.add("provider", "%q is not one of %s", p.Provider, strings.Join(forge.Names(), ", "))
	}
	if p.PipelinePath == "" {
		p.PipelinePath = store.DefaultPipelinePath
	}
	if msg := checkPipelinePath(p.PipelinePath); msg != "" {
		problems.add("pipeline_path", "%s", msg)
	}
	if p.DefaultBranch != "" && !validBranch(p.DefaultBranch) {
		problems.add("default_branch", "%q is not a branch name", p.DefaultBranch)
	}
	if p.APIBaseURL != "" {
		u, err := url.Parse(p.APIBaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems.add("api_base_url", "%q is not an http:// or https:// URL", p.APIBaseURL)
		} else if u.User != nil {
			problems.add("api_base_url", "holds credentials; give the token in api_token_file")
		}
	}
	if p.APITokenFile != "" && !filepath.IsAbs(p.APITokenFile) {
		problems.add("api_token_file", "%q is not an absolute path (it is read on the coordinator)", p.APITokenFile)
	}
	if p.WebhookSecret == "" && p.WebhookSecretSealed.IsZero() {
		p.WebhookSecret = newWebhookSecret()
	}
	checkRepoCredentialSettings(p, problems)
}

// checkRepoCredentialSettings checks the secrets a project names for its repository's
// credential against each other and the remote's kind: a token goes over http(s) only, a
// deploy key over ssh only.
func checkRepoCredentialSettings(p *store.Project, problems *projectProblems) {
	for _, f := range []struct{ field, name string }{
		{"repo_token_secret", p.RepoTokenSecret}, {"repo_ssh_key_secret", p.RepoSSHKeySecret},
		{"repo_known_hosts_secret", p.RepoKnownHostsSecret},
	} {
		if f.name != "" && !pipeline.ValidSecretName(f.name) {
			problems.add(f.field, "%q is not a secret name: use upper case letters, digits and _, not starting with a digit", f.name)
		}
	}
	if strings.ContainsFunc(p.RepoTokenUser, func(r rune) bool { return r < 0x20 || r == 0x7f || r == ':' }) {
		problems.add("repo_token_user", "holds a control character or a colon")
	}
	if p.RepoTokenUser != "" && p.RepoTokenSecret == "" {
		problems.add("repo_token_user", "goes with repo_token_secret, which is not set")
	}
	if p.RepoKnownHostsSecret != "" && p.RepoSSHKeySecret == "" {
		problems.add("repo_known_hosts_secret", "goes with repo_ssh_key_secret, which is not set")
	}
	if p.RepoTokenSecret != "" && p.RepoSSHKeySecret != "" {
		problems.add("repo_ssh_key_secret", "a repository has one credential: give repo_token_secret or repo_ssh_key_secret, not both")
	}
	web := strings.HasPrefix(p.RepoURL, "https://") || strings.HasPrefix(p.RepoURL, "http://")
	switch {
	case p.RepoURL == "":
	case p.RepoTokenSecret != "" && !web:
		problems.add("repo_token_secret", "a token is sent to an http:// or https:// repo_url only; use repo_ssh_key_secret for %s", p.RepoURL)
	case p.RepoSSHKeySecret != "" && (web || strings.HasPrefix(p.RepoURL, "file://") || strings.HasPrefix(p.RepoURL, "/")):
		problems.add("repo_ssh_key_secret", "a deploy key is used with an ssh repo_url only; use repo_token_secret for %s", p.RepoURL)
	}
}

// guessProvider names the forge of a well-known host, and generic for any other.
func guessProvider(repo string) string {
	host := repo
	if u, err := url.Parse(repo); err == nil && u.Host != "" {
		host = u.Hostname()
	} else if at, rest, ok := strings.Cut(repo, "@"); ok && !strings.Contains(at, "/") {
		host, _, _ = strings.Cut(rest, ":") // scp-like git@github.com:owner/name.git
	}
	switch host = strings.ToLower(host); {
	case host == "github.com":
		return "github"
	case host == "gitlab.com":
		return "gitlab"
	case host == "codeberg.org":
		return "forgejo"
	}
	return "generic"
}

// checkPipelinePath says what is wrong with a pipeline path, or "".
func checkPipelinePath(p string) string {
	if strings.ContainsAny(p, "\x00\n\r") {
		return "holds a control character"
	}
	c := path.Clean(strings.TrimPrefix(p, "/"))
	if c == "." || c == ".." || strings.HasPrefix(c, "../") || strings.HasSuffix(p, "/") {
		return fmt.Sprintf("%q is not a file inside the repository", p)
	}
	return ""
}

// validBranch accepts what git accepts as a branch name and nothing that could pass for
// an option or a revision expression.
func validBranch(b string) bool {
	if b == "" || strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") ||
		strings.HasSuffix(b, ".lock") || strings.HasSuffix(b, ".") || strings.Contains(b, "..") ||
		strings.Contains(b, "//") || strings.Contains(b, "@{") || b == "@" {
		return false
	}
	return !strings.ContainsFunc(b, func(r rune) bool {
		return r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r)
	})
}

// discoverDefaultBranch asks the remote which branch its HEAD names. It also proves the
// URL is one git takes (a malformed one fails before any network use).
func (s *Server) discoverDefaultBranch(ctx context.Context, repo string, creds source.Credentials) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, discoverTimeout)
	defer cancel()
	m, err := source.Open(ctx, source.Config{Dir: s.hooks.mirrors, URL: repo, Credentials: creds, Logger: s.log})
	if err != nil {
		return "", err
	}
	defer m.Close()
	return m.DefaultBranch(ctx)
}

// checkRepoURL opens the remote's mirror without fetching: it refuses what git would not
// take (a password in the URL, an unknown scheme) before anything is stored.
func (s *Server) checkRepoURL(ctx context.Context, repo string) error {
	m, err := source.Open(ctx, source.Config{Dir: s.hooks.mirrors, URL: repo, Logger: s.log})
	if err != nil {
		return err
	}
	return m.Close()
}

// settle validates p, checks its remote and discovers its default branch when it names
// none, answering the request and returning false on any problem.
func (s *Server) settle(w http.ResponseWriter, r *http.Request, p *store.Project, problems projectProblems) bool {
	checkProjectSettings(p, &problems)
	s.checkPlainHTTPToken(p, &problems)
	if len(problems) == 0 {
		if p.DefaultBranch == "" {
			// A private repository is asked with its credential, when its secrets are
			// set already (a project made on first use may have them; a new one not).
			creds, err := s.repoCredentials(r.Context(), p)
			var b string
			if err == nil {
				b, err = s.discoverDefaultBranch(r.Context(), p.RepoURL, creds)
			}
			switch {
			case errors.Is(err, source.ErrInvalid):
				problems.add("repo_url", "%v", err)
			case err != nil:
				problems.add("default_branch", "was not given and could not be learned from the repository (%v); give default_branch", err)
			default:
				p.DefaultBranch = b
			}
		} else if err := s.checkRepoURL(r.Context(), p.RepoURL); err != nil {
			problems.add("repo_url", "%v", err)
		}
	}
	if len(problems) > 0 {
		problems.write(w)
		return false
	}
	return true
}

func (s *Server) createProject(w http.ResponseWriter, r *http.Request) {
	body, rerr := s.readBody(w, r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	req, rerr := decodeProjectRequest(body)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	var problems projectProblems
	p := &store.Project{}
	if req.Name == nil || !validNewProjectName(*req.Name) {
		name := ""
		if req.Name != nil {
			name = *req.Name
		}
		writeRequestError(w, newProjectNameError(name))
		return
	}
	p.Name = *req.Name
	if req.RotateWebhookSecret {
		problems.add("rotate_webhook_secret", "is for updates; a new project gets a secret when it gives none")
	}
	req.apply(p, &problems)
	s.checkAPIBaseURL(req, p, &problems)
	if !s.settle(w, r, p, problems) {
		return
	}
	ctx := withAudit(r, auditEvent{Action: "project.created", Project: p.Name, Target: p.Name, Details: projectAuditDetails(nil, p)})
	secret := p.WebhookSecret
	if !s.sealWebhookSecret(w, r, p) {
		return
	}
	if err := s.store.CreateProject(ctx, p); err != nil {
		s.storeError(w, r, "create project", err)
		return
	}
	out := newProjectJSON(p)
	// The secret is shown this once, generated or given, so the forge can be set up
	// from this answer alone.
	out.WebhookSecret = secret
	w.Header().Set("Location", "/api/v1/projects/"+url.PathEscape(p.Name))
	writeJSON(w, http.StatusCreated, out)
}

func (s *Server) listProjects(w http.ResponseWriter, r *http.Request) {
	list, err := s.store.ListProjects(r.Context())
	if err != nil {
		s.storeError(w, r, "list projects", err)
		return
	}
	out := make([]projectJSON, 0, len(list))
	for _, p := range list {
		if ok, err := s.canSee(r.Context(), p.ID, p.Name); err != nil {
			s.storeError(w, r, "list projects", err)
			return
		} else if ok {
			out = append(out, newProjectJSON(p))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"projects": out})
}

// pathProject reads and checks the {name} path value.
func pathProject(r *http.Request) (string, *requestError) {
	name := r.PathValue("name")
	if msg := checkProjectName(name); msg != "" || name == "" {
		if msg == "" {
			msg = "the name is empty"
		}
		return "", badRequest("project name: %s", msg)
	}
	return name, nil
}

// projectInPath loads the project the path names, answering a bad name (400) or the
// store's refusal (404 when there is none) itself, as pathWorkflow does for workflows.
func (s *Server) projectInPath(w http.ResponseWriter, r *http.Request) (*store.Project, bool) {
	name, rerr := pathProject(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return nil, false
	}
	p, err := s.store.GetProjectByName(r.Context(), name)
	if err != nil {
		s.storeError(w, r, "get project", err)
		return nil, false
	}
	return p, true
}

func (s *Server) getProject(w http.ResponseWriter, r *http.Request) {
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, newProjectJSON(p))
}

func (s *Server) updateProject(w http.ResponseWriter, r *http.Request) {
	name, rerr := pathProject(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	body, rerr := s.readBody(w, r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	req, rerr := decodeProjectRequest(body)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	p, err := s.store.GetProjectByName(r.Context(), name)
	if err != nil {
		s.storeError(w, r, "get project", err)
		return
	}
	old := *p
	if !s.adminOnlyChange(w, r, req, p) {
		return
	}
	var problems projectProblems
	if req.Name != nil && *req.Name != name {
		problems.add("name", "a project cannot be renamed: its runs and its forge's webhook URL name it")
	}
	repoChanged := req.RepoURL != nil && strings.TrimSpace(*req.RepoURL) != p.RepoURL
	secret := req.apply(p, &problems)
	s.checkAPIBaseURL(req, p, &problems)
	if repoChanged && req.DefaultBranch == nil {
		// Another repository has its own default branch.
		p.DefaultBranch = ""
	}
	if req.needsNoRepository() {
		// Only settings that need no repository change: the connection is not checked
		// again, and a project made on first use, with no repository, takes them too.
		if len(problems) > 0 {
			problems.write(w)
			return
		}
	} else if !s.settle(w, r, p, problems) {
		return
	}
	ctx := withAudit(r, auditEvent{Action: "project.updated", Project: name, Target: name, Details: projectAuditDetails(&old, p)})
	if !s.sealWebhookSecret(w, r, p) {
		return
	}
	if err := s.store.UpdateProject(ctx, p); err != nil {
		s.storeError(w, r, "update project", err)
		return
	}
	out := newProjectJSON(p)
	out.WebhookSecret = secret
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) deleteProject(w http.ResponseWriter, r *http.Request) {
	name, rerr := pathProject(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if err := s.store.DeleteProject(withAudit(r, auditEvent{Action: "project.deleted", Project: name, Target: name}), name); err != nil {
		s.storeError(w, r, "delete project", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
