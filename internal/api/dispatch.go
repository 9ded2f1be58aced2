package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strings"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/trigger"
)

// Error codes of the dispatch routes.
const (
	codeRefNotFound   = "ref_not_found"
	codeNoPipeline    = "no_pipeline"
	codeNoDispatch    = "no_dispatch"
	codeInvalidInputs = "invalid_inputs"
	codeNoRepository  = "no_repository"
	codeDisabled      = "disabled"
)

// InputEnvPrefix begins the name of the variable each dispatch input is given to steps
// in: input environment is GANTRY_INPUT_ENVIRONMENT.
const InputEnvPrefix = "GANTRY_INPUT_"

// apiError is a request that cannot be done, with its answer.
type apiError struct {
	status  int
	code    string
	msg     string
	details []errorDetail
}

func (e *apiError) Error() string { return e.msg }

func (e *apiError) write(w http.ResponseWriter) { writeError(w, e.status, e.code, e.msg, e.details) }

// dispatchRequest is the body of POST /api/v1/projects/{name}/dispatches and
// POST /api/v1/workflows/{id}/dispatches.
type dispatchRequest struct {
	// Ref is a branch, a tag, a full ref name or a commit id; the project's default
	// branch when empty.
	Ref string `json:"ref"`
	// Inputs are JSON strings, booleans or numbers; each is checked against its type.
	Inputs map[string]json.RawMessage `json:"inputs"`
}

// decodeDispatch reads a dispatch request: one JSON object, no unknown fields; an empty
// body is a dispatch of the default branch with no inputs.
func decodeDispatch(body []byte) (string, map[string]string, *requestError) {
	if len(bytes.TrimSpace(body)) == 0 {
		return "", nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	var req dispatchRequest
	if err := dec.Decode(&req); err != nil {
		return "", nil, badRequest("decode dispatch request: %v", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return "", nil, badRequest("decode dispatch request: unexpected data after the JSON object")
	}
	inputs := make(map[string]string, len(req.Inputs))
	names := make([]string, 0, len(req.Inputs))
	for name := range req.Inputs {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		raw := bytes.TrimSpace(req.Inputs[name])
		var s string
		switch {
		case len(raw) > 0 && raw[0] == '"':
			if err := json.Unmarshal(raw, &s); err != nil {
				return "", nil, badRequest("inputs.%s: %v", name, err)
			}
		case string(raw) == "true" || string(raw) == "false":
			s = string(raw)
		case len(raw) > 0 && (raw[0] == '-' || raw[0] >= '0' && raw[0] <= '9'):
			// A number keeps the text it was sent as; the input's type parses it.
			s = string(raw)
		default:
			return "", nil, badRequest("inputs.%s: want a string, a boolean or a number, found %s", name, raw)
		}
		inputs[name] = s
	}
	return strings.TrimSpace(req.Ref), inputs, nil
}

// atRef is a project's repository at the commit a ref names.
type atRef struct {
	ref source.Ref // Name is "" when the ref was a commit id
	// branch is the branch the ref names, "" for a tag or a commit.
	branch string
	tag    string
	file   string // the pipeline file's path
	def    []byte // its content at ref.SHA; nil unless asked for
	// message and author are the commit's, "" when not read.
	message, author string
}

// resolveProjectRef resolves ref (the project's default branch when "") in the project's
// mirror to a commit and, when readFile, reads the project's pipeline file there.
func (s *Server) resolveProjectRef(ctx context.Context, proj *store.Project, ref string, readFile bool) (*atRef, *apiError) {
	if proj.RepoURL == "" {
		return nil, &apiError{status: http.StatusUnprocessableEntity, code: codeNoRepository,
			msg: fmt.Sprintf("project %q is not connected to a repository (gantry project update %s --repo URL)", proj.Name, proj.Name)}
	}
	if ref == "" {
		ref = proj.DefaultBranch
	}
	if ref == "" {
		return nil, &apiError{status: http.StatusUnprocessableEntity, code: codeRefNotFound,
			msg: fmt.Sprintf("project %q has no default branch: give a ref", proj.Name)}
	}
	gitCtx, cancel := context.WithTimeout(ctx, s.hooks.fetchTimeout)
	defer cancel()
	fail := func(what string, err error) *apiError {
		switch {
		case errors.Is(err, source.ErrInvalid):
			return &apiError{status: http.StatusUnprocessableEntity, code: codeBadRequest, msg: fmt.Sprintf("ref: %v", err)}
		case errors.Is(err, source.ErrNotFound), errors.Is(err, source.ErrCommitNotFound):
			return &apiError{status: http.StatusUnprocessableEntity, code: codeRefNotFound,
				msg: fmt.Sprintf("project %q: %s: %v", proj.Name, what, err)}
		case gitCtx.Err() != nil && ctx.Err() == nil:
			return &apiError{status: http.StatusGatewayTimeout, code: codeFetchFailed,
				msg: fmt.Sprintf("project %q: %s: gave up after %s: %v", proj.Name, what, s.hooks.fetchTimeout, err)}
		}
		return &apiError{status: http.StatusBadGateway, code: codeFetchFailed,
			msg: fmt.Sprintf("project %q: %s%s: %v", proj.Name, what, repoCredentialNote(proj), err)}
	}
	creds, err := s.repoCredentials(gitCtx, proj)
	if err != nil {
		return nil, s.repoCredentialsError(ctx, proj, err)
	}
	m, err := source.Open(gitCtx, source.Config{Dir: s.hooks.mirrors, URL: proj.RepoURL, Credentials: creds, Logger: s.log})
	if err != nil {
		return nil, fail("open the mirror", err)
	}
	defer m.Close()
	resolved, err := m.ResolveRef(gitCtx, ref)
	if err != nil {
		return nil, fail("resolve "+ref, err)
	}
	out := &atRef{ref: resolved, file: proj.PipelinePath}
	if out.file == "" {
		out.file = store.DefaultPipelinePath
	}
	out.branch, _ = strings.CutPrefix(resolved.Name, "refs/heads/")
	if out.branch == resolved.Name {
		out.branch = ""
	}
	if tag, ok := strings.CutPrefix(resolved.Name, "refs/tags/"); ok {
		out.tag = tag
	}
	// The commit's message and author, for the runs list; nothing decides on them.
	if msg, author, err := m.Commit(gitCtx, resolved.SHA); err == nil {
		out.message, out.author = msg, author
	}
	if !readFile {
		return out, nil
	}
	out.def, err = m.ReadFile(gitCtx, resolved.SHA, out.file)
	switch {
	case errors.Is(err, source.ErrNotFound):
		return nil, &apiError{status: http.StatusUnprocessableEntity, code: codeNoPipeline,
			msg: fmt.Sprintf("project %q has no %s at %s (%s)", proj.Name, out.file, ref, resolved.SHA)}
	case errors.Is(err, source.ErrTooLarge):
		return nil, &apiError{status: http.StatusUnprocessableEntity, code: codeInvalidPipeline,
			msg: fmt.Sprintf("%s at %s: %v", out.file, resolved.SHA, err)}
	case err != nil:
		return nil, fail("read "+out.file, err)
	}
	return out, nil
}

// invalidPipeline answers a definition that does not compile, with every mistake.
func invalidPipeline(err error) *apiError {
	details := pipelineDetails(err)
	return &apiError{status: http.StatusUnprocessableEntity, code: codeInvalidPipeline,
		msg: "the pipeline has " + countOf(len(details), "error"), details: details}
}

// checkInputs validates given inputs against the pipeline's on: dispatch, answering 422
// with every bad input.
func checkInputs(on *pipeline.Triggers, given map[string]string) (map[string]string, *apiError) {
	var spec *pipeline.DispatchTrigger
	if on != nil {
		spec = on.Dispatch
	}
	values, errs := trigger.ValidateInputs(spec, given)
	if len(errs) == 0 {
		return values, nil
	}
	details := make([]errorDetail, len(errs))
	for i, err := range errs {
		d := errorDetail{Message: err.Error(), Code: codeInvalidInputs}
		var ie *trigger.InputError
		if errors.As(err, &ie) {
			d.Path, d.Message = "inputs."+ie.Input, ie.Message
		}
		details[i] = d
	}
	msg := details[0].Path + ": " + details[0].Message
	if len(details) > 1 {
		msg = fmt.Sprintf("%d inputs are wrong", len(details))
	}
	return nil, &apiError{status: http.StatusUnprocessableEntity, code: codeInvalidInputs, msg: msg, details: details}
}

// inputEnv gives each input to steps as GANTRY_INPUT_<NAME>: the name upper-cased, with
// every character a shell variable name cannot hold made _.
func inputEnv(values map[string]string) map[string]string {
	env := make(map[string]string, len(values))
	for name, v := range values {
		key := strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z':
				return r - 'a' + 'A'
			case r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
				return r
			}
			return '_'
		}, name)
		env[InputEnvPrefix+key] = v
	}
	return env
}

// actor names who started a run by hand: the token's name, "" with auth off.
func actor(ctx context.Context) string {
	if tk := tokenFrom(ctx); tk != nil {
		return tk.Name
	}
	return ""
}

// principal is the user the caller acts for (store.Token.Principal), "" with auth off.
func principal(ctx context.Context) string {
	if tk := tokenFrom(ctx); tk != nil {
		return tk.Principal()
	}
	return ""
}

// adminRef is what a ref given by the caller is verified by: the admin is trusted to say
// which branch a run is of (and with auth off every caller is the admin); anyone else's
// ref is recorded as given and not verified (store.Trigger.RefVerified).
func adminRef(ctx context.Context) store.RefSource {
	if tk := tokenFrom(ctx); tk == nil || tk.Role == store.RoleAdmin {
		return store.RefFromAdmin
	}
	return ""
}

// dispatchRun creates the run of a dispatch and answers it like POST /api/v1/runs.
func (s *Server) dispatchRun(w http.ResponseWriter, r *http.Request, p store.CreateRunParams) {
	p.IdempotencyKey = r.Header.Get("Idempotency-Key")
	plan, err := s.pinActions(r.Context(), p.Plan)
	if err != nil {
		writeError(w, http.StatusUnprocessableEntity, codeInvalidPipeline, err.Error(), pipelineDetails(err))
		return
	}
	p.Plan = plan
	run, jobs, created, err := s.store.CreateRun(r.Context(), p)
	if err != nil {
		s.storeError(w, r, "create run", err)
		return
	}
	s.log.InfoContext(r.Context(), "dispatch", "project", p.Project, "run", run.ID, "ref", p.Trigger.Ref,
		"sha", p.Trigger.SHA, "workflow", p.Trigger.WorkflowID, "created", created)
	s.answerCreatedRun(w, r, run, jobs, created)
}

// dispatchTrigger is what a dispatched run records of the commit it runs at and who
// dispatched it. The caller says how the ref is verified.
func dispatchTrigger(ctx context.Context, proj *store.Project, at *atRef, values map[string]string, verified store.RefSource) store.Trigger {
	tr := store.Trigger{Event: string(trigger.KindDispatch), Actor: actor(ctx), User: principal(ctx), Verified: verified}
	if len(values) > 0 {
		iv := store.InputValues(values)
		tr.Inputs = &iv
	}
	if at != nil {
		tr.Ref, tr.SHA, tr.Branch, tr.Tag, tr.CloneURL = at.ref.Name, at.ref.SHA, at.branch, at.tag, proj.RepoURL
		tr.SetCommit(at.message, at.author)
	}
	return tr
}

// dispatchProject starts a run of a repository project's pipeline file at a ref: POST
// /api/v1/projects/{name}/dispatches.
func (s *Server) dispatchProject(w http.ResponseWriter, r *http.Request) {
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
	ref, given, rerr := decodeDispatch(body)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	proj, err := s.store.GetProjectByName(r.Context(), name)
	if err != nil {
		s.storeError(w, r, "get project", err)
		return
	}
	at, aerr := s.resolveProjectRef(r.Context(), proj, ref, true)
	if aerr != nil {
		aerr.write(w)
		return
	}
	gitCtx, cancel := context.WithTimeout(r.Context(), s.hooks.fetchTimeout)
	plan, err := pipeline.Compile(at.def, pipeline.Options{Limits: s.limits, Path: at.file,
		Workflows: s.workflows(gitCtx, s.repoFiles(gitCtx, proj, at.ref.SHA))})
	cancel()
	if err != nil {
		invalidPipeline(err).write(w)
		return
	}
	if ok, reason := trigger.Match(plan.On, trigger.Event{Kind: trigger.KindDispatch}); !ok {
		writeError(w, http.StatusUnprocessableEntity, codeNoDispatch,
			fmt.Sprintf("the pipeline has no on: dispatch (%s at %s: %s)", at.file, at.ref.SHA, reason), nil)
		return
	}
	values, aerr := checkInputs(plan.On, given)
	if aerr != nil {
		aerr.write(w)
		return
	}
	// The coordinator resolved the ref in its own mirror and read the pipeline file there:
	// the run is the repository's at that ref, whoever asked for it.
	s.dispatchRun(w, r, store.CreateRunParams{
		Project: proj.Name, Trigger: dispatchTrigger(r.Context(), proj, at, values, store.RefFromRepository),
		Definition: at.def, Plan: plan, Env: inputEnv(values),
	})
}
