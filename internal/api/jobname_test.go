package api_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

// TestClaimedNameFailsTheJob: a name: that reads needs and cannot be evaluated (its
// need left no JSON) fails the job before its first step, as on GitHub: the claim says
// why, and the job's secrets, resolved after, do not hide it.
func TestClaimedNameFailsTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.submit(t, `on: push
jobs:
  a: {runs-on: x, steps: [{run: x}]}
  b:
    needs: a
    name: ${{ fromJSON(needs.a.outputs.v).name }}
    runs-on: x
    steps: [{run: x}]
`)
	a := b.claim(t, `{"worker_id": "w", "labels": ["x"], "wait": "0s"}`).Jobs[0]
	if r := b.post(t, "/api/v1/agent/jobs/"+a.ID+"/complete", fmt.Sprintf(`{"token": %q, "status": "success", "outputs": {"v": "{not json"}}`,
		a.Lease.Token)); r.status != http.StatusOK {
		t.Fatalf("complete a: %d %s", r.status, r.body)
	}
	r := b.post(t, "/api/v1/agent/claim", `{"worker_id": "w", "labels": ["x"], "wait": "0s"}`)
	var v struct {
		Jobs []struct {
			Key          string `json:"key"`
			SecretsError string `json:"secrets_error"`
		} `json:"jobs"`
	}
	r.decode(t, &v)
	if len(v.Jobs) != 1 || v.Jobs[0].Key != "b" || !strings.Contains(v.Jobs[0].SecretsError, "the job's name: could not be evaluated: job b: name: ${{ fromJSON(needs.a.outputs.v).name }}") {
		t.Errorf("claim of b: %s", r.body)
	}
}

// TestCompleteEnvironmentURL: a completion's environment_url must be an absolute http or
// https URL, else 400 and nothing changes; a good one is what the run shows of the
// job's environment.
func TestCompleteEnvironmentURL(t *testing.T) {
	t.Parallel()
	b := setup(t)
	run := b.submit(t, "jobs:\n  deploy:\n    environment: {name: pages, url: \"${{ steps.d.outputs.url }}\"}\n    steps: [{id: d, run: x}]\n")
	j := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	path := "/api/v1/agent/jobs/" + j.ID + "/complete"
	for _, bad := range []string{"javascript:alert(1)", "pages/x", "https://x/" + strings.Repeat("a", 2048)} {
		r := b.post(t, path, fmt.Sprintf(`{"token": %q, "status": "success", "environment_url": %q}`, j.Lease.Token, bad))
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "environment_url") {
			t.Errorf("environment_url %.40q: %d %.200s, want 400", bad, r.status, r.body)
		}
	}
	if r := b.post(t, path, fmt.Sprintf(`{"token": %q, "status": "success", "environment_url": "https://pages.example/"}`, j.Lease.Token)); r.status != http.StatusOK {
		t.Fatalf("complete: %d %s", r.status, r.body)
	}
	var v struct {
		Status string `json:"status"`
		Jobs   []struct {
			Environment map[string]string `json:"environment"`
		} `json:"jobs"`
	}
	b.get(t, "/api/v1/runs/"+run).decode(t, &v)
	if v.Status != "success" || len(v.Jobs) != 1 || v.Jobs[0].Environment["url"] != "https://pages.example/" || len(v.Jobs[0].Environment) != 2 {
		t.Errorf("run: %+v, want the job's environment with its url (and no template)", v)
	}
}
