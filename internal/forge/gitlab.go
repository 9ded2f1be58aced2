package forge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
)

// GitLab speaks GitLab's webhooks (Push Hook, Tag Push Hook, Merge Request Hook) and commit
// status API.
type GitLab struct{ cfg Config }

// NewGitLab returns a GitLab provider; BaseURL defaults to https://gitlab.com.
func NewGitLab(cfg Config) *GitLab {
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://gitlab.com"
	}
	return &GitLab{cfg}
}

// Name returns "gitlab".
func (*GitLab) Name() string { return "gitlab" }

// Verify checks that X-Gitlab-Token equals the secret. GitLab sends the secret itself, not a
// signature of the body: it proves who sent the hook, and only TLS protects what it says.
func (g *GitLab) Verify(r *http.Request, _, secret []byte) error {
	if len(secret) == 0 {
		return &SignatureError{g.Name(), "no webhook secret is configured"}
	}
	tok := r.Header.Get("X-Gitlab-Token")
	if tok == "" {
		return &SignatureError{g.Name(), "no X-Gitlab-Token header"}
	}
	if !equalSecret(tok, secret) {
		return &SignatureError{g.Name(), "X-Gitlab-Token does not match the secret"}
	}
	return nil
}

// DeliveryID returns the first of Idempotency-Key (GitLab 17.4+, kept across retries),
// X-Gitlab-Event-UUID and X-Gitlab-Webhook-UUID that is present.
func (*GitLab) DeliveryID(r *http.Request) string {
	for _, h := range []string{"Idempotency-Key", "X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID"} {
		if v := r.Header.Get(h); v != "" {
			return v
		}
	}
	return ""
}

type glProject struct {
	ID                int    `json:"id"`
	PathWithNamespace string `json:"path_with_namespace"`
	WebURL            string `json:"web_url"`
	GitHTTPURL        string `json:"git_http_url"`
	GitSSHURL         string `json:"git_ssh_url"`
	DefaultBranch     string `json:"default_branch"`
}

func (p *glProject) repository() Repository {
	if p == nil {
		return Repository{}
	}
	return Repository{p.PathWithNamespace, p.GitHTTPURL, p.GitSSHURL, p.WebURL, p.DefaultBranch}
}

type glPush struct {
	ObjectKind        string     `json:"object_kind"`
	Ref               string     `json:"ref"`
	Before            string     `json:"before"`
	After             string     `json:"after"`
	CheckoutSHA       string     `json:"checkout_sha"`
	UserUsername      string     `json:"user_username"`
	Project           *glProject `json:"project"`
	TotalCommitsCount int        `json:"total_commits_count"`
	Commits           []struct {
		ID       string                `json:"id"`
		Message  string                `json:"message"`
		Author   struct{ Name string } `json:"author"`
		Added    []string              `json:"added"`
		Modified []string              `json:"modified"`
		Removed  []string              `json:"removed"`
	} `json:"commits"`
}

type glMergeRequest struct {
	ObjectKind string `json:"object_kind"`
	User       *struct {
		Username string `json:"username"`
	} `json:"user"`
	Project          *glProject `json:"project"`
	ObjectAttributes *struct {
		IID             int        `json:"iid"`
		Title           string     `json:"title"`
		Action          string     `json:"action"`
		State           string     `json:"state"`
		OldRev          string     `json:"oldrev"`
		SourceBranch    string     `json:"source_branch"`
		TargetBranch    string     `json:"target_branch"`
		SourceProjectID int        `json:"source_project_id"`
		TargetProjectID int        `json:"target_project_id"`
		Source          *glProject `json:"source"`
		Target          *glProject `json:"target"`
		LastCommit      *struct {
			ID string `json:"id"`
		} `json:"last_commit"`
	} `json:"object_attributes"`
}

// Parse reads X-Gitlab-Event and the body.
func (g *GitLab) Parse(r *http.Request, body []byte) (*Event, error) {
	name := r.Header.Get("X-Gitlab-Event")
	ev := &Event{Provider: g.Name(), DeliveryID: g.DeliveryID(r)}
	bad := func(err error) (*Event, error) { return nil, &PayloadError{g.Name(), name, err} }
	switch name {
	case "Push Hook", "Tag Push Hook":
		var p glPush
		if err := decode(g.Name(), name, body, &p); err != nil {
			return nil, err
		}
		if p.Project == nil {
			return bad(errors.New("no project"))
		}
		if err := ev.setRef(p.Ref); err != nil {
			return bad(err)
		}
		if (ev.Kind == KindTag) != (name == "Tag Push Hook") {
			return bad(fmt.Errorf("ref %q in a %s", p.Ref, name))
		}
		if err := ev.setPush(p.Before, p.After); err != nil {
			return bad(err)
		}
		ev.peelTag(p.CheckoutSHA)
		ev.Repository = p.Project.repository()
		ev.Actor = p.UserUsername
		var lists [][]string
		for _, c := range p.Commits {
			lists = append(lists, c.Added, c.Modified, c.Removed)
			if c.ID != "" && (c.ID == p.After || c.ID == p.CheckoutSHA) {
				ev.Message, ev.AuthorName = c.Message, c.Author.Name
			}
		}
		ev.ChangedPaths = pathUnion(lists...)
		// GitLab lists at most 20 commits and says how many there were.
		if p.TotalCommitsCount > len(p.Commits) {
			ev.ChangedPathsIncomplete = true
		}
		return ev, nil
	case "Merge Request Hook":
		var p glMergeRequest
		if err := decode(g.Name(), name, body, &p); err != nil {
			return nil, err
		}
		a := p.ObjectAttributes
		if a == nil || p.Project == nil {
			return bad(errors.New("no object_attributes or project"))
		}
		var action string
		merged := false
		switch a.Action {
		case "open":
			action = ActionOpened
		case "reopen":
			action = ActionReopened
		case "update":
			// An update without oldrev changed the title, labels or the like, not the code.
			if a.OldRev == "" {
				return nil, &IgnoredError{g.Name(), name + ".update"}
			}
			action = ActionSynchronize
		case "close":
			action = ActionClosed
		case "merge":
			action, merged = ActionClosed, true
		default:
			return nil, &IgnoredError{g.Name(), name + "." + a.Action}
		}
		if a.IID <= 0 {
			return bad(fmt.Errorf("merge request iid %d", a.IID))
		}
		if a.LastCommit == nil || !validSHA(a.LastCommit.ID) {
			return bad(errors.New("last_commit.id is not a commit id"))
		}
		if !validRefName(a.TargetBranch) {
			return bad(fmt.Errorf("target branch %q is not a branch name", a.TargetBranch))
		}
		ev.Kind, ev.Action = KindPullRequest, action
		ev.Repository = p.Project.repository()
		ev.Ref = fmt.Sprintf("refs/merge-requests/%d/head", a.IID)
		ev.SHA = a.LastCommit.ID
		if validSHA(a.OldRev) {
			ev.Before = a.OldRev
		}
		ev.Branch = a.TargetBranch
		if p.User != nil {
			ev.Actor = p.User.Username
		}
		base := a.Target.repository()
		if base.FullName == "" {
			base = ev.Repository
		}
		ev.PullRequest = &PullRequest{
			Number: a.IID,
			Title:  a.Title,
			Head:   PRBranch{a.Source.repository(), a.SourceBranch, a.LastCommit.ID},
			// A merge request event does not name the target's commit.
			Base:   PRBranch{base, a.TargetBranch, ""},
			Fork:   a.SourceProjectID != a.TargetProjectID,
			Merged: merged,
		}
		ev.ChangedPathsIncomplete = true
		return ev, nil
	case "":
		return bad(errors.New("no X-Gitlab-Event header"))
	default:
		return nil, &IgnoredError{g.Name(), name}
	}
}

// gitlabStates maps Gantry's states onto GitLab's; GitLab has no separate "error".
var gitlabStates = map[State]string{
	StatePending:   "pending",
	StateRunning:   "running",
	StateSuccess:   "success",
	StateFailure:   "failed",
	StateError:     "failed",
	StateCancelled: "canceled",
	StateSkipped:   "skipped",
}

// gitlabMaxDescription keeps descriptions within what GitLab's status column holds.
const gitlabMaxDescription = 255

// ReportStatus POSTs /api/v4/projects/{url-encoded path}/statuses/{sha}.
func (g *GitLab) ReportStatus(ctx context.Context, s Status) error {
	h := http.Header{}
	h.Set("PRIVATE-TOKEN", g.cfg.Token)
	body := map[string]string{
		"state":       gitlabStates[s.State],
		"name":        s.Context,
		"description": truncate(s.Description, gitlabMaxDescription),
	}
	return reportStatus(ctx, g.cfg, g.Name(), s, gitlabProjectPath, h, body)
}

// gitlabProjectPath addresses any project path: it is one path segment, so its slashes must
// travel as %2F.
func gitlabProjectPath(repository string) (string, bool) {
	return "/api/v4/projects/" + url.PathEscape(repository), true
}
