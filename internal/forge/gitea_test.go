package forge_test

import (
	"errors"
	"net/http"
	"testing"

	"github.com/gantry-ci/gantry/internal/forge"
	"github.com/gantry-ci/gantry/internal/forge/forgetest"
)

func giteaRepo(full string) forge.Repository {
	return forge.Repository{
		FullName:      full,
		CloneURL:      "https://git.example.org/" + full + ".git",
		SSHURL:        "git@git.example.org:" + full + ".git",
		HTMLURL:       "https://git.example.org/" + full,
		DefaultBranch: "main",
	}
}

func giteaCase(t *testing.T, name, eventHeader, sigHeader, deliveryHeader string) forgetest.Case {
	repo := giteaRepo("infra/web-app")
	ev := func(name string) http.Header { return header(eventHeader, name) }
	pr := func(action string, fork bool) forge.Event {
		head := giteaRepo("grace/web-app")
		if !fork {
			head = repo
		}
		return forge.Event{
			Kind: forge.KindPullRequest, Action: action, Repository: repo,
			Ref: "refs/pull/42/head", SHA: shaHead, Branch: "main", Actor: "grace",
			PullRequest: &forge.PullRequest{
				Number: 42, Title: "Retry flaky uploads",
				Head: forge.PRBranch{Repository: head, Ref: "retry-uploads", SHA: shaHead},
				Base: forge.PRBranch{Repository: repo, Ref: "main", SHA: shaBase},
				Fork: fork,
			},
			ChangedPathsIncomplete: true,
		}
	}
	return forgetest.Case{
		Name: name,
		New:  func(cfg forge.Config) forge.Provider { return forge.NewGitea(cfg) },
		Sign: func(h http.Header, body, secret []byte) {
			h.Set(sigHeader, hmacHex(body, secret))
		},
		SignsBody:       true,
		DeliveryHeaders: []string{deliveryHeader},
		Events: []forgetest.EventCase{
			{Name: forgetest.EventPush, Header: ev("push"), Body: readTestdata(t, "gitea/push.json"), Want: forge.Event{
				Kind: forge.KindPush, Repository: repo, Ref: "refs/heads/main", SHA: shaAfter, Before: shaBefore,
				Branch: "main", Actor: "grace", ChangedPaths: pushPaths,
				Message: "Drop the old script\n", AuthorName: "Grace",
			}},
			{Name: forgetest.EventTag, Header: ev("push"), Body: readTestdata(t, "gitea/push-tag.json"), Want: forge.Event{
				Kind: forge.KindTag, Repository: repo, Ref: "refs/tags/v1.4.0", SHA: shaTag, Tag: "v1.4.0",
				Actor: "grace", ChangedPathsIncomplete: true,
			}},
			{Name: forgetest.EventDelete, Header: ev("delete"), Body: readTestdata(t, "gitea/delete.json"), Want: forge.Event{
				Kind: forge.KindPush, Repository: repo, Ref: "refs/heads/feature/old-login",
				Branch: "feature/old-login", Deleted: true, Actor: "grace",
			}},
			{Name: forgetest.EventPROpened, Header: ev("pull_request"), Body: readTestdata(t, "gitea/pull_request-opened.json"),
				Want: pr(forge.ActionOpened, true)},
			{Name: forgetest.EventPRSynchronize, Header: ev("pull_request"), Body: readTestdata(t, "gitea/pull_request-synchronized.json"),
				Want: pr(forge.ActionSynchronize, true)},
			{Name: forgetest.EventPRReopened, Header: ev("pull_request"), Body: readTestdata(t, "gitea/pull_request-reopened.json"),
				Want: pr(forge.ActionReopened, false)},
		},
		Lacks: map[string]string{
			forgetest.EventPing: "Gitea has no ping event: its test delivery sends a push",
		},
		Ignored: []forgetest.IgnoredCase{
			{Header: ev("issues"), Body: readTestdata(t, "gitea/issues.json"), Event: "issues"},
			{Header: ev("pull_request"), Body: readTestdata(t, "gitea/pull_request-label_updated.json"), Event: "pull_request.label_updated"},
		},
		MalformedHeader: ev("push"),
		Status: forgetest.StatusCase{
			BasePath:   "/gitea",
			Repository: "infra/web-app",
			SHA:        shaAfter,
			Path:       "/api/v1/repos/infra/web-app/statuses/" + shaAfter,
			Header:     header("Authorization", "token "+forgetest.Token),
			States: map[forge.State]string{
				forge.StatePending: "pending", forge.StateRunning: "pending", forge.StateSuccess: "success",
				forge.StateFailure: "failure", forge.StateError: "error", forge.StateCancelled: "error", forge.StateSkipped: "success",
			},
			StateField: "state", ContextField: "context",
		},
	}
}

func TestGitea(t *testing.T) {
	t.Parallel()
	forgetest.Run(t, giteaCase(t, "gitea", "X-Gitea-Event", "X-Gitea-Signature", "X-Gitea-Delivery"))
}

// TestForgejo runs the suite with the headers Forgejo sends under its own name.
func TestForgejo(t *testing.T) {
	t.Parallel()
	c := giteaCase(t, "forgejo", "X-Forgejo-Event", "X-Forgejo-Signature", "X-Forgejo-Delivery")
	forgetest.Run(t, c)
}

// TestGiteaBothSignatures: Forgejo sends its signature under both names; a good one must
// not vouch for a forged other.
func TestGiteaBothSignatures(t *testing.T) {
	t.Parallel()
	p := forge.NewGitea(forge.Config{})
	body := readTestdata(t, "gitea/push.json")
	secret := []byte("s3cret")
	good := hmacHex(body, secret)
	bad := hmacHex(body, []byte("other"))
	for _, tc := range []struct {
		gitea, forgejo string
		ok             bool
	}{
		{good, good, true},
		{good, bad, false},
		{bad, good, false},
	} {
		r, _ := http.NewRequest(http.MethodPost, "/", nil)
		r.Header.Set("X-Gitea-Signature", tc.gitea)
		r.Header.Set("X-Forgejo-Signature", tc.forgejo)
		err := p.Verify(r, body, secret)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, forge.ErrBadSignature)) {
			t.Errorf("gitea %.6s forgejo %.6s: Verify = %v, want ok %v", tc.gitea, tc.forgejo, err, tc.ok)
		}
	}
}

// TestGiteaPushDeletion: a push whose after is all zeros is a deletion too, whichever way the
// Gitea version reports it.
func TestGiteaPushDeletion(t *testing.T) {
	t.Parallel()
	body := []byte(`{"ref":"refs/tags/v0.9","before":"` + shaFirst + `","after":"0000000000000000000000000000000000000000",
		"commits":[],"total_commits":0,"repository":{"full_name":"infra/web-app"},"sender":{"login":"grace"}}`)
	r, _ := http.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("X-Gitea-Event", "push")
	ev, err := forge.NewGitea(forge.Config{}).Parse(r, body)
	if err != nil {
		t.Fatal(err)
	}
	if !ev.Deleted || ev.SHA != "" || ev.Kind != forge.KindTag || ev.Tag != "v0.9" || ev.Before != shaFirst || ev.ChangedPathsIncomplete {
		t.Errorf("deletion parsed as %+v", ev)
	}
}

func FuzzGiteaParse(f *testing.F) {
	seedFuzz(f, "gitea", "push", "delete", "pull_request")
	p := forge.NewGitea(forge.Config{})
	f.Fuzz(func(t *testing.T, event string, body []byte) {
		checkParse(t, p, fuzzRequest(t, "X-Gitea-Event", event), body)
	})
}

// TestGiteaAnnotatedTag: an annotated tag's push names the tag object in after; the event
// builds the commit head_commit names.
func TestGiteaAnnotatedTag(t *testing.T) {
	t.Parallel()
	const tagObject = "6a5b4c3d2e1f0a9b8c7d6e5f4a3b2c1d0e9f8a7b"
	body := []byte(`{"ref":"refs/tags/v2.0.0","before":"0000000000000000000000000000000000000000",
		"after":"` + tagObject + `","commits":[],"total_commits":0,"head_commit":{"id":"` + shaTag + `"},
		"repository":{"full_name":"infra/web-app"},"sender":{"login":"grace"}}`)
	r, _ := http.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("X-Gitea-Event", "push")
	ev, err := forge.NewGitea(forge.Config{}).Parse(r, body)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != forge.KindTag || ev.SHA != shaTag {
		t.Errorf("annotated tag parsed as kind %s sha %s, want tag %s", ev.Kind, ev.SHA, shaTag)
	}
}
