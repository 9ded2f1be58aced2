package forge

import (
	"cmp"
	"context"
	"errors"
	"net/http"
)

// GitHub speaks GitHub's webhooks (push, pull_request, ping) and commit status API.
type GitHub struct{ cfg Config }

// NewGitHub returns a GitHub provider; BaseURL defaults to https://api.github.com.
func NewGitHub(cfg Config) *GitHub {
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.github.com"
	}
	return &GitHub{cfg}
}

// Name returns "github".
func (*GitHub) Name() string { return "github" }

// Verify checks X-Hub-Signature-256: "sha256=" and the hex HMAC-SHA256 of the body.
func (g *GitHub) Verify(r *http.Request, body, secret []byte) error {
	return verifyHMAC(g.Name(), "X-Hub-Signature-256", r.Header.Get("X-Hub-Signature-256"), "sha256=", body, secret)
}

// DeliveryID returns X-GitHub-Delivery.
func (*GitHub) DeliveryID(r *http.Request) string { return r.Header.Get("X-GitHub-Delivery") }

type ghRepo struct {
	FullName      string `json:"full_name"`
	CloneURL      string `json:"clone_url"`
	SSHURL        string `json:"ssh_url"`
	HTMLURL       string `json:"html_url"`
	DefaultBranch string `json:"default_branch"`
}

func (r *ghRepo) repository() Repository {
	if r == nil {
		return Repository{}
	}
	return Repository{r.FullName, r.CloneURL, r.SSHURL, r.HTMLURL, r.DefaultBranch}
}

type ghUser struct {
	Login string `json:"login"`
}

type ghCommit struct {
	Added    []string `json:"added"`
	Removed  []string `json:"removed"`
	Modified []string `json:"modified"`
}

// headCommit is the head commit a GitHub or Gitea push lists.
type headCommit struct {
	ID      string `json:"id"`
	Message string `json:"message"`
	Author  struct {
		Name string `json:"name"`
	} `json:"author"`
}

type ghPush struct {
	Ref        string      `json:"ref"`
	Before     string      `json:"before"`
	After      string      `json:"after"`
	Deleted    bool        `json:"deleted"`
	Commits    []ghCommit  `json:"commits"`
	HeadCommit *headCommit `json:"head_commit"`
	Repository *ghRepo     `json:"repository"`
	Sender     *ghUser     `json:"sender"`
}

type ghPRSide struct {
	Ref  string  `json:"ref"`
	SHA  string  `json:"sha"`
	Repo *ghRepo `json:"repo"`
}

type ghPullRequest struct {
	Action      string  `json:"action"`
	Number      int     `json:"number"`
	Before      string  `json:"before"`
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

type ghPing struct {
	Zen        string  `json:"zen"`
	Repository *ghRepo `json:"repository"`
	Sender     *ghUser `json:"sender"`
}

// githubMaxCommits is how many commits GitHub lists in a push webhook at most; a push that
// lists that many may have had more.
const githubMaxCommits = 20

// Parse reads X-GitHub-Event and the body.
func (g *GitHub) Parse(r *http.Request, body []byte) (*Event, error) {
	name := r.Header.Get("X-GitHub-Event")
	ev := &Event{Provider: g.Name(), DeliveryID: g.DeliveryID(r)}
	bad := func(err error) (*Event, error) { return nil, &PayloadError{g.Name(), name, err} }
	switch name {
	case "push":
		var p ghPush
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
		ev.Deleted = ev.Deleted || p.Deleted
		if ev.Deleted {
			ev.SHA = ""
		}
		if p.HeadCommit != nil {
			ev.peelTag(p.HeadCommit.ID)
			ev.Message, ev.AuthorName = p.HeadCommit.Message, p.HeadCommit.Author.Name
		}
		ev.Repository = p.Repository.repository()
		ev.Actor = actor(p.Sender)
		var lists [][]string
		for _, c := range p.Commits {
			lists = append(lists, c.Added, c.Removed, c.Modified)
		}
		ev.ChangedPaths = pathUnion(lists...)
		if len(p.Commits) >= githubMaxCommits {
			ev.ChangedPathsIncomplete = true
		}
		return ev, nil
	case "pull_request":
		var p ghPullRequest
		if err := decode(g.Name(), name, body, &p); err != nil {
			return nil, err
		}
		switch p.Action {
		case ActionOpened, ActionSynchronize, ActionReopened, ActionClosed:
		default:
			return nil, &IgnoredError{g.Name(), name + "." + p.Action}
		}
		if p.Repository == nil || p.PullRequest == nil {
			return bad(errors.New("no repository or pull_request"))
		}
		pr := p.PullRequest
		ev.Repository = p.Repository.repository()
		if validSHA(p.Before) {
			ev.Before = p.Before
		}
		ev.Actor = actor(p.Sender)
		head := PRBranch{pr.Head.Repo.repository(), pr.Head.Ref, pr.Head.SHA}
		base := PRBranch{pr.Base.Repo.repository(), pr.Base.Ref, pr.Base.SHA}
		if err := ev.setPullRequest(p.Action, cmp.Or(p.Number, pr.Number), pr.Title, pr.Merged, head, base); err != nil {
			return bad(err)
		}
		return ev, nil
	case "ping":
		var p ghPing
		if err := decode(g.Name(), name, body, &p); err != nil {
			return nil, err
		}
		ev.Kind = KindPing
		ev.Repository = p.Repository.repository()
		ev.Actor = actor(p.Sender)
		return ev, nil
	case "":
		return bad(errors.New("no X-GitHub-Event header"))
	default:
		return nil, &IgnoredError{g.Name(), name}
	}
}

// githubStates maps Gantry's states onto the four GitHub knows. GitHub has no "running",
// "cancelled" or "skipped": a running job is still pending, a cancelled one did not finish,
// which GitHub calls error, and a skipped one is no failure of the commit (its
// description says it was skipped).
var githubStates = map[State]string{
	StatePending:   "pending",
	StateRunning:   "pending",
	StateSuccess:   "success",
	StateFailure:   "failure",
	StateError:     "error",
	StateCancelled: "error",
	StateSkipped:   "success",
}

// githubMaxDescription is the longest description GitHub accepts (longer answers 422).
const githubMaxDescription = 140

// ReportStatus POSTs /repos/{owner}/{repo}/statuses/{sha}.
func (g *GitHub) ReportStatus(ctx context.Context, s Status) error {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+g.cfg.Token)
	h.Set("Accept", "application/vnd.github+json")
	h.Set("X-GitHub-Api-Version", "2022-11-28")
	body := map[string]string{
		"state":       githubStates[s.State],
		"context":     s.Context,
		"description": truncate(s.Description, githubMaxDescription),
	}
	return reportStatus(ctx, g.cfg, g.Name(), s, ownerRepoPath(""), h, body)
}

// truncate shortens s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
