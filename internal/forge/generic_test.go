package forge_test

import (
	"net/http"
	"testing"

	"github.com/gantry-ci/gantry/internal/forge"
	"github.com/gantry-ci/gantry/internal/forge/forgetest"
)

func TestGeneric(t *testing.T) {
	t.Parallel()
	repo := forge.Repository{
		FullName: "team/web-app", CloneURL: "https://git.example.net/team/web-app.git", DefaultBranch: "main",
	}
	pr := func(action, before string) forge.Event {
		return forge.Event{
			Kind: forge.KindPullRequest, Action: action, Repository: repo,
			Ref: "refs/pull/42/head", SHA: shaHead, Before: before, Branch: "main", Actor: "lin",
			PullRequest: &forge.PullRequest{
				Number: 42, Title: "Retry flaky uploads",
				Head: forge.PRBranch{Repository: repo, Ref: "retry-uploads", SHA: shaHead},
				Base: forge.PRBranch{Repository: repo, Ref: "main", SHA: shaBase},
			},
			ChangedPathsIncomplete: true,
		}
	}
	forgetest.Run(t, forgetest.Case{
		Name: "generic",
		New:  func(cfg forge.Config) forge.Provider { return forge.NewGeneric(cfg) },
		Sign: func(h http.Header, body, secret []byte) {
			h.Set("X-Gantry-Signature-256", "sha256="+hmacHex(body, secret))
		},
		SignsBody:       true,
		DeliveryHeaders: []string{"X-Gantry-Delivery"},
		Events: []forgetest.EventCase{
			{Name: forgetest.EventPush, Body: readTestdata(t, "generic/push.json"), Want: forge.Event{
				Kind: forge.KindPush, Repository: repo, Ref: "refs/heads/main", SHA: shaAfter, Before: shaBefore,
				Branch: "main", Actor: "lin", ChangedPaths: []string{"cmd/health/main.go", "go.mod"},
				Message: "Add a health check", AuthorName: "Lin",
			}},
			{Name: forgetest.EventTag, Body: readTestdata(t, "generic/tag.json"), Want: forge.Event{
				Kind: forge.KindTag, Repository: repo, Ref: "refs/tags/v1.4.0", SHA: shaTag, Tag: "v1.4.0",
				Actor: "lin", ChangedPathsIncomplete: true,
			}},
			{Name: forgetest.EventDelete, Body: readTestdata(t, "generic/delete.json"), Want: forge.Event{
				Kind: forge.KindPush, Repository: repo, Ref: "refs/heads/feature/old-login", Before: shaFirst,
				Branch: "feature/old-login", Deleted: true, Actor: "lin",
			}},
			{Name: forgetest.EventPROpened, Body: readTestdata(t, "generic/pull_request-opened.json"),
				Want: pr(forge.ActionOpened, "")},
			{Name: forgetest.EventPRSynchronize, Body: readTestdata(t, "generic/pull_request-synchronize.json"),
				Want: pr(forge.ActionSynchronize, shaPRBefore)},
			{Name: forgetest.EventPRReopened, Body: readTestdata(t, "generic/pull_request-reopened.json"),
				Want: pr(forge.ActionReopened, "")},
			{Name: forgetest.EventPing, Body: readTestdata(t, "generic/ping.json"), Want: forge.Event{
				Kind: forge.KindPing, Repository: repo,
			}},
		},
		Ignored: []forgetest.IgnoredCase{
			{Body: readTestdata(t, "generic/release.json"), Event: "release"},
		},
		Status: forgetest.StatusCase{
			BasePath:   "/hooks/status",
			Repository: "team/web-app",
			SHA:        shaAfter,
			Path:       "",
			Header:     header("Authorization", "Bearer "+forgetest.Token),
			States: map[forge.State]string{
				forge.StatePending: "pending", forge.StateRunning: "running", forge.StateSuccess: "success",
				forge.StateFailure: "failure", forge.StateError: "error", forge.StateCancelled: "cancelled", forge.StateSkipped: "skipped",
			},
			StateField: "state", ContextField: "context",
			TokenOptional: true,
		},
	})
}

func FuzzGenericParse(f *testing.F) {
	seedFuzz(f, "generic", "")
	p := forge.NewGeneric(forge.Config{})
	f.Fuzz(func(t *testing.T, _ string, body []byte) {
		checkParse(t, p, fuzzRequest(t, "X-Gantry-Event", ""), body)
	})
}
