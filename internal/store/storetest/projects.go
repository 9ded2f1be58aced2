package storetest

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var projectTests = []test{
	{"CreateGetListUpdate", testProjectCRUD},
	{"ConnectProjectMadeByARun", testProjectConnectFirstUse},
	{"DeleteRefusedWhileRunsBelong", testProjectDelete},
	{"DeliveriesRecordedOnce", testDeliveries},
	{"HookEventClaimedOncePerWindow", testHookEventClaims},
	{"HookEventClaimsRace", testHookEventClaimsRace},
	{"FailedRunCarriesErrors", testFailedRun},
	{"TriggerFieldsRoundTrip", testTriggerFields},
	{"WebhookSecretSealedInPlace", testSealWebhookSecret},
	{"WebhookSubscriptionSecretSealedInPlace", testSealWebhookSubscriptionSecret},
}

// testSealWebhookSubscriptionSecret: an outbound webhook subscription's sealed secret
// round-trips through create, get and list; SealWebhookSubscriptionSecret replaces a
// plain-text secret or a sealed one only while it is still the one named, and leaves no
// plain text behind.
func testSealWebhookSubscriptionSecret(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := connected("subs")
	if err := b.s.CreateProject(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	sealed := store.SealedValue{KeyID: "k1", WrappedKey: []byte{0, 1, 2, 0xff}, Ciphertext: []byte("ct\x00one")}
	events := []string{store.WebhookRunFinished}
	wantErr(t, "CreateWebhook with a plain and a sealed secret", b.s.CreateWebhook(b.ctx, &store.Webhook{ProjectID: p.ID,
		URL: "https://x", Secret: "both", SecretSealed: sealed, Events: events}), store.ErrInvalid)
	sealedHook := &store.Webhook{ProjectID: p.ID, URL: "https://hooks.example.com/sealed", SecretSealed: sealed, Events: events}
	legacy := &store.Webhook{ProjectID: p.ID, URL: "https://hooks.example.com/legacy", Secret: "plain-k", Events: events}
	for _, w := range []*store.Webhook{sealedHook, legacy} {
		if err := b.s.CreateWebhook(b.ctx, w); err != nil {
			t.Fatalf("CreateWebhook: %v", err)
		}
	}
	get := func(id uuid.UUID) *store.Webhook {
		t.Helper()
		w, err := b.s.GetWebhook(b.ctx, id)
		if err != nil {
			t.Fatalf("GetWebhook: %v", err)
		}
		return w
	}
	if got := get(sealedHook.ID); got.Secret != "" || !reflect.DeepEqual(got.SecretSealed, sealed) {
		t.Errorf("sealed subscription read back with %q, %+v; want %+v", got.Secret, got.SecretSealed, sealed)
	}
	if got := get(legacy.ID); got.Secret != "plain-k" || !got.SecretSealed.IsZero() {
		t.Errorf("plain subscription read back with %q, %+v", got.Secret, got.SecretSealed)
	}

	seal := func(p store.SealWebhookSubscriptionSecretParams) error {
		return b.s.SealWebhookSubscriptionSecret(b.ctx, p)
	}
	wantErr(t, "SealWebhookSubscriptionSecret of another plain text", seal(store.SealWebhookSubscriptionSecretParams{
		ID: legacy.ID, OldPlain: "not-it", Sealed: sealed}), store.ErrConflict)
	wantErr(t, "SealWebhookSubscriptionSecret of no subscription", seal(store.SealWebhookSubscriptionSecretParams{
		ID: store.NewID(), OldPlain: "plain-k", Sealed: sealed}), store.ErrNotFound)
	wantErr(t, "SealWebhookSubscriptionSecret of nothing", seal(store.SealWebhookSubscriptionSecretParams{
		ID: legacy.ID, OldPlain: "plain-k"}), store.ErrInvalid)
	if err := seal(store.SealWebhookSubscriptionSecretParams{ID: legacy.ID, OldPlain: "plain-k", Sealed: sealed}); err != nil {
		t.Fatalf("SealWebhookSubscriptionSecret: %v", err)
	}
	list, err := b.s.ListWebhooks(b.ctx, p.ID)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListWebhooks = %v, %v", list, err)
	}
	for _, w := range list {
		if w.Secret != "" || !reflect.DeepEqual(w.SecretSealed, sealed) {
			t.Errorf("subscription %s lists with %q, %+v; want only %+v", w.URL, w.Secret, w.SecretSealed, sealed)
		}
	}
	// A rewrap under another key: only while the sealed value is the one named.
	next := store.SealedValue{KeyID: "k2", WrappedKey: []byte("w2"), Ciphertext: sealed.Ciphertext}
	wantErr(t, "sealing a secret sealed meanwhile", seal(store.SealWebhookSubscriptionSecretParams{
		ID: legacy.ID, OldPlain: "plain-k", Sealed: next}), store.ErrConflict)
	wantErr(t, "rewrapping from a value it does not hold", seal(store.SealWebhookSubscriptionSecretParams{
		ID: legacy.ID, OldSealed: next, Sealed: next}), store.ErrConflict)
	if err := seal(store.SealWebhookSubscriptionSecretParams{ID: legacy.ID, OldSealed: sealed, Sealed: next}); err != nil {
		t.Fatalf("rewrap: %v", err)
	}
	if got := get(legacy.ID); got.Secret != "" || !reflect.DeepEqual(got.SecretSealed, next) {
		t.Errorf("rewrapped subscription = %q, %+v; want %+v", got.Secret, got.SecretSealed, next)
	}
	if got := get(sealedHook.ID); !reflect.DeepEqual(got.SecretSealed, sealed) {
		t.Errorf("the rewrap of one subscription changed another: %+v", got.SecretSealed)
	}
}

// testSealWebhookSecret: a sealed webhook secret round-trips through create, get, list
// and update; SealWebhookSecret replaces a plain-text secret or a sealed one only while
// it is still the one named, and leaves no plain text behind.
func testSealWebhookSecret(t *testing.T, h Harness) {
	_, b := setup(t, h)
	sealed := store.SealedValue{KeyID: "k1", WrappedKey: []byte{0, 1, 2, 0xff}, Ciphertext: []byte("ct\x00one")}
	p := connected("sealed")
	p.WebhookSecret, p.WebhookSecretSealed = "", sealed
	if err := b.s.CreateProject(b.ctx, p); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	got, err := b.s.GetProjectByName(b.ctx, "sealed")
	if err != nil {
		t.Fatal(err)
	}
	if got.WebhookSecret != "" || !reflect.DeepEqual(got.WebhookSecretSealed, sealed) {
		t.Errorf("sealed project read back with %q, %+v; want %+v", got.WebhookSecret, got.WebhookSecretSealed, sealed)
	}

	legacy := connected("legacy") // a plain-text secret, as rows made before sealing hold
	if err := b.s.CreateProject(b.ctx, legacy); err != nil {
		t.Fatal(err)
	}
	wantErr(t, "SealWebhookSecret of another plain text", b.s.SealWebhookSecret(b.ctx, store.SealWebhookSecretParams{
		Project: "legacy", OldPlain: "not-it", Sealed: sealed}), store.ErrConflict)
	wantErr(t, "SealWebhookSecret of no project", b.s.SealWebhookSecret(b.ctx, store.SealWebhookSecretParams{
		Project: "nope", OldPlain: "x", Sealed: sealed}), store.ErrNotFound)
	wantErr(t, "SealWebhookSecret of nothing", b.s.SealWebhookSecret(b.ctx, store.SealWebhookSecretParams{
		Project: "legacy", OldPlain: legacy.WebhookSecret}), store.ErrInvalid)
	if err := b.s.SealWebhookSecret(b.ctx, store.SealWebhookSecretParams{Project: "legacy", OldPlain: legacy.WebhookSecret, Sealed: sealed}); err != nil {
		t.Fatalf("SealWebhookSecret: %v", err)
	}
	list, err := b.s.ListProjects(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, lp := range list {
		if lp.Name == "legacy" && (lp.WebhookSecret != "" || !reflect.DeepEqual(lp.WebhookSecretSealed, sealed)) {
			t.Errorf("sealed legacy project lists with %q, %+v", lp.WebhookSecret, lp.WebhookSecretSealed)
		}
	}
	// A rewrap under another key: only while the sealed value is the one named.
	next := store.SealedValue{KeyID: "k2", WrappedKey: []byte("w2"), Ciphertext: sealed.Ciphertext}
	err = b.s.SealWebhookSecret(b.ctx, store.SealWebhookSecretParams{Project: "legacy", OldPlain: legacy.WebhookSecret, Sealed: next})
	if !errors.Is(err, store.ErrConflict) {
		t.Errorf("sealing a secret sealed meanwhile = %v, want ErrConflict", err)
	}
	if err := b.s.SealWebhookSecret(b.ctx, store.SealWebhookSecretParams{Project: "legacy", OldSealed: sealed, Sealed: next}); err != nil {
		t.Fatalf("rewrap: %v", err)
	}
	got, err = b.s.GetProjectByName(b.ctx, "legacy")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.WebhookSecretSealed, next) || got.WebhookSecret != "" {
		t.Errorf("rewrapped project = %q, %+v; want %+v", got.WebhookSecret, got.WebhookSecretSealed, next)
	}
	// An update that sets a plain secret (no key) clears the sealed one, and back.
	got.WebhookSecret, got.WebhookSecretSealed = "plain-again", store.SealedValue{}
	if err := b.s.UpdateProject(b.ctx, got); err != nil {
		t.Fatal(err)
	}
	got, err = b.s.GetProjectByName(b.ctx, "legacy")
	if err != nil {
		t.Fatal(err)
	}
	if got.WebhookSecret != "plain-again" || !got.WebhookSecretSealed.IsZero() {
		t.Errorf("updated project = %q, %+v", got.WebhookSecret, got.WebhookSecretSealed)
	}
}

func connected(name string) *store.Project {
	return &store.Project{
		Name: name, RepoURL: "https://git.example.com/" + name + ".git", Provider: "github",
		PipelinePath: store.DefaultPipelinePath, DefaultBranch: "main", WebhookSecret: "s3cret-" + name,
		APIBaseURL: "https://api.example.com", APITokenFile: "/etc/gantry/" + name + ".token",
		RepoTokenSecret: "REPO_TOKEN", RepoTokenUser: "ci-bot", GitHubTokenSecret: "CI_TOKEN",
	}
}

func testProjectCRUD(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := connected("web")
	if err := b.s.CreateProject(b.ctx, p); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	if p.ID == uuid.Nil {
		t.Fatal("CreateProject left ID unset")
	}
	wantTime(t, "CreatedAt", p.CreatedAt, b.clk.Now())
	wantTime(t, "UpdatedAt", p.UpdatedAt, b.clk.Now())
	got, err := b.s.GetProjectByName(b.ctx, "web")
	if err != nil {
		t.Fatalf("GetProjectByName: %v", err)
	}
	want := *p
	want.CreatedAt, want.UpdatedAt = got.CreatedAt, got.UpdatedAt
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("GetProjectByName = %+v\nwant %+v", got, want)
	}
	wantTime(t, "read CreatedAt", got.CreatedAt, b.clk.Now())

	wantErr(t, "CreateProject of a connected name", b.s.CreateProject(b.ctx, connected("web")), store.ErrConflict)
	wantErr(t, "CreateProject without a name", b.s.CreateProject(b.ctx, &store.Project{}), store.ErrInvalid)
	_, err = b.s.GetProjectByName(b.ctx, "nope")
	wantErr(t, "GetProjectByName of an unknown name", err, store.ErrNotFound)

	if err := b.s.CreateProject(b.ctx, connected("api")); err != nil {
		t.Fatalf("CreateProject(api): %v", err)
	}
	list, err := b.s.ListProjects(b.ctx)
	if err != nil {
		t.Fatalf("ListProjects: %v", err)
	}
	var names []string
	for _, p := range list {
		names = append(names, p.Name)
	}
	if !slices.Equal(names, []string{"api", "web"}) {
		t.Errorf("ListProjects names = %v, want [api web] (by name)", names)
	}

	b.clk.Advance(time.Minute)
	upd := *got
	upd.Provider, upd.PipelinePath, upd.DefaultBranch, upd.WebhookSecret = "gitlab", "ci/pipeline.yml", "trunk", "new-secret"
	upd.RepoURL, upd.APIBaseURL, upd.APITokenFile = "ssh://git@gitlab.example.com/web.git", "", ""
	upd.RepoTokenSecret, upd.RepoTokenUser, upd.RepoSSHKeySecret, upd.RepoKnownHostsSecret = "", "", "DEPLOY_KEY", "KNOWN_HOSTS"
	upd.GitHubTokenSecret = "BOT_TOKEN"
	if err := b.s.UpdateProject(b.ctx, &upd); err != nil {
		t.Fatalf("UpdateProject: %v", err)
	}
	wantTime(t, "UpdatedAt after update", upd.UpdatedAt, b.clk.Now())
	again, err := b.s.GetProjectByName(b.ctx, "web")
	if err != nil {
		t.Fatal(err)
	}
	if again.Provider != "gitlab" || again.PipelinePath != "ci/pipeline.yml" || again.DefaultBranch != "trunk" ||
		again.WebhookSecret != "new-secret" || again.RepoURL != upd.RepoURL || again.APIBaseURL != "" || again.APITokenFile != "" ||
		again.RepoTokenSecret != "" || again.RepoTokenUser != "" || again.RepoSSHKeySecret != "DEPLOY_KEY" || again.RepoKnownHostsSecret != "KNOWN_HOSTS" ||
		again.GitHubTokenSecret != "BOT_TOKEN" {
		t.Errorf("after UpdateProject = %+v", again)
	}
	if again.ID != p.ID {
		t.Errorf("UpdateProject changed the id %s -> %s", p.ID, again.ID)
	}
	wantTime(t, "CreatedAt kept by update", again.CreatedAt, b.clk.Now().Add(-time.Minute))
	wantTime(t, "UpdatedAt read back", again.UpdatedAt, b.clk.Now())
	wantErr(t, "UpdateProject of an unknown name", b.s.UpdateProject(b.ctx, &store.Project{Name: "nope"}), store.ErrNotFound)
}

func testProjectConnectFirstUse(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.createRun(`jobs: { a: { steps: [ { run: "true" } ] } }`, store.CreateRunParams{Project: "legacy"})
	made, err := b.s.GetProjectByName(b.ctx, "legacy")
	if err != nil {
		t.Fatalf("GetProjectByName of a project made by a run: %v", err)
	}
	if made.ID != run.ProjectID || made.RepoURL != "" || made.Provider != "" {
		t.Errorf("project made on first use = %+v, want id %s and no repository", made, run.ProjectID)
	}
	wantTime(t, "UpdatedAt of a never-updated project", made.UpdatedAt, made.CreatedAt)

	p := connected("legacy")
	if err := b.s.CreateProject(b.ctx, p); err != nil {
		t.Fatalf("CreateProject over a project made on first use: %v", err)
	}
	if p.ID != run.ProjectID {
		t.Errorf("connected project id = %s, want the one its runs have, %s", p.ID, run.ProjectID)
	}
	runs, err := b.s.ListRuns(b.ctx, store.ListRunsParams{Project: "legacy"})
	if err != nil || len(runs) != 1 || runs[0].ID != run.ID {
		t.Errorf("runs of the connected project = %v, %v; want the earlier run", runs, err)
	}
	// A run by name still lands in the same project after it is connected.
	run2, _ := b.createRun(`jobs: { a: { steps: [ { run: "true" } ] } }`, store.CreateRunParams{Project: "legacy"})
	if run2.ProjectID != p.ID {
		t.Errorf("run after connect has project %s, want %s", run2.ProjectID, p.ID)
	}
}

func testProjectDelete(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := connected("busy")
	if err := b.s.CreateProject(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	b.createRun(`jobs: { a: { steps: [ { run: "true" } ] } }`, store.CreateRunParams{Project: "busy"})
	wantErr(t, "DeleteProject with runs", b.s.DeleteProject(b.ctx, "busy"), store.ErrConflict)
	if _, err := b.s.GetProjectByName(b.ctx, "busy"); err != nil {
		t.Errorf("project after a refused delete: %v", err)
	}

	idle := connected("idle")
	if err := b.s.CreateProject(b.ctx, idle); err != nil {
		t.Fatal(err)
	}
	if _, _, err := b.s.RecordDelivery(b.ctx, &store.Delivery{ProjectID: idle.ID, DeliveryID: "d1", Event: "ping"}); err != nil {
		t.Fatal(err)
	}
	wf := &store.Workflow{Project: "idle", Name: "nightly", Definition: []byte(`jobs: { a: { steps: [ { run: "true" } ] } }`)}
	if err := b.s.CreateWorkflow(b.ctx, wf); err != nil {
		t.Fatal(err)
	}
	// Its outbound webhook subscriptions do not keep it (nor are they left behind).
	if err := b.s.CreateWebhook(b.ctx, &store.Webhook{ProjectID: idle.ID, URL: "https://hooks.example.com/x", Secret: "k",
		Events: []string{store.WebhookRunFinished}}); err != nil {
		t.Fatal(err)
	}
	// What it owns in the blob store goes with it.
	if err := b.s.AddBlobOwner(b.ctx, idle.ID, sha256Hex("idle's archive")); err != nil {
		t.Fatal(err)
	}
	if err := b.s.DeleteProject(b.ctx, "idle"); err != nil {
		t.Fatalf("DeleteProject: %v", err)
	}
	if owned, err := b.s.BlobOwned(b.ctx, idle.ID, sha256Hex("idle's archive")); err != nil || owned {
		t.Errorf("the deleted project still owns its blob: %v, %v", owned, err)
	}
	_, err := b.s.GetProjectByName(b.ctx, "idle")
	wantErr(t, "GetProjectByName after delete", err, store.ErrNotFound)
	wantErr(t, "DeleteProject again", b.s.DeleteProject(b.ctx, "idle"), store.ErrNotFound)
	if hooks, err := b.s.ListWebhooks(b.ctx, idle.ID); err != nil || len(hooks) != 0 {
		t.Errorf("webhooks of the deleted project = %v, %v; want none", hooks, err)
	}
	_, err = b.s.GetWorkflow(b.ctx, wf.ID)
	wantErr(t, "GetWorkflow of the deleted project's workflow", err, store.ErrNotFound)
	// The name is free again, for a new project or for a run that makes one on first use.
	run, _ := b.createRun(`jobs: { a: { steps: [ { run: "true" } ] } }`, store.CreateRunParams{Project: "idle"})
	if run.ProjectID == idle.ID {
		t.Errorf("a run after delete reuses the deleted project's id %s", idle.ID)
	}
	if _, err := b.s.GetProjectByName(b.ctx, "idle"); err != nil {
		t.Errorf("project made on first use after delete: %v", err)
	}
}

func testDeliveries(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p, q := connected("one"), connected("two")
	for _, pr := range []*store.Project{p, q} {
		if err := b.s.CreateProject(b.ctx, pr); err != nil {
			t.Fatal(err)
		}
	}
	_, err := b.s.GetDelivery(b.ctx, p.ID, "abc")
	wantErr(t, "GetDelivery before any", err, store.ErrNotFound)
	runs := []uuid.UUID{store.NewID(), store.NewID()}
	d, created, err := b.s.RecordDelivery(b.ctx, &store.Delivery{ProjectID: p.ID, DeliveryID: "abc", Event: "push", RunIDs: runs, Reason: "ran"})
	if err != nil || !created {
		t.Fatalf("RecordDelivery = created %v, %v; want a new record", created, err)
	}
	wantTime(t, "delivery CreatedAt", d.CreatedAt, b.clk.Now())
	b.clk.Advance(time.Second)
	again, created, err := b.s.RecordDelivery(b.ctx, &store.Delivery{ProjectID: p.ID, DeliveryID: "abc", Event: "push", RunIDs: []uuid.UUID{store.NewID()}})
	if err != nil || created {
		t.Fatalf("RecordDelivery of a seen id = created %v, %v; want the first record", created, err)
	}
	if !slices.Equal(again.RunIDs, runs) || again.Reason != "ran" {
		t.Errorf("redelivery returned %+v, want the first record's runs %v", again, runs)
	}
	wantTime(t, "first record's CreatedAt", again.CreatedAt, b.clk.Now().Add(-time.Second))
	got, err := b.s.GetDelivery(b.ctx, p.ID, "abc")
	if err != nil || !slices.Equal(got.RunIDs, runs) || got.Event != "push" {
		t.Errorf("GetDelivery = %+v, %v", got, err)
	}
	// Ids are per project: another project's delivery with the same id is its own.
	if _, created, err := b.s.RecordDelivery(b.ctx, &store.Delivery{ProjectID: q.ID, DeliveryID: "abc", Event: "ping"}); err != nil || !created {
		t.Errorf("same id in another project: created %v, %v", created, err)
	}
	none, err := b.s.GetDelivery(b.ctx, q.ID, "abc")
	if err != nil || len(none.RunIDs) != 0 || none.RunIDs == nil {
		t.Errorf("delivery without runs = %+v, %v; want an empty, non-nil list", none, err)
	}
	_, _, err = b.s.RecordDelivery(b.ctx, &store.Delivery{ProjectID: p.ID})
	wantErr(t, "RecordDelivery without an id", err, store.ErrInvalid)
}

// testHookEventClaims: the first delivery of an event (kind, ref, sha) owns it for the
// window; a resend under another delivery id is told the first one's id, while another
// ref, another event, another project or a resend after the window is a claim of its own.
func testHookEventClaims(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p, q := connected("events-one"), connected("events-two")
	for _, pr := range []*store.Project{p, q} {
		if err := b.s.CreateProject(b.ctx, pr); err != nil {
			t.Fatal(err)
		}
	}
	const window = 10 * time.Minute
	sha := "4f2c1e0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e"
	claim := func(project *store.Project, event, ref, delivery string) *store.HookEventClaim {
		t.Helper()
		c, err := b.s.ClaimHookEvent(b.ctx, store.ClaimHookEventParams{ProjectID: project.ID, Event: event, Ref: ref, SHA: sha, DeliveryID: delivery, Window: window})
		if err != nil {
			t.Fatalf("ClaimHookEvent(%s %s %s %s): %v", project.Name, event, ref, delivery, err)
		}
		return c
	}
	first := claim(p, "push", "refs/heads/main", "d-1")
	if first.DeliveryID != "d-1" {
		t.Fatalf("first claim = %+v, want d-1's", first)
	}
	wantTime(t, "ClaimedAt", first.ClaimedAt, b.clk.Now())
	b.clk.Advance(window - time.Second)
	if c := claim(p, "push", "refs/heads/main", "d-2"); c.DeliveryID != "d-1" {
		t.Errorf("a resend within the window = %+v, want d-1's claim", c)
	} else {
		wantTime(t, "ClaimedAt of the first claim", c.ClaimedAt, epoch)
	}
	if c := claim(p, "push", "refs/heads/main", "d-1"); c.DeliveryID != "d-1" {
		t.Errorf("the first delivery again = %+v, want its own claim", c)
	}
	for _, other := range []struct {
		project              *store.Project
		event, ref, delivery string
	}{
		{p, "push", "refs/heads/release", "d-3"},
		{p, "tag", "refs/tags/v1", "d-4"},
		{p, "tag", "refs/heads/main", "d-4b"},
		{p, "pull_request/opened", "refs/pull/7/head", "d-5"},
		{p, "pull_request/closed", "refs/pull/7/head", "d-6"},
		{q, "push", "refs/heads/main", "d-7"},
	} {
		if c := claim(other.project, other.event, other.ref, other.delivery); c.DeliveryID != other.delivery {
			t.Errorf("%s %s %s: claim = %+v, want %s's own", other.project.Name, other.event, other.ref, c, other.delivery)
		}
	}
	// Past the window the event is new again.
	b.clk.Advance(time.Second)
	if c := claim(p, "push", "refs/heads/main", "d-8"); c.DeliveryID != "d-8" {
		t.Errorf("a resend after the window = %+v, want d-8's own claim", c)
	}
	if c := claim(p, "push", "refs/heads/main", "d-9"); c.DeliveryID != "d-8" {
		t.Errorf("a resend within the new window = %+v, want d-8's claim", c)
	}
	for _, bad := range []store.ClaimHookEventParams{
		{Event: "push", SHA: sha, DeliveryID: "x", Window: window},
		{ProjectID: p.ID, SHA: sha, DeliveryID: "x", Window: window},
		{ProjectID: p.ID, Event: "push", DeliveryID: "x", Window: window},
		{ProjectID: p.ID, Event: "push", SHA: sha, Window: window},
		{ProjectID: p.ID, Event: "push", SHA: sha, DeliveryID: "x"},
	} {
		_, err := b.s.ClaimHookEvent(b.ctx, bad)
		wantErr(t, "ClaimHookEvent with a field missing", err, store.ErrInvalid)
	}
	// A project's claims go with it.
	if err := b.s.DeleteProject(b.ctx, q.Name); err != nil {
		t.Fatalf("delete a project with hook events: %v", err)
	}
}

// testHookEventClaimsRace: deliveries of one event claimed at once, from one store or
// from replicas, all name the same one delivery.
func testHookEventClaimsRace(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := connected("events-race")
	if err := b.s.CreateProject(b.ctx, p); err != nil {
		t.Fatal(err)
	}
	const n = 8
	owners := make(chan string, n)
	errs := make(chan error, n)
	for i := range n {
		go func() {
			c, err := b.s.ClaimHookEvent(b.ctx, store.ClaimHookEventParams{ProjectID: p.ID, Event: "push", Ref: "refs/heads/main",
				SHA: "4f2c1e0a9b8c7d6e5f4a3b2c1d0e9f8a7b6c5d4e", DeliveryID: fmt.Sprintf("race-%d", i), Window: time.Minute})
			if err != nil {
				errs <- err
				return
			}
			owners <- c.DeliveryID
		}()
	}
	seen := map[string]bool{}
	for range n {
		select {
		case err := <-errs:
			t.Fatalf("ClaimHookEvent: %v", err)
		case o := <-owners:
			seen[o] = true
		}
	}
	if len(seen) != 1 {
		t.Errorf("concurrent claims named %v, want one delivery", seen)
	}
}

func testFailedRun(t *testing.T, h Harness) {
	_, b := setup(t, h)
	errs := []store.RunError{
		{Path: "jobs.build.needs[0]", Line: 3, Column: 12, Message: `needs unknown job "lint"`},
		{Message: "yaml: line 9: mapping values are not allowed here"},
	}
	tr := store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: "0123456789abcdef0123456789abcdef01234567", Event: "push"}
	run, created, err := b.s.CreateFailedRun(b.ctx, store.CreateFailedRunParams{
		Project: "web", Name: ".gantry.yml", Trigger: tr, IdempotencyKey: "delivery:1", Definition: []byte("jobs: ["), Errors: errs,
	})
	if err != nil || !created {
		t.Fatalf("CreateFailedRun = created %v, %v", created, err)
	}
	if run.Status != store.RunFailed || run.JobsTotal != 0 || run.Project != "web" || run.Name != ".gantry.yml" {
		t.Errorf("failed run = %+v", run)
	}
	if !slices.Equal(run.Errors, errs) || run.Trigger != tr {
		t.Errorf("failed run errors %+v trigger %+v", run.Errors, run.Trigger)
	}
	if def, err := b.s.RunDefinition(b.ctx, run.ID); err != nil || string(def) != "jobs: [" {
		t.Errorf("RunDefinition of the failed run = %q, %v; want the file as submitted", def, err)
	}
	wantTime(t, "FinishedAt", run.FinishedAt, b.clk.Now())
	got := b.getRun(run.ID)
	if !slices.Equal(got.Errors, errs) || got.Status != store.RunFailed {
		t.Errorf("GetRun of the failed run = %+v", got)
	}
	jobs, err := b.s.ListJobs(b.ctx, run.ID)
	if err != nil || len(jobs) != 0 {
		t.Errorf("ListJobs of the failed run = %v, %v; want none", jobs, err)
	}
	listed, err := b.s.ListRuns(b.ctx, store.ListRunsParams{Project: "web", Status: store.RunFailed})
	if err != nil || len(listed) != 1 || !slices.Equal(listed[0].Errors, errs) {
		t.Errorf("ListRuns of failed runs = %v, %v", listed, err)
	}
	again, created, err := b.s.CreateFailedRun(b.ctx, store.CreateFailedRunParams{
		Project: "web", Trigger: tr, IdempotencyKey: "delivery:1", Errors: errs,
	})
	if err != nil || created || again.ID != run.ID {
		t.Errorf("CreateFailedRun with a known key = %v, created %v, %v; want the first run", again, created, err)
	}
	// A run with jobs has no errors.
	ok, _ := b.createRun(`jobs: { a: { steps: [ { run: "true" } ] } }`, store.CreateRunParams{Project: "web"})
	if got := b.getRun(ok.ID); got.Errors != nil {
		t.Errorf("run with jobs has errors %v", got.Errors)
	}
	_, _, err = b.s.CreateFailedRun(b.ctx, store.CreateFailedRunParams{Project: "web"})
	wantErr(t, "CreateFailedRun without errors", err, store.ErrInvalid)
}

func testTriggerFields(t *testing.T, h Harness) {
	_, b := setup(t, h)
	tr := store.Trigger{
		Ref: "refs/pull/42/head", Branch: "main", SHA: "0123456789abcdef0123456789abcdef01234567",
		Before: "89abcdef0123456789abcdef0123456789abcdef", Event: "pull_request", Actor: "mona",
		Repository: "octo-org/web-app", PRNumber: 42, DeliveryID: "72d3162e", Tag: "",
	}
	run, _ := b.createRun(`jobs: { a: { steps: [ { run: "true" } ] } }`, store.CreateRunParams{Trigger: tr})
	if got := b.getRun(run.ID); got.Trigger != tr {
		t.Errorf("trigger read back = %+v, want %+v", got.Trigger, tr)
	}
	tag := store.Trigger{Ref: "refs/tags/v1.0.0", Tag: "v1.0.0", SHA: tr.SHA, Event: "tag"}
	run, _ = b.createRun(`jobs: { a: { steps: [ { run: "true" } ] } }`, store.CreateRunParams{Trigger: tag})
	if got := b.getRun(run.ID); got.Trigger != tag {
		t.Errorf("tag trigger read back = %+v, want %+v", got.Trigger, tag)
	}
}
