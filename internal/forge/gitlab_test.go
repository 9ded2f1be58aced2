package forge_test

import (
	"net/http"
	"testing"

	"github.com/gantry-ci/gantry/internal/forge"
	"github.com/gantry-ci/gantry/internal/forge/forgetest"
)

func gitlabRepo(path string) forge.Repository {
	return forge.Repository{
		FullName:      path,
		CloneURL:      "https://gitlab.example.com/" + path + ".git",
		SSHURL:        "git@gitlab.example.com:" + path + ".git",
		HTMLURL:       "https://gitlab.example.com/" + path,
		DefaultBranch: "main",
	}
}

func TestGitLab(t *testing.T) {
	t.Parallel()
	repo := gitlabRepo("platform/ci/web-app")
	ev := func(name string) http.Header { return header("X-Gitlab-Event", name) }
	mr := func(action, before string, fork, merged bool) forge.Event {
		head := gitlabRepo("ada/web-app")
		if !fork {
			head = repo
		}
		return forge.Event{
			Kind: forge.KindPullRequest, Action: action, Repository: repo,
			Ref: "refs/merge-requests/42/head", SHA: shaHead, Before: before, Branch: "main", Actor: "ada",
			PullRequest: &forge.PullRequest{
				Number: 42, Title: "Retry flaky uploads",
				Head: forge.PRBranch{Repository: head, Ref: "retry-uploads", SHA: shaHead},
				Base: forge.PRBranch{Repository: repo, Ref: "main"},
				Fork: fork, Merged: merged,
			},
			ChangedPathsIncomplete: true,
		}
	}
	forgetest.Run(t, forgetest.Case{
		Name: "gitlab",
		New:  func(cfg forge.Config) forge.Provider { return forge.NewGitLab(cfg) },
		Sign: func(h http.Header, _, secret []byte) {
			h.Set("X-Gitlab-Token", string(secret))
		},
		SignsBody:       false,
		DeliveryHeaders: []string{"Idempotency-Key", "X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID"},
		Events: []forgetest.EventCase{
			{Name: forgetest.EventPush, Header: ev("Push Hook"), Body: readTestdata(t, "gitlab/push.json"), Want: forge.Event{
				Kind: forge.KindPush, Repository: repo, Ref: "refs/heads/main", SHA: shaAfter, Before: shaBefore,
				Branch: "main", Actor: "ada", ChangedPaths: pushPaths,
				Message: "Drop the old script", AuthorName: "Ada",
			}},
			{Name: forgetest.EventTag, Header: ev("Tag Push Hook"), Body: readTestdata(t, "gitlab/tag_push.json"), Want: forge.Event{
				Kind: forge.KindTag, Repository: repo, Ref: "refs/tags/v1.4.0", SHA: shaTag, Tag: "v1.4.0",
				Actor: "ada", ChangedPathsIncomplete: true,
			}},
			{Name: forgetest.EventDelete, Header: ev("Push Hook"), Body: readTestdata(t, "gitlab/push-delete.json"), Want: forge.Event{
				Kind: forge.KindPush, Repository: repo, Ref: "refs/heads/feature/old-login", Before: shaFirst,
				Branch: "feature/old-login", Deleted: true, Actor: "ada",
			}},
			{Name: forgetest.EventPROpened, Header: ev("Merge Request Hook"), Body: readTestdata(t, "gitlab/merge_request-open.json"),
				Want: mr(forge.ActionOpened, "", true, false)},
			{Name: forgetest.EventPRSynchronize, Header: ev("Merge Request Hook"), Body: readTestdata(t, "gitlab/merge_request-update.json"),
				Want: mr(forge.ActionSynchronize, shaPRBefore, true, false)},
			{Name: forgetest.EventPRReopened, Header: ev("Merge Request Hook"), Body: readTestdata(t, "gitlab/merge_request-reopen.json"),
				Want: mr(forge.ActionReopened, "", false, false)},
			{Name: "mr-merged", Header: ev("Merge Request Hook"), Body: readTestdata(t, "gitlab/merge_request-merge.json"),
				Want: mr(forge.ActionClosed, "", false, true)},
			{Name: "push-truncated", Header: ev("Push Hook"), Body: readTestdata(t, "gitlab/push-truncated.json"), Want: forge.Event{
				Kind: forge.KindPush, Repository: repo, Ref: "refs/heads/main", SHA: shaAfter, Before: shaBefore,
				Branch: "main", Actor: "ada", ChangedPaths: []string{"README.md"}, ChangedPathsIncomplete: true,
				Message: "Last of many", AuthorName: "Ada",
			}},
		},
		Lacks: map[string]string{
			forgetest.EventPing: "GitLab has no ping event: its test button sends a Push Hook",
		},
		Ignored: []forgetest.IgnoredCase{
			{Header: ev("Note Hook"), Body: readTestdata(t, "gitlab/note.json"), Event: "Note Hook"},
			{Header: ev("Merge Request Hook"), Body: readTestdata(t, "gitlab/merge_request-update-title.json"), Event: "Merge Request Hook.update"},
		},
		MalformedHeader: ev("Push Hook"),
		Status: forgetest.StatusCase{
			BasePath:   "/gitlab",
			Repository: "platform/ci/web-app",
			SHA:        shaAfter,
			Path:       "/api/v4/projects/platform%2Fci%2Fweb-app/statuses/" + shaAfter,
			Header:     header("PRIVATE-TOKEN", forgetest.Token),
			States: map[forge.State]string{
				forge.StatePending: "pending", forge.StateRunning: "running", forge.StateSuccess: "success",
				forge.StateFailure: "failed", forge.StateError: "failed", forge.StateCancelled: "canceled", forge.StateSkipped: "skipped",
			},
			StateField: "state", ContextField: "name",
		},
	})
}

// TestGitLabTagInPushHook: a tag ref in a Push Hook (or a branch in a Tag Push Hook) is not
// what GitLab sends, so it is refused rather than guessed at.
func TestGitLabTagInPushHook(t *testing.T) {
	t.Parallel()
	p := forge.NewGitLab(forge.Config{})
	body := readTestdata(t, "gitlab/tag_push.json")
	r, _ := http.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("X-Gitlab-Event", "Push Hook")
	if _, err := p.Parse(r, body); err == nil {
		t.Error("a tag ref in a Push Hook was accepted")
	}
}

func FuzzGitLabParse(f *testing.F) {
	seedFuzz(f, "gitlab", "Push Hook", "Tag Push Hook", "Merge Request Hook")
	p := forge.NewGitLab(forge.Config{})
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		checkParse(t, p, fuzzRequest(t, "X-Gitlab-Event", event), body)
	})
}
