package storetest

import (
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// testConcurrencyHolders: the holder of a group is its assigned or running job, in the
// project asked about only; free groups and groups of other projects are absent.
func testConcurrencyHolders(t *testing.T, h Harness) {
	_, b := setup(t, h)
	none, err := b.s.ConcurrencyHolders(b.ctx, uuid.New(), nil)
	if err != nil || len(none) != 0 {
		t.Fatalf("ConcurrencyHolders of no groups = %v, %v; want none", none, err)
	}
	pRun, pJobs := b.createRun(groupYAML, store.CreateRunParams{Project: "p"})
	_, waiting := b.createRun(groupYAML, store.CreateRunParams{Project: "p"})
	qRun, _ := b.createRun(groupYAML, store.CreateRunParams{Project: "q"})

	holders := func(projectID uuid.UUID) map[string]*store.Job {
		t.Helper()
		m, err := b.s.ConcurrencyHolders(b.ctx, projectID, []string{"production", "staging"})
		if err != nil {
			t.Fatalf("ConcurrencyHolders: %v", err)
		}
		return m
	}
	if m := holders(pRun.ProjectID); len(m) != 0 {
		t.Fatalf("holders before any claim: %v, want none (queued jobs hold nothing)", m)
	}
	claims := b.claim(store.ClaimParams{Max: 8})
	if len(claims) != 2 {
		t.Fatalf("claimed %d jobs, want p's oldest and q's", len(claims))
	}
	var pClaim *store.Claim
	for _, c := range claims {
		if c.Job.ID == pJobs[0].ID {
			pClaim = c
		}
	}
	if pClaim == nil {
		t.Fatalf("p's oldest group job was not claimed")
	}
	m := holders(pRun.ProjectID)
	got := m["production"]
	if len(m) != 1 || got == nil || got.ID != pJobs[0].ID || got.RunID != pRun.ID || got.Key != "deploy" || got.Status != store.JobAssigned {
		t.Fatalf("holders of p while assigned: %+v, want production held by job %s of run %s", m, pJobs[0].ID, pRun.ID)
	}
	if err := b.s.StartJob(b.ctx, ref(pClaim)); err != nil {
		t.Fatalf("StartJob: %v", err)
	}
	if got := holders(pRun.ProjectID)["production"]; got == nil || got.ID != pJobs[0].ID {
		t.Fatalf("holder of p while running: %+v, want job %s", got, pJobs[0].ID)
	}
	if got := holders(qRun.ProjectID)["production"]; got == nil || got.RunID != qRun.ID {
		t.Fatalf("holder of q: %+v, want q's own job", got)
	}
	b.complete(pClaim, store.JobSuccess)
	if m := holders(pRun.ProjectID); len(m) != 0 {
		t.Fatalf("holders of p after its holder finished: %v, want none (job %s waits, queued)", m, waiting[0].ID)
	}
}
