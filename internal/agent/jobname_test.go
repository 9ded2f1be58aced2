package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// runJobsView is GET /api/v1/runs/{id}, as far as these tests read it.
type runJobsView struct {
	Jobs []struct {
		ID          string `json:"id"`
		Key         string `json:"key"`
		DisplayName string `json:"display_name"`
		Status      string `json:"status"`
		Environment *struct {
			Name string `json:"name"`
			URL  string `json:"url"`
		} `json:"environment"`
	} `json:"jobs"`
}

func (b *bundle) runJob(t *testing.T, run uuid.UUID, key string) (id, name, status string, env *struct{ Name, URL string }) {
	t.Helper()
	res, err := http.Get(b.url + "/api/v1/runs/" + run.String())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var v runJobsView
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		t.Fatal(err)
	}
	for _, j := range v.Jobs {
		if j.Key == key {
			if j.Environment != nil {
				env = &struct{ Name, URL string }{j.Environment.Name, j.Environment.URL}
			}
			return j.ID, j.DisplayName, j.Status, env
		}
	}
	t.Fatalf("run %s has no job %s", run, key)
	return
}

// TestJobNameAndEnvironmentURLEndToEnd: a workflow posted to a real coordinator and run
// by a real worker, in the shape of a publishing workflow and of GitHub Pages'. Job
// publish's name: reads what job prepare left: the run shows it as written until
// publish is claimed, and as evaluated from then on. Its environment's url reads what
// its step printed: none is shown while the job runs, and the step's output once it
// ended. A url that is not an http or https URL is kept as none.
func TestJobNameAndEnvironmentURLEndToEnd(t *testing.T) {
	t.Parallel()
	b := setup(t)
	gate := filepath.Join(t.TempDir(), "go")
	res, err := http.Post(b.url+"/api/v1/runs", "application/yaml", strings.NewReader(fmt.Sprintf(`on: push
jobs:
  prepare:
    runs-on: ubuntu-latest
    outputs:
      version: ${{ steps.v.outputs.version }}
    steps:
      - id: v
        run: echo "version=1.2.3" >> "$GITHUB_OUTPUT"
  publish:
    needs: prepare
    name: Publish ${{ needs.prepare.outputs.version }}
    runs-on: ubuntu-latest
    environment:
      name: github-pages
      url: ${{ steps.deployment.outputs.page_url }}
    steps:
      - id: deployment
        run: |
          echo "page_url=https://example.org/v${{ needs.prepare.outputs.version }}/" >> "$GITHUB_OUTPUT"
          for i in $(seq 600); do [ -e %s ] && exit 0; sleep 0.05; done
          exit 1
  docs:
    runs-on: ubuntu-latest
    environment:
      name: docs
      url: ${{ steps.d.outputs.url }}
    steps:
      - id: d
        run: echo "url=javascript:alert(1)" >> "$GITHUB_OUTPUT"
`, gate)))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var created struct {
		ID uuid.UUID `json:"id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&created); err != nil || res.StatusCode != http.StatusAccepted {
		t.Fatalf("create run: %d %v", res.StatusCode, err)
	}
	run := created.ID

	// No worker yet: the name is shown as written.
	if _, name, _, env := b.runJob(t, run, "publish"); name != "Publish ${{ needs.prepare.outputs.version }}" ||
		env == nil || env.Name != "github-pages" || env.URL != "" {
		t.Fatalf("before any claim publish is shown as %q in %+v", name, env)
	}

	b.start(t, 2)
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, name, status, env := b.runJob(t, run, "publish")
		if status == "running" && name == "Publish 1.2.3" {
			if env == nil || env.URL != "" {
				t.Errorf("while publish runs its environment is %+v, want no url yet", env)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("publish is %s, shown as %q; want it running as Publish 1.2.3", status, name)
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b.wantSuccess(t, run)

	id, name, _, env := b.runJob(t, run, "publish")
	if name != "Publish 1.2.3" || env == nil || env.URL != "https://example.org/v1.2.3/" {
		t.Errorf("once publish ended it is shown as %q in %+v, want Publish 1.2.3 at https://example.org/v1.2.3/", name, env)
	}
	// A url that is not one is told in the log and kept as none; the job succeeds, as on
	// GitHub.
	if _, _, status, env := b.runJob(t, run, "docs"); status != "success" || env == nil || env.URL != "" {
		t.Errorf("docs is %s in %+v, want success with no url", status, env)
	}
	if log := b.jobLog(t, run, "docs"); !strings.Contains(log, "not an absolute http or https URL, so the job keeps none") {
		t.Errorf("docs log:\n%s", log)
	}
	jres, err := http.Get(b.url + "/api/v1/jobs/" + id)
	if err != nil {
		t.Fatal(err)
	}
	defer jres.Body.Close()
	var detail struct {
		DisplayName string `json:"display_name"`
		Environment struct {
			URL         string `json:"url"`
			URLTemplate string `json:"url_template"`
		} `json:"environment"`
	}
	if err := json.NewDecoder(jres.Body).Decode(&detail); err != nil {
		t.Fatal(err)
	}
	if detail.DisplayName != "Publish 1.2.3" || detail.Environment.URL != "https://example.org/v1.2.3/" || detail.Environment.URLTemplate != "" {
		t.Errorf("GET the job: %+v", detail)
	}
}
