package api_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/blob"
)

// withBlobs is a server with a directory blob store, and a dashboard mounted beside it.
func withBlobs(t *testing.T) (*bundle, *blob.DirStore) {
	t.Helper()
	bs, err := blob.OpenDir(t.TempDir(), blob.Options{Secret: []byte(strings.Repeat("s", 32))})
	if err != nil {
		t.Fatal(err)
	}
	ui := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("page")) })
	return setupWith(t, func(c *api.Config) { c.Blobs = bs; c.UI = ui }), bs
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

type registerView struct {
	Artifacts []struct {
		ID     string `json:"id"`
		Name   string `json:"name"`
		State  string `json:"state"`
		Upload *struct {
			Method string              `json:"method"`
			URL    string              `json:"url"`
			Header map[string][]string `json:"header"`
		} `json:"upload"`
	} `json:"artifacts"`
}

// put sends body to a signed upload URL.
func (b *bundle) put(t *testing.T, u, body string, header map[string][]string) int {
	t.Helper()
	target, err := url.Parse(b.url)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPut, target.ResolveReference(ref).String(), strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, vs := range header {
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// TestArtifactFlow: a worker registers an artifact, gets a signed upload URL, and the
// coordinator records the artifact stored only once the blob store holds the right
// bytes; the same content from another job needs no upload.
func TestArtifactFlow(t *testing.T) {
	t.Parallel()
	b, bs := withBlobs(t)
	b.post(t, "/api/v1/runs", diamond)
	got := b.claim(t, `{"worker_id": "w", "max": 2, "wait": "0s"}`)
	if len(got.Jobs) != 2 {
		t.Fatalf("claimed %d jobs, want a and b", len(got.Jobs))
	}
	ja, jb := got.Jobs[0], got.Jobs[1]
	const content = "binary v1\n"
	register := func(j struct{ ID, Token string }, name string) registerView {
		t.Helper()
		r := b.post(t, "/api/v1/agent/jobs/"+j.ID+"/artifacts", fmt.Sprintf(
			`{"token": %q, "artifacts": [{"name": %q, "sha256": %q, "size": %d, "media_type": "application/octet-stream", "mode": 493}]}`,
			j.Token, name, digest(content), len(content)))
		if r.status != http.StatusOK {
			t.Fatalf("register %s: %d %s", name, r.status, r.body)
		}
		var v registerView
		r.decode(t, &v)
		if len(v.Artifacts) != 1 {
			t.Fatalf("register answered %s", r.body)
		}
		return v
	}
	a := struct{ ID, Token string }{ja.ID, ja.Lease.Token}
	v := register(a, "bin/app")
	up := v.Artifacts[0].Upload
	if v.Artifacts[0].State != "pending" || up == nil || up.Method != http.MethodPut {
		t.Fatalf("first registration: %+v, want pending with an upload URL", v.Artifacts[0])
	}
	id := v.Artifacts[0].ID
	expectError(t, b.post(t, "/api/v1/agent/artifacts/"+id+"/stored", `{}`), http.StatusConflict, "blob_missing")

	// Wrong bytes of the right size are refused and change nothing.
	if status := b.put(t, up.URL, "binary v2\n", up.Header); status < 400 {
		t.Fatalf("upload of other bytes: %d, want a refusal", status)
	}
	if _, err := bs.Stat(t.Context(), digest(content)); err == nil {
		t.Fatal("the blob store holds the digest after a mismatched upload")
	}
	expectError(t, b.post(t, "/api/v1/agent/artifacts/"+id+"/stored", `{}`), http.StatusConflict, "blob_missing")
	expectError(t, b.get(t, "/api/v1/artifacts/"+id), http.StatusConflict, "blob_missing")

	if status := b.put(t, up.URL, content, up.Header); status != http.StatusOK && status != http.StatusCreated && status != http.StatusNoContent {
		t.Fatalf("upload: %d", status)
	}
	if r := b.post(t, "/api/v1/agent/artifacts/"+id+"/stored", `{}`); r.status != http.StatusOK {
		t.Fatalf("stored: %d %s", r.status, r.body)
	}

	// The same bytes from another job are already stored: no upload.
	v2 := register(struct{ ID, Token string }{jb.ID, jb.Lease.Token}, "dist/app")
	if v2.Artifacts[0].State != "stored" || v2.Artifacts[0].Upload != nil {
		t.Errorf("registration of stored content: %+v, want stored with no upload", v2.Artifacts[0])
	}

	var list []struct {
		ID, Name, SHA256, State, Job string
		Size                         int64
		Mode                         uint32
	}
	b.get(t, "/api/v1/jobs/"+ja.ID+"/artifacts").decode(t, &list)
	if len(list) != 1 || list[0].ID != id || list[0].Name != "bin/app" || list[0].State != "stored" ||
		list[0].SHA256 != digest(content) || list[0].Size != int64(len(content)) || list[0].Mode != 0o755 || list[0].Job != "a" {
		t.Errorf("job artifacts = %+v", list)
	}
	b.get(t, "/api/v1/runs/"+ja.RunID+"/artifacts").decode(t, &list)
	if len(list) != 2 {
		t.Errorf("run artifacts = %+v, want two", list)
	}

	// Downloads redirect to a signed URL that serves the bytes.
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := noFollow.Get(b.url + "/api/v1/artifacts/" + id)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc := res.Header.Get("Location")
	if res.StatusCode != http.StatusFound || !strings.HasPrefix(loc, api.DefaultBlobPrefix) {
		t.Fatalf("download: %d to %q, want 302 to the blob store", res.StatusCode, loc)
	}
	if r := b.get(t, loc); r.status != http.StatusOK || string(r.body) != content {
		t.Errorf("signed download: %d %q", r.status, r.body)
	}
	var signed struct{ URL string }
	b.get(t, "/api/v1/artifacts/"+id+"?redirect=false").decode(t, &signed)
	if r := b.get(t, signed.URL); !strings.HasPrefix(signed.URL, api.DefaultBlobPrefix) || r.status != http.StatusOK || string(r.body) != content {
		t.Errorf("?redirect=false answered %+v, whose download is %d %q", signed, r.status, r.body)
	}
	// The signature is bound to its blob: another digest with the same signature fails.
	forged := strings.Replace(loc, digest(content), digest("other"), 1)
	if r := b.get(t, forged); r.status != http.StatusForbidden {
		t.Errorf("download with a signature for another blob: %d, want 403", r.status)
	}
}

// TestArtifactRegistrationRefusals: only the lease holder registers, with names that stay
// in the workspace and well-formed digests; without a blob store the routes say so.
func TestArtifactRegistrationRefusals(t *testing.T) {
	t.Parallel()
	b, _ := withBlobs(t)
	b.post(t, "/api/v1/runs", diamond)
	j := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	path := "/api/v1/agent/jobs/" + j.ID + "/artifacts"
	one := func(token, name, sha string, size int) string {
		return fmt.Sprintf(`{"token": %q, "artifacts": [{"name": %q, "sha256": %q, "size": %d}]}`, token, name, sha, size)
	}
	expectError(t, b.post(t, path, one("stolen", "app", digest("x"), 1)), http.StatusConflict, "lease_lost")
	for _, name := range []string{"../etc/passwd", "/etc/passwd", "a/../../b", "./a", "a//b", ""} {
		r := b.post(t, path, one(j.Lease.Token, name, digest("x"), 1))
		expectError(t, r, http.StatusBadRequest, "bad_request")
		if !strings.Contains(string(r.body), "artifacts[0].name") {
			t.Errorf("refusal of name %q does not point at it: %s", name, r.body)
		}
	}
	expectError(t, b.post(t, path, one(j.Lease.Token, "app", "ABC", 1)), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, path, one(j.Lease.Token, "app", digest("x"), -1)), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, path, fmt.Sprintf(`{"token": %q, "artifacts": []}`, j.Lease.Token)), http.StatusBadRequest, "bad_request")
	// A name registered once keeps its content for the attempt.
	if r := b.post(t, path, one(j.Lease.Token, "app", digest("x"), 1)); r.status != http.StatusOK {
		t.Fatalf("register: %d %s", r.status, r.body)
	}
	expectError(t, b.post(t, path, one(j.Lease.Token, "app", digest("y"), 1)), http.StatusConflict, "conflict")
	expectError(t, b.post(t, "/api/v1/agent/jobs/"+j.ID+"/inputs", `{"token": "stolen"}`), http.StatusConflict, "lease_lost")
	expectError(t, b.get(t, "/api/v1/artifacts/0190f3c2-0000-7000-8000-000000000000"), http.StatusNotFound, "not_found")

	plain := setup(t)
	plain.post(t, "/api/v1/runs", diamond)
	pj := plain.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	expectError(t, plain.post(t, "/api/v1/agent/jobs/"+pj.ID+"/artifacts", one(pj.Lease.Token, "app", digest("x"), 1)),
		http.StatusServiceUnavailable, "unavailable")
	// Without a blob store a job has nothing to fetch, which is no reason to fail it.
	if r := plain.post(t, "/api/v1/agent/jobs/"+pj.ID+"/inputs", fmt.Sprintf(`{"token": %q}`, pj.Lease.Token)); r.status != http.StatusOK ||
		!strings.Contains(string(r.body), `"artifacts":[]`) {
		t.Errorf("inputs without a blob store: %d %s, want 200 and none", r.status, r.body)
	}
}

// TestJobInputs: a job is handed its needs' stored artifacts with download URLs, and told
// which are still being uploaded.
func TestJobInputs(t *testing.T) {
	t.Parallel()
	b, _ := withBlobs(t)
	b.post(t, "/api/v1/runs", diamond)
	got := b.claim(t, `{"worker_id": "w", "max": 2, "wait": "0s"}`)
	for i, j := range got.Jobs {
		content := "out of " + j.Key
		r := b.post(t, "/api/v1/agent/jobs/"+j.ID+"/artifacts", fmt.Sprintf(
			`{"token": %q, "artifacts": [{"name": "out/%s", "sha256": %q, "size": %d}]}`, j.Lease.Token, j.Key, digest(content), len(content)))
		if r.status != http.StatusOK {
			t.Fatalf("register: %d %s", r.status, r.body)
		}
		if i == 0 { // the first job's upload lands, the second's does not
			var v registerView
			r.decode(t, &v)
			if code := b.put(t, v.Artifacts[0].Upload.URL, content, v.Artifacts[0].Upload.Header); code/100 != 2 {
				t.Fatalf("upload: %d", code)
			}
			if r := b.post(t, "/api/v1/agent/artifacts/"+v.Artifacts[0].ID+"/stored", `{}`); r.status != http.StatusOK {
				t.Fatalf("stored: %d %s", r.status, r.body)
			}
		}
		if r := b.post(t, "/api/v1/agent/jobs/"+j.ID+"/complete", fmt.Sprintf(`{"token": %q, "status": "success"}`, j.Lease.Token)); r.status != http.StatusOK {
			t.Fatalf("complete: %d %s", r.status, r.body)
		}
	}
	c := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	var in struct {
		Artifacts []struct {
			Job, Name, SHA256 string
			Download          struct{ URL string }
		}
		Missing []struct{ Job, Name string }
	}
	r := b.post(t, "/api/v1/agent/jobs/"+c.ID+"/inputs", fmt.Sprintf(`{"token": %q}`, c.Lease.Token))
	if r.status != http.StatusOK {
		t.Fatalf("inputs: %d %s", r.status, r.body)
	}
	r.decode(t, &in)
	first, second := got.Jobs[0].Key, got.Jobs[1].Key
	if len(in.Artifacts) != 1 || in.Artifacts[0].Job != first || in.Artifacts[0].Name != "out/"+first {
		t.Fatalf("inputs = %+v, want %s's artifact", in.Artifacts, first)
	}
	if len(in.Missing) != 1 || in.Missing[0].Job != second {
		t.Errorf("missing = %+v, want %s's pending artifact", in.Missing, second)
	}
	if d := b.get(t, in.Artifacts[0].Download.URL); d.status != http.StatusOK || string(d.body) != "out of "+first {
		t.Errorf("input download: %d %q", d.status, d.body)
	}
}

// TestArtifactSets: files registered in named sets are answered by name and by pattern,
// each at its path in the set, with the names no job kept; bad requests say what is
// wrong.
func TestArtifactSets(t *testing.T) {
	t.Parallel()
	b, _ := withBlobs(t)
	b.post(t, "/api/v1/runs", diamond)
	j := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	reg := "/api/v1/agent/jobs/" + j.ID + "/artifacts"
	file := func(set, name, setPath, content string) string {
		return fmt.Sprintf(`{"token": %q, "set": %q, "artifacts": [{"name": %q, "set_path": %q, "sha256": %q, "size": %d}]}`,
			j.Lease.Token, set, name, setPath, digest(content), len(content))
	}
	for set, body := range map[string]string{"cov-1": file("cov-1", "out/c1.txt", "c1.txt", "one"), "cov-2": file("cov-2", "out/c2.txt", "c2.txt", "two")} {
		r := b.post(t, reg, body)
		if r.status != http.StatusOK {
			t.Fatalf("register %s: %d %s", set, r.status, r.body)
		}
		var v registerView
		r.decode(t, &v)
		content := map[string]string{"cov-1": "one", "cov-2": "two"}[set]
		if code := b.put(t, v.Artifacts[0].Upload.URL, content, v.Artifacts[0].Upload.Header); code/100 != 2 {
			t.Fatalf("upload: %d", code)
		}
		if r := b.post(t, "/api/v1/agent/artifacts/"+v.Artifacts[0].ID+"/stored", `{}`); r.status != http.StatusOK {
			t.Fatalf("stored: %d %s", r.status, r.body)
		}
	}
	// A set name with / or :, a set path without a set, a set path leaving the set.
	for _, bad := range []string{file("a/b", "x", "x", "x"), file("a:b", "x", "x", "x"), file("", "x", "x", "x"), file("s", "x", "../x", "x")} {
		expectError(t, b.post(t, reg, bad), http.StatusBadRequest, "bad_request")
	}

	sets := "/api/v1/agent/jobs/" + j.ID + "/artifact-sets"
	var ans struct {
		Sets []struct {
			Name, Job string
			Files     []struct{ Path, SHA256 string }
		}
		Missing []string
	}
	r := b.post(t, sets, fmt.Sprintf(`{"token": %q, "names": ["cov-2", "nope"]}`, j.Lease.Token))
	r.decode(t, &ans)
	if r.status != http.StatusOK || len(ans.Sets) != 1 || ans.Sets[0].Name != "cov-2" || len(ans.Sets[0].Files) != 1 ||
		ans.Sets[0].Files[0].Path != "c2.txt" || ans.Sets[0].Job != j.Key || len(ans.Missing) != 1 || ans.Missing[0] != "nope" {
		t.Errorf("sets by name: %d %s", r.status, r.body)
	}
	ans.Sets, ans.Missing = nil, nil
	r = b.post(t, sets, fmt.Sprintf(`{"token": %q, "pattern": "cov-*"}`, j.Lease.Token))
	r.decode(t, &ans)
	if len(ans.Sets) != 2 || ans.Sets[0].Name != "cov-1" || ans.Sets[1].Name != "cov-2" || len(ans.Missing) != 0 {
		t.Errorf("sets by pattern: %d %s", r.status, r.body)
	}
	expectError(t, b.post(t, sets, fmt.Sprintf(`{"token": %q, "pattern": "["}`, j.Lease.Token)), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, sets, fmt.Sprintf(`{"token": %q, "names": ["a"], "pattern": "a*"}`, j.Lease.Token)), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, sets, fmt.Sprintf(`{"token": %q, "names": ["a/b"]}`, j.Lease.Token)), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, sets, `{"token": "stolen"}`), http.StatusConflict, "lease_lost")
}

// TestArtifactSetsOfAnotherRun: a job reads the sets another run of its project kept
// (download-artifact's run-id, with the project's repository named or not); another
// project's run, a run that does not exist and a repository that is not the project's
// are refused alike, with no file and no download URL; a run id that is not one says so.
func TestArtifactSetsOfAnotherRun(t *testing.T) {
	t.Parallel()
	b, _ := withBlobs(t)
	b.createProject(t, map[string]any{"name": "web", "repo_url": "https://git.example.com/acme/web.git", "default_branch": "main"})
	one := func(project string) string {
		return fmt.Sprintf(`{"pipeline": "name: one\njobs:\n  a: {steps: [{run: 'true'}]}\n", "project": %q}`, project)
	}
	var first runView
	b.post(t, "/api/v1/runs", one("web")).decode(t, &first)
	j := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	r := b.post(t, "/api/v1/agent/jobs/"+j.ID+"/artifacts", fmt.Sprintf(`{"token": %q, "set": "coverage-html", "artifacts": [
		{"name": "htmlcov/index.html", "set_path": "index.html", "sha256": %q, "size": 4}]}`, j.Lease.Token, digest("100%")))
	var v registerView
	r.decode(t, &v)
	if r.status != http.StatusOK || b.put(t, v.Artifacts[0].Upload.URL, "100%", v.Artifacts[0].Upload.Header)/100 != 2 {
		t.Fatalf("register and upload: %d %s", r.status, r.body)
	}
	if r := b.post(t, "/api/v1/agent/artifacts/"+v.Artifacts[0].ID+"/stored", `{}`); r.status != http.StatusOK {
		t.Fatalf("stored: %d %s", r.status, r.body)
	}
	if r := b.post(t, "/api/v1/agent/jobs/"+j.ID+"/complete", fmt.Sprintf(`{"token": %q, "status": "success"}`, j.Lease.Token)); r.status != http.StatusOK {
		t.Fatalf("complete: %d %s", r.status, r.body)
	}

	// A later run of web, and a run of another project, each with a job holding a lease.
	b.post(t, "/api/v1/runs", one("web"))
	b.post(t, "/api/v1/runs", one("other"))
	c := b.claim(t, `{"worker_id": "w", "wait": "0s", "max": 2}`)
	if len(c.Jobs) != 2 {
		t.Fatalf("claimed %d jobs, want 2", len(c.Jobs))
	}
	var same, other string
	var sameTok, otherTok string
	for _, cj := range c.Jobs {
		var run runView
		b.get(t, "/api/v1/runs/"+cj.RunID).decode(t, &run)
		if run.Project == "web" {
			same, sameTok = cj.ID, cj.Lease.Token
		} else {
			other, otherTok = cj.ID, cj.Lease.Token
		}
	}
	sets := func(job, token, extra string) response {
		return b.post(t, "/api/v1/agent/jobs/"+job+"/artifact-sets", fmt.Sprintf(`{"token": %q, "names": ["coverage-html"]%s}`, token, extra))
	}
	var ans struct {
		Sets []struct {
			Name, Job string
			Files     []struct {
				Path     string
				Download *struct{ URL string }
			}
		}
		Missing []string
	}
	for _, extra := range []string{fmt.Sprintf(`, "run_id": %q`, first.ID), fmt.Sprintf(`, "run_id": %q, "repository": "ACME/web"`, first.ID),
		fmt.Sprintf(`, "run_id": " %s ", "repository": "https://git.example.com/acme/web"`, first.ID)} {
		ans.Sets, ans.Missing = nil, nil
		r := sets(same, sameTok, extra)
		r.decode(t, &ans)
		if r.status != http.StatusOK || len(ans.Sets) != 1 || ans.Sets[0].Name != "coverage-html" || ans.Sets[0].Job != "a" ||
			len(ans.Sets[0].Files) != 1 || ans.Sets[0].Files[0].Path != "index.html" || ans.Sets[0].Files[0].Download == nil || len(ans.Missing) != 0 {
			t.Fatalf("web's later run, %s: %d %s", extra, r.status, r.body)
		}
		if d := b.get(t, ans.Sets[0].Files[0].Download.URL); d.status != http.StatusOK || string(d.body) != "100%" {
			t.Errorf("download: %d %q", d.status, d.body)
		}
	}
	// Without run_id the job's own run, which kept nothing.
	ans.Sets, ans.Missing = nil, nil
	sets(same, sameTok, "").decode(t, &ans)
	if len(ans.Sets) != 0 || len(ans.Missing) != 1 {
		t.Errorf("the job's own run: %+v", ans)
	}

	refused := []struct{ name, job, token, extra, msg string }{
		{"another project's run", other, otherTok, fmt.Sprintf(`, "run_id": %q`, first.ID), "is not a run of project other"},
		{"a run that does not exist", same, sameTok, `, "run_id": "01a20ce3-30a3-7190-8e9e-9a211ee2bae6"`, "is not a run of project web"},
		{"another repository", same, sameTok, fmt.Sprintf(`, "run_id": %q, "repository": "acme/api"`, first.ID), `repository "acme/api" is not the repository of project web`},
		{"a repository for a project without one", other, otherTok, `, "repository": "acme/web"`, "is not the repository of project other"},
	}
	for _, tc := range refused {
		r := sets(tc.job, tc.token, tc.extra)
		e := expectError(t, r, http.StatusNotFound, "not_found")
		if !strings.Contains(e.Error.Message, tc.msg) || !strings.Contains(e.Error.Message, "its own project only") ||
			strings.Contains(string(r.body), "index.html") || strings.Contains(string(r.body), `"sets"`) || strings.Contains(string(r.body), "/blobs/") {
			t.Errorf("%s: %s", tc.name, r.body)
		}
	}
	e := expectError(t, sets(same, sameTok, `, "run_id": "7"`), http.StatusBadRequest, "bad_request")
	if !strings.Contains(e.Error.Message, `run-id "7" is not a Gantry run id`) {
		t.Errorf("a run id that is not one: %s", e.Error.Message)
	}
}
