package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Generic accepts Gantry's own webhook format, for forges Gantry does not know and for
// scripts, and reports statuses by POSTing them as JSON to one configured URL.
//
// The body (docs/triggers.md):
//
//	{
//	  "event": "push",                  // push (default), tag, pull_request or ping
//	  "ref": "refs/heads/main",         // refs/heads/X or refs/tags/X; for pull_request the ref holding its head
//	  "sha": "<40 or 64 hex>",          // all zeros: the ref was deleted
//	  "before": "<hex>",                // optional
//	  "repository": {"full_name": "team/app", "clone_url": "https://...", "ssh_url": "", "html_url": "", "default_branch": "main"},
//	  "actor": "alice",
//	  "message": "Fix the parser",      // optional: the commit's message and author's name
//	  "author_name": "Alice",
//	  "changed_paths": ["a/b.go"],      // optional; absent means unknown, so callers diff
//	  "pull_request": {"number": 7, "action": "opened", "title": "",
//	                   "head": {"ref": "feature", "sha": "<hex>", "repository": {...}},
//	                   "base": {"ref": "main", "sha": "<hex>"}}
//	}
type Generic struct{ cfg Config }

// NewGeneric returns the generic provider. BaseURL is the URL statuses are POSTed to.
func NewGeneric(cfg Config) *Generic { return &Generic{cfg} }

// Name returns "generic".
func (*Generic) Name() string { return "generic" }

// Verify checks X-Gantry-Signature-256: "sha256=" and the hex HMAC-SHA256 of the body, as
// GitHub signs, so any HMAC tool can sign for it.
func (g *Generic) Verify(r *http.Request, body, secret []byte) error {
	return verifyHMAC(g.Name(), "X-Gantry-Signature-256", r.Header.Get("X-Gantry-Signature-256"), "sha256=", body, secret)
}

// DeliveryID returns X-Gantry-Delivery.
func (*Generic) DeliveryID(r *http.Request) string { return r.Header.Get("X-Gantry-Delivery") }

type genRepo struct {
	FullName      string `json:"full_name"`
	CloneURL      string `json:"clone_url"`
	SSHURL        string `json:"ssh_url"`
	HTMLURL       string `json:"html_url"`
	DefaultBranch string `json:"default_branch"`
}

func (r *genRepo) repository() Repository {
	if r == nil {
		return Repository{}
	}
	return Repository{r.FullName, r.CloneURL, r.SSHURL, r.HTMLURL, r.DefaultBranch}
}

type genSide struct {
	Ref        string   `json:"ref"`
	SHA        string   `json:"sha"`
	Repository *genRepo `json:"repository"`
}

type genPayload struct {
	Event        string    `json:"event"`
	Ref          string    `json:"ref"`
	SHA          string    `json:"sha"`
	Before       string    `json:"before"`
	Repository   *genRepo  `json:"repository"`
	Actor        string    `json:"actor"`
	Message      string    `json:"message"`
	AuthorName   string    `json:"author_name"`
	ChangedPaths *[]string `json:"changed_paths"`
	PullRequest  *struct {
		Number int     `json:"number"`
		Action string  `json:"action"`
		Title  string  `json:"title"`
		Merged bool    `json:"merged"`
		Head   genSide `json:"head"`
		Base   genSide `json:"base"`
	} `json:"pull_request"`
}

// Parse reads the Gantry JSON body; the event kind is in the body, not a header.
func (g *Generic) Parse(r *http.Request, body []byte) (*Event, error) {
	var p genPayload
	if err := decode(g.Name(), "", body, &p); err != nil {
		return nil, err
	}
	name := p.Event
	if name == "" {
		name = string(KindPush)
	}
	bad := func(err error) (*Event, error) { return nil, &PayloadError{g.Name(), name, err} }
	ev := &Event{Provider: g.Name(), DeliveryID: g.DeliveryID(r), Actor: p.Actor, Message: p.Message, AuthorName: p.AuthorName}
	switch Kind(name) {
	case KindPing:
		ev.Kind = KindPing
		ev.Repository = p.Repository.repository()
		return ev, nil
	case KindPush, KindTag, KindPullRequest:
	default:
		return nil, &IgnoredError{g.Name(), name}
	}
	if p.Repository == nil || (p.Repository.CloneURL == "" && p.Repository.FullName == "") {
		return bad(errors.New("repository has neither full_name nor clone_url"))
	}
	ev.Repository = p.Repository.repository()
	if Kind(name) == KindPullRequest {
		pr := p.PullRequest
		if pr == nil {
			return bad(errors.New("no pull_request"))
		}
		switch pr.Action {
		case ActionOpened, ActionSynchronize, ActionReopened, ActionClosed:
		default:
			return nil, &IgnoredError{g.Name(), name + "." + pr.Action}
		}
		if pr.Number <= 0 {
			return bad(fmt.Errorf("pull request number %d", pr.Number))
		}
		rest, ok := strings.CutPrefix(p.Ref, "refs/")
		if !ok || !validRefName(rest) {
			return bad(fmt.Errorf("ref %q is not a full ref name", p.Ref))
		}
		sha := p.SHA
		if sha == "" {
			sha = pr.Head.SHA
		}
		if !validSHA(sha) {
			return bad(fmt.Errorf("sha %q is not a commit id", sha))
		}
		if !validRefName(pr.Base.Ref) {
			return bad(fmt.Errorf("base ref %q is not a branch name", pr.Base.Ref))
		}
		ev.Kind, ev.Action = KindPullRequest, pr.Action
		ev.Ref, ev.SHA, ev.Branch = p.Ref, sha, pr.Base.Ref
		if validSHA(p.Before) {
			ev.Before = p.Before
		}
		head, base := pr.Head.Repository.repository(), pr.Base.Repository.repository()
		if base == (Repository{}) {
			base = ev.Repository
		}
		if head == (Repository{}) {
			head = ev.Repository
		}
		headSHA := pr.Head.SHA
		if headSHA == "" {
			headSHA = sha
		}
		ev.PullRequest = &PullRequest{
			Number: pr.Number,
			Title:  pr.Title,
			Head:   PRBranch{head, pr.Head.Ref, headSHA},
			Base:   PRBranch{base, pr.Base.Ref, pr.Base.SHA},
			Fork:   head != base,
			Merged: pr.Merged,
		}
	} else {
		if err := ev.setRef(p.Ref); err != nil {
			return bad(err)
		}
		if Kind(name) == KindTag && ev.Kind != KindTag {
			return bad(fmt.Errorf("event tag with ref %q", p.Ref))
		}
		if err := ev.setPush(p.Before, p.SHA); err != nil {
			return bad(err)
		}
	}
	if p.ChangedPaths != nil {
		ev.ChangedPaths = pathUnion(*p.ChangedPaths)
	}
	// Paths the sender did not list are unknown, not empty.
	ev.ChangedPathsIncomplete = p.ChangedPaths == nil && !ev.Deleted
	return ev, nil
}

// ReportStatus POSTs the status as JSON to BaseURL, in Gantry's own state words, with the
// token as a bearer token when one is configured.
func (g *Generic) ReportStatus(ctx context.Context, s Status) error {
	if err := s.validate(); err != nil {
		return fmt.Errorf("report generic commit status: %w", err)
	}
	if g.cfg.BaseURL == "" {
		return errors.New("report generic commit status: no status URL is configured")
	}
	h := http.Header{}
	if g.cfg.Token != "" {
		h.Set("Authorization", "Bearer "+g.cfg.Token)
	}
	body := map[string]string{
		"repository":  s.Repository,
		"sha":         s.SHA,
		"state":       string(s.State),
		"context":     s.Context,
		"description": s.Description,
		"target_url":  s.TargetURL,
	}
	return postStatus(ctx, g.cfg, g.Name(), g.cfg.BaseURL, h, body)
}
