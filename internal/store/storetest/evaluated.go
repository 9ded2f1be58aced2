package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// What a job's definition leaves to be known while the job runs: its name: as its claim
// evaluates it, and its environment's url as its end gives it.
var evaluatedTests = []test{
	{"JobNameKept", testJobNameKept},
	{"JobNameFenced", testJobNameFenced},
	{"EnvironmentURLKept", testEnvironmentURLKept},
	{"EnvironmentURLNotKeptByARetriedAttempt", testEnvironmentURLRetried},
}

const namedYAML = `
jobs:
  build:
    steps: [{run: "true"}]
  publish:
    needs: [build]
    name: Publish ${{ needs.build.outputs.version }}
    steps: [{run: "true"}]
`

// changedJob is the job of the run with that key as the run's change feed lists it
// since since; nil when it does not list it.
func changedJob(b *bundle, runID uuid.UUID, since int64, key string) *store.Job {
	b.t.Helper()
	for _, j := range mustChanged(b, runID, since) {
		if j.Key == key {
			return j
		}
	}
	return nil
}

// testJobNameKept: the name a claim evaluated is kept on the job, shown by GetJob and
// ListJobs, and is a change the run's feed lists; the plan's name stays as written.
func testJobNameKept(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(namedYAML)
	if _, err := b.completeWith(b.claimOne(), store.JobSuccess, map[string]string{"version": "1.2.3"}); err != nil {
		t.Fatal(err)
	}
	c := b.claimOne()
	if c.Job.Key != "publish" || c.Job.EvaluatedName != "" {
		t.Fatalf("claimed %s named %q, want publish with no name evaluated", c.Job.Key, c.Job.EvaluatedName)
	}
	since := b.getRun(run.ID).JobSeq
	if err := b.s.SetJobName(b.ctx, ref(c), "Publish 1.2.3"); err != nil {
		t.Fatalf("SetJobName: %v", err)
	}
	j := b.getJob(c.Job.ID)
	if j.EvaluatedName != "Publish 1.2.3" || j.Spec.DisplayName != "Publish ${{ needs.build.outputs.version }}" {
		t.Errorf("GetJob: evaluated name %q, plan's name %q", j.EvaluatedName, j.Spec.DisplayName)
	}
	if got := b.jobsByKey(run.ID)["publish"].EvaluatedName; got != "Publish 1.2.3" {
		t.Errorf("ListJobs: evaluated name %q", got)
	}
	if got := changedJob(b, run.ID, since, "publish"); got == nil || got.EvaluatedName != "Publish 1.2.3" {
		t.Errorf("the run's feed since the claim lists publish as %+v, want it with its name", got)
	}
	// The name stays with the job once it ended.
	b.complete(c, store.JobSuccess)
	if got := b.getJob(c.Job.ID).EvaluatedName; got != "Publish 1.2.3" {
		t.Errorf("after the job ended its name is %q", got)
	}
}

// testJobNameFenced: only the current lease sets the name, and a name that is empty, too
// long or not UTF-8 is refused with ErrInvalid.
func testJobNameFenced(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(namedYAML)
	c := b.claimOne()
	for _, name := range []string{"", strings.Repeat("x", 1001), "bad \xff"} {
		err := b.s.SetJobName(b.ctx, ref(c), name)
		wantErr(t, "SetJobName("+name+")", err, store.ErrInvalid)
	}
	err := b.s.SetJobName(b.ctx, store.LeaseRef{JobID: c.Job.ID, Token: "not-the-token"}, "x")
	wantErr(t, "SetJobName with another token", err, store.ErrLeaseLost)
	err = b.s.SetJobName(b.ctx, store.LeaseRef{JobID: uuid.New(), Token: "t"}, "x")
	wantErr(t, "SetJobName of no job", err, store.ErrNotFound)
	b.complete(c, store.JobSuccess)
	err = b.s.SetJobName(b.ctx, ref(c), "x")
	wantErr(t, "SetJobName after the job ended", err, store.ErrLeaseLost)
	if got := b.getJob(c.Job.ID).EvaluatedName; got != "" {
		t.Errorf("refused names left %q", got)
	}
}

const pagesYAML = `
jobs:
  deploy:
    environment: {name: pages, url: "${{ steps.d.outputs.url }}"}
    steps: [{id: d, run: "true"}]
  other:
    environment: {name: pages, url: "${{ steps.d.outputs.url }}"}
    steps: [{id: d, run: "true"}]
`

func strPtr(s string) *string { return &s }

// testEnvironmentURLKept: the url a job's end gives its environment is kept with the
// end, for a success and a failure alike, shown by GetJob and ListJobs and listed by
// the run's feed; a url that is not absolute http or https is refused with ErrInvalid
// and the job stays leased; none given leaves none.
func testEnvironmentURLKept(t *testing.T, h Harness) {
	_, b := setup(t, h)
	run, _ := b.create(pagesYAML)
	claims := map[string]*store.Claim{}
	for _, c := range b.claimAll() {
		claims[c.Job.Key] = c
	}
	c := claims["deploy"]
	for _, bad := range []string{"javascript:alert(1)", "/relative", "https://", "https://x/" + strings.Repeat("a", 2048)} {
		_, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobSuccess, EnvironmentURL: strPtr(bad)})
		wantErr(t, "CompleteJob with environment url "+bad, err, store.ErrInvalid)
	}
	if j := b.getJob(c.Job.ID); !j.Status.Leased() || j.EnvironmentURL != "" {
		t.Fatalf("after refused completions the job is %s with url %q, want still leased with none", j.Status, j.EnvironmentURL)
	}
	since := b.getRun(run.ID).JobSeq
	done, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobSuccess,
		EnvironmentURL: strPtr("https://example.org/site/")})
	if err != nil {
		t.Fatal(err)
	}
	if done.EnvironmentURL != "https://example.org/site/" {
		t.Errorf("CompleteJob returned the job with url %q", done.EnvironmentURL)
	}
	if got := b.getJob(c.Job.ID).EnvironmentURL; got != "https://example.org/site/" {
		t.Errorf("GetJob: url %q", got)
	}
	if got := changedJob(b, run.ID, since, "deploy"); got == nil || got.EnvironmentURL != "https://example.org/site/" {
		t.Errorf("the run's feed lists deploy as %+v, want it with its url", got)
	}
	o := claims["other"]
	if _, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(o), Status: store.JobFailed, FailureKind: store.FailureExit,
		ExitCode: intPtr(1), EnvironmentURL: strPtr("http://failed.example/")}); err != nil {
		t.Fatal(err)
	}
	if got := b.jobsByKey(run.ID)["other"].EnvironmentURL; got != "http://failed.example/" {
		t.Errorf("ListJobs: a failed job's url %q", got)
	}

	// None given leaves none.
	run2, _ := b.create(pagesYAML)
	for _, c := range b.claimAll() {
		b.complete(c, store.JobSuccess)
	}
	if got := b.jobsByKey(run2.ID)["deploy"].EnvironmentURL; got != "" {
		t.Errorf("a job that gave no url has %q", got)
	}
}

// testEnvironmentURLRetried: an attempt that will be retried keeps no url, as it keeps
// no outputs; the attempt that ends the job does.
func testEnvironmentURLRetried(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.create(`
jobs:
  deploy:
    retry: {max_attempts: 2, backoff: 1s, max_backoff: 1s}
    environment: {name: pages, url: "${{ steps.d.outputs.url }}"}
    steps: [{id: d, run: "true"}]
`)
	c := b.claimOne()
	j, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobFailed, FailureKind: store.FailureExit,
		ExitCode: intPtr(1), EnvironmentURL: strPtr("https://first.example/")})
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != store.JobRetrying || b.getJob(c.Job.ID).EnvironmentURL != "" {
		t.Fatalf("a retried attempt: job %s with url %q, want retrying with none", j.Status, b.getJob(c.Job.ID).EnvironmentURL)
	}
	b.clk.Advance(2 * time.Second)
	if _, err := b.s.PromoteRetries(b.ctx); err != nil {
		t.Fatal(err)
	}
	c = b.claimOne()
	if _, err := b.s.CompleteJob(b.ctx, store.CompleteParams{LeaseRef: ref(c), Status: store.JobSuccess,
		EnvironmentURL: strPtr("https://second.example/")}); err != nil {
		t.Fatal(err)
	}
	if got := b.getJob(c.Job.ID).EnvironmentURL; got != "https://second.example/" {
		t.Errorf("url %q, want the second attempt's", got)
	}
}
