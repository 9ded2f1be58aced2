package api_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/store"
)

type summaryView struct {
	JobID   string `json:"job_id"`
	Job     string `json:"job"`
	Attempt int    `json:"attempt"`
	Bytes   int    `json:"bytes"`
	Parts   []struct {
		Step      int    `json:"step"`
		Bytes     int    `json:"bytes"`
		CreatedAt string `json:"created_at"`
	} `json:"parts"`
	Markdown *string `json:"markdown"`
	HTML     *string `json:"html"`
}

func summaryBody(token string, step int, markdown string) string {
	b, _ := json.Marshal(map[string]any{"token": token, "step": step, "markdown": markdown})
	return string(b)
}

const (
	tablePart  = "# Tests\n\n| suite | result |\n|:--|--:|\n| unit | pass |\n"
	scriptPart = "<script>alert(1)</script>\n\n<img src=x onerror=alert(2)>"
)

// TestSummaries: a worker's step summaries are kept once however often sent, and read
// back in step order as Markdown, as HTML where a script is text, and as JSON with
// their parts; the run lists its jobs' summaries with or without their text.
func TestSummaries(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, b *bundle, _ *blob.DirStore) {
		id, token := b.leasedJob(t)
		if r := b.get(t, "/api/v1/jobs/"+id+"/summary"); r.status != http.StatusOK || len(r.body) != 0 {
			t.Errorf("a job without a summary: %d %q, want 200 and nothing", r.status, r.body)
		}
		for _, body := range []string{summaryBody(token, 1, scriptPart), summaryBody(token, 0, tablePart), summaryBody(token, 0, tablePart)} {
			if r := b.post(t, "/api/v1/agent/jobs/"+id+"/summary", body); r.status != http.StatusOK {
				t.Fatalf("post summary: %d %s", r.status, r.body)
			}
		}

		r := b.get(t, "/api/v1/jobs/"+id+"/summary")
		if want := tablePart + "\n" + scriptPart + "\n"; r.status != http.StatusOK || string(r.body) != want ||
			r.header.Get("Content-Type") != "text/markdown; charset=utf-8" {
			t.Errorf("markdown: %d %s %q, want %q", r.status, r.header.Get("Content-Type"), r.body, want)
		}

		r = b.do(t, http.MethodGet, "/api/v1/jobs/"+id+"/summary", "", "", map[string]string{"Accept": "text/html"})
		html := string(r.body)
		for _, want := range []string{"<h1>Tests</h1>", `<th align="left">suite</th>`, `<td align="right">pass</td>`,
			"&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(2)&gt;"} {
			if !strings.Contains(html, want) {
				t.Errorf("html lacks %q:\n%s", want, html)
			}
		}
		if strings.Contains(html, "<script") || strings.Contains(html, "<img") || strings.Index(html, "<h1>") > strings.Index(html, "&lt;script") {
			t.Errorf("html runs something or is out of order:\n%s", html)
		}
		if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "sandbox") || !strings.Contains(csp, "default-src 'none'") ||
			r.header.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Errorf("html answer: Content-Type %q, CSP %q; want a sandbox", r.header.Get("Content-Type"), csp)
		}

		r = b.do(t, http.MethodGet, "/api/v1/jobs/"+id+"/summary", "", "", map[string]string{"Accept": "application/json"})
		var sv summaryView
		r.decode(t, &sv)
		if sv.JobID != id || sv.Attempt != 1 || sv.Bytes != len(tablePart)+len(scriptPart) || len(sv.Parts) != 2 ||
			sv.Parts[0].Step != 0 || sv.Parts[1].Step != 1 || sv.Parts[1].Bytes != len(scriptPart) || sv.Parts[0].CreatedAt == "" ||
			sv.Markdown == nil || *sv.Markdown != tablePart+"\n"+scriptPart+"\n" || sv.HTML == nil || !strings.Contains(*sv.HTML, "<table>") {
			t.Errorf("json: %s", r.body)
		}
		if r := b.get(t, "/api/v1/jobs/"+id+"/summary?attempt=2"); r.status != http.StatusOK || len(r.body) != 0 {
			t.Errorf("another attempt: %d %q, want 200 and nothing", r.status, r.body)
		}

		var job jobView
		b.get(t, "/api/v1/jobs/"+id).decode(t, &job)
		var list []summaryView
		r = b.get(t, "/api/v1/runs/"+job.RunID+"/summaries")
		r.decode(t, &list)
		if len(list) != 1 || list[0].Job != "a" || list[0].JobID != id || list[0].Bytes != sv.Bytes || len(list[0].Parts) != 2 ||
			list[0].Markdown != nil || list[0].HTML != nil {
			t.Errorf("run's summaries: %s", r.body)
		}
		list = nil
		b.get(t, "/api/v1/runs/"+job.RunID+"/summaries?include=markdown,html").decode(t, &list)
		if len(list) != 1 || list[0].Markdown == nil || *list[0].Markdown != *sv.Markdown || list[0].HTML == nil || *list[0].HTML != *sv.HTML {
			t.Errorf("run's summaries with their text: %+v", list)
		}
		if r := b.get(t, "/api/v1/runs/"+job.RunID+"/summaries?include=pdf"); r.status != http.StatusBadRequest {
			t.Errorf("include=pdf: %d, want 400", r.status)
		}
	})
}

// TestSummaryRefusals: a report from a worker that does not hold the lease, without a
// step, too large or empty changes nothing; the largest summary is kept whatever JSON
// makes of it; a reader's mistakes are 400 and an unknown job 404.
func TestSummaryRefusals(t *testing.T) {
	t.Parallel()
	b := setup(t)
	id, token := b.leasedJob(t)
	path := "/api/v1/agent/jobs/" + id + "/summary"
	expectError(t, b.post(t, path, summaryBody("not-the-token", 0, "x")), http.StatusConflict, "lease_lost")
	expectError(t, b.post(t, path, `{"token": "`+token+`", "markdown": "x"}`), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, path, summaryBody(token, -1, "x")), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, path, summaryBody(token, 0, "")), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, path, summaryBody(token, 0, strings.Repeat("x", store.MaxSummaryBytes+1))), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, path, `{"token": "`+token+`", "step": 0, "markdown": "`+strings.Repeat(`\u0001`, store.MaxSummaryBytes+20<<10)+`"}`),
		http.StatusRequestEntityTooLarge, "payload_too_large")
	if r := b.get(t, "/api/v1/jobs/"+id+"/summary"); len(r.body) != 0 {
		t.Fatalf("refused reports kept %q", r.body)
	}
	// Every byte a "<", six bytes in JSON: more than any other request may be.
	largest := strings.Repeat("<", store.MaxSummaryBytes)
	if r := b.post(t, path, summaryBody(token, 0, largest)); r.status != http.StatusOK {
		t.Fatalf("the largest summary: %d %s", r.status, r.body)
	}
	if r := b.get(t, "/api/v1/jobs/"+id+"/summary"); string(r.body) != largest+"\n" {
		t.Errorf("the largest summary read back as %d bytes", len(r.body))
	}
	expectError(t, b.get(t, "/api/v1/jobs/"+id+"/summary?attempt=0"), http.StatusBadRequest, "bad_request")
	expectError(t, b.get(t, "/api/v1/jobs/0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b/summary"), http.StatusNotFound, "not_found")
	expectError(t, b.get(t, "/api/v1/jobs/0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b/summary?attempt=1"), http.StatusNotFound, "not_found")
}

// TestSummaryMaskedByCoordinator: a summary a worker sent with a secret of the job in it
// is kept masked, as a log line would be, by the replica that handed the job out and by
// another that resolves the job's secrets from the store.
func TestSummaryMaskedByCoordinator(t *testing.T) {
	t.Parallel()
	kr := testKeyring(t)
	b := setupWith(t, func(c *api.Config) { c.Secrets = kr })
	const value = "summary-secret-value-7"
	if r := b.do(t, http.MethodPut, "/api/v1/projects/web/secrets/TOKEN", "application/json", `{"value": "`+value+`"}`, nil); r.status != http.StatusCreated {
		t.Fatalf("set secret: %d %s", r.status, r.body)
	}
	if r := b.post(t, "/api/v1/runs", `{"project": "web", "pipeline": "jobs:\n  a:\n    env: {X: '${{ secrets.TOKEN }}'}\n    steps: [{run: echo $X}, {run: 'true'}]\n"}`); r.status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", r.status, r.body)
	}
	claim := b.claim(t, `{"worker_id": "w", "wait": "0s"}`)
	if len(claim.Jobs) != 1 {
		t.Fatalf("claimed %d jobs", len(claim.Jobs))
	}
	id, token := claim.Jobs[0].ID, claim.Jobs[0].Lease.Token
	b64 := base64.StdEncoding.EncodeToString([]byte(value))
	if r := b.post(t, "/api/v1/agent/jobs/"+id+"/summary", summaryBody(token, 0, "| token | "+value+" |\n| b64 | "+b64+" |\n")); r.status != http.StatusOK {
		t.Fatalf("post summary: %d %s", r.status, r.body)
	}
	other := httptest.NewServer(api.New(api.Config{Store: b.store, Logger: testLogger(t), Clock: b.clock, Secrets: kr}).Handler())
	t.Cleanup(other.Close)
	replica := &bundle{store: b.store, clock: b.clock, url: other.URL}
	if r := replica.post(t, "/api/v1/agent/jobs/"+id+"/summary", summaryBody(token, 1, "replica "+value)); r.status != http.StatusOK {
		t.Fatalf("post summary to the other replica: %d %s", r.status, r.body)
	}
	got := string(b.get(t, "/api/v1/jobs/"+id+"/summary").body)
	if want := "| token | *** |\n| b64 | *** |\n\nreplica ***\n"; got != want {
		t.Errorf("summary %q, want %q", got, want)
	}
}
