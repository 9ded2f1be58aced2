package notify_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/notify"
	"github.com/gantry-ci/gantry/internal/store"
)

// subscribe makes project and a subscription of it to run.finished at u, then a run that
// finishes, and returns after one delivery pass the messages that are dead.
func (b *bundle) subscribeAndFinish(project, u string) []*store.OutboxMessage {
	b.t.Helper()
	b.createRun(project, oneJob) // makes the project
	b.finish(store.JobSuccess)
	p, err := b.st.GetProjectByName(b.t.Context(), project)
	if err != nil {
		b.t.Fatal(err)
	}
	if err := b.st.CreateWebhook(b.t.Context(), &store.Webhook{ProjectID: p.ID, URL: u, Secret: "k",
		Events: []string{store.WebhookRunFinished}}); err != nil {
		b.t.Fatalf("CreateWebhook: %v", err)
	}
	b.createRun(project, oneJob)
	b.finish(store.JobSuccess)
	if n := b.deliver(); n != 1 {
		b.t.Fatalf("claimed %d, want 1", n)
	}
	return b.outbox(store.OutboxDead)
}

// TestDeliveryRefusesThePrivateNetwork: a webhook or a forge on loopback is not sent to
// unless the allow-list names it, whether the URL gives the address or a name that
// resolves to it; the message is dead at once and says why.
func TestDeliveryRefusesThePrivateNetwork(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		byName  bool // the URL says localhost, not 127.0.0.1
		allow   string
		refused bool
	}{
		{"literal", false, "", true},
		{"a name resolving to loopback", true, "", true},
		{"allowed", false, "127.0.0.0/8", false},
		{"the name allowed", true, "localhost", false},
		{"another range allowed", false, "10.0.0.0/8,ghe.internal", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec, srv := serve(t, answer{status: 204})
			url := srv.URL + "/in"
			if tc.byName {
				url = "http://localhost:" + portOf(t, srv) + "/in"
			}
			b := setupAllowing(t, 10, tc.allow)
			dead := b.subscribeAndFinish("hooks", url)
			if !tc.refused {
				if len(dead) != 0 || len(rec.requests()) != 1 || len(b.outbox(store.OutboxDelivered)) != 1 {
					t.Fatalf("dead %d, requests %d: want the webhook delivered", len(dead), len(rec.requests()))
				}
				return
			}
			if len(rec.requests()) != 0 {
				t.Errorf("the receiver got %d requests", len(rec.requests()))
			}
			if len(dead) != 1 || dead[0].Attempts != 1 {
				t.Fatalf("%d dead messages, want 1 after one attempt", len(dead))
			}
			if e := dead[0].LastError; !strings.Contains(e, "a loopback address; not allowed unless the server's --outbound-allow lists it") {
				t.Errorf("last error %q does not say the loopback address is refused", e)
			}
		})
	}

	t.Run("a forge", func(t *testing.T) {
		t.Parallel()
		forgeRec, forgeSrv := serve(t, answer{status: 201})
		b := setupAllowing(t, 10, "")
		tokenFile := filepath.Join(t.TempDir(), "token")
		if err := os.WriteFile(tokenFile, []byte("ghp_secret\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := b.st.CreateProject(t.Context(), &store.Project{Name: "web", RepoURL: "https://github.com/acme/web.git", Provider: "github",
			APIBaseURL: forgeSrv.URL, APITokenFile: tokenFile, CommitStatuses: store.CommitStatusesRun}); err != nil {
			t.Fatal(err)
		}
		b.createRun("web", oneJob)
		if n := b.deliver(); n != 1 {
			t.Fatalf("claimed %d, want 1", n)
		}
		dead := b.outbox(store.OutboxDead)
		if len(forgeRec.requests()) != 0 || len(dead) != 1 || !strings.Contains(dead[0].LastError, "loopback address") {
			t.Errorf("forge got %d requests; dead %d: %v", len(forgeRec.requests()), len(dead), dead)
		}
	})
}

func portOf(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	u, err := url.Parse(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Port()
}

// TestWebhookWithCredentialsRefused: a subscription whose URL holds credentials (one
// stored before they were refused) is not sent.
func TestWebhookWithCredentialsRefused(t *testing.T) {
	t.Parallel()
	rec, srv := serve(t, answer{status: 204})
	b := setup(t, 10)
	dead := b.subscribeAndFinish("hooks", strings.Replace(srv.URL, "http://", "http://bot:hunter2@", 1)+"/in")
	if len(rec.requests()) != 0 || len(dead) != 1 || !strings.Contains(dead[0].LastError, "credentials") ||
		strings.Contains(dead[0].LastError, "hunter2") {
		t.Errorf("receiver got %d requests; dead %d: %+v", len(rec.requests()), len(dead), dead)
	}
}

// TestWebhookRedirectNotFollowed: a 307 is a failed delivery; where it points gets
// nothing, body and signature least of all.
func TestWebhookRedirectNotFollowed(t *testing.T) {
	t.Parallel()
	target, targetSrv := serve(t, answer{status: 204})
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, targetSrv.URL+"/stolen?token=abc", http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	b := setup(t, 10)
	dead := b.subscribeAndFinish("hooks", redirect.URL+"/in")
	if len(target.requests()) != 0 {
		t.Errorf("the redirect's target got %d requests", len(target.requests()))
	}
	if len(dead) != 1 || !strings.Contains(dead[0].LastError, "HTTP 307: redirects are not followed") ||
		!strings.Contains(dead[0].LastError, targetSrv.URL+"/stolen") || strings.Contains(dead[0].LastError, "token=abc") {
		t.Errorf("dead %d: %+v", len(dead), dead)
	}
}

// TestHugeAnswerRecordedCapped: of a 10 MiB answer the outbox keeps a bounded excerpt.
func TestHugeAnswerRecordedCapped(t *testing.T) {
	t.Parallel()
	huge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, "start of the answer\x00\n")
		chunk := strings.Repeat("é", 512) // two bytes each: cuts fall mid-rune
		for range 10 << 20 / len(chunk) {
			if _, err := io.WriteString(w, chunk); err != nil {
				return // the dispatcher stopped reading
			}
		}
	}))
	t.Cleanup(huge.Close)
	b := setup(t, 10)
	dead := b.subscribeAndFinish("hooks", huge.URL+"/in")
	if len(dead) != 1 {
		t.Fatalf("%d dead messages, want 1", len(dead))
	}
	e := dead[0].LastError
	if len(e) > notify.MaxRecordedError || !strings.Contains(e, "HTTP 400: start of the answer") || !strings.Contains(e, "éé") ||
		strings.ContainsAny(e, "\x00\n\uFFFD") {
		t.Errorf("last error of %d bytes: %q", len(e), e)
	}
	if strings.Count(e, "é") > notify.MaxAnswerExcerpt/2 {
		t.Errorf("last error keeps %d bytes of the answer, more than %d", 2*strings.Count(e, "é"), notify.MaxAnswerExcerpt)
	}
}
