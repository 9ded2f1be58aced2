package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/blob/blobtest"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

// flakyBlobs is a directory blob store whose signed URLs can be made to fail, as a blob
// store that is down would.
type flakyBlobs struct {
	*blob.DirStore
	down atomic.Bool
}

func newBlobs(tb testing.TB, dir string) *flakyBlobs {
	tb.Helper()
	d, err := blob.OpenDir(dir, blob.Options{Secret: []byte(strings.Repeat("k", 32))})
	if err != nil {
		tb.Fatal(err)
	}
	return &flakyBlobs{DirStore: d}
}

func (f *flakyBlobs) Handler() http.Handler {
	h := f.DirStore.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if f.down.Load() {
			http.Error(w, "blob store down", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// artifactBlobs counts the blobs in bs that hold artifacts' contents: finished logs are
// blobs too.
func artifactBlobs(t *testing.T, bs blob.Store, as map[string]artifactAnswer) int {
	t.Helper()
	digests := map[string]bool{}
	for _, a := range as {
		digests[a.SHA256] = true
	}
	n := 0
	if err := bs.Walk(t.Context(), func(b blob.Info) error {
		if digests[b.Digest] {
			n++
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != len(digests) {
		t.Errorf("the blob store holds %d of the artifacts' %d contents", n, len(digests))
	}
	return n
}

type artifactAnswer struct {
	ID      uuid.UUID `json:"id"`
	Job     string    `json:"job"`
	Attempt int       `json:"attempt"`
	Name    string    `json:"name"`
	SHA256  string    `json:"sha256"`
	Size    int64     `json:"size"`
	Mode    uint32    `json:"mode"`
	State   string    `json:"state"`
}

func (b *bundle) runArtifacts(t *testing.T, run uuid.UUID) map[string]artifactAnswer {
	t.Helper()
	res, err := http.Get(b.url + "/api/v1/runs/" + run.String() + "/artifacts")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("list artifacts: %d", res.StatusCode)
	}
	var as []artifactAnswer
	if err := json.NewDecoder(res.Body).Decode(&as); err != nil {
		t.Fatal(err)
	}
	out := map[string]artifactAnswer{}
	for _, a := range as {
		out[a.Job+":"+a.Name] = a
	}
	return out
}

// jobLog reads the whole log of a run's job by key.
func (b *bundle) jobLog(t *testing.T, run uuid.UUID, key string) string {
	t.Helper()
	jobs, err := b.st.ListJobs(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Key != key {
			continue
		}
		res, err := http.Get(b.url + "/api/v1/jobs/" + j.ID.String() + "/logs")
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		if err != nil {
			t.Fatal(err)
		}
		return string(body)
	}
	t.Fatalf("no job %q", key)
	return ""
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestDiamondArtifacts: the diamond example as shipped, whose package job reads the file
// its build job kept; the artifact is listed and downloads through the coordinator's
// redirect to a signed URL.
func TestDiamondArtifacts(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 2)
	yaml, err := os.ReadFile("../../examples/diamond.yml")
	if err != nil {
		t.Fatal(err)
	}
	run := b.submit(t, string(yaml))
	b.wantSuccess(t, run)
	if log := b.jobLog(t, run, "package"); !strings.Contains(log, "packaged binary for demo") {
		t.Errorf("package's log does not show the build's binary:\n%s", log)
	}
	as := b.runArtifacts(t, run)
	a, ok := as["build:out/app"]
	if !ok || len(as) != 1 {
		t.Fatalf("artifacts = %+v, want build's out/app only", as)
	}
	if a.State != "stored" || a.Size != int64(len("binary for demo\n")) || a.SHA256 != sha("binary for demo\n") || a.Attempt != 1 {
		t.Errorf("out/app = %+v, want stored, 16 bytes, the digest of its content", a)
	}
	res, err := http.Get(b.url + "/api/v1/artifacts/" + a.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(body) != "binary for demo\n" {
		t.Errorf("download: %d %q, want 200 and the binary", res.StatusCode, body)
	}
	if res.Request.URL.Path == "/api/v1/artifacts/"+a.ID.String() {
		t.Errorf("the download was served by the API route, not redirected to the blob store")
	}
}

// TestArtifactPaths: globs with ** and directories select files; permission bits survive
// the trip to a downstream job; the same content kept twice is one blob; a symlink that
// leads out of the workspace is not kept, one that stays inside is; a path that matches
// nothing is told in the log.
func TestArtifactPaths(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 2)
	outside := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(outside, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	run := b.submit(t, `
name: paths
jobs:
  build:
    steps:
      - run: |
          mkdir -p bin reports/a/b dist
          printf '#!/bin/sh\necho tool ran\n' > bin/tool && chmod 755 bin/tool
          echo '<ok/>' > reports/a/b/unit.xml && echo '<ok/>' > reports/top.xml && echo skip > reports/a/notes.txt
          echo one > dist/1 && echo same > dist/same
          ln -s `+outside+` dist/escape
          ln -s 1 dist/inside
    artifacts:
      paths: [bin/tool, "reports/**/*.xml", dist, nothing/*]
  twin:
    steps:
      - run: echo same > same
    artifacts: { paths: [same] }
  use:
    needs: [build, twin]
    steps:
      - run: ./bin/tool | grep -q 'tool ran'
      - run: test "$(cat reports/a/b/unit.xml)" = '<ok/>' && test -f reports/top.xml && test ! -e reports/a/notes.txt
      - run: test "$(cat dist/inside)" = one && test ! -e dist/escape && test "$(cat same)" = same
`)
	b.wantSuccess(t, run)
	as := b.runArtifacts(t, run)
	var names []string
	for k := range as {
		names = append(names, k)
	}
	want := []string{"build:bin/tool", "build:dist/1", "build:dist/inside", "build:dist/same", "build:reports/a/b/unit.xml", "build:reports/top.xml", "twin:same"}
	if len(as) != len(want) {
		t.Errorf("artifacts %v, want %v", names, want)
	}
	for _, w := range want {
		if as[w].State != "stored" {
			t.Errorf("artifact %s = %+v, want stored", w, as[w])
		}
	}
	if m := as["build:bin/tool"].Mode; m != 0o755 {
		t.Errorf("bin/tool kept with mode %o, want 755", m)
	}
	// Seven files, four contents: the two reports, dist/1 and dist/inside, and dist/same and
	// twin's same are alike.
	if n, want := artifactBlobs(t, b.blobs, as), 4; n != want {
		t.Errorf("the blob store holds %d blobs, want %d: equal contents are one blob", n, want)
	}
	log := b.jobLog(t, run, "build")
	for _, w := range []string{"dist/escape is a symlink leading out of the workspace; not kept", `no file matches "nothing/*"`} {
		if !strings.Contains(log, w) {
			t.Errorf("build's log does not say %q:\n%s", w, log)
		}
	}
}

// TestBlobStoreDown: while the blob store is down a job that keeps artifacts still
// succeeds, its artifact stays pending, and the worker's background retry lands it once
// the store is back.
func TestBlobStoreDown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.blobs.down.Store(true)
	b.start(t, 1)
	run := b.submit(t, `
name: down
jobs:
  build:
    steps: [ { run: echo data > out.bin } ]
    artifacts: { paths: [out.bin] }
`)
	b.wantSuccess(t, run)
	a := b.runArtifacts(t, run)["build:out.bin"]
	if a.State != "pending" {
		t.Fatalf("out.bin = %+v while the blob store is down, want pending", a)
	}
	if log := b.jobLog(t, run, "build"); !strings.Contains(log, "retrying in the background") {
		t.Errorf("build's log does not say the upload is retried:\n%s", log)
	}
	res, err := http.Get(b.url + "/api/v1/artifacts/" + a.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusConflict {
		t.Errorf("download of a pending artifact: %d, want 409", res.StatusCode)
	}
	b.blobs.down.Store(false)
	deadline := time.Now().Add(30 * time.Second)
	for b.runArtifacts(t, run)["build:out.bin"].State != "stored" {
		if time.Now().After(deadline) {
			t.Fatal("the artifact is still pending 30s after the blob store came back")
		}
		pause(t, 100*time.Millisecond)
	}
	if _, err := b.blobs.Stat(t.Context(), sha("data\n")); err != nil {
		t.Errorf("the blob store lacks the retried blob: %v", err)
	}
}

// TestFetchRefusesBadInputs: a downstream worker checks what it downloads: a blob whose
// bytes do not match the recorded digest never appears in the workspace.
func TestFetchRefusesBadInputs(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "tampered") }))
	defer ts.Close()
	base, err := url.Parse(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	err = download(context.Background(), http.DefaultClient, base, blob.Signed{Method: http.MethodGet, URL: "/blob"}, ws, "out/app", sha("original"), 8, 0o644)
	if err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Errorf("download of tampered bytes: %v, want a digest error", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "out", "app")); !os.IsNotExist(err) {
		t.Errorf("the tampered file is in the workspace: %v", err)
	}
	entries, _ := os.ReadDir(filepath.Join(ws, "out"))
	if len(entries) != 0 {
		t.Errorf("the download left %d files behind", len(entries))
	}
}

// TestArtifactsOnS3: the same flow against a real S3 server: workers upload to and
// download from MinIO through pre-signed URLs, and the coordinator's download redirects
// there.
func TestArtifactsOnS3(t *testing.T) {
	t.Parallel()
	m, err := blobtest.StartMinIO(t.Logf)
	if errors.Is(err, blobtest.ErrNoMinIO) && testing.Short() {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	})
	bs, err := blob.Open(m.URL(), blob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st, err := sqlite.Open(t.Context(), sqlitetest.Path(t), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := setupWith(t, st, bs)
	b.start(t, 2)
	run := b.submit(t, `
name: s3
jobs:
  build:
    steps: [ { run: "mkdir -p out && echo s3 binary > out/app && chmod +x out/app && echo s3 binary > copy" } ]
    artifacts: { paths: [out/app, copy] }
  use:
    needs: [build]
    steps: [ { run: 'test -x out/app && test "$(cat out/app)" = "s3 binary"' } ]
`)
	b.wantSuccess(t, run)
	as := b.runArtifacts(t, run)
	a := as["build:out/app"]
	if a.State != "stored" || as["build:copy"].State != "stored" {
		t.Fatalf("artifacts = %+v, want both stored", as)
	}
	if n := artifactBlobs(t, bs, as); n != 1 {
		t.Errorf("the bucket holds %d artifact blobs, want 1 for two files with one content", n)
	}
	res, err := http.Get(b.url + "/api/v1/artifacts/" + a.ID.String())
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || string(body) != "s3 binary\n" || res.Request.URL.Host != m.Endpoint {
		t.Errorf("download: %d %q from %s, want the bytes from MinIO at %s", res.StatusCode, body, res.Request.URL.Host, m.Endpoint)
	}
}

// TestLargeArtifact: a 1 GiB artifact is kept and fetched by streaming: the Go heap of the
// whole process, worker and coordinator with its blob store, stays under 64 MiB. The test
// is not parallel, so that no other test's allocations count.
func TestLargeArtifact(t *testing.T) {
	if testing.Short() {
		t.Skip("moves 1 GiB through the disk three times")
	}
	b := setup(t)
	b.start(t, 1)
	var peak atomic.Uint64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		var ms runtime.MemStats
		for {
			runtime.ReadMemStats(&ms)
			if in := ms.HeapInuse + ms.StackInuse; in > peak.Load() {
				peak.Store(in)
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	run := b.submit(t, `
name: large
jobs:
  make:
    steps: [ { run: "head -c 1073741824 /dev/zero > big.bin" } ]
    artifacts: { paths: [big.bin] }
  use:
    needs: [make]
    steps: [ { run: "test $(stat -c %s big.bin) = 1073741824" } ]
`)
	// The whole suite runs beside it in CI: give the 3 GiB of disk traffic time.
	if r := b.waitRunWithin(t, run, 3*time.Minute); r.Status != store.RunSuccess {
		t.Fatalf("run %s, want success", r.Status)
	}
	close(stop)
	<-sampled
	const limit = 64 << 20
	t.Logf("peak Go heap and stacks: %.1f MiB", float64(peak.Load())/(1<<20))
	if peak.Load() > limit {
		t.Errorf("peak Go heap and stacks %.1f MiB while moving a 1 GiB artifact, want under 64 MiB", float64(peak.Load())/(1<<20))
	}
	if a := b.runArtifacts(t, run)["make:big.bin"]; a.Size != 1<<30 || a.State != "stored" {
		t.Errorf("big.bin = %+v, want 1 GiB stored", a)
	}
	for _, key := range []string{"make", "use"} {
		t.Logf("%s:\n%s", key, b.jobLog(t, run, key))
	}
}
