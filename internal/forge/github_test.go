package forge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/gantry-ci/gantry/internal/forge"
	"github.com/gantry-ci/gantry/internal/forge/forgetest"
)

func githubRepo(full string) forge.Repository {
	return forge.Repository{
		FullName:      full,
		CloneURL:      "https://github.com/" + full + ".git",
		SSHURL:        "git@github.com:" + full + ".git",
		HTMLURL:       "https://github.com/" + full,
		DefaultBranch: "main",
	}
}

// githubManyCommits is a push listing as many commits as GitHub ever lists, so it may have
// had more.
func githubManyCommits(t *testing.T) []byte {
	var commits []map[string]any
	for i := range 20 {
		commits = append(commits, map[string]any{
			"id": fmt.Sprintf("%040x", i+1), "added": []string{fmt.Sprintf("f%02d.txt", i)},
			"removed": []string{}, "modified": []string{},
		})
	}
	b, err := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "before": shaBefore, "after": shaAfter,
		"repository": map[string]any{"full_name": "octo-org/web-app"},
		"sender":     map[string]any{"login": "mona"},
		"commits":    commits,
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGitHub(t *testing.T) {
	t.Parallel()
	repo := githubRepo("octo-org/web-app")
	ev := func(name string) http.Header { return header("X-GitHub-Event", name) }
	pr := func(action, before string, fork bool) forge.Event {
		head := githubRepo("hubot/web-app")
		if !fork {
			head = repo
		}
		return forge.Event{
			Kind: forge.KindPullRequest, Action: action, Repository: repo,
			Ref: "refs/pull/42/head", SHA: shaHead, Before: before, Branch: "main", Actor: "hubot",
			PullRequest: &forge.PullRequest{
				Number: 42, Title: "Retry flaky uploads",
				Head: forge.PRBranch{Repository: head, Ref: "retry-uploads", SHA: shaHead},
				Base: forge.PRBranch{Repository: repo, Ref: "main", SHA: shaBase},
				Fork: fork,
			},
			ChangedPathsIncomplete: true,
		}
	}
	var many []string
	for i := range 20 {
		many = append(many, fmt.Sprintf("f%02d.txt", i))
	}
	forgetest.Run(t, forgetest.Case{
		Name: "github",
		New:  func(cfg forge.Config) forge.Provider { return forge.NewGitHub(cfg) },
		Sign: func(h http.Header, body, secret []byte) {
			h.Set("X-Hub-Signature-256", "sha256="+hmacHex(body, secret))
		},
		SignsBody:       true,
		DeliveryHeaders: []string{"X-GitHub-Delivery"},
		Events: []forgetest.EventCase{
			{Name: forgetest.EventPush, Header: ev("push"), Body: readTestdata(t, "github/push.json"), Want: forge.Event{
				Kind: forge.KindPush, Repository: repo, Ref: "refs/heads/main", SHA: shaAfter, Before: shaBefore,
				Branch: "main", Actor: "mona", ChangedPaths: pushPaths,
				Message: "Drop the old script, document the check", AuthorName: "Mona",
			}},
			{Name: forgetest.EventTag, Header: ev("push"), Body: readTestdata(t, "github/push-tag.json"), Want: forge.Event{
				Kind: forge.KindTag, Repository: repo, Ref: "refs/tags/v1.4.0", SHA: shaTag, Tag: "v1.4.0",
				Actor: "mona", ChangedPathsIncomplete: true, Message: "Release 1.4.0", AuthorName: "Mona",
			}},
			{Name: forgetest.EventDelete, Header: ev("push"), Body: readTestdata(t, "github/push-delete.json"), Want: forge.Event{
				Kind: forge.KindPush, Repository: repo, Ref: "refs/heads/feature/old-login", Before: shaFirst,
				Branch: "feature/old-login", Deleted: true, Actor: "mona",
			}},
			{Name: forgetest.EventPROpened, Header: ev("pull_request"), Body: readTestdata(t, "github/pull_request-opened.json"),
				Want: pr(forge.ActionOpened, "", true)},
			{Name: forgetest.EventPRSynchronize, Header: ev("pull_request"), Body: readTestdata(t, "github/pull_request-synchronize.json"),
				Want: pr(forge.ActionSynchronize, shaPRBefore, true)},
			{Name: forgetest.EventPRReopened, Header: ev("pull_request"), Body: readTestdata(t, "github/pull_request-reopened.json"),
				Want: pr(forge.ActionReopened, "", false)},
			{Name: forgetest.EventPing, Header: ev("ping"), Body: readTestdata(t, "github/ping.json"), Want: forge.Event{
				Kind: forge.KindPing, Repository: repo, Actor: "mona",
			}},
			{Name: "push-20-commits", Header: ev("push"), Body: githubManyCommits(t), Want: forge.Event{
				Kind: forge.KindPush, Repository: forge.Repository{FullName: "octo-org/web-app"}, Ref: "refs/heads/main",
				SHA: shaAfter, Before: shaBefore, Branch: "main", Actor: "mona",
				ChangedPaths: many, ChangedPathsIncomplete: true,
			}},
		},
		Ignored: []forgetest.IgnoredCase{
			{Header: ev("issues"), Body: readTestdata(t, "github/issues.json"), Event: "issues"},
			{Header: ev("pull_request"), Body: readTestdata(t, "github/pull_request-labeled.json"), Event: "pull_request.labeled"},
		},
		MalformedHeader: ev("push"),
		Status: forgetest.StatusCase{
			BasePath:   "/api/v3",
			Repository: "octo-org/web-app",
			SHA:        shaAfter,
			Path:       "/repos/octo-org/web-app/statuses/" + shaAfter,
			Header: header("Authorization", "Bearer "+forgetest.Token, "Accept", "application/vnd.github+json",
				"X-GitHub-Api-Version", "2022-11-28"),
			States: map[forge.State]string{
				forge.StatePending: "pending", forge.StateRunning: "pending", forge.StateSuccess: "success",
				forge.StateFailure: "failure", forge.StateError: "error", forge.StateCancelled: "error", forge.StateSkipped: "success",
			},
			StateField: "state", ContextField: "context",
		},
	})
}

func FuzzGitHubParse(f *testing.F) {
	seedFuzz(f, "github", "push", "pull_request", "ping")
	p := forge.NewGitHub(forge.Config{})
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		r := fuzzRequest(t, "X-GitHub-Event", event)
		checkParse(t, p, r, body)
	})
}
