package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/google/uuid"

	"github.com/gantry-ci/gantry/internal/lazyre"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/store"
)

// MaxSecretBytes bounds a secret's value.
const MaxSecretBytes = 64 << 10

// codeNoSecretsKey answers a secret route on a coordinator started without a key.
const codeNoSecretsKey = "no_secrets_key"

// secretRoutes registers the secret routes. Secrets are a maintainer's business; until
// projects have roles of their own, that is an admin. A value goes in and never comes
// out: every answer is metadata.
func (s *Server) secretRoutes() {
	s.handle("GET /api/v1/projects/{name}/secrets", on(thingProject, store.RoleMaintainer), s.listSecrets)
	s.handle("PUT /api/v1/projects/{name}/secrets/{secret}", on(thingProject, store.RoleMaintainer), s.putSecret)
	s.handle("GET /api/v1/projects/{name}/secrets/{secret}", on(thingProject, store.RoleMaintainer), s.getSecret)
	s.handle("DELETE /api/v1/projects/{name}/secrets/{secret}", on(thingProject, store.RoleMaintainer), s.deleteSecret)
	s.handle("GET /api/v1/projects/{name}/secret-settings", on(thingProject, store.RoleMaintainer), s.getSecretSettings)
	s.handle("PUT /api/v1/projects/{name}/secret-settings", on(thingProject, store.RoleMaintainer), s.putSecretSettings)
}

type secretJSON struct {
	Project     string `json:"project"`
	Name        string `json:"name"`
	Environment string `json:"environment"`
	KeyID       string `json:"key_id"`
	CreatedAt   string `json:"created_at"`
	UpdatedAt   string `json:"updated_at"`
}

func newSecretJSON(sc *store.Secret) secretJSON {
	return secretJSON{Project: sc.Project, Name: sc.Name, Environment: sc.Environment, KeyID: sc.KeyID,
		CreatedAt: formatTime(sc.CreatedAt), UpdatedAt: formatTime(sc.UpdatedAt)}
}

// secretPath reads the project and the secret's name from the path.
func secretPath(r *http.Request) (project, name string, rerr *requestError) {
	project, rerr = pathProject(r)
	if rerr != nil {
		return "", "", rerr
	}
	name = r.PathValue("secret")
	if !pipeline.ValidSecretName(name) {
		return "", "", badRequest("secret name %q: use upper case letters, digits and _, not starting with a digit (at most %d bytes)",
			name, pipeline.MaxSecretNameLen)
	}
	return project, name, nil
}

// environmentParam reads ?environment=, "" meaning project-wide.
func environmentParam(r *http.Request) (string, *requestError) {
	env := r.URL.Query().Get("environment")
	if msg := checkEnvironmentName(env); msg != "" {
		return "", badRequest("environment: %s", msg)
	}
	return env, nil
}

// checkEnvironmentName says what is wrong with a secret's environment name: it must be a
// name a job's environment may have, or "" for every environment.
func checkEnvironmentName(env string) string {
	if env == "" {
		return ""
	}
	if !pipeline.EnvironmentNamePattern.Regexp().MatchString(env) {
		return fmt.Sprintf("%q: use letters, digits, _ . and -, at most 100 bytes", env)
	}
	return ""
}

func (s *Server) keyring(w http.ResponseWriter) (*secret.Keyring, bool) {
	if s.secrets == nil {
		writeError(w, http.StatusServiceUnavailable, codeNoSecretsKey,
			"this coordinator has no secrets key: start it with --secrets-key-file or GANTRY_SECRETS_KEY", nil)
		return nil, false
	}
	return s.secrets, true
}

type putSecretRequest struct {
	Value       *string `json:"value"`
	Environment string  `json:"environment"`
}

func (s *Server) putSecret(w http.ResponseWriter, r *http.Request) {
	project, name, rerr := secretPath(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	kr, ok := s.keyring(w)
	if !ok {
		return
	}
	var req putSecretRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		// The decoder's message may quote the body, and the body is a secret.
		if rerr.status == http.StatusBadRequest {
			rerr = badRequest(`decode request: want {"value": "...", "environment": "..."}`)
		}
		writeRequestError(w, rerr)
		return
	}
	switch {
	case req.Value == nil:
		writeRequestError(w, badRequest(`"value" is required`))
		return
	case *req.Value == "":
		writeRequestError(w, badRequest("the value is empty; delete the secret instead"))
		return
	case len(*req.Value) > MaxSecretBytes:
		writeRequestError(w, badRequest("the value is %d bytes; the most is %d", len(*req.Value), MaxSecretBytes))
		return
	}
	if msg := checkEnvironmentName(req.Environment); msg != "" {
		writeRequestError(w, badRequest("environment: %s", msg))
		return
	}
	sealed, err := kr.Seal([]byte(*req.Value), secret.Scope{Project: project, Environment: req.Environment, Name: name})
	if err != nil {
		s.log.ErrorContext(r.Context(), "seal a secret", "project", project, "secret", name, "err", err)
		writeError(w, http.StatusInternalServerError, codeInternal, "seal the secret: internal error", nil)
		return
	}
	if rerr := s.ensureProject(r.Context(), project); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	sc := &store.Secret{Project: project, Environment: req.Environment, Name: name,
		KeyID: sealed.KeyID, WrappedKey: sealed.WrappedKey, Ciphertext: sealed.Ciphertext}
	created, err := s.store.PutSecret(withAudit(r, auditEvent{Action: "secret.set", Project: project, Target: name,
		Details: map[string]any{"environment": req.Environment, "key_id": sealed.KeyID}}), sc)
	if err != nil {
		s.storeError(w, r, "put secret", err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	writeJSON(w, status, newSecretJSON(sc))
}

func (s *Server) listSecrets(w http.ResponseWriter, r *http.Request) {
	project, rerr := pathProject(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	list, err := s.store.ListSecrets(r.Context(), project)
	if err != nil {
		s.storeError(w, r, "list secrets", err)
		return
	}
	out := make([]secretJSON, len(list))
	for i, sc := range list {
		out[i] = newSecretJSON(sc)
	}
	writeJSON(w, http.StatusOK, map[string]any{"secrets": out})
}

func (s *Server) getSecret(w http.ResponseWriter, r *http.Request) {
	project, name, rerr := secretPath(r)
	if rerr == nil {
		var env string
		if env, rerr = environmentParam(r); rerr == nil {
			sc, err := s.store.GetSecret(r.Context(), store.SecretKey{Project: project, Environment: env, Name: name})
			if err != nil {
				s.storeError(w, r, "get secret", err)
				return
			}
			writeJSON(w, http.StatusOK, newSecretJSON(sc))
			return
		}
	}
	writeRequestError(w, rerr)
}

func (s *Server) deleteSecret(w http.ResponseWriter, r *http.Request) {
	project, name, rerr := secretPath(r)
	if rerr == nil {
		var env string
		if env, rerr = environmentParam(r); rerr == nil {
			ctx := withAudit(r, auditEvent{Action: "secret.deleted", Project: project, Target: name,
				Details: map[string]any{"environment": env}})
			if err := s.store.DeleteSecret(ctx, store.SecretKey{Project: project, Environment: env, Name: name}); err != nil {
				s.storeError(w, r, "delete secret", err)
				return
			}
			w.WriteHeader(http.StatusNoContent)
			return
		}
	}
	writeRequestError(w, rerr)
}

type secretSettingsJSON struct {
	SecretsForForks *bool `json:"secrets_for_forks"`
}

func (s *Server) getSecretSettings(w http.ResponseWriter, r *http.Request) {
	project, rerr := pathProject(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	allow, err := s.store.SecretsForForks(r.Context(), project)
	if err != nil {
		s.storeError(w, r, "read secret settings", err)
		return
	}
	writeJSON(w, http.StatusOK, secretSettingsJSON{SecretsForForks: &allow})
}

func (s *Server) putSecretSettings(w http.ResponseWriter, r *http.Request) {
	project, rerr := pathProject(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	var req secretSettingsJSON
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if req.SecretsForForks == nil {
		writeRequestError(w, badRequest(`"secrets_for_forks" (true or false) is required`))
		return
	}
	ctx := withAudit(r, auditEvent{Action: "project.updated", Project: project, Target: project,
		Details: map[string]any{"secrets_for_forks": *req.SecretsForForks}})
	if err := s.store.SetSecretsForForks(ctx, project, *req.SecretsForForks); err != nil {
		s.storeError(w, r, "change secret settings", err)
		return
	}
	writeJSON(w, http.StatusOK, req)
}

// ensureProject makes the project on first use, as a run does, so that a secret may be
// set before the project's first run; a name no new project may have is refused (400).
func (s *Server) ensureProject(ctx context.Context, project string) *requestError {
	_, err := s.store.GetProjectByName(ctx, project)
	if errors.Is(err, store.ErrNotFound) {
		if !validNewProjectName(project) {
			return newProjectNameError(project)
		}
		err = s.store.CreateProject(ctx, &store.Project{Name: project})
		if errors.Is(err, store.ErrConflict) {
			err = nil // made meanwhile
		}
	}
	if err != nil {
		s.log.ErrorContext(ctx, "make a project on first use", "project", project, "err", err)
		return &requestError{status: http.StatusInternalServerError, code: codeInternal, msg: "look up project " + project + ": internal error"}
	}
	return nil
}

// secretEnvPattern is the reference a run's env keeps for a value given as secret env:
// the value itself is sealed in the secrets table under scope "env:<id>".
var secretEnvPattern = lazyre.New(`^\$\{\{ secret_env\.([0-9a-f-]{36}) \}\}$`)

func secretEnvScope(id string) string { return "env:" + id }

// sealSecretEnv stores each secret env value of a run about to be created, sealed like a
// secret, and puts a reference to it in the run's env in its place. drop deletes what it
// stored, for a request that creates no run (it failed, or replayed an idempotency key).
func (s *Server) sealSecretEnv(ctx context.Context, p *store.CreateRunParams, secretEnv map[string]string) (drop func(context.Context), rerr *requestError) {
	var stored []store.SecretKey
	drop = func(ctx context.Context) {
		for _, k := range stored {
			if err := s.store.DeleteSecret(context.WithoutCancel(ctx), k); err != nil && !errors.Is(err, store.ErrNotFound) {
				s.log.WarnContext(ctx, "delete the secret env of a run not created", "project", k.Project, "name", k.Name, "err", err)
			}
		}
	}
	if len(secretEnv) == 0 {
		return drop, nil
	}
	defer func() {
		if rerr != nil {
			drop(ctx)
		}
	}()
	if s.secrets == nil {
		return drop, &requestError{status: http.StatusServiceUnavailable, code: codeNoSecretsKey,
			msg: "secret env needs a secrets key: start the coordinator with --secrets-key-file or GANTRY_SECRETS_KEY"}
	}
	project := p.Project
	if project == "" {
		project = "default"
	}
	if rerr := s.ensureProject(ctx, project); rerr != nil {
		return drop, rerr
	}
	if p.Env == nil {
		p.Env = map[string]string{}
	}
	for _, k := range slices.Sorted(maps.Keys(secretEnv)) {
		v := secretEnv[k]
		if _, dup := p.Env[k]; dup {
			return drop, badRequest("%s is both in env and in secret_env", k)
		}
		if k == "" || strings.ContainsAny(k, "=\x00") || len(v) > MaxSecretBytes {
			return drop, badRequest("secret_env %q: a name without = and a value of at most %d bytes are required", k, MaxSecretBytes)
		}
		id := uuid.NewString()
		scope := secretEnvScope(id)
		sealed, err := s.secrets.Seal([]byte(v), secret.Scope{Project: project, Run: scope, Name: k})
		if err != nil {
			return drop, &requestError{status: http.StatusInternalServerError, code: codeInternal, msg: "seal secret env: internal error"}
		}
		key := store.SecretKey{Project: project, Scope: scope, Name: k}
		if _, err := s.store.PutSecret(ctx, &store.Secret{Project: project, Scope: scope, Name: k,
			KeyID: sealed.KeyID, WrappedKey: sealed.WrappedKey, Ciphertext: sealed.Ciphertext}); err != nil {
			s.log.ErrorContext(ctx, "store secret env", "project", project, "name", k, "err", err)
			return drop, &requestError{status: http.StatusInternalServerError, code: codeInternal, msg: "store secret env: internal error"}
		}
		stored = append(stored, key)
		p.Env[k] = "${{ secret_env." + id + " }}"
	}
	return drop, nil
}

// decodeSecretEnv reads the secret_env of a run request envelope.
func decodeSecretEnv(contentType string, body []byte) map[string]string {
	if !strings.HasPrefix(contentType, "application/json") || !isEnvelope(body) {
		return nil
	}
	var env struct {
		SecretEnv map[string]string `json:"secret_env"`
	}
	if err := json.NewDecoder(bytes.NewReader(body)).Decode(&env); err != nil {
		return nil
	}
	return env.SecretEnv
}

// jobSecrets is what a claimed job is given besides its spec.
type jobSecrets struct {
	// values are the job's secrets by name: exactly those its env refers to.
	values map[string]string
	// from names the project secret a value was read from where that is not its own
	// name: GITHUB_TOKEN's, the secret the project names for it (github_token_secret).
	from map[string]string
	// env are the run's secret env values by variable name.
	env map[string]string
	// failure, when set, is why the job cannot run: it fails before its first step.
	failure string
	// project is the run's project, which the secrets belong to.
	project string
	// repo are the values of the job's repository credential (repocreds.go).
	repo []string
	// notices are what the job's log is told of its secrets (optional ones it has not).
	notices []string
}

func (j jobSecrets) all() []string {
	var out []string
	for _, v := range j.values {
		out = append(out, v)
	}
	for _, v := range j.env {
		out = append(out, v)
	}
	return append(out, j.repo...)
}

// resolveSecrets opens the secrets a job refers to and its run's secret env. A secret that
// is missing, withheld from a fork, or that cannot be opened is a failure naming it; a
// store error is an error.
func (s *Server) resolveSecrets(ctx context.Context, run *store.Run, job *store.Job) (jobSecrets, error) {
	var out jobSecrets
	if run == nil || job == nil || job.Spec == nil {
		return out, nil
	}
	spec := job.Spec
	names, optional := spec.Secrets(), spec.OptionalSecrets()
	envRefs := map[string]string{}
	for k, v := range run.Env {
		if m := secretEnvPattern.Regexp().FindStringSubmatch(v); m != nil {
			envRefs[k] = m[1]
		}
	}
	if len(names) == 0 && len(envRefs) == 0 && len(optional) == 0 {
		return out, nil
	}
	if len(names) == 0 && len(envRefs) == 0 && s.secrets == nil {
		out.notices = append(out.notices, fmt.Sprintf("secrets %s read as empty: this coordinator keeps no secrets (no secrets key)", strings.Join(optional, ", ")))
		return out, nil
	}
	if run.Project == "" {
		// A claim's run carries no project name; the secrets are filed under it.
		full, err := s.store.GetRun(ctx, run.ID)
		if err != nil {
			return out, fmt.Errorf("read the run's project: %w", err)
		}
		run = full
	}
	if s.secrets == nil {
		out.failure = "this job needs secrets, and the coordinator has no secrets key (--secrets-key-file or GANTRY_SECRETS_KEY)"
		return out, nil
	}
	if len(names) > 0 || len(optional) > 0 {
		trusted, why, err := s.forkTrust(ctx, run, job)
		if err != nil {
			return out, err
		}
		switch {
		case !trusted && len(names) > 0:
			out.failure = fmt.Sprintf("secret %s is not given to a pull request from a fork: %s", names[0], why)
			return out, nil
		case !trusted:
			// As on GitHub, a workflow's secrets read as empty in a run from a fork.
			out.notices = append(out.notices, fmt.Sprintf("secrets %s read as empty: %s", strings.Join(optional, ", "), why))
			optional = nil
		}
	}
	out.project = run.Project
	// A job's environment's secret comes first, the project-wide one otherwise.
	environment := ""
	if spec.Environment != nil {
		environment = spec.Environment.Name
	}
	out.values = make(map[string]string, len(names)+len(optional))
	all := append(append([]string(nil), names...), optional...)
	from, err := s.secretSources(ctx, run.Project, all)
	if err != nil {
		return out, err
	}
	out.from = from
	var missing []string
	for _, name := range all {
		stored, what := name, name
		if f, ok := from[name]; ok {
			stored, what = f, fmt.Sprintf("%s (the project's github_token_secret, %s)", name, f)
		}
		var sc *store.Secret
		var err error
		for _, env := range []string{environment, ""} {
			sc, err = s.store.GetSecret(ctx, store.SecretKey{Project: run.Project, Environment: env, Name: stored})
			if !errors.Is(err, store.ErrNotFound) || env == "" {
				break
			}
		}
		if errors.Is(err, store.ErrNotFound) && slices.Contains(optional, name) {
			missing = append(missing, what)
			continue
		}
		if errors.Is(err, store.ErrNotFound) {
			out.failure = fmt.Sprintf("secret %s is not set for project %s", what, run.Project)
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("read secret %s: %w", stored, err)
		}
		v, err := s.secrets.Open(secret.Sealed{KeyID: sc.KeyID, WrappedKey: sc.WrappedKey, Ciphertext: sc.Ciphertext},
			secret.Scope{Project: run.Project, Environment: sc.Environment, Name: stored})
		if err != nil {
			out.failure = fmt.Sprintf("secret %s of project %s cannot be decrypted with this coordinator's secrets key", what, run.Project)
			return out, nil
		}
		out.values[name] = string(v)
	}
	if len(missing) > 0 {
		out.notices = append(out.notices, fmt.Sprintf("secrets %s are not set for project %s: they read as empty, as GitHub reads a secret a repository does not have", strings.Join(missing, ", "), run.Project))
	}
	out.env = make(map[string]string, len(envRefs))
	for k, id := range envRefs {
		scope := secretEnvScope(id)
		sc, err := s.store.GetSecret(ctx, store.SecretKey{Project: run.Project, Scope: scope, Name: k})
		if errors.Is(err, store.ErrNotFound) {
			out.failure = fmt.Sprintf("the run's secret env %s is no longer stored", k)
			return out, nil
		}
		if err != nil {
			return out, fmt.Errorf("read secret env %s: %w", k, err)
		}
		v, err := s.secrets.Open(secret.Sealed{KeyID: sc.KeyID, WrappedKey: sc.WrappedKey, Ciphertext: sc.Ciphertext},
			secret.Scope{Project: run.Project, Run: scope, Name: k})
		if err != nil {
			out.failure = fmt.Sprintf("the run's secret env %s cannot be decrypted with this coordinator's secrets key", k)
			return out, nil
		}
		out.env[k] = string(v)
	}
	return out, nil
}

// secretSources names, for each of names that the project reads from a secret of
// another name, that secret: GITHUB_TOKEN is the secret the project's
// github_token_secret names, when it names one.
func (s *Server) secretSources(ctx context.Context, project string, names []string) (map[string]string, error) {
	if !slices.Contains(names, pipeline.GitHubTokenSecret) {
		return nil, nil
	}
	p, err := s.store.GetProjectByName(ctx, project)
	if err != nil {
		return nil, fmt.Errorf("read project %s's github_token_secret: %w", project, err)
	}
	if p.GitHubToken() == pipeline.GitHubTokenSecret {
		return nil, nil
	}
	return map[string]string{pipeline.GitHubTokenSecret: p.GitHubToken()}, nil
}

// deliverSecrets adds a claimed job's secrets to its claim answer, the one place their
// values leave the coordinator, and keeps them for the log ingest of that attempt.
func (s *Server) deliverSecrets(r *http.Request, c *store.Claim, out *claimedJSON) {
	ctx := r.Context()
	js, err := s.resolveSecrets(ctx, c.Run, c.Job)
	if err != nil {
		s.log.ErrorContext(ctx, "resolve a claimed job's secrets", "job", c.Job.ID, "err", err)
		js = jobSecrets{failure: "the coordinator could not read this job's secrets; retry the job"}
	}
	s.addRepoCredentials(ctx, c, &js, out)
	if js.failure != "" {
		// After deliverNeeds, whose reason to fail the job stands too.
		out.SecretsError = js.failure
	}
	out.Notices = append(out.Notices, js.notices...)
	if len(js.values) > 0 {
		out.Secrets = js.values
	}
	if len(js.env) > 0 {
		env := make(map[string]string, len(out.RunEnv))
		for k, v := range out.RunEnv {
			env[k] = v
		}
		for k, v := range js.env {
			env[k] = v
			out.SecretEnv = append(out.SecretEnv, k)
		}
		out.RunEnv = env
	}
	// Remembered even when there are none, so this replica's log ingest need not ask the
	// store about the attempt's secrets at its first batch.
	s.logs.RememberSecrets(logs.Key{Job: c.Job.ID, Attempt: c.Job.Attempt}, js.all())
	// Each secret handed out is a read, by the worker holding the lease, of the secret
	// stored under its name or under the one the project maps it to.
	for _, name := range slices.Sorted(maps.Keys(js.values)) {
		details := map[string]any{"job": c.Job.ID.String(), "attempt": c.Job.Attempt, "worker": c.Job.WorkerID}
		target := name
		if f, ok := js.from[name]; ok {
			target, details["as"] = f, name
		}
		e := auditEntry(r, auditEvent{Action: "secret.read", Project: js.project, Target: target, Details: details})
		if err := s.store.AppendAudit(ctx, &e); err != nil {
			s.log.ErrorContext(ctx, "record a secret's read by a job", "job", c.Job.ID, "secret", name, "err", err)
		}
	}
}

// logSecrets resolves a job attempt's secret values for the log ingest of a coordinator
// that did not hand the attempt out.
func (s *Server) logSecrets(ctx context.Context, k logs.Key) ([]string, error) {
	job, err := s.store.GetJob(ctx, k.Job)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	run, err := s.store.GetRun(ctx, job.RunID)
	if err != nil {
		return nil, err
	}
	js, err := s.resolveSecrets(ctx, run, job)
	if err != nil {
		return nil, err
	}
	s.addRepoCredentials(ctx, &store.Claim{Job: job, Run: run}, &js, nil)
	return js.all(), nil
}
