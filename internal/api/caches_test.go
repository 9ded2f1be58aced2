package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/blob"
)

// TestCacheFlow: a job misses, saves (upload, then commit once the blob store holds the
// archive), and a job of a later run restores the entry by exact key and by prefix; the
// same archive again needs no upload; the project's list shows the entry and delete
// removes it.
func TestCacheFlow(t *testing.T) {
	t.Parallel()
	onBothStores(t, testCacheFlow)
}

func testCacheFlow(t *testing.T, b *bundle, bs *blob.DirStore) {
	job := func() (string, string) {
		b.post(t, "/api/v1/runs", "jobs:\n  a:\n    cache:\n      - {key: go-1, restore_keys: [go-], paths: [x]}\n"+
			"      - {key: go-2, restore_keys: [nope-, go-], paths: [y]}\n    steps: [{run: make}]\n")
		j := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
		return j.ID, j.Lease.Token
	}
	id, token := job()
	restore := func(id, token, key string, restoreKeys ...string) map[string]any {
		t.Helper()
		rk, _ := json.Marshal(restoreKeys)
		r := b.post(t, "/api/v1/agent/jobs/"+id+"/caches/restore", fmt.Sprintf(`{"token": %q, "key": %q, "restore_keys": %s}`, token, key, rk))
		if r.status != http.StatusOK {
			t.Fatalf("restore: %d %s", r.status, r.body)
		}
		var out map[string]any
		if err := json.Unmarshal(r.body, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	if got := restore(id, token, "go-1", "go-"); got["entry"] != nil {
		t.Fatalf("restore from nothing: %v", got)
	}
	const archive = "the archive"
	save := fmt.Sprintf(`{"token": %q, "key": "go-1", "sha256": %q, "size": %d}`, token, digest(archive), len(archive))
	expectError(t, b.post(t, "/api/v1/agent/jobs/"+id+"/caches/commit", save), http.StatusConflict, "blob_missing")
	r := b.post(t, "/api/v1/agent/jobs/"+id+"/caches/save", save)
	var ans struct {
		State  string `json:"state"`
		Scope  string `json:"scope"`
		Upload *struct {
			URL    string              `json:"url"`
			Header map[string][]string `json:"header"`
		} `json:"upload"`
	}
	if err := json.Unmarshal(r.body, &ans); err != nil || r.status != http.StatusOK || ans.State != "upload" || ans.Upload == nil {
		t.Fatalf("save: %d %s", r.status, r.body)
	}
	if code := b.put(t, ans.Upload.URL, archive, ans.Upload.Header); code/100 != 2 {
		t.Fatalf("upload: %d", code)
	}
	if r := b.post(t, "/api/v1/agent/jobs/"+id+"/caches/commit", save); r.status != http.StatusOK || !strings.Contains(string(r.body), `"state":"saved"`) {
		t.Fatalf("commit: %d %s", r.status, r.body)
	}
	if r := b.post(t, "/api/v1/agent/jobs/"+id+"/caches/save", save); !strings.Contains(string(r.body), `"state":"exists"`) {
		t.Errorf("saving the key again: %s", r.body)
	}
	if _, err := bs.Stat(t.Context(), digest(archive)); err != nil {
		t.Fatal(err)
	}

	id2, token2 := job()
	got := restore(id2, token2, "go-1")
	entry, _ := got["entry"].(map[string]any)
	if entry == nil || entry["key"] != "go-1" || entry["exact"] != true || entry["scope"] != "main" || entry["download"] == nil {
		t.Fatalf("exact restore: %v", got)
	}
	got = restore(id2, token2, "go-2", "nope-", "go-")
	if entry, _ := got["entry"].(map[string]any); entry == nil || entry["key"] != "go-1" || entry["exact"] != false {
		t.Fatalf("prefix restore: %v", got)
	}
	// The same archive under another key: already stored, saved without an upload.
	again := fmt.Sprintf(`{"token": %q, "key": "go-2", "sha256": %q, "size": %d}`, token2, digest(archive), len(archive))
	if r := b.post(t, "/api/v1/agent/jobs/"+id2+"/caches/save", again); !strings.Contains(string(r.body), `"state":"saved"`) {
		t.Errorf("save of a stored archive: %s", r.body)
	}

	list := b.get(t, "/api/v1/projects/default/caches")
	var entries []struct {
		ID    string `json:"id"`
		Key   string `json:"key"`
		Scope string `json:"scope"`
		Size  int64  `json:"size"`
	}
	if err := json.Unmarshal(list.body, &entries); err != nil || len(entries) != 2 || entries[0].Size != int64(len(archive)) {
		t.Fatalf("list: %d %s", list.status, list.body)
	}
	if r := b.do(t, http.MethodDelete, "/api/v1/projects/default/caches/"+entries[0].ID, "", "", nil); r.status != http.StatusOK {
		t.Errorf("delete by id: %d %s", r.status, r.body)
	}
	expectError(t, b.do(t, http.MethodDelete, "/api/v1/projects/default/caches/"+entries[0].ID, "", "", nil), http.StatusNotFound, "not_found")
	if r := b.do(t, http.MethodDelete, "/api/v1/projects/default/caches?key=go-1", "", "", nil); !strings.Contains(string(r.body), `"deleted":`) {
		t.Errorf("delete by key: %d %s", r.status, r.body)
	}
	expectError(t, b.get(t, "/api/v1/projects/nope/caches"), http.StatusNotFound, "not_found")
}

func TestCacheRefusals(t *testing.T) {
	t.Parallel()
	b, _ := withBlobs(t)
	b.post(t, "/api/v1/runs", "jobs:\n  a: {steps: [{run: make}]}\n")
	j := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	path := "/api/v1/agent/jobs/" + j.ID + "/caches/"
	expectError(t, b.post(t, path+"restore", `{"token": "stolen", "key": "k"}`), http.StatusConflict, "lease_lost")
	expectError(t, b.post(t, path+"restore", fmt.Sprintf(`{"token": %q, "key": ""}`, j.Lease.Token)), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, path+"restore", fmt.Sprintf(`{"token": %q, "key": "a\nb"}`, j.Lease.Token)), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, path+"restore", fmt.Sprintf(`{"token": %q, "key": %q}`, j.Lease.Token, strings.Repeat("k", 600))), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, path+"save", fmt.Sprintf(`{"token": %q, "key": "k", "sha256": "ABC", "size": 1}`, j.Lease.Token)), http.StatusBadRequest, "bad_request")
	expectError(t, b.post(t, path+"save", fmt.Sprintf(`{"token": "stolen", "key": "k", "sha256": %q, "size": 1}`, digest("x"))), http.StatusConflict, "lease_lost")

	plain := setup(t)
	plain.post(t, "/api/v1/runs", "jobs:\n  a: {steps: [{run: make}]}\n")
	pj := plain.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
	// Without a blob store caches are off: said at once, not a failure to retry.
	for _, op := range []string{"restore", "save", "commit"} {
		body := fmt.Sprintf(`{"token": %q, "key": "k", "sha256": %q, "size": 1}`, pj.Lease.Token, digest("x"))
		if op == "restore" {
			body = fmt.Sprintf(`{"token": %q, "key": "k"}`, pj.Lease.Token)
		}
		r := plain.post(t, "/api/v1/agent/jobs/"+pj.ID+"/caches/"+op, body)
		if r.status != http.StatusOK || !strings.Contains(string(r.body), `"state":"off"`) {
			t.Errorf("%s without a blob store: %d %s", op, r.status, r.body)
		}
	}
}

// TestCacheKeysDeclared: a worker restores and saves only under the keys its job's caches
// declare, in the shape the worker computes them (hashFiles is 64 hexadecimal digits, or
// nothing), with the restore keys of that cache; any other key is refused, as is every
// key of a job that declares no cache.
func TestCacheKeysDeclared(t *testing.T) {
	t.Parallel()
	b, _ := withBlobs(t)
	const pipeline = "jobs:\n  a:\n    cache:\n      - key: \"go-${{ hashFiles('go.sum') }}\"\n        restore_keys: [go-]\n        paths: [x]\n" +
		"    steps: [{run: make}]\n"
	id, token := b.projectJob(t, "default", pipeline)
	hex := digest("go.sum's content")
	save := func(op, key string) response {
		return b.post(t, cachePath(id, op), saveBody(token, key, "an archive"))
	}
	restore := func(key string, restoreKeys ...string) response {
		rk, _ := json.Marshal(restoreKeys)
		return b.post(t, cachePath(id, "restore"), fmt.Sprintf(`{"token": %q, "key": %q, "restore_keys": %s}`, token, key, rk))
	}
	for _, r := range []response{save("save", "go-"+hex), save("save", "go-"), restore("go-"+hex, "go-"), restore("go-" + hex)} {
		if r.status != http.StatusOK {
			t.Errorf("a declared key: %d %s", r.status, r.body)
		}
	}
	for _, tt := range []struct {
		what string
		r    response
	}{
		{"save of another key", save("save", "main-secrets")},
		{"save of a key with more after it", save("save", "go-"+hex+"-x")},
		{"save of a key whose hash is no hash", save("save", "go-../../x")},
		{"commit of another key", save("commit", "npm-"+hex)},
		{"restore of another key", restore("npm-" + hex)},
		{"restore with another restore key", restore("go-"+hex, "g")},
	} {
		expectError(t, tt.r, http.StatusForbidden, "forbidden")
	}
	bare, bareToken := b.projectJob(t, "default", "jobs:\n  b: {steps: [{run: make}]}\n")
	expectError(t, b.post(t, cachePath(bare, "save"), saveBody(bareToken, "go-1", "an archive")), http.StatusForbidden, "forbidden")
}

// TestCacheScopeOfABranchNamedLikeAPullRequest: a branch whose name reads as a pull
// request's or a tag's scope saves in a scope of its own, not where pull request 7 or
// the release build of tag v1 would read.
func TestCacheScopeOfABranchNamedLikeAPullRequest(t *testing.T) {
	t.Parallel()
	b, _ := withBlobs(t)
	for branch, want := range map[string]string{"pr/7": "branch/pr/7", "tag/v1": "branch/tag/v1", "feature": "feature"} {
		r := b.post(t, "/api/v1/runs", mustJSON(t, map[string]any{"pipeline": ownersPipeline, "ref": "refs/heads/" + branch}))
		if r.status != http.StatusAccepted {
			t.Fatalf("submit: %d %s", r.status, r.body)
		}
		var run runView
		r.decode(t, &run)
		if !run.RefVerified {
			t.Fatalf("a run submitted with authentication off is not verified: %s", r.body)
		}
		c := b.claim(t, `{"worker_id": "w", "wait": "0s"}`).Jobs[0]
		var save map[string]any
		b.post(t, cachePath(c.ID, "save"), saveBody(c.Lease.Token, "deps", "archive of "+branch)).decode(t, &save)
		if save["scope"] != want {
			t.Errorf("branch %s saves in scope %v, want %s", branch, save["scope"], want)
		}
	}
}
