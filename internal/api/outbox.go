package api

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"

	"github.com/gantry-ci/gantry/internal/store"
)

func (s *Server) outboxRoutes() {
	// Messages carry what runs report and where webhooks go: admins only, as are the
	// subscriptions, whose secrets sign what Gantry sends.
	s.handle("GET /api/v1/outbox", admins, s.listOutbox)
	s.handle("POST /api/v1/outbox/{id}/redeliver", admins, s.redeliverOutbox)
	s.handle("POST /api/v1/projects/{name}/webhooks", on(thingProject, store.RoleMaintainer), s.createWebhook)
	s.handle("GET /api/v1/projects/{name}/webhooks", on(thingProject, store.RoleMaintainer), s.listWebhooks)
	s.handle("DELETE /api/v1/projects/{name}/webhooks/{id}", on(thingProject, store.RoleMaintainer), s.deleteWebhook)
}

// outboxJSON is an outbox message as the API shows it.
type outboxJSON struct {
	ID            string          `json:"id"`
	Topic         string          `json:"topic"`
	State         string          `json:"state"` // pending, failed, dead, delivered or superseded
	Attempts      int             `json:"attempts"`
	LastError     string          `json:"last_error,omitempty"`
	NextAttemptAt string          `json:"next_attempt_at,omitempty"`
	CreatedAt     string          `json:"created_at"`
	DeliveredAt   string          `json:"delivered_at,omitempty"`
	DeadAt        string          `json:"dead_at,omitempty"`
	Payload       json.RawMessage `json:"payload"`
}

func newOutboxJSON(m *store.OutboxMessage) outboxJSON {
	out := outboxJSON{ID: m.ID.String(), Topic: m.Topic, Attempts: m.Attempts, LastError: m.LastError,
		CreatedAt: formatTime(m.CreatedAt), DeliveredAt: formatTime(m.DeliveredAt), DeadAt: formatTime(m.DeadAt),
		Payload: json.RawMessage(m.Payload)}
	switch {
	case !m.DeliveredAt.IsZero() && m.LastError == store.OutboxSupersededNote:
		out.State = string(store.OutboxSuperseded)
	case !m.DeliveredAt.IsZero():
		out.State = string(store.OutboxDelivered)
	case !m.DeadAt.IsZero():
		out.State = string(store.OutboxDead)
	case m.LastError != "":
		out.State, out.NextAttemptAt = string(store.OutboxFailed), formatTime(m.NextAttempt)
	default:
		out.State, out.NextAttemptAt = string(store.OutboxPending), formatTime(m.NextAttempt)
	}
	if !json.Valid(m.Payload) {
		// Every message Gantry enqueues is JSON; one that is not is shown, not hidden.
		b, _ := json.Marshal(string(m.Payload))
		out.Payload = b
	}
	return out
}

var outboxStates = []store.OutboxState{store.OutboxPending, store.OutboxFailed, store.OutboxDead, store.OutboxDelivered, store.OutboxSuperseded}

func (s *Server) listOutbox(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := store.ListOutboxParams{State: store.OutboxState(q.Get("state")), Topic: q.Get("topic")}
	if p.State != "" && !slices.Contains(outboxStates, p.State) {
		writeError(w, http.StatusBadRequest, codeBadRequest, "state "+strconv.Quote(string(p.State))+" is not pending, failed, dead, delivered or superseded", nil)
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			writeError(w, http.StatusBadRequest, codeBadRequest, "limit "+strconv.Quote(v)+" is not a number from 1 to 500", nil)
			return
		}
		p.Limit = n
	}
	ms, err := s.store.ListOutbox(r.Context(), p)
	if err != nil {
		s.storeError(w, r, "list outbox", err)
		return
	}
	out := make([]outboxJSON, len(ms))
	for i, m := range ms {
		out[i] = newOutboxJSON(m)
	}
	writeJSON(w, http.StatusOK, map[string]any{"messages": out})
}

func (s *Server) redeliverOutbox(w http.ResponseWriter, r *http.Request) {
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	if err := s.store.RedeliverOutbox(r.Context(), id); err != nil {
		s.storeError(w, r, "redeliver message", err)
		return
	}
	m, err := s.store.GetOutbox(r.Context(), id)
	if err != nil {
		s.storeError(w, r, "get message", err)
		return
	}
	writeJSON(w, http.StatusOK, newOutboxJSON(m))
}

// webhookJSON is a subscription as the API shows it: its secret only in the answer that
// created it.
type webhookJSON struct {
	ID        string   `json:"id"`
	Project   string   `json:"project"`
	URL       string   `json:"url"`
	Events    []string `json:"events"`
	Secret    string   `json:"secret,omitempty"`
	CreatedAt string   `json:"created_at"`
}

func newWebhookJSON(project string, h *store.Webhook) webhookJSON {
	return webhookJSON{ID: h.ID.String(), Project: project, URL: h.URL, Events: h.Events, CreatedAt: formatTime(h.CreatedAt)}
}

// webhookRequest is the body of POST /api/v1/projects/{name}/webhooks.
type webhookRequest struct {
	URL string `json:"url"`
	// Secret keys the HMAC-SHA256 signature; when empty, one is made and returned once.
	Secret string `json:"secret"`
	// Events default to run.finished.
	Events []string `json:"events"`
}

func (s *Server) createWebhook(w http.ResponseWriter, r *http.Request) {
	name, rerr := pathProject(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	var req webhookRequest
	if rerr := s.decodeJSON(w, r, &req); rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	var problems projectProblems
	if u, err := url.Parse(req.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		problems.add("url", "%q is not an absolute http or https URL", req.URL)
	} else if err := s.outbound.CheckURL(req.URL); err != nil {
		// Checked again on every delivery, on the address dialed: a name may resolve
		// into the coordinator's network later.
		problems.add("url", "%v", err)
	}
	if len(req.Secret) > maxWebhookSecret {
		problems.add("secret", "is longer than %d bytes", maxWebhookSecret)
	}
	if len(req.Events) == 0 {
		req.Events = []string{store.WebhookRunFinished}
	}
	for i, ev := range req.Events {
		if ev != store.WebhookRunFinished && ev != store.WebhookJobFinished {
			problems.add("events["+strconv.Itoa(i)+"]", "%q is not %s or %s", ev, store.WebhookRunFinished, store.WebhookJobFinished)
		}
	}
	if len(problems) > 0 {
		problems.write(w)
		return
	}
	p, err := s.store.GetProjectByName(r.Context(), name)
	if err != nil {
		s.storeError(w, r, "get project", err)
		return
	}
	secret := req.Secret
	if secret == "" {
		b := make([]byte, 32)
		_, _ = rand.Read(b)
		secret = hex.EncodeToString(b)
	}
	// In the order the store lists them, so the answer reads like a later list.
	var events []string
	for _, ev := range []string{store.WebhookRunFinished, store.WebhookJobFinished} {
		if slices.Contains(req.Events, ev) {
			events = append(events, ev)
		}
	}
	h := &store.Webhook{ProjectID: p.ID, URL: req.URL, Secret: secret, Events: events}
	// Sealed before it is stored when the coordinator has a secrets key; without one it
	// is stored as given, and sealed by the first coordinator that has one.
	if s.secrets != nil {
		if err := s.secrets.SealWebhookSubscriptionSecret(h); err != nil {
			s.log.ErrorContext(r.Context(), "seal a webhook subscription's secret", "project", name, "err", err)
			writeError(w, http.StatusInternalServerError, codeInternal, "the webhook secret could not be sealed: internal error", nil)
			return
		}
	}
	if err := s.store.CreateWebhook(r.Context(), h); err != nil {
		s.storeError(w, r, "create webhook", err)
		return
	}
	out := newWebhookJSON(name, h)
	out.Secret = secret
	writeJSON(w, http.StatusCreated, out)
}

// checkAPIBaseURL refuses a new api_base_url the outbox would refuse to call: one that
// names by address a host of the coordinator's own network --outbound-allow does not
// list. What else is wrong with it checkProjectSettings says.
func (s *Server) checkAPIBaseURL(req *projectRequest, p *store.Project, problems *projectProblems) {
	if req.APIBaseURL == nil || p.APIBaseURL == "" {
		return
	}
	if u, err := url.Parse(p.APIBaseURL); err != nil || u.Host == "" || u.User != nil {
		return
	}
	if err := s.outbound.CheckURL(p.APIBaseURL); err != nil {
		problems.add("api_base_url", "%v", err)
	}
}

func (s *Server) listWebhooks(w http.ResponseWriter, r *http.Request) {
	p, ok := s.projectInPath(w, r)
	if !ok {
		return
	}
	hooks, err := s.store.ListWebhooks(r.Context(), p.ID)
	if err != nil {
		s.storeError(w, r, "list webhooks", err)
		return
	}
	out := make([]webhookJSON, len(hooks))
	for i, h := range hooks {
		out[i] = newWebhookJSON(p.Name, h)
	}
	writeJSON(w, http.StatusOK, map[string]any{"webhooks": out})
}

func (s *Server) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	name, rerr := pathProject(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	id, rerr := pathID(r)
	if rerr != nil {
		writeRequestError(w, rerr)
		return
	}
	p, err := s.store.GetProjectByName(r.Context(), name)
	if err != nil {
		s.storeError(w, r, "get project", err)
		return
	}
	if err := s.store.DeleteWebhook(r.Context(), p.ID, id); err != nil {
		s.storeError(w, r, "delete webhook", err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
