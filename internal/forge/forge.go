package forge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/outbound"
)

// Provider is one forge's webhook dialect and status API.
type Provider interface {
	// Name is the provider's canonical registry name ("github", "gitlab", "gitea", "generic").
	Name() string
	// Verify checks that body was sent by someone who knows secret. A missing, malformed or
	// wrong signature, or an empty secret, is an error that matches ErrBadSignature.
	Verify(r *http.Request, body, secret []byte) error
	// Parse turns a verified webhook into an Event. An event Gantry does not act on returns an
	// error matching ErrIgnored (see IgnoredError); a body that is not the forge's documented
	// shape returns one matching ErrMalformed (see PayloadError).
	Parse(r *http.Request, body []byte) (*Event, error)
	// DeliveryID is the forge's id for this delivery, the same on a redelivery; "" if absent.
	DeliveryID(r *http.Request) string
	// ReportStatus sets a commit status on the forge. A failed attempt returns a *StatusError
	// that says whether trying again can help.
	ReportStatus(ctx context.Context, s Status) error
}

// Kind is what happened at the forge.
type Kind string

// The kinds of Event. A tag push is KindTag, not KindPush, so a filter on branches never
// matches a tag by accident; `on: push: tags:` is for the trigger package to map onto KindTag.
const (
	KindPush        Kind = "push"
	KindTag         Kind = "tag"
	KindPullRequest Kind = "pull_request"
	KindPing        Kind = "ping"
)

// Pull request actions, in GitHub's words whichever forge sent them.
const (
	ActionOpened      = "opened"
	ActionSynchronize = "synchronize"
	ActionReopened    = "reopened"
	ActionClosed      = "closed"
)

// Event is one webhook delivery, in Gantry's words whatever forge sent it.
type Event struct {
	Provider   string `json:"provider"`              // canonical provider name
	DeliveryID string `json:"delivery_id,omitempty"` // the forge's delivery id, the same on a redelivery
	Kind       Kind   `json:"kind"`
	Action     string `json:"action,omitempty"` // pull requests only: ActionOpened, ActionSynchronize, ...

	Repository Repository `json:"repository"` // the repository the hook belongs to (a PR's base repository)

	// Payload is the delivery's body as the forge sent it, set by the webhook intake.
	Payload json.RawMessage `json:"-"`

	// Ref is the full ref to build: refs/heads/X, refs/tags/X, or for a pull request the
	// forge's ref for its head in the base repository (refs/pull/N/head on GitHub and Gitea,
	// refs/merge-requests/N/head on GitLab), which is fetchable even from a fork.
	Ref string `json:"ref,omitempty"`
	// SHA is the commit to build, for an annotated tag the commit it points at; "" when
	// Deleted.
	SHA string `json:"sha,omitempty"`
	// Before is the commit Ref pointed at before a push ("" when the ref is new or unknown).
	Before string `json:"before,omitempty"`
	// Branch is the branch pushed to, or for a pull request its base (target) branch, which
	// is what `on: pull_request: branches` filters on.
	Branch string `json:"branch,omitempty"`
	Tag    string `json:"tag,omitempty"` // the tag pushed, without refs/tags/
	// Deleted is set when the push deleted Branch or Tag; nothing should be built.
	Deleted bool   `json:"deleted,omitempty"`
	Actor   string `json:"actor,omitempty"` // login of who caused the event
	// Message and AuthorName are the built commit's message and author's name, as the
	// push lists its head commit; "" when the delivery does not say (a pull request's
	// title is PullRequest.Title).
	Message    string `json:"message,omitempty"`
	AuthorName string `json:"author_name,omitempty"`

	PullRequest *PullRequest `json:"pull_request,omitempty"` // set for KindPullRequest

	// ChangedPaths is the union of paths added, modified and removed by the push's commits,
	// sorted. ChangedPathsIncomplete says the forge's list may be short (it lists a bounded
	// number of commits, a new ref lists none, pull requests list no files): a caller that
	// filters on paths must then diff Before..SHA (or base..head) itself.
	ChangedPaths           []string `json:"changed_paths,omitempty"`
	ChangedPathsIncomplete bool     `json:"changed_paths_incomplete,omitempty"`
}

// Repository names a repository and how to clone it.
type Repository struct {
	FullName      string `json:"full_name,omitempty"` // owner/name; on GitLab the full namespace path, group/sub/name
	CloneURL      string `json:"clone_url,omitempty"` // https
	SSHURL        string `json:"ssh_url,omitempty"`
	HTMLURL       string `json:"html_url,omitempty"`
	DefaultBranch string `json:"default_branch,omitempty"`
}

// PullRequest is a pull (merge) request's two sides.
type PullRequest struct {
	Number int      `json:"number"`
	Title  string   `json:"title,omitempty"`
	Head   PRBranch `json:"head"`
	Base   PRBranch `json:"base"`
	Fork   bool     `json:"fork,omitempty"`   // the head lives in another repository than the base
	Merged bool     `json:"merged,omitempty"` // set on ActionClosed when the request was merged
}

// PRBranch is one side of a pull request.
type PRBranch struct {
	Repository Repository `json:"repository"`    // may be empty when the head's fork was deleted
	Ref        string     `json:"ref,omitempty"` // branch name, without refs/heads/
	SHA        string     `json:"sha,omitempty"`
}

// State is a commit status in Gantry's words; each provider maps it onto its forge's.
type State string

// The states ReportStatus accepts.
const (
	StatePending   State = "pending"
	StateRunning   State = "running"
	StateSuccess   State = "success"
	StateFailure   State = "failure"
	StateError     State = "error"
	StateCancelled State = "cancelled"
	// StateSkipped is a job that did not run (its needs failed, or its if: was false).
	StateSkipped State = "skipped"
)

// States lists every State, in lifecycle order.
var States = []State{StatePending, StateRunning, StateSuccess, StateFailure, StateError, StateCancelled, StateSkipped}

// Status is one commit status to report.
type Status struct {
	Repository  string // full name, as in Event.Repository.FullName
	SHA         string
	State       State
	Context     string // "gantry/<pipeline>" for a run, "gantry/<pipeline>/<job display name>" for a job
	Description string
	TargetURL   string // link to the run page
}

func (s Status) validate() error {
	if s.Repository == "" {
		return errors.New("status has no repository")
	}
	if !validSHA(s.SHA) {
		return fmt.Errorf("status sha %q is not a commit id", s.SHA)
	}
	if !slices.Contains(States, s.State) {
		return fmt.Errorf("status state %q is not one of %v", s.State, States)
	}
	if s.Context == "" {
		return errors.New("status has no context")
	}
	return nil
}

// Config is what a provider needs to report statuses. Webhook verification and parsing need
// none of it.
type Config struct {
	// BaseURL is the forge's API root: for GitHub the REST root (https://api.github.com, or
	// https://HOST/api/v3 for GitHub Enterprise Server); for GitLab and Gitea the instance
	// (https://gitlab.com, https://codeberg.org), to which /api/v4 or /api/v1 is appended;
	// for generic the URL statuses are POSTed to.
	BaseURL string
	// Token authenticates status calls: a GitHub token with statuses:write, a GitLab token
	// with the api scope, a Gitea token with write:repository, or the generic endpoint's
	// bearer token.
	Token string
	// HTTPClient sends status calls; nil means a client with a 30 s timeout that reaches
	// no private address and follows no redirect (outbound.Policy).
	HTTPClient *http.Client
	// Clock reads Retry-After dates; nil means the wall clock.
	Clock clock.Clock
}

func (c Config) client() *http.Client {
	if c.HTTPClient != nil {
		return c.HTTPClient
	}
	return defaultClient
}

func (c Config) clock() clock.Clock {
	if c.Clock != nil {
		return c.Clock
	}
	return clock.Real{}
}

// defaultClient bounds every status call, so a forge that never answers cannot hold an
// outbox dispatcher forever, and, like every request the coordinator makes on a project's
// behalf, reaches no address of its own network and follows no redirect.
var defaultClient = outbound.Policy{}.Client(30 * time.Second)

// Errors callers test with errors.Is.
var (
	ErrBadSignature    = errors.New("bad or missing webhook signature")
	ErrIgnored         = errors.New("event is not handled")
	ErrMalformed       = errors.New("malformed webhook payload")
	ErrUnknownProvider = errors.New("unknown forge provider")
)

// SignatureError says why a webhook failed verification. It never carries the expected
// signature or the secret.
type SignatureError struct {
	Provider string
	Reason   string
}

func (e *SignatureError) Error() string {
	return fmt.Sprintf("verify %s webhook: %s", e.Provider, e.Reason)
}

// Is makes a SignatureError match ErrBadSignature.
func (e *SignatureError) Is(target error) bool { return target == ErrBadSignature }

// IgnoredError names an event Gantry does not act on, so the caller can answer
// "nothing ran: event X is not handled".
type IgnoredError struct {
	Provider string
	Event    string // the forge's event name, with the action when that is what is ignored
}

func (e *IgnoredError) Error() string {
	return fmt.Sprintf("%s event %q is not handled", e.Provider, e.Event)
}

// Is makes an IgnoredError match ErrIgnored.
func (e *IgnoredError) Is(target error) bool { return target == ErrIgnored }

// PayloadError is a body that is not valid JSON or lacks what its event must carry.
type PayloadError struct {
	Provider string
	Event    string
	Err      error
}

func (e *PayloadError) Error() string {
	return fmt.Sprintf("parse %s %q webhook: %v", e.Provider, e.Event, e.Err)
}

// Unwrap returns the decoding or validation error.
func (e *PayloadError) Unwrap() error { return e.Err }

// Is makes a PayloadError match ErrMalformed.
func (e *PayloadError) Is(target error) bool { return target == ErrMalformed }

// StatusError is a status report the forge did not accept, or never answered.
type StatusError struct {
	Provider   string
	StatusCode int // 0 when no answer came
	// Retryable says whether the same request may succeed later (5xx, 429, rate limits,
	// network errors); a 4xx means the request itself is wrong and retrying cannot help.
	Retryable bool
	// RetryAfter is how long the forge asked us to wait (Retry-After or a rate limit
	// reset); 0 when it did not say.
	RetryAfter time.Duration
	Message    string // the start of the forge's answer, or the network error
	Err        error
}

func (e *StatusError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "report %s commit status: ", e.Provider)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, "HTTP %d", e.StatusCode)
		if e.Message != "" {
			fmt.Fprintf(&b, ": %s", e.Message)
		}
	} else {
		b.WriteString(e.Message)
	}
	if e.Retryable {
		b.WriteString(" (retryable")
		if e.RetryAfter > 0 {
			fmt.Fprintf(&b, " after %s", e.RetryAfter)
		}
		b.WriteString(")")
	}
	return b.String()
}

// Unwrap returns the network error, if any.
func (e *StatusError) Unwrap() error { return e.Err }

// Retryable reports whether err, from ReportStatus, may succeed if tried again, and how long
// the forge asked to wait first.
func Retryable(err error) (bool, time.Duration) {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Retryable, se.RetryAfter
	}
	return false, 0
}

// registry maps every accepted name to its constructor; "forgejo" is Gitea's fork and
// speaks its dialect.
var registry = map[string]func(Config) Provider{
	"github":  func(c Config) Provider { return NewGitHub(c) },
	"gitlab":  func(c Config) Provider { return NewGitLab(c) },
	"gitea":   func(c Config) Provider { return NewGitea(c) },
	"forgejo": func(c Config) Provider { return NewGitea(c) },
	"generic": func(c Config) Provider { return NewGeneric(c) },
}

// Names lists the provider names Lookup accepts, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Lookup builds the provider registered under name (case-insensitive).
func Lookup(name string, cfg Config) (Provider, error) {
	ctor, ok := registry[strings.ToLower(strings.TrimSpace(name))]
	if !ok {
		return nil, fmt.Errorf("%w %q: want one of %s", ErrUnknownProvider, name, strings.Join(Names(), ", "))
	}
	return ctor(cfg), nil
}
