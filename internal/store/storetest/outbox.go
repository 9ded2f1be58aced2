package storetest

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var outboxReportTests = []test{
	{"StatusesInTheTransaction", testStatusReports},
	{"JobStatuses", testJobStatusReports},
	{"NoStatusWithoutProviderSHAOrVerifiedRef", testNoStatusReports},
	{"StatusOfAFailedRunAndARetry", testStatusFailedAndRetry},
	{"WebhookSubscriptions", testWebhookReports},
	{"FailDeadRedeliver", testOutboxFailDead},
}

const reportSHA = "0123456789abcdef0123456789abcdef01234567"

var reportTrigger = store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: reportSHA, Event: "push", Repository: "acme/web",
	Verified: store.RefFromWebhook}

// statuses returns the run status messages enqueued so far, oldest first.
func (b *bundle) statuses() []store.StatusMessage {
	b.t.Helper()
	var out []store.StatusMessage
	for _, s := range b.allStatuses() {
		if s.JobID == uuid.Nil {
			out = append(out, s)
		}
	}
	return out
}

// jobStatuses returns the job status messages enqueued so far, oldest first, as
// "<context> <state>".
func (b *bundle) jobStatuses() []string {
	b.t.Helper()
	var out []string
	for _, s := range b.allStatuses() {
		if s.JobID != uuid.Nil {
			out = append(out, s.Context+" "+s.State)
		}
	}
	return out
}

func (b *bundle) allStatuses() []store.StatusMessage {
	b.t.Helper()
	var out []store.StatusMessage
	for _, m := range b.outbox(store.TopicStatus) {
		var s store.StatusMessage
		if err := json.Unmarshal(m.Payload, &s); err != nil {
			b.t.Fatalf("status payload %s: %v", m.Payload, err)
		}
		out = append(out, s)
	}
	return out
}

// testJobStatusReports: a run of a project that reports per job (the default) enqueues,
// beside the run's, a status per job under gantry/<pipeline>/<job name>: pending with the
// run, running when it starts, its end when it ends (skipped too), linking to the job's
// page. A project set to report per run, and a run of more than store.MaxJobStatuses
// jobs, enqueue the run's only.
func testJobStatusReports(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := connected("web")
	if err := b.s.CreateProject(b.ctx, p); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	yaml := "name: ci\njobs:\n  a:\n    steps: [{run: 'true'}]\n  b:\n    needs: [a]\n    steps: [{run: 'true'}]\n" +
		"  c:\n    needs: [b]\n    steps: [{run: 'true'}]\n"
	run, jobs := b.createRun(yaml, store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	if got := b.jobStatuses(); !slices.Equal(got, []string{"gantry/ci/a pending", "gantry/ci/b pending", "gantry/ci/c pending"}) {
		t.Fatalf("after CreateRun job statuses = %v", got)
	}
	c := b.claimOne()
	if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	if err := b.s.StartJob(b.ctx, ref(c)); err != nil {
		t.Fatalf("StartJob again: %v", err)
	}
	if got := b.jobStatuses(); !slices.Equal(got[3:], []string{"gantry/ci/a running"}) {
		t.Fatalf("after StartJob (twice) job statuses = %v", got)
	}
	b.complete(c, store.JobFailed)
	b.drive(run.ID, nil)
	b.wantRunDone(run.ID, store.RunFailed)
	got := b.jobStatuses()
	if !slices.Equal(got[4:], []string{"gantry/ci/a failure", "gantry/ci/b skipped", "gantry/ci/c skipped"}) {
		t.Fatalf("job statuses = %v", got)
	}
	byKey := map[string]uuid.UUID{}
	for _, j := range jobs {
		byKey[j.Key] = j.ID
	}
	for _, s := range b.allStatuses() {
		if s.JobID == uuid.Nil {
			continue
		}
		key := s.Context[len("gantry/ci/"):]
		if s.JobID != byKey[key] || s.Path != "/jobs/"+s.JobID.String() || s.RunID != run.ID || s.SHA != reportSHA ||
			s.Repository != "acme/web" || s.Project != "web" || s.Description == "" {
			t.Errorf("job status %+v", s)
		}
	}

	// A claim that starts its job reports it running.
	started, _ := b.createRun("name: one\njobs:\n  only:\n    steps: [{run: 'true'}]\n", store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	n := len(b.jobStatuses())
	cs := b.claim(store.ClaimParams{Max: 1, Start: true})
	if len(cs) != 1 {
		t.Fatalf("claim.start claimed %d", len(cs))
	}
	if got := b.jobStatuses()[n:]; !slices.Equal(got, []string{"gantry/one/only running"}) {
		t.Errorf("after a claim that starts: %v", got)
	}
	b.complete(cs[0], store.JobSuccess)
	b.wantRunDone(started.ID, store.RunSuccess)
	if got := b.jobStatuses()[n:]; !slices.Equal(got, []string{"gantry/one/only running", "gantry/one/only success"}) {
		t.Errorf("after success: %v", got)
	}

	// A job reports pending, waiting for a worker, when it is queued: once its needs
	// succeeded, and again when it goes back to the queue after an attempt.
	chain, chainJobs := b.createRun("name: chain\njobs:\n  first:\n    steps: [{run: 'true'}]\n  second:\n    needs: [first]\n"+
		"    retry: {max_attempts: 2, backoff: 1s, on: [failure]}\n    steps: [{run: 'true'}]\n",
		store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	second := chainJobs[1].ID
	described := func(from int) []string {
		t.Helper()
		var out []string
		for _, s := range b.allStatuses()[from:] {
			if s.JobID != uuid.Nil {
				// Every status names its run's number first, as in "Run #3: Passed".
				desc, ok := strings.CutPrefix(s.Description, fmt.Sprintf("Run #%d: ", s.RunNumber))
				if !ok || s.RunNumber < 1 {
					t.Errorf("job status of run #%d described %q, want it to start with the number", s.RunNumber, s.Description)
				}
				out = append(out, s.Context+" "+s.State+": "+desc)
			}
		}
		slices.Sort(out)
		return out
	}
	n = len(b.allStatuses())
	first := b.claimOne()
	b.complete(first, store.JobSuccess)
	if got, want := described(n), []string{"gantry/chain/first success: Passed", "gantry/chain/second pending: Waiting for a worker"}; !slices.Equal(got, want) {
		t.Errorf("after its need succeeded: %v, want %v", got, want)
	}
	n = len(b.allStatuses())
	c2 := b.claimOne()
	if c2.Job.ID != second {
		t.Fatalf("claimed %s, want the second job", c2.Job.Key)
	}
	if err := b.s.StartJob(b.ctx, ref(c2)); err != nil {
		t.Fatal(err)
	}
	b.complete(c2, store.JobFailed) // retried after its backoff
	b.wantJobStatus(second, store.JobRetrying)
	b.clk.Advance(time.Minute)
	if _, err := b.s.PromoteRetries(b.ctx); err != nil {
		t.Fatalf("PromoteRetries: %v", err)
	}
	b.wantJobStatus(second, store.JobQueued)
	if got, want := described(n), []string{"gantry/chain/second pending: Waiting for a worker", "gantry/chain/second running: Running"}; !slices.Equal(got, want) {
		t.Errorf("through an attempt and its retry: %v, want %v", got, want)
	}
	b.complete(b.claimOne(), store.JobSuccess)
	b.wantRunDone(chain.ID, store.RunSuccess)

	// A job behind an approval says so, once, and is queued when approved.
	if err := b.s.PutEnvironment(b.ctx, &store.Environment{ProjectID: p.ID, Name: "production", RequiredApprovals: 1,
		Approvers: []string{"alice"}}); err != nil {
		t.Fatalf("PutEnvironment: %v", err)
	}
	n = len(b.allStatuses())
	_, gated := b.createRun(deployYAML, store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	if got, want := described(n), []string{"gantry/deploy/deploy pending: Waiting for approval"}; !slices.Equal(got, want) {
		t.Errorf("a job waiting for approval: %v, want %v", got, want)
	}
	n = len(b.allStatuses())
	if _, err := b.decide(gated[0].ID, "alice", store.Approved); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if got, want := described(n), []string{"gantry/deploy/deploy pending: Waiting for a worker"}; !slices.Equal(got, want) {
		t.Errorf("once approved: %v, want %v", got, want)
	}

	// Per run only, and a wide run: the run's statuses only.
	quiet := connected("quiet")
	quiet.CommitStatuses = store.CommitStatusesRun
	if err := b.s.CreateProject(b.ctx, quiet); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	n, runs := len(b.jobStatuses()), len(b.statuses())
	b.createRun(yaml, store.CreateRunParams{Project: "quiet", Trigger: reportTrigger})
	wide := "name: wide\njobs:\n  m:\n    matrix: {n: ["
	for i := range store.MaxJobStatuses + 1 {
		if i > 0 {
			wide += ", "
		}
		wide += strconv.Itoa(i)
	}
	wide += "]}\n    steps: [{run: 'true'}]\n"
	b.createRun(wide, store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	if got := b.jobStatuses(); len(got) != n {
		t.Errorf("per-run project and a wide run enqueued job statuses: %v", got[n:])
	}
	if got := len(b.statuses()); got != runs+2 {
		t.Errorf("run statuses = %d, want %d", got, runs+2)
	}
	bad := connected("bad")
	bad.CommitStatuses = "some"
	wantErr(t, "CreateProject with commit statuses some", b.s.CreateProject(b.ctx, bad), store.ErrInvalid)
}

// outbox returns the messages of topic, oldest first.
func (b *bundle) outbox(topic string) []*store.OutboxMessage {
	b.t.Helper()
	ms, err := b.s.ListOutbox(b.ctx, store.ListOutboxParams{Topic: topic, Limit: 500})
	if err != nil {
		b.t.Fatalf("ListOutbox: %v", err)
	}
	slices.Reverse(ms)
	return ms
}

func states(ss []store.StatusMessage) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.State
	}
	return out
}

// testStatusReports: a run of a project connected to a forge enqueues its pending status
// with the run, running with the claim that starts it, and its result exactly once with
// the job that ends it; each message says what the dispatcher needs.
func testStatusReports(t *testing.T, h Harness) {
	_, b := setup(t, h)
	p := connected("web")
	p.CommitStatuses = store.CommitStatusesRun // the run's alone: testJobStatusReports has the jobs'
	if err := b.s.CreateProject(b.ctx, p); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	yaml := "name: ci\njobs:\n  a:\n    steps: [{run: 'true'}]\n  b:\n    needs: [a]\n    steps: [{run: 'true'}]\n"
	run, _ := b.createRun(yaml, store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	if got := states(b.statuses()); !slices.Equal(got, []string{"pending"}) {
		t.Fatalf("after CreateRun statuses = %v, want [pending]", got)
	}
	c := b.claimOne()
	if got := states(b.statuses()); !slices.Equal(got, []string{"pending", "running"}) {
		t.Fatalf("after the first claim statuses = %v, want [pending running]", got)
	}
	b.complete(c, store.JobSuccess)
	if got := states(b.statuses()); len(got) != 2 {
		t.Fatalf("a job that does not end the run enqueued a status: %v", got)
	}
	b.drive(run.ID, nil)
	b.wantRunDone(run.ID, store.RunSuccess)
	ss := b.statuses()
	if got := states(ss); !slices.Equal(got, []string{"pending", "running", "success"}) {
		t.Fatalf("statuses = %v, want [pending running success]", got)
	}
	want := store.StatusMessage{RunID: run.ID, RunNumber: 1, Project: "web", ProjectID: p.ID, Repository: "acme/web", SHA: reportSHA,
		State: "success", Context: "gantry/ci", Description: "Run #1: Passed", Path: "/runs/" + run.ID.String()}
	if ss[2] != want {
		t.Errorf("final status = %+v\nwant %+v", ss[2], want)
	}
	ms := b.outbox("")
	if len(ms) != 3 {
		t.Fatalf("outbox holds %d messages, want 3", len(ms))
	}
	for _, m := range ms {
		if m.Attempts != 0 || !m.DeliveredAt.IsZero() || !m.DeadAt.IsZero() || m.LastError != "" {
			t.Errorf("new message %+v is not fresh", m)
		}
		wantTime(t, "NextAttempt", m.NextAttempt, b.clk.Now())
	}

	// A failing and a cancelled run say so in the forge's words, once.
	failing, _ := b.createRun(yaml, store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	b.drive(failing.ID, map[string]store.JobStatus{"a": store.JobFailed})
	b.wantRunDone(failing.ID, store.RunFailed)
	cancelled, _ := b.createRun(yaml, store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	if err := b.s.CancelRun(b.ctx, cancelled.ID); err != nil {
		t.Fatalf("CancelRun: %v", err)
	}
	byRun := map[uuid.UUID][]string{}
	for _, s := range b.statuses() {
		byRun[s.RunID] = append(byRun[s.RunID], s.State)
	}
	if got := byRun[failing.ID]; !slices.Equal(got, []string{"pending", "running", "failure"}) {
		t.Errorf("failing run statuses = %v, want [pending running failure]", got)
	}
	if got := byRun[cancelled.ID]; !slices.Equal(got, []string{"pending", "cancelled"}) {
		t.Errorf("cancelled run statuses = %v, want [pending cancelled]", got)
	}
}

// testNoStatusReports: runs of a project with no provider, without a commit, or whose
// ref and commit nobody verified (a developer's hand-made run naming main's commit),
// enqueue nothing at all, failed runs included.
func testNoStatusReports(t *testing.T, h Harness) {
	_, b := setup(t, h)
	if err := b.s.CreateProject(b.ctx, connected("web")); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	yaml := "jobs:\n  a:\n    steps: [{run: 'true'}]\n"
	unverified := reportTrigger
	unverified.Verified, unverified.Event = "", "api"
	plain, _ := b.createRun(yaml, store.CreateRunParams{Project: "plain", Trigger: reportTrigger})
	noSHA, _ := b.createRun(yaml, store.CreateRunParams{Project: "web", Trigger: store.Trigger{Event: "manual", Verified: store.RefFromAdmin}})
	byHand, _ := b.createRun(yaml, store.CreateRunParams{Project: "web", Trigger: unverified})
	for _, id := range []uuid.UUID{plain.ID, noSHA.ID, byHand.ID} {
		b.drive(id, nil)
		b.wantRunDone(id, store.RunSuccess)
	}
	if _, _, err := b.s.CreateFailedRun(b.ctx, store.CreateFailedRunParams{Project: "web", Name: ".gantry.yml",
		Trigger: unverified, Errors: []store.RunError{{Message: "bad"}}}); err != nil {
		t.Fatalf("CreateFailedRun: %v", err)
	}
	if ms := b.outbox(""); len(ms) != 0 {
		t.Errorf("runs that report nothing enqueued %d messages: %s", len(ms), ms[0].Payload)
	}
}

// testStatusFailedAndRetry: a run that failed before it had jobs reports failure; a run
// retried goes back to running on the forge and reports its new result.
func testStatusFailedAndRetry(t *testing.T, h Harness) {
	_, b := setup(t, h)
	if err := b.s.CreateProject(b.ctx, connected("web")); err != nil {
		t.Fatalf("CreateProject: %v", err)
	}
	bad, _, err := b.s.CreateFailedRun(b.ctx, store.CreateFailedRunParams{Project: "web", Name: ".gantry.yml",
		Trigger: reportTrigger, Errors: []store.RunError{{Message: "bad"}}})
	if err != nil {
		t.Fatalf("CreateFailedRun: %v", err)
	}
	ss := b.statuses()
	if len(ss) != 1 || ss[0].RunID != bad.ID || ss[0].State != "failure" || ss[0].Context != "gantry/.gantry.yml" {
		t.Fatalf("failed run statuses = %+v, want one failure", ss)
	}
	run, _ := b.createRun("name: ci\njobs:\n  a:\n    steps: [{run: 'true'}]\n", store.CreateRunParams{Project: "web", Trigger: reportTrigger})
	b.drive(run.ID, map[string]store.JobStatus{"a": store.JobFailed})
	if err := b.s.RetryRun(b.ctx, run.ID); err != nil {
		t.Fatalf("RetryRun: %v", err)
	}
	b.drive(run.ID, nil)
	b.wantRunDone(run.ID, store.RunSuccess)
	var got []string
	for _, s := range b.statuses() {
		if s.RunID == run.ID {
			got = append(got, s.State)
		}
	}
	if want := []string{"pending", "running", "failure", "running", "success"}; !slices.Equal(got, want) {
		t.Errorf("retried run statuses = %v, want %v", got, want)
	}
}

// testWebhookReports: subscriptions are kept per project, and a run enqueues one message
// per subscription and event it wants, in the transaction that ended the job or run.
func testWebhookReports(t *testing.T, h Harness) {
	_, b := setup(t, h)
	// A project without a provider: webhooks alone make its runs report.
	first, _ := b.create("jobs:\n  a:\n    steps: [{run: 'true'}]\n") // makes "default"
	p, err := b.s.GetProjectByName(b.ctx, "default")
	if err != nil {
		t.Fatalf("GetProjectByName: %v", err)
	}
	b.drive(first.ID, nil)
	runsOnly := &store.Webhook{ProjectID: p.ID, URL: "https://hooks.example.com/runs", Secret: "k1", Events: []string{store.WebhookRunFinished}}
	both := &store.Webhook{ProjectID: p.ID, URL: "https://hooks.example.com/all", Secret: "k2",
		Events: []string{store.WebhookRunFinished, store.WebhookJobFinished}}
	for _, w := range []*store.Webhook{runsOnly, both} {
		if err := b.s.CreateWebhook(b.ctx, w); err != nil {
			t.Fatalf("CreateWebhook: %v", err)
		}
		if w.ID == uuid.Nil {
			t.Fatal("CreateWebhook left ID unset")
		}
	}
	wantErr(t, "CreateWebhook with an unknown event", b.s.CreateWebhook(b.ctx,
		&store.Webhook{ProjectID: p.ID, URL: "https://x", Events: []string{"run.started"}}), store.ErrInvalid)
	wantErr(t, "CreateWebhook of an unknown project", b.s.CreateWebhook(b.ctx,
		&store.Webhook{ProjectID: store.NewID(), URL: "https://x", Events: []string{store.WebhookRunFinished}}), store.ErrNotFound)
	list, err := b.s.ListWebhooks(b.ctx, p.ID)
	if err != nil || len(list) != 2 || list[0].ID != runsOnly.ID || list[1].Secret != "k2" || !slices.Equal(list[1].Events, both.Events) {
		t.Fatalf("ListWebhooks = %+v, %v", list, err)
	}
	if ms := b.outbox(""); len(ms) != 0 {
		t.Fatalf("a run made before any subscription enqueued %d messages", len(ms))
	}

	run, _ := b.createRun("name: ci\njobs:\n  a:\n    steps: [{run: 'true'}]\n  b:\n    needs: [a]\n    steps: [{run: 'false'}]\n",
		store.CreateRunParams{Trigger: reportTrigger})
	b.drive(run.ID, map[string]store.JobStatus{"b": store.JobFailed})
	b.wantRunDone(run.ID, store.RunFailed)
	type seen struct {
		hook  uuid.UUID
		event string
		job   string
	}
	var got []seen
	for _, m := range b.outbox(store.TopicWebhook) {
		var w store.WebhookMessage
		if err := json.Unmarshal(m.Payload, &w); err != nil {
			t.Fatalf("webhook payload: %v", err)
		}
		if w.Project != "default" || w.Run.ID != run.ID || w.Run.Number != run.Number || w.Run.Number < 1 || w.Run.SHA != reportSHA || w.Run.Name != "ci" || w.Run.Path != "/runs/"+run.ID.String() {
			t.Errorf("webhook message %+v", w)
		}
		s := seen{hook: w.WebhookID, event: w.Event}
		if w.Job != nil {
			s.job = w.Job.Key + "=" + string(w.Job.Status)
		} else if w.Run.Status != store.RunFailed || w.Run.FinishedAt.IsZero() {
			t.Errorf("run.finished says run %s finished %v", w.Run.Status, w.Run.FinishedAt)
		}
		got = append(got, s)
	}
	want := []seen{
		{both.ID, store.WebhookJobFinished, "a=success"},
		{both.ID, store.WebhookJobFinished, "b=failed"},
		{both.ID, store.WebhookRunFinished, ""},
		{runsOnly.ID, store.WebhookRunFinished, ""},
	}
	sortSeen := func(s []seen) {
		slices.SortFunc(s, func(x, y seen) int {
			if c := x.hook.String(); c != y.hook.String() {
				if c < y.hook.String() {
					return -1
				}
				return 1
			}
			if x.event+x.job < y.event+y.job {
				return -1
			}
			return 1
		})
	}
	sortSeen(got)
	sortSeen(want)
	if !slices.Equal(got, want) {
		t.Errorf("webhook messages = %+v\nwant %+v", got, want)
	}
	if ss := b.statuses(); len(ss) != 0 {
		t.Errorf("a project without a provider enqueued statuses: %+v", ss)
	}

	wantErr(t, "DeleteWebhook of another project's id", b.s.DeleteWebhook(b.ctx, store.NewID(), both.ID), store.ErrNotFound)
	if err := b.s.DeleteWebhook(b.ctx, p.ID, both.ID); err != nil {
		t.Fatalf("DeleteWebhook: %v", err)
	}
	_, err = b.s.GetWebhook(b.ctx, both.ID)
	wantErr(t, "GetWebhook of a deleted subscription", err, store.ErrNotFound)
	if got, err := b.s.GetWebhook(b.ctx, runsOnly.ID); err != nil || got.URL != runsOnly.URL {
		t.Errorf("GetWebhook = %+v, %v", got, err)
	}
}

// testOutboxFail: a failed attempt records its error and the next attempt; a dead
// message is never claimed again until redelivered; the states filter the list.
func testOutboxFailDead(t *testing.T, h Harness) {
	_, b := setup(t, h)
	if err := b.s.EnqueueOutbox(b.ctx, "webhook", []byte(`{"n":1}`)); err != nil {
		t.Fatalf("EnqueueOutbox: %v", err)
	}
	claim := func(want int) []*store.OutboxMessage {
		t.Helper()
		ms, err := b.s.ClaimOutbox(b.ctx, 10, time.Minute)
		if err != nil {
			t.Fatalf("ClaimOutbox: %v", err)
		}
		if len(ms) != want {
			t.Fatalf("ClaimOutbox returned %d messages, want %d", len(ms), want)
		}
		return ms
	}
	list := func(state store.OutboxState) int {
		t.Helper()
		ms, err := b.s.ListOutbox(b.ctx, store.ListOutboxParams{State: state})
		if err != nil {
			t.Fatalf("ListOutbox(%s): %v", state, err)
		}
		return len(ms)
	}
	m := claim(1)[0]
	if list(store.OutboxPending) != 1 || list(store.OutboxFailed) != 0 {
		t.Fatal("a claimed message is not pending, or is failed before failing")
	}
	if err := b.s.FailOutbox(b.ctx, store.FailOutboxParams{ID: m.ID, Error: "HTTP 500", NextAttempt: b.clk.Now().Add(10 * time.Second)}); err != nil {
		t.Fatalf("FailOutbox: %v", err)
	}
	got, err := b.s.GetOutbox(b.ctx, m.ID)
	if err != nil || got.LastError != "HTTP 500" || got.Attempts != 1 || !got.DeadAt.IsZero() {
		t.Fatalf("GetOutbox after a failure = %+v, %v", got, err)
	}
	wantTime(t, "NextAttempt", got.NextAttempt, b.clk.Now().Add(10*time.Second))
	if list(store.OutboxFailed) != 1 {
		t.Error("a failed message is not listed as failed")
	}
	claim(0)
	b.clk.Advance(10 * time.Second)
	m = claim(1)[0]
	if m.Attempts != 2 {
		t.Errorf("second claim Attempts = %d, want 2", m.Attempts)
	}
	if err := b.s.FailOutbox(b.ctx, store.FailOutboxParams{ID: m.ID, Error: "HTTP 404", Dead: true}); err != nil {
		t.Fatalf("FailOutbox dead: %v", err)
	}
	b.clk.Advance(time.Hour)
	claim(0)
	if list(store.OutboxDead) != 1 || list(store.OutboxPending) != 0 || list("") != 1 {
		t.Error("a dead message is not listed as dead only")
	}
	got, _ = b.s.GetOutbox(b.ctx, m.ID)
	wantTime(t, "DeadAt", got.DeadAt, b.clk.Now().Add(-time.Hour))

	if err := b.s.RedeliverOutbox(b.ctx, m.ID); err != nil {
		t.Fatalf("RedeliverOutbox: %v", err)
	}
	m = claim(1)[0]
	if m.Attempts != 1 || m.LastError != "" || !m.DeadAt.IsZero() {
		t.Errorf("redelivered message = %+v, want a fresh first attempt", m)
	}
	if err := b.s.MarkDelivered(b.ctx, m.ID); err != nil {
		t.Fatalf("MarkDelivered: %v", err)
	}
	// A replica whose attempt failed after another delivered it leaves it delivered.
	if err := b.s.FailOutbox(b.ctx, store.FailOutboxParams{ID: m.ID, Error: "late", NextAttempt: b.clk.Now()}); err != nil {
		t.Fatalf("FailOutbox of a delivered message: %v", err)
	}
	if list(store.OutboxDelivered) != 1 || list(store.OutboxPending) != 0 {
		t.Error("a delivered message is not listed as delivered only")
	}
	claim(0)

	// A message superseded before it was sent is done, listed as superseded only.
	if err := b.s.EnqueueOutbox(b.ctx, "status", []byte(`{"n":2}`)); err != nil {
		t.Fatalf("EnqueueOutbox: %v", err)
	}
	s := claim(1)[0]
	if err := b.s.SupersedeOutbox(b.ctx, s.ID); err != nil {
		t.Fatalf("SupersedeOutbox: %v", err)
	}
	if got, err := b.s.GetOutbox(b.ctx, s.ID); err != nil || got.DeliveredAt.IsZero() || got.LastError != store.OutboxSupersededNote {
		t.Errorf("superseded message = %+v, %v", got, err)
	}
	if list(store.OutboxSuperseded) != 1 || list(store.OutboxDelivered) != 1 || list(store.OutboxPending) != 0 {
		t.Errorf("superseded %d, delivered %d, pending %d; want 1, 1 (the other message), 0",
			list(store.OutboxSuperseded), list(store.OutboxDelivered), list(store.OutboxPending))
	}
	claim(0)
	wantErr(t, "SupersedeOutbox of an unknown id", b.s.SupersedeOutbox(b.ctx, store.NewID()), store.ErrNotFound)
	_, err = b.s.ListOutbox(b.ctx, store.ListOutboxParams{State: "lost"})
	wantErr(t, "ListOutbox of an unknown state", err, store.ErrInvalid)
	wantErr(t, "FailOutbox of an unknown id", b.s.FailOutbox(b.ctx, store.FailOutboxParams{ID: store.NewID()}), store.ErrNotFound)
	wantErr(t, "RedeliverOutbox of an unknown id", b.s.RedeliverOutbox(b.ctx, store.NewID()), store.ErrNotFound)
	_, err = b.s.GetOutbox(b.ctx, store.NewID())
	wantErr(t, "GetOutbox of an unknown id", err, store.ErrNotFound)
}
