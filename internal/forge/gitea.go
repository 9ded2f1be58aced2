package forge

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Gitea speaks the webhooks (push, delete, pull_request) and commit status API of Gitea and
// of Forgejo, which kept Gitea's formats and sends its headers under both names.
type Gitea struct{ cfg Config }

// NewGitea returns a Gitea/Forgejo provider. BaseURL has no default: there is no one Gitea.
func NewGitea(cfg Config) *Gitea { return &Gitea{cfg} }

// Name returns "gitea".
func (*Gitea) Name() string { return "gitea" }

// giteaHeader reads a header Forgejo may send as X-Forgejo-* instead of X-Gitea-*.
func giteaHeader(r *http.Request, suffix string) string {
	if v := r.Header.Get("X-Gitea-" + suffix); v != "" {
		return v
	}
	return r.Header.Get("X-Forgejo-" + suffix)
}

// Verify checks X-Gitea-Signature (or X-Forgejo-Signature): the hex HMAC-SHA256 of the body,
// with no prefix. When both are present both must match, so a forged one cannot hide
// behind a good one.
func (g *Gitea) Verify(r *http.Request, body, secret []byte) error {
	gitea, forgejo := r.Header.Get("X-Gitea-Signature"), r.Header.Get("X-Forgejo-Signature")
	if gitea == "" && forgejo == "" {
		return verifyHMAC(g.Name(), "X-Gitea-Signature", "", "", body, secret)
	}
	if gitea != "" {
		if err := verifyHMAC(g.Name(), "X-Gitea-Signature", gitea, "", body, secret); err != nil {
			return err
		}
	}
	if forgejo != "" {
		return verifyHMAC(g.Name(), "X-Forgejo-Signature", forgejo, "", body, secret)
	}
	return nil
}

// DeliveryID returns X-Gitea-Delivery (or X-Forgejo-Delivery).
func (*Gitea) DeliveryID(r *http.Request) string { return giteaHeader(r, "Delivery") }

// Gitea's payloads keep GitHub's shapes for a repository, a user, a commit's paths and a
// pull request's side, so those are read with GitHub's types.

type gtPush struct {
	Ref          string      `json:"ref"`
	Before       string      `json:"before"`
	After        string      `json:"after"`
	TotalCommits int         `json:"total_commits"`
	HeadCommit   *headCommit `json:"head_commit"`
	Repository   *ghRepo     `json:"repository"`
	Pusher       *ghUser     `json:"pusher"`
	Sender       *ghUser     `json:"sender"`
	Commits      []ghCommit  `json:"commits"`
}

type gtDelete struct {
	Ref        string  `json:"ref"`
	RefType    string  `json:"ref_type"`
	Repository *ghRepo `json:"repository"`
	Sender     *ghUser `json:"sender"`
}

type gtPullRequest struct {
	Action      string  `json:"action"`
	Number      int     `json:"number"`
	Repository  *ghRepo `json:"repository"`
	Sender      *ghUser `json:"sender"`
	PullRequest *struct {
		Number int      `json:"number"`
		Title  string   `json:"title"`
		Merged bool     `json:"merged"`
		Head   ghPRSide `json:"head"`
		Base   ghPRSide `json:"base"`
	} `json:"pull_request"`
}

// Parse reads X-Gitea-Event (or X-Forgejo-Event) and the body.
func (g *Gitea) Parse(r *http.Request, body []byte) (*Event, error) {
	name := giteaHeader(r, "Event")
	ev := &Event{Provider: g.Name(), DeliveryID: g.DeliveryID(r)}
	bad := func(err error) (*Event, error) { return nil, &PayloadError{g.Name(), name, err} }
	switch name {
	case "push":
		var p gtPush
		if err := decode(g.Name(), name, body, &p); err != nil {
			return nil, err
		}
		if p.Repository == nil {
			return bad(errors.New("no repository"))
		}
		if err := ev.setRef(p.Ref); err != nil {
			return bad(err)
		}
		if err := ev.setPush(p.Before, p.After); err != nil {
			return bad(err)
		}
		if p.HeadCommit != nil {
			ev.peelTag(p.HeadCommit.ID)
			ev.Message, ev.AuthorName = p.HeadCommit.Message, p.HeadCommit.Author.Name
		}
		ev.Repository = p.Repository.repository()
		ev.Actor = actor(p.Sender, p.Pusher)
		var lists [][]string
		for _, c := range p.Commits {
			lists = append(lists, c.Added, c.Removed, c.Modified)
		}
		ev.ChangedPaths = pathUnion(lists...)
		// Gitea caps the commits it lists and says how many the push had.
		if p.TotalCommits > len(p.Commits) {
			ev.ChangedPathsIncomplete = true
		}
		return ev, nil
	case "delete":
		// Gitea reports a deleted branch or tag as its own event, with the short ref name.
		var p gtDelete
		if err := decode(g.Name(), name, body, &p); err != nil {
			return nil, err
		}
		if p.Repository == nil {
			return bad(errors.New("no repository"))
		}
		var prefix string
		switch p.RefType {
		case "branch":
			prefix = "refs/heads/"
		case "tag":
			prefix = "refs/tags/"
		default:
			return bad(fmt.Errorf("ref_type %q is not branch or tag", p.RefType))
		}
		if err := ev.setRef(prefix + strings.TrimPrefix(p.Ref, prefix)); err != nil {
			return bad(err)
		}
		ev.Deleted = true
		ev.Repository = p.Repository.repository()
		ev.Actor = actor(p.Sender)
		return ev, nil
	case "pull_request":
		var p gtPullRequest
		if err := decode(g.Name(), name, body, &p); err != nil {
			return nil, err
		}
		var action string
		switch p.Action {
		case "opened", "reopened", "closed":
			action = p.Action
		case "synchronized":
			action = ActionSynchronize
		default:
			return nil, &IgnoredError{g.Name(), name + "." + p.Action}
		}
		if p.Repository == nil || p.PullRequest == nil {
			return bad(errors.New("no repository or pull_request"))
		}
		pr := p.PullRequest
		ev.Repository = p.Repository.repository()
		ev.Actor = actor(p.Sender)
		head := PRBranch{pr.Head.Repo.repository(), pr.Head.Ref, pr.Head.SHA}
		base := PRBranch{pr.Base.Repo.repository(), pr.Base.Ref, pr.Base.SHA}
		if err := ev.setPullRequest(action, cmp.Or(p.Number, pr.Number), pr.Title, pr.Merged, head, base); err != nil {
			return bad(err)
		}
		return ev, nil
	case "":
		return bad(errors.New("no X-Gitea-Event or X-Forgejo-Event header"))
	default:
		return nil, &IgnoredError{g.Name(), name}
	}
}

// giteaStates maps Gantry's states onto Gitea's, which are GitHub's: no "running" (still
// pending) nor "cancelled" (the run did not finish: error).
var giteaStates = githubStates

// ReportStatus POSTs /api/v1/repos/{owner}/{repo}/statuses/{sha}.
func (g *Gitea) ReportStatus(ctx context.Context, s Status) error {
	h := http.Header{}
	h.Set("Authorization", "token "+g.cfg.Token)
	h.Set("Accept", "application/json")
	body := map[string]string{
		"state":       giteaStates[s.State],
		"context":     s.Context,
		"description": s.Description,
	}
	return reportStatus(ctx, g.cfg, g.Name(), s, ownerRepoPath("/api/v1"), h, body)
}
