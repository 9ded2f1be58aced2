package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store/postgres"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// onBothStores runs fn on a server with a directory blob store, over SQLite and over
// PostgreSQL.
func onBothStores(t *testing.T, fn func(t *testing.T, b *bundle, bs *blob.DirStore)) {
	t.Run("sqlite", func(t *testing.T) {
		t.Parallel()
		b, bs := withBlobs(t)
		fn(t, b, bs)
	})
	t.Run("postgres", func(t *testing.T) {
		t.Parallel()
		st, err := postgres.Open(t.Context(), testdb.Postgres(t), postgres.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		bs, err := blob.OpenDir(t.TempDir(), blob.Options{Secret: []byte(strings.Repeat("s", 32))})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(api.New(api.Config{Store: st, Logger: testLogger(t), Clock: clock.Real{}, Blobs: bs}).Handler())
		t.Cleanup(srv.Close)
		fn(t, &bundle{store: st, url: srv.URL}, bs)
	})
}

// projectJob submits pipeline to project and claims its one job.
func (b *bundle) projectJob(t *testing.T, project, pipeline string) (id, token string) {
	t.Helper()
	r := b.post(t, "/api/v1/runs", mustJSON(t, map[string]any{"pipeline": pipeline, "project": project}))
	if r.status != http.StatusAccepted {
		t.Fatalf("submit to %s: %d %s", project, r.status, r.body)
	}
	var run runView
	r.decode(t, &run)
	c := b.claim(t, `{"worker_id": "w-`+project+`", "wait": "0s"}`)
	if len(c.Jobs) != 1 || c.Jobs[0].ID != run.Jobs[0].ID {
		t.Fatalf("claimed %+v, want the job of %s's run", c.Jobs, project)
	}
	return c.Jobs[0].ID, c.Jobs[0].Lease.Token
}

// registeredJSON is one artifact of a registration's answer, as JSON.
type registeredJSON map[string]any

func (b *bundle) registerOne(t *testing.T, id, token, name, content string) registeredJSON {
	t.Helper()
	r := b.post(t, "/api/v1/agent/jobs/"+id+"/artifacts", fmt.Sprintf(
		`{"token": %q, "artifacts": [{"name": %q, "sha256": %q, "size": %d}]}`, token, name, digest(content), len(content)))
	if r.status != http.StatusOK {
		t.Fatalf("register %s: %d %s", name, r.status, r.body)
	}
	var v struct{ Artifacts []registeredJSON }
	r.decode(t, &v)
	if len(v.Artifacts) != 1 {
		t.Fatalf("register answered %s", r.body)
	}
	return v.Artifacts[0]
}

// upload is the upload an answer (a registration's, or a cache save's) gives, or nil.
func upload(t *testing.T, a map[string]any) (u string, header map[string][]string) {
	t.Helper()
	up, _ := a["upload"].(map[string]any)
	if up == nil {
		return "", nil
	}
	header = map[string][]string{}
	if h, _ := up["header"].(map[string]any); h != nil {
		for k, vs := range h {
			for _, v := range vs.([]any) {
				header[k] = append(header[k], v.(string))
			}
		}
	}
	return up["url"].(string), header
}

// shape is what an answer says once digests, ids and signatures are taken out: what a
// worker can tell apart.
func shape(t *testing.T, a map[string]any, digests ...string) string {
	t.Helper()
	c := map[string]any{}
	for k, v := range a {
		c[k] = v
	}
	delete(c, "id")
	if up, _ := c["upload"].(map[string]any); up != nil {
		u, err := url.Parse(up["url"].(string))
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range q {
				if !yield(k) {
					return
				}
			}
		})
		path := u.Path
		for _, d := range digests {
			path = strings.ReplaceAll(path, d, "<digest>")
		}
		header, _ := up["header"].(map[string]any)
		c["upload"] = map[string]any{"method": up["method"], "path": path, "query": keys, "header": len(header)}
	}
	out, _ := json.Marshal(c)
	return string(out)
}

const (
	ownersPipeline = "jobs:\n  a:\n    cache: {key: deps, restore_keys: [d], paths: [x]}\n    steps: [{run: make}]\n"
	betaSecret     = "beta's deploy key\n"
	betaArchive    = "beta's cache archive"
)

func cachePath(id, op string) string { return "/api/v1/agent/jobs/" + id + "/caches/" + op }

func saveBody(token, key, content string) string {
	return fmt.Sprintf(`{"token": %q, "key": %q, "sha256": %q, "size": %d}`, token, key, digest(content), len(content))
}

// betaStores has project beta keep a secret as an artifact and an archive as a cache
// entry, the honest way: registered, uploaded, confirmed.
func betaStores(t *testing.T, b *bundle) {
	t.Helper()
	job, token := b.projectJob(t, "beta", ownersPipeline)
	a := b.registerOne(t, job, token, "key", betaSecret)
	u, h := upload(t, a)
	if u == "" {
		t.Fatalf("beta's first registration: %v, want an upload", a)
	}
	if code := b.put(t, u, betaSecret, h); code/100 != 2 {
		t.Fatalf("beta's upload: %d", code)
	}
	if r := b.post(t, "/api/v1/agent/artifacts/"+a["id"].(string)+"/stored", `{}`); r.status != http.StatusOK {
		t.Fatalf("beta's stored: %d %s", r.status, r.body)
	}
	var save map[string]any
	b.post(t, cachePath(job, "save"), saveBody(token, "deps", betaArchive)).decode(t, &save)
	if u, h = upload(t, save); u == "" {
		t.Fatalf("beta's cache save: %v, want an upload", save)
	}
	if code := b.put(t, u, betaArchive, h); code/100 != 2 {
		t.Fatalf("beta's cache upload: %d", code)
	}
	if r := b.post(t, cachePath(job, "commit"), saveBody(token, "deps", betaArchive)); !strings.Contains(string(r.body), `"state":"saved"`) {
		t.Fatalf("beta's cache commit: %d %s", r.status, r.body)
	}
}

func countBlobs(t *testing.T, bs *blob.DirStore) int {
	t.Helper()
	n := 0
	if err := bs.Walk(context.Background(), func(blob.Info) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestArtifactDigestsStayInTheirProject: a worker of project alpha that registers the
// digest of content project beta uploaded gets nothing of beta's: the answer is the
// upload URL an unknown digest gets (nothing says the digest exists), and confirming
// without uploading leaves the artifact pending and undownloadable. Once alpha uploads
// the same content itself, verified by the blob store, it counts for alpha, and the
// blob store still keeps one copy.
func TestArtifactDigestsStayInTheirProject(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, b *bundle, bs *blob.DirStore) {
		betaStores(t, b)
		job, token := b.projectJob(t, "alpha", ownersPipeline)
		stolen := b.registerOne(t, job, token, "loot", betaSecret)
		unknown := b.registerOne(t, job, token, "other", "nobody has this")
		if stolen["state"] != "pending" || stolen["upload"] == nil {
			t.Fatalf("alpha's registration of beta's digest: %v, want pending with an upload URL", stolen)
		}
		delete(stolen, "name")
		delete(unknown, "name")
		if got, want := shape(t, stolen, digest(betaSecret)), shape(t, unknown, digest("nobody has this")); got != want {
			t.Errorf("a digest another project stored answers\n%s\nan unknown one\n%s", got, want)
		}
		loot := stolen["id"].(string)
		expectError(t, b.post(t, "/api/v1/agent/artifacts/"+loot+"/stored", `{}`), http.StatusConflict, "blob_missing")
		expectError(t, b.get(t, "/api/v1/artifacts/"+loot), http.StatusConflict, "blob_missing")
		// Other bytes under the digest are refused by the blob store.
		u, h := upload(t, stolen)
		if code := b.put(t, u, strings.Repeat("x", len(betaSecret)), h); code < 400 {
			t.Errorf("upload of other bytes under beta's digest: %d, want a refusal", code)
		}
		expectError(t, b.post(t, "/api/v1/agent/artifacts/"+loot+"/stored", `{}`), http.StatusConflict, "blob_missing")

		// alpha has the content after all and uploads it: verified, it counts for alpha.
		if code := b.put(t, u, betaSecret, h); code/100 != 2 {
			t.Fatalf("alpha's upload of the same bytes: %d", code)
		}
		if r := b.post(t, "/api/v1/agent/artifacts/"+loot+"/stored", `{}`); r.status != http.StatusOK {
			t.Fatalf("alpha's stored after its upload: %d %s", r.status, r.body)
		}
		if r := b.get(t, "/api/v1/artifacts/"+loot+"?redirect=false"); r.status != http.StatusOK {
			t.Errorf("alpha's download after its upload: %d %s", r.status, r.body)
		}
		if again := b.registerOne(t, job, token, "loot-again", betaSecret); again["state"] != "stored" || again["upload"] != nil {
			t.Errorf("alpha's registration of content it uploaded: %v, want stored", again)
		}
		if n := countBlobs(t, bs); n != 2 {
			t.Errorf("the blob store holds %d blobs, want 2: one copy of the secret and one of the archive", n)
		}
	})
}

// TestCacheDigestsStayInTheirProject: a job of project alpha that saves a cache under
// the digest of beta's archive is asked to upload it, as for an unknown archive, and a
// commit without the upload saves nothing; alpha restores nothing of beta's. Once alpha
// uploads the archive itself, its entry is saved.
func TestCacheDigestsStayInTheirProject(t *testing.T) {
	t.Parallel()
	onBothStores(t, func(t *testing.T, b *bundle, bs *blob.DirStore) {
		betaStores(t, b)
		job, token := b.projectJob(t, "alpha", ownersPipeline)
		var save, unknown map[string]any
		b.post(t, cachePath(job, "save"), saveBody(token, "deps", betaArchive)).decode(t, &save)
		b.post(t, cachePath(job, "save"), saveBody(token, "deps", "an archive nobody has")).decode(t, &unknown)
		if save["state"] != "upload" {
			t.Fatalf("alpha's save of beta's archive digest: %v, want an upload", save)
		}
		if got, want := shape(t, save, digest(betaArchive)), shape(t, unknown, digest("an archive nobody has")); got != want {
			t.Errorf("an archive another project stored answers\n%s\nan unknown one\n%s", got, want)
		}
		expectError(t, b.post(t, cachePath(job, "commit"), saveBody(token, "deps", betaArchive)), http.StatusConflict, "blob_missing")
		var restored map[string]any
		b.post(t, cachePath(job, "restore"), fmt.Sprintf(`{"token": %q, "key": "deps", "restore_keys": ["d"]}`, token)).decode(t, &restored)
		if restored["entry"] != nil {
			t.Errorf("alpha restored %v, want nothing", restored["entry"])
		}

		u, h := upload(t, save)
		if code := b.put(t, u, betaArchive, h); code/100 != 2 {
			t.Fatalf("alpha's upload of the same archive: %d", code)
		}
		if r := b.post(t, cachePath(job, "commit"), saveBody(token, "deps", betaArchive)); !strings.Contains(string(r.body), `"state":"saved"`) {
			t.Errorf("alpha's commit after its upload: %d %s", r.status, r.body)
		}
		if n := countBlobs(t, bs); n != 2 {
			t.Errorf("the blob store holds %d blobs, want 2", n)
		}
	})
}
