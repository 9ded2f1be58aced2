package agent

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// jobLines reads the whole log of the run's only job through the API.
func jobLines(t *testing.T, url string, st store.Store, run uuid.UUID) []logs.Line {
	t.Helper()
	jobs, err := st.ListJobs(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url+"/api/v1/jobs/"+jobs[0].ID.String()+"/logs?limit=100000", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/x-ndjson")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("read logs: %d", res.StatusCode)
	}
	var out []logs.Line
	dec := json.NewDecoder(res.Body)
	for dec.More() {
		var l logs.Line
		if err := dec.Decode(&l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	for i, l := range out {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d has seq %d: the log is not dense", i+1, l.Seq)
		}
	}
	return out
}

// TestJobLogs: what a job prints reaches the coordinator's log in order, with the
// streams told apart, progress output collapsed, a registered secret masked, and the
// worker's own lines about the steps.
func TestJobLogs(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 1)
	id := b.submit(t, `
jobs:
  a:
    steps:
      - name: talk
        run: |
          echo one
          echo two >&2
          printf '10%%\r50%%\r100%%\n'
          echo '::add-mask::hunter22'
          echo "the password is hunter22"
      - name: fails
        run: exit 3
        continue_on_error: true
`)
	if r := b.waitRun(t, id); r.Status != store.RunSuccess {
		t.Fatalf("run %s", r.Status)
	}
	// stdout and stderr are separate pipes, so only the order within each is defined.
	var got []string
	stderr := 0
	for _, l := range jobLines(t, b.url, b.st, id) {
		if l.Stream == logs.Stderr {
			stderr++
			if l.Text != "two" {
				t.Errorf("stderr line %q, want %q", l.Text, "two")
			}
			continue
		}
		got = append(got, l.Stream+" "+l.Text)
	}
	if stderr != 1 {
		t.Errorf("%d stderr lines, want 1", stderr)
	}
	want := []string{
		"system step talk",
		"stdout one",
		"stdout 100%",
		"stdout the password is ***",
		"system step fails",
		"system step fails failed with exit code 3; continuing (continue_on_error)",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLogsSurviveCoordinatorRestart: a job prints steadily while the coordinator goes
// away and comes back; the worker spools what it could not send and re-sends it, so
// the stored log has every line exactly once, in order.
func TestLogsSurviveCoordinatorRestart(t *testing.T) {
	t.Parallel()
	c := newCoordinator(t, coordOpts{})
	c.up()
	startAgent(t, c.url, slog.LevelInfo)
	id := c.bundle().submit(t, "jobs:\n  a: {steps: [{run: 'for i in $(seq 1 400); do echo line $i; sleep 0.01; done'}]}\n")
	waitInHand(t, c.st, id)
	pause(t, 500*time.Millisecond)
	c.down()
	pause(t, 2*time.Second)
	c.up()
	b := c.bundle()
	if r := b.waitRun(t, id); r.Status != store.RunSuccess {
		t.Fatalf("run %s", r.Status)
	}
	var printed []string
	for _, l := range jobLines(t, c.url, c.st, id) {
		if l.Stream == logs.Stdout {
			printed = append(printed, l.Text)
		}
	}
	if len(printed) != 400 {
		t.Fatalf("%d lines stored, want 400", len(printed))
	}
	for i, text := range printed {
		if want := fmt.Sprintf("line %d", i+1); text != want {
			t.Fatalf("line %d is %q, want %q", i+1, text, want)
		}
	}
}
