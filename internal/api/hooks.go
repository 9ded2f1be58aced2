package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/gantry-ci/gantry/internal/forge"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/trigger"
	"github.com/google/uuid"
)

// DefaultHookFetchTimeout bounds what a webhook may wait for git: fetching the event's
// commit into the mirror and reading the pipeline file there. GitHub gives up on a hook
// after 10 s but still counts the run made after; a first fetch of a big repository can
// take longer, and the forge's redelivery then finds the run already made.
const DefaultHookFetchTimeout = 60 * time.Second

// DefaultMirrorsDir is where the coordinator keeps its git mirrors when it is given no
// directory: under the system's temporary directory, so a PostgreSQL coordinator with no
// data directory of its own still has one.
func DefaultMirrorsDir() string { return filepath.Join(os.TempDir(), "gantry-mirrors") }

// HookResendWindow is how long an event a signed webhook reported (its kind, ref and
// sha) answers a resend under a new delivery id with the runs it started, rather than
// starting more: a forge's retry, or a delivery resent by hand, may come with a new id.
// After it, the same event runs again.
const HookResendWindow = 10 * time.Minute

// MaxHookBodyBytes bounds a webhook's body: GitHub caps its payloads at 25 MB, and a push
// listing many commits and files can pass the 1 MiB other requests are held to.
const MaxHookBodyBytes = 25 << 20

// readBodyUpTo reads the whole body, refusing one over limit with 413.
func readBodyUpTo(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, *requestError) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, &requestError{status: http.StatusRequestEntityTooLarge, code: codePayloadTooLarge,
				msg: fmt.Sprintf("webhook body is larger than %d bytes", tooBig.Limit)}
		}
		return nil, badRequest("read webhook body: %v", err)
	}
	return body, nil
}

// hookSettings configure webhook intake and the coordinator's git mirrors.
type hookSettings struct {
	mirrors      string
	fetchTimeout time.Duration
	plainHTTP    []string // Config.AllowPlainHTTP
}

func newHookSettings(mirrors string, fetchTimeout time.Duration, plainHTTP []string) hookSettings {
	if mirrors == "" {
		mirrors = DefaultMirrorsDir()
	}
	if fetchTimeout <= 0 {
		fetchTimeout = DefaultHookFetchTimeout
	}
	return hookSettings{mirrors: mirrors, fetchTimeout: fetchTimeout, plainHTTP: plainHTTP}
}

// hookAnswer is the answer to a webhook: 202 when it started runs now, 200 when it
// started none (Reason says why) or when it is a redelivery of one that did (Runs are
// the runs the first delivery started).
type hookAnswer struct {
	Ran        bool     `json:"ran"`
	Runs       []string `json:"runs"`
	Reason     string   `json:"reason,omitempty"`
	DeliveryID string   `json:"delivery_id,omitempty"`
	Redelivery bool     `json:"redelivery,omitempty"`
	ResendOf   string   `json:"resend_of,omitempty"`
}

// Error codes of the hook route.
const (
	codeCommitNotFound = "commit_not_found"
	codeFetchFailed    = "fetch_failed"
)

// hookError is a failure to reach the repository, with its answer. Nothing is recorded
// for the delivery, so the forge's redelivery tries again.
type hookError struct {
	status int
	code   string
	err    error
}

func (e *hookError) Error() string { return e.err.Error() }
func (e *hookError) Unwrap() error { return e.err }

// hookRefusedMessage is the one answer to a delivery that does not prove itself: an
// unknown provider or project, a project that takes another forge's webhooks or has no
// secret, and a missing or wrong signature all get it, so a stranger learns nothing of
// which projects exist or which forge each uses. The coordinator's log says which it was.
const hookRefusedMessage = "webhook refused: no project takes webhooks of this provider at this path with this signature"

// refuseHook answers a delivery that did not prove itself, and logs why.
func (s *Server) refuseHook(w http.ResponseWriter, r *http.Request, level slog.Level, why string, attrs ...any) {
	attrs = append([]any{"provider", r.PathValue("provider"), "project", r.PathValue("project"), "why", why}, attrs...)
	s.log.Log(r.Context(), level, "webhook refused", attrs...)
	writeError(w, http.StatusUnauthorized, codeUnauthorized, hookRefusedMessage, nil)
}

func (s *Server) hook(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	provName, name := r.PathValue("provider"), r.PathValue("project")
	// The body is read before anything is looked up, so that its size is refused alike
	// whether or not the project exists.
	body, rerr := readBodyUpTo(w, r, MaxHookBodyBytes)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	prov, err := forge.Lookup(provName, forge.Config{})
	if err != nil {
		s.refuseHook(w, r, slog.LevelInfo, "unknown provider", "err", err)
		return
	}
	proj, err := s.store.GetProjectByName(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		s.refuseHook(w, r, slog.LevelInfo, "no such project")
		return
	}
	if err != nil {
		s.storeError(w, r, "get project", err)
		return
	}
	if proj.RepoURL == "" || !sameProvider(proj.Provider, prov.Name()) {
		s.refuseHook(w, r, slog.LevelInfo, "the project takes no webhooks of this provider", "project_provider", proj.Provider)
		return
	}
	hookSecret, err := secret.ProjectWebhookSecret(s.secrets, proj)
	if err != nil {
		// The forge is told no more than for a bad signature; the admin finds it here.
		s.refuseHook(w, r, slog.LevelError, "the project's webhook secret cannot be opened by this coordinator", "err", err)
		return
	}
	if len(hookSecret) == 0 {
		s.refuseHook(w, r, slog.LevelWarn, "the project has no webhook secret")
		return
	}
	// The signature covers the body as sent, form encoding and all.
	if err := prov.Verify(r, body, hookSecret); err != nil {
		s.refuseHook(w, r, slog.LevelInfo, "bad signature", "err", err)
		return
	}
	payload, rerr := hookPayload(r.Header.Get("Content-Type"), body)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if proj.WebhookSecret != "" && s.secrets != nil {
		// A plain-text secret from before sealing, or set by a coordinator without a key:
		// seal it now that it proved itself (another replica may have done it first).
		p := *proj
		if err := s.secrets.SealProjectWebhookSecret(&p); err == nil {
			err = s.store.SealWebhookSecret(ctx, store.SealWebhookSecretParams{Project: p.Name, OldPlain: proj.WebhookSecret, Sealed: p.WebhookSecretSealed})
			if err != nil && !errors.Is(err, store.ErrConflict) {
				s.log.WarnContext(ctx, "webhook: seal the project's webhook secret", "project", proj.Name, "err", err)
			}
		}
	}
	deliveryID := prov.DeliveryID(r)
	if deliveryID != "" {
		d, err := s.store.GetDelivery(ctx, proj.ID, deliveryID)
		switch {
		case err == nil:
			writeJSON(w, http.StatusOK, deliveryAnswer(d, true))
			return
		case !errors.Is(err, store.ErrNotFound):
			s.storeError(w, r, "look up delivery", err)
			return
		}
	}
	ev, err := prov.Parse(r, payload)
	if err == nil && len(payload) <= store.MaxEventPayload && json.Valid(payload) {
		ev.Payload = payload
	}
	switch {
	case errors.Is(err, forge.ErrIgnored):
		writeJSON(w, http.StatusOK, hookAnswer{Runs: []string{}, Reason: err.Error(), DeliveryID: deliveryID})
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, codeBadRequest, err.Error(), nil)
		return
	}
	if ev.Kind == forge.KindPing {
		writeJSON(w, http.StatusOK, hookAnswer{Runs: []string{},
			Reason: fmt.Sprintf("ping: the %s webhook of project %q is connected", prov.Name(), proj.Name), DeliveryID: deliveryID})
		return
	}
	// The run's idempotency key is the delivery that first reported this event within the
	// window, so a resend under a new delivery id, even one that arrives while the first
	// is still fetching, finds the first one's run.
	keyID := deliveryID
	resendOf := ""
	if !ev.Deleted && ev.SHA != "" {
		claimID := deliveryID
		if claimID == "" {
			claimID = "anonymous:" + uuid.NewString()
		}
		claim, err := s.store.ClaimHookEvent(ctx, store.ClaimHookEventParams{
			ProjectID: proj.ID, Event: hookEventKey(ev), Ref: ev.Ref, SHA: ev.SHA, DeliveryID: claimID, Window: HookResendWindow,
		})
		if err != nil {
			s.storeError(w, r, "claim webhook event", err)
			return
		}
		keyID = claim.DeliveryID
		if claim.DeliveryID != claimID {
			resendOf = claim.DeliveryID
			d, err := s.store.GetDelivery(ctx, proj.ID, claim.DeliveryID)
			switch {
			case err == nil:
				answer := deliveryAnswer(d, true)
				answer.DeliveryID, answer.ResendOf = deliveryID, claim.DeliveryID
				answer.Reason = fmt.Sprintf("a resend of delivery %s (%s of %s at %s, less than %s before): it started these runs",
					claim.DeliveryID, hookEventKey(ev), ev.Ref, ev.SHA, HookResendWindow)
				s.log.InfoContext(ctx, "webhook resend", "project", proj.Name, "delivery", deliveryID, "resend_of", claim.DeliveryID, "sha", ev.SHA)
				writeJSON(w, http.StatusOK, answer)
				return
			case !errors.Is(err, store.ErrNotFound):
				s.storeError(w, r, "look up delivery", err)
				return
			}
			// The first delivery started nothing yet (it is still fetching, or failed): this
			// one tries under its key, and finds its run if it made one meanwhile.
		}
	}
	runs, created, reason, err := s.startFromEvent(ctx, proj, ev, deliveryID, keyID)
	var he *hookError
	switch {
	case errors.As(err, &he):
		s.log.WarnContext(ctx, "webhook: repository unavailable", "project", proj.Name, "delivery", deliveryID, "err", err)
		writeError(w, he.status, he.code, err.Error(), nil)
		return
	case err != nil:
		s.storeError(w, r, "start run from webhook", err)
		return
	}
	answer := hookAnswer{Ran: len(runs) > 0, Runs: idStrings(runs), Reason: reason, DeliveryID: deliveryID}
	if len(runs) > 0 && !created {
		answer.Redelivery, answer.ResendOf = true, resendOf
	}
	if len(runs) > 0 && deliveryID != "" {
		// Only deliveries that started runs are remembered: one that started nothing
		// may be redelivered after the project or its file is fixed, and try again.
		d, first, err := s.store.RecordDelivery(ctx, &store.Delivery{
			ProjectID: proj.ID, DeliveryID: deliveryID, Event: string(ev.Kind), RunIDs: runs, Reason: reason,
		})
		if err != nil {
			s.storeError(w, r, "record delivery", err)
			return
		}
		if !first {
			// A copy of this delivery recorded it first; the runs are the same ones (the
			// delivery id is their idempotency key), and the copy that made them still
			// answers 202.
			answer.Runs, answer.Ran = idStrings(d.RunIDs), len(d.RunIDs) > 0
		}
	}
	status := http.StatusOK
	if created {
		status = http.StatusAccepted
		for _, id := range runs {
			traceRunCreated(ctx, id)
		}
	}
	s.log.InfoContext(ctx, "webhook", "project", proj.Name, "provider", prov.Name(), "delivery", deliveryID,
		"event", ev.Kind, "sha", ev.SHA, "ran", answer.Ran, "reason", answer.Reason)
	writeJSON(w, status, answer)
}

// hookEventKey is what tells events apart for HookResendWindow: the kind, and a pull
// request's action, so closing a pull request is not taken for a resend of its opening.
func hookEventKey(ev *forge.Event) string {
	if ev.Action != "" {
		return string(ev.Kind) + "/" + ev.Action
	}
	return string(ev.Kind)
}

// sameProvider compares provider names by the dialect they speak: gitea and forgejo are
// one.
func sameProvider(a, b string) bool {
	pa, errA := forge.Lookup(a, forge.Config{})
	pb, errB := forge.Lookup(b, forge.Config{})
	return errA == nil && errB == nil && pa.Name() == pb.Name()
}

func deliveryAnswer(d *store.Delivery, redelivery bool) hookAnswer {
	return hookAnswer{Ran: len(d.RunIDs) > 0, Runs: idStrings(d.RunIDs), Reason: d.Reason, DeliveryID: d.DeliveryID, Redelivery: redelivery}
}

func idStrings(ids []uuid.UUID) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = id.String()
	}
	return out
}

// hookPayload returns the JSON of a webhook body: the body itself, or for GitHub's
// application/x-www-form-urlencoded content type its payload field.
func hookPayload(contentType string, body []byte) ([]byte, *requestError) {
	mt := ""
	if contentType != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(contentType); err != nil {
			return nil, badRequest("bad Content-Type %q: %v", contentType, err)
		}
	}
	switch mt {
	case "application/json":
		return body, nil
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, badRequest("decode form-encoded webhook: %v", err)
		}
		payload := form.Get("payload")
		if payload == "" {
			return nil, badRequest("form-encoded webhook has no payload field")
		}
		return []byte(payload), nil
	}
	return nil, &requestError{status: http.StatusUnsupportedMediaType, code: codeUnsupportedMedia,
		msg: fmt.Sprintf("webhook Content-Type %q is not accepted; set the forge to send application/json", contentType)}
}

// triggerEvent converts a forge event into what trigger.Match decides on.
func triggerEvent(ev *forge.Event) trigger.Event {
	tev := trigger.Event{
		Kind: trigger.Kind(ev.Kind), Branch: ev.Branch, Tag: ev.Tag, Action: ev.Action,
		ChangedPaths: ev.ChangedPaths, ChangedPathsIncomplete: ev.ChangedPathsIncomplete, Deleted: ev.Deleted,
	}
	if ev.Kind == forge.KindPullRequest {
		tev.Branch, tev.BaseBranch = "", ev.Branch
	}
	return tev
}

// runTrigger is what a run of proj started by ev records; workers check the commit out
// from the project's repository. A pull request's run has no branch: its head may be any
// branch of any fork, and `if: branch == "main"` must never take it for a push to main.
// Its ref is verified: the delivery was signed with the project's secret, and the
// pipeline file is read at the event's commit.
func runTrigger(proj *store.Project, ev *forge.Event, deliveryID string) store.Trigger {
	tr := store.Trigger{
		Ref: ev.Ref, SHA: ev.SHA, Before: ev.Before, Event: string(ev.Kind), Actor: ev.Actor,
		Repository: ev.Repository.FullName, CloneURL: proj.RepoURL, DeliveryID: deliveryID,
		Verified: store.RefFromWebhook,
	}
	if len(ev.Payload) > 0 {
		p := json.RawMessage(ev.Payload)
		tr.Payload = &p
	}
	tr.SetCommit(ev.Message, ev.AuthorName)
	switch ev.Kind {
	case forge.KindPush:
		tr.Branch = ev.Branch
	case forge.KindTag:
		tr.Tag = ev.Tag
	case forge.KindPullRequest:
		// github.base_ref and github.head_ref; only names, which no if: takes for the
		// run's own branch.
		tr.BaseRef = ev.Branch
		if ev.PullRequest != nil {
			tr.SetCommit(ev.PullRequest.Title, ev.AuthorName)
			tr.PRNumber = ev.PullRequest.Number
			tr.Fork = ev.PullRequest.Fork
			tr.HeadRef = ev.PullRequest.Head.Ref
			if ev.PullRequest.Base.Ref != "" {
				tr.BaseRef = ev.PullRequest.Base.Ref
			}
		}
	}
	return tr
}

// hasPathFilter reports whether on: filters the event's kind by paths, which is when an
// incomplete list of changed paths is worth completing from git.
func hasPathFilter(on *pipeline.Triggers, kind forge.Kind) bool {
	switch {
	case on == nil:
		return false
	case kind == forge.KindPush && on.Push != nil:
		return len(on.Push.Paths) > 0 || len(on.Push.PathsIgnore) > 0
	case kind == forge.KindPullRequest && on.PullRequest != nil:
		return len(on.PullRequest.Paths) > 0 || len(on.PullRequest.PathsIgnore) > 0
	}
	return false
}

// startFromEvent reads the project's pipeline file at exactly the event's commit,
// decides with its on: whether the event runs it, and creates the run: a failed one
// without jobs when the file is invalid. It returns the runs (none when nothing ran),
// whether they were created now (not replayed by a concurrent delivery of the same id),
// and why. keyID names the delivery whose run this one is: deliveryID, or the delivery
// that reported the same event first (HookResendWindow).
func (s *Server) startFromEvent(ctx context.Context, proj *store.Project, ev *forge.Event, deliveryID, keyID string) ([]uuid.UUID, bool, string, error) {
	tev := triggerEvent(ev)
	if ev.Deleted || ev.SHA == "" {
		_, reason := trigger.Match(nil, tev)
		return nil, false, reason, nil
	}
	gitCtx, cancel := context.WithTimeout(ctx, s.hooks.fetchTimeout)
	defer cancel()
	creds, err := s.repoCredentials(gitCtx, proj)
	if err != nil {
		ae := s.repoCredentialsError(ctx, proj, err)
		return nil, false, "", &hookError{ae.status, ae.code, errors.New(ae.msg)}
	}
	m, err := source.Open(gitCtx, source.Config{Dir: s.hooks.mirrors, URL: proj.RepoURL, Credentials: creds, Logger: s.log})
	if errors.Is(err, source.ErrPlainHTTP) {
		return nil, false, "", &hookError{http.StatusUnprocessableEntity, codeRepoCredential, fmt.Errorf("project %q: %w", proj.Name, err)}
	}
	if err != nil {
		return nil, false, "", &hookError{http.StatusBadGateway, codeFetchFailed, fmt.Errorf("open the mirror of project %q: %w", proj.Name, err)}
	}
	defer m.Close()
	file := proj.PipelinePath
	if file == "" {
		file = store.DefaultPipelinePath
	}
	def, err := m.ReadFile(gitCtx, ev.SHA, file)
	tr := runTrigger(proj, ev, deliveryID)
	idem := ""
	if keyID != "" {
		idem = "hook:" + keyID
	}
	var compileErr error
	var plan *pipeline.Plan
	switch {
	case errors.Is(err, source.ErrNotFound):
		return nil, false, fmt.Sprintf("no %s at %s", file, ev.SHA), nil
	case errors.Is(err, source.ErrTooLarge):
		compileErr = fmt.Errorf("%s at %s: %w", file, ev.SHA, err)
	case errors.Is(err, source.ErrCommitNotFound):
		return nil, false, "", &hookError{http.StatusUnprocessableEntity, codeCommitNotFound, err}
	case gitCtx.Err() != nil && ctx.Err() == nil:
		return nil, false, "", &hookError{http.StatusGatewayTimeout, codeFetchFailed,
			fmt.Errorf("fetch %s of project %q: gave up after %s: %w", ev.SHA, proj.Name, s.hooks.fetchTimeout, err)}
	case err != nil:
		return nil, false, "", &hookError{http.StatusBadGateway, codeFetchFailed,
			fmt.Errorf("fetch %s of project %q%s: %w", ev.SHA, proj.Name, repoCredentialNote(proj), err)}
	default:
		read := func(f string) ([]byte, error) { return readAt(gitCtx, m, ev.SHA, f) }
		plan, compileErr = pipeline.Compile(def, pipeline.Options{Limits: s.limits, Path: file, Workflows: s.workflows(gitCtx, read)})
		if compileErr == nil {
			if pinned, err := s.pinActions(ctx, plan); err != nil {
				compileErr = err
			} else {
				plan = pinned
			}
		}
	}
	if compileErr != nil {
		// Not a silent drop: the push made a run, and the run says what is wrong.
		details := pipelineDetails(compileErr)
		errs := make([]store.RunError, len(details))
		for i, d := range details {
			errs[i] = store.RunError{File: d.File, Path: d.Path, Line: d.Line, Column: d.Column, Message: d.Message}
		}
		params := store.CreateFailedRunParams{
			Project: proj.Name, Name: file, Trigger: tr, IdempotencyKey: idem, Definition: def, Errors: errs,
		}
		run, created, err := s.store.CreateFailedRun(ctx, params)
		if err != nil && idem != "" && ctx.Err() == nil {
			run, created, err = s.store.CreateFailedRun(ctx, params) // see createRun
		}
		if err != nil {
			return nil, false, "", err
		}
		return []uuid.UUID{run.ID}, created, fmt.Sprintf("%s at %s is invalid (%s); the run failed", file, ev.SHA, countOf(len(errs), "error")), nil
	}
	if tev.ChangedPathsIncomplete && hasPathFilter(plan.On, ev.Kind) {
		before := ev.Before
		if ev.Kind == forge.KindPullRequest && ev.PullRequest != nil {
			before = ev.PullRequest.Base.SHA
		}
		if before != "" {
			paths, err := m.ChangedPaths(gitCtx, before, ev.SHA)
			if err != nil {
				// Left incomplete, the path filters run rather than skip.
				s.log.WarnContext(ctx, "webhook: list changed paths", "project", proj.Name, "err", err)
			} else {
				tev.ChangedPaths, tev.ChangedPathsIncomplete = paths, false
			}
		}
	}
	ok, reason := trigger.Match(plan.On, tev)
	if !ok {
		return nil, false, reason, nil
	}
	params := store.CreateRunParams{Project: proj.Name, Trigger: tr, IdempotencyKey: idem, Definition: def, Plan: plan}
	run, jobs, created, err := s.store.CreateRun(ctx, params)
	if err != nil && idem != "" && ctx.Err() == nil {
		// On PostgreSQL a copy of the same delivery on another connection or replica can
		// insert its run between this one's look-up of the key and its insert; the unique
		// key then refuses this one. Asked again, the store finds the key and returns
		// that run. Any other failure fails again.
		run, jobs, created, err = s.store.CreateRun(ctx, params)
	}
	if err != nil {
		return nil, false, "", err
	}
	if created {
		s.metrics.JobsCreated.Add(float64(len(jobs)))
	}
	return []uuid.UUID{run.ID}, created, reason, nil
}

// countOf is "1 error" or "3 errors".
func countOf(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
