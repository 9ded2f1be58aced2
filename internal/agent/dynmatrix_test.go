package agent

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// TestComputedMatrixEndToEnd: a workflow posted to the coordinator whose job test takes
// its matrix from what job setup wrote to $GITHUB_OUTPUT: the instances run with their
// values, and the job that needs test runs once every instance is done.
func TestComputedMatrixEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 3)
	res, err := http.Post(b.url+"/api/v1/runs", "application/yaml", strings.NewReader(`on: push
jobs:
  setup:
    runs-on: ubuntu-latest
    outputs:
      matrix: ${{ steps.m.outputs.matrix }}
    steps:
      - id: m
        run: echo 'matrix=["a","b","c"]' >> "$GITHUB_OUTPUT"
  test:
    needs: setup
    runs-on: ubuntu-latest
    strategy:
      matrix:
        x: ${{ fromJSON(needs.setup.outputs.matrix) }}
    steps:
      - run: echo "instance ${{ matrix.x }}"
  after:
    needs: test
    runs-on: ubuntu-latest
    steps:
      - run: echo "after ${{ needs.test.result }}"
`))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var created struct {
		ID   uuid.UUID `json:"id"`
		Jobs []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
		} `json:"jobs"`
	}
	if err := json.NewDecoder(res.Body).Decode(&created); err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("create run: %d %v", res.StatusCode, err)
	}
	if len(created.Jobs) != 3 || created.Jobs[1].Name != "test" {
		t.Fatalf("created jobs %+v, want setup, the placeholder test and after", created.Jobs)
	}
	b.wantSuccess(t, created.ID)

	jobs, err := b.st.ListJobs(t.Context(), created.ID)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	byKey := map[string]*store.Job{}
	for _, j := range jobs {
		keys = append(keys, j.Key)
		byKey[j.Key] = j
	}
	want := []string{"setup", "test (x=a)", "test (x=b)", "test (x=c)", "after"}
	if !slices.Equal(keys, want) {
		t.Fatalf("jobs %q, want %q", keys, want)
	}
	for _, x := range []string{"a", "b", "c"} {
		key := "test (x=" + x + ")"
		if log := b.jobLog(t, created.ID, key); !strings.Contains(log, "instance "+x) {
			t.Errorf("%s log:\n%s", key, log)
		}
		if !byKey["after"].StartedAt.After(byKey[key].FinishedAt) && !byKey["after"].StartedAt.Equal(byKey[key].FinishedAt) {
			t.Errorf("after started at %v, before %s finished at %v", byKey["after"].StartedAt, key, byKey[key].FinishedAt)
		}
	}
	if log := b.jobLog(t, created.ID, "after"); !strings.Contains(log, "after success") {
		t.Errorf("after log:\n%s", log)
	}
}
