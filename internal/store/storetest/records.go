package storetest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var workerTests = []test{
	{"UpsertTouchList", testWorkers},
}

var artifactTests = []test{
	{"PutMarkList", testArtifacts},
	{"BlobOwners", testBlobOwners},
	{"StoredOnlyForOwners", testArtifactStoredOnlyForOwners},
}

var logChunkTests = []test{
	{"ContiguousChunks", testLogChunks},
}

var outboxTests = []test{
	{"ClaimHideRetryDeliver", testOutbox},
	{"ConcurrentClaims", testOutboxConcurrent},
}

var notifierTests = []test{
	{"WakesWaiters", testNotifier},
	{"WakesWriteWaiters", testWriteNotifier},
	{"Publish", testPublish},
}

// testPublish: a notice reaches the subscribers of its topic, only them, and, where the
// driver serves several replicas, the subscribers of another store on the same database.
func testPublish(t *testing.T, h Harness) {
	dsn := h.NewDSN(t)
	ctx := t.Context()
	open := func() store.Store {
		s, err := h.Open(ctx, dsn, clock.NewFake(epoch))
		if err != nil {
			t.Fatalf("open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
	a := open()
	logs, stop := a.Subscribe("logs")
	defer stop()
	other, stopOther := a.Subscribe("runs")
	defer stopOther()
	var remote <-chan string
	if h.Replicas {
		var stopRemote func()
		remote, stopRemote = open().Subscribe("logs")
		defer stopRemote()
	}
	if err := a.Publish(ctx, "logs", "job-1 7"); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	for name, ch := range map[string]<-chan string{"this store": logs, "another replica": remote} {
		if ch == nil {
			continue
		}
		select {
		case got := <-ch:
			if got != "job-1 7" {
				t.Errorf("%s received %q, want %q", name, got, "job-1 7")
			}
		case <-time.After(signalWait):
			t.Errorf("%s received no notice", name)
		}
	}
	select {
	case got := <-other:
		t.Errorf("a subscriber of another topic received %q", got)
	default:
	}
	// Once stopped, a subscriber gets nothing new; a notice may arrive twice, so the
	// check is for the new one only, after a fresh subscriber has seen it.
	stop()
	late, stopLate := a.Subscribe("logs")
	defer stopLate()
	if err := a.Publish(ctx, "logs", "after"); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	for got := ""; got != "after"; {
		select {
		case got = <-late:
		case <-time.After(signalWait):
			t.Fatal("a new subscriber received no notice")
		}
	}
	for len(logs) > 0 {
		if got := <-logs; got == "after" {
			t.Errorf("a stopped subscriber received %q", got)
		}
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func testWorkers(t *testing.T, h Harness) {
	s, b := setup(t, h)
	find := func(id string) *store.Worker {
		t.Helper()
		ws, err := s.ListWorkers(b.ctx)
		if err != nil {
			t.Fatalf("ListWorkers: %v", err)
		}
		for _, w := range ws {
			if w.ID == id {
				return w
			}
		}
		t.Fatalf("ListWorkers has no worker %q", id)
		return nil
	}

	w1 := &store.Worker{ID: "w1", Name: "builder-1", Labels: []string{"linux", "amd64"}, MilliCPU: 8000, Memory: 16 << 30, MaxJobs: 4, State: store.WorkerIdle, Version: "1.0.0"}
	if err := s.UpsertWorker(b.ctx, w1); err != nil {
		t.Fatalf("UpsertWorker: %v", err)
	}
	w2 := &store.Worker{ID: "w2", Name: "gpu-1", Labels: []string{"gpu"}, MaxJobs: 1, State: store.WorkerBusy, Version: "1.0.0"}
	if err := s.UpsertWorker(b.ctx, w2); err != nil {
		t.Fatalf("UpsertWorker: %v", err)
	}
	got := find("w1")
	if got.Name != "builder-1" || !slices.Equal(sortedCopy(got.Labels), []string{"amd64", "linux"}) || got.MilliCPU != 8000 ||
		got.Memory != 16<<30 || got.MaxJobs != 4 || got.State != store.WorkerIdle || got.Version != "1.0.0" {
		t.Errorf("listed worker %+v, want %+v", got, w1)
	}
	wantTime(t, "RegisteredAt", got.RegisteredAt, epoch)
	wantTime(t, "LastSeenAt", got.LastSeenAt, epoch)
	if ws, err := s.ListWorkers(b.ctx); err != nil || len(ws) != 2 {
		t.Errorf("ListWorkers = %d workers, %v; want 2", len(ws), err)
	}

	b.clk.Advance(10 * time.Second)
	if err := s.TouchWorker(b.ctx, "w1", store.WorkerBusy); err != nil {
		t.Fatalf("TouchWorker: %v", err)
	}
	got = find("w1")
	if got.State != store.WorkerBusy || got.Name != "builder-1" || got.MaxJobs != 4 {
		t.Errorf("after TouchWorker: %+v; want busy, description unchanged", got)
	}
	wantTime(t, "LastSeenAt after TouchWorker", got.LastSeenAt, epoch.Add(10*time.Second))
	wantTime(t, "RegisteredAt after TouchWorker", got.RegisteredAt, epoch)
	wantTime(t, "other worker's LastSeenAt", find("w2").LastSeenAt, epoch)

	// A second upsert refreshes the description but keeps the registration time.
	b.clk.Advance(10 * time.Second)
	w1b := &store.Worker{ID: "w1", Name: "builder-1", Labels: []string{"linux", "arm64", "big"}, MilliCPU: 4000, Memory: 8 << 30, MaxJobs: 2, State: store.WorkerDraining, Version: "1.1.0"}
	if err := s.UpsertWorker(b.ctx, w1b); err != nil {
		t.Fatalf("UpsertWorker again: %v", err)
	}
	got = find("w1")
	if !slices.Equal(sortedCopy(got.Labels), []string{"arm64", "big", "linux"}) || got.MilliCPU != 4000 || got.MaxJobs != 2 ||
		got.State != store.WorkerDraining || got.Version != "1.1.0" {
		t.Errorf("after a second upsert: %+v, want %+v", got, w1b)
	}
	wantTime(t, "RegisteredAt after a second upsert", got.RegisteredAt, epoch)
	wantTime(t, "LastSeenAt after a second upsert", got.LastSeenAt, epoch.Add(20*time.Second))

	if err := s.TouchWorker(b.ctx, "w2", store.WorkerOffline); err != nil {
		t.Fatalf("TouchWorker: %v", err)
	}
	if got := find("w2"); got.State != store.WorkerOffline {
		t.Errorf("w2 state %s, want offline", got.State)
	}
}

// testBlobOwners: a digest is owned per project; owning it twice is one ownership, and
// forgetting a blob's owners forgets them in every project.
func testBlobOwners(t *testing.T, h Harness) {
	s, b := setup(t, h)
	b.project("alpha")
	b.project("beta")
	alpha, beta := b.projectID("alpha"), b.projectID("beta")
	d, other := sha256Hex("alpha's secret"), sha256Hex("something else")
	owned := func(p uuid.UUID, digest string) bool {
		t.Helper()
		ok, err := s.BlobOwned(b.ctx, p, digest)
		if err != nil {
			t.Fatalf("BlobOwned: %v", err)
		}
		return ok
	}
	if owned(alpha, d) {
		t.Fatal("a project owns a digest nobody added")
	}
	for range 2 {
		if err := s.AddBlobOwner(b.ctx, alpha, d); err != nil {
			t.Fatalf("AddBlobOwner: %v", err)
		}
	}
	if !owned(alpha, d) || owned(beta, d) || owned(alpha, other) {
		t.Errorf("after alpha added %s: alpha %v, beta %v, alpha of another digest %v; want only alpha's",
			d, owned(alpha, d), owned(beta, d), owned(alpha, other))
	}
	if err := s.AddBlobOwner(b.ctx, beta, d); err != nil {
		t.Fatalf("AddBlobOwner: %v", err)
	}
	if err := s.AddBlobOwner(b.ctx, alpha, other); err != nil {
		t.Fatalf("AddBlobOwner: %v", err)
	}
	if err := s.DeleteBlobOwners(b.ctx, d); err != nil {
		t.Fatalf("DeleteBlobOwners: %v", err)
	}
	if owned(alpha, d) || owned(beta, d) || !owned(alpha, other) {
		t.Errorf("after DeleteBlobOwners(%s): alpha %v, beta %v, alpha of another digest %v; want only the other digest",
			d, owned(alpha, d), owned(beta, d), owned(alpha, other))
	}
	err := s.AddBlobOwner(b.ctx, store.NewID(), d)
	wantErr(t, "AddBlobOwner of an unknown project", err, store.ErrNotFound)
	for _, bad := range []struct {
		p uuid.UUID
		d string
	}{{uuid.Nil, d}, {alpha, "abc"}} {
		wantErr(t, fmt.Sprintf("AddBlobOwner(%s, %q)", bad.p, bad.d), s.AddBlobOwner(b.ctx, bad.p, bad.d), store.ErrInvalid)
	}
}

// testArtifactStoredOnlyForOwners: an artifact becomes stored only for a digest its own
// project owns; another project's ownership of the same digest does not count, and the
// refusal changes nothing.
func testArtifactStoredOnlyForOwners(t *testing.T, h Harness) {
	s, b := setup(t, h)
	b.project("beta")
	beta := b.projectID("beta")
	_, jobs := b.createRun("name: alpha\njobs:\n  build: { steps: [ { run: make } ] }\n", store.CreateRunParams{Project: "alpha"})
	c := b.claimOne()
	if c.Job.ID != jobs[0].ID {
		t.Fatalf("claimed %s, want alpha's job", c.Job.ID)
	}
	secret := sha256Hex("beta's secret")
	if err := s.AddBlobOwner(b.ctx, beta, secret); err != nil {
		t.Fatalf("AddBlobOwner: %v", err)
	}
	a, err := s.PutArtifact(b.ctx, ref(c), &store.Artifact{JobID: c.Job.ID, Name: "loot", SHA256: secret, Size: 13})
	if err != nil {
		t.Fatalf("PutArtifact: %v", err)
	}
	wantErr(t, "MarkArtifactStored of a digest only another project owns", s.MarkArtifactStored(b.ctx, a.ID), store.ErrForbidden)
	if got, err := s.GetArtifact(b.ctx, a.ID); err != nil || got.State != store.ArtifactPending {
		t.Fatalf("after the refusal: %+v, %v; want still pending", got, err)
	}
	if err := s.AddBlobOwner(b.ctx, c.Job.ProjectID, secret); err != nil {
		t.Fatalf("AddBlobOwner: %v", err)
	}
	if err := s.MarkArtifactStored(b.ctx, a.ID); err != nil {
		t.Fatalf("MarkArtifactStored once its project owns the digest: %v", err)
	}
	if got, _ := s.GetArtifact(b.ctx, a.ID); got == nil || got.State != store.ArtifactStored {
		t.Errorf("artifact is %+v, want stored", got)
	}
}

func testArtifacts(t *testing.T, h Harness) {
	s, b := setup(t, h)
	b.create(`
name: artifacts
jobs:
  build:
    retry: { max_attempts: 2, on: [lost] }
    steps: [ { run: make } ]
`)
	c := b.claimOne()
	b.clk.Advance(time.Second)
	expires := b.clk.Now().Add(24 * time.Hour)
	in := &store.Artifact{JobID: c.Job.ID, Name: "bin/app", SHA256: sha256Hex("app v1"), Size: 6, MediaType: "application/octet-stream", Mode: 0o755, ExpiresAt: expires}
	a, err := s.PutArtifact(b.ctx, ref(c), in)
	if err != nil {
		t.Fatalf("PutArtifact: %v", err)
	}
	if a.ID == uuid.Nil || a.JobID != c.Job.ID || a.Attempt != 1 || a.Name != "bin/app" || a.SHA256 != in.SHA256 ||
		a.Size != 6 || a.MediaType != "application/octet-stream" || a.Mode != 0o755 || a.State != store.ArtifactPending {
		t.Errorf("PutArtifact returned %+v; want a pending record of attempt 1", a)
	}
	wantTime(t, "CreatedAt", a.CreatedAt, b.clk.Now())
	wantTime(t, "ExpiresAt", a.ExpiresAt, expires)

	// The same name again in the same attempt is the first record.
	b.clk.Advance(time.Second)
	again, err := s.PutArtifact(b.ctx, ref(c), &store.Artifact{JobID: c.Job.ID, Name: "bin/app", SHA256: sha256Hex("app v2"), Size: 6})
	if err != nil {
		t.Fatalf("PutArtifact again: %v", err)
	}
	if again.ID != a.ID || again.SHA256 != a.SHA256 {
		t.Errorf("second put returned %s (sha %s), want the first record %s (sha %s)", again.ID, again.SHA256, a.ID, a.SHA256)
	}
	other, err := s.PutArtifact(b.ctx, ref(c), &store.Artifact{JobID: c.Job.ID, Name: "report.xml", SHA256: sha256Hex("<ok/>"), Size: 5})
	if err != nil {
		t.Fatalf("PutArtifact of a second file: %v", err)
	}
	if other.ID == a.ID {
		t.Errorf("two names share artifact id %s", a.ID)
	}
	if other.Mode != 0o644 {
		t.Errorf("an artifact registered without a mode has mode %o, want 644", other.Mode)
	}

	// One file in two named sets of the attempt: two records, each with its set and path
	// in it; the same set again is its first record.
	var inSets []*store.Artifact
	for _, set := range []string{"dist", "everything", "dist"} {
		path := map[string]string{"dist": "app", "everything": "bin/app"}[set]
		a, err := s.PutArtifact(b.ctx, ref(c), &store.Artifact{JobID: c.Job.ID, Name: "bin/app", SHA256: in.SHA256, Size: 6, Set: set, SetPath: path})
		if err != nil {
			t.Fatalf("PutArtifact in set %s: %v", set, err)
		}
		if a.Set != set || a.SetPath != path || a.Name != "bin/app" {
			t.Errorf("PutArtifact in set %s returned set %q path %q name %q", set, a.Set, a.SetPath, a.Name)
		}
		inSets = append(inSets, a)
	}
	if inSets[0].ID == a.ID || inSets[1].ID == inSets[0].ID || inSets[2].ID != inSets[0].ID {
		t.Errorf("records of bin/app: job's %s, sets %s %s %s; want one per set, and the set's first again", a.ID, inSets[0].ID, inSets[1].ID, inSets[2].ID)
	}
	if as, err := s.ListArtifacts(b.ctx, c.Job.ID); err != nil || len(as) != 4 {
		t.Errorf("ListArtifacts with two sets: %d records, %v; want 4", len(as), err)
	}

	_, err = s.PutArtifact(b.ctx, store.LeaseRef{JobID: c.Job.ID, Token: "stolen"}, &store.Artifact{JobID: c.Job.ID, Name: "evil", SHA256: sha256Hex("x"), Size: 1})
	wantErr(t, "PutArtifact with a wrong token", err, store.ErrLeaseLost)

	list := func() map[string]*store.Artifact {
		t.Helper()
		as, err := s.ListArtifacts(b.ctx, c.Job.ID)
		if err != nil {
			t.Fatalf("ListArtifacts: %v", err)
		}
		m := map[string]*store.Artifact{}
		sets := 0
		for _, a := range as {
			if a.Set != "" {
				sets++
				continue
			}
			m[fmt.Sprintf("%s@%d", a.Name, a.Attempt)] = a
		}
		if len(m) != len(as)-sets {
			t.Errorf("ListArtifacts repeats a (name, attempt): %d records", len(as))
		}
		return m
	}
	if got := list(); len(got) != 2 || got["bin/app@1"] == nil || got["report.xml@1"] == nil {
		t.Errorf("ListArtifacts = %v, want bin/app and report.xml of attempt 1", got)
	}

	if err := s.AddBlobOwner(b.ctx, c.Job.ProjectID, a.SHA256); err != nil {
		t.Fatalf("AddBlobOwner: %v", err)
	}
	if err := s.MarkArtifactStored(b.ctx, a.ID); err != nil {
		t.Fatalf("MarkArtifactStored: %v", err)
	}
	if err := s.MarkArtifactStored(b.ctx, a.ID); err != nil {
		t.Errorf("MarkArtifactStored twice: %v", err)
	}
	stored, err := s.GetArtifact(b.ctx, a.ID)
	if err != nil {
		t.Fatalf("GetArtifact: %v", err)
	}
	if stored.State != store.ArtifactStored || stored.Name != "bin/app" || stored.SHA256 != a.SHA256 {
		t.Errorf("GetArtifact after MarkArtifactStored: %+v; want stored", stored)
	}
	if got, _ := s.GetArtifact(b.ctx, other.ID); got == nil || got.State != store.ArtifactPending {
		t.Errorf("the other artifact is %+v, want still pending", got)
	}

	// A new attempt keeps its own records; the old token may not add to it.
	b.clk.Advance(leaseTTL + time.Second)
	if n := b.reap(); n != 1 {
		t.Fatalf("reaped %d jobs, want 1", n)
	}
	c2 := b.claimOne()
	_, err = s.PutArtifact(b.ctx, ref(c), &store.Artifact{JobID: c.Job.ID, Name: "late", SHA256: sha256Hex("late"), Size: 4})
	wantErr(t, "PutArtifact with the previous attempt's token", err, store.ErrLeaseLost)
	a2, err := s.PutArtifact(b.ctx, ref(c2), &store.Artifact{JobID: c.Job.ID, Name: "bin/app", SHA256: sha256Hex("app v3"), Size: 6})
	if err != nil {
		t.Fatalf("PutArtifact in attempt 2: %v", err)
	}
	if a2.ID == a.ID || a2.Attempt != 2 || a2.State != store.ArtifactPending || a2.SHA256 != sha256Hex("app v3") {
		t.Errorf("attempt 2's bin/app = %+v; want a new pending record of attempt 2", a2)
	}
	if got := list(); len(got) != 3 || got["bin/app@2"] == nil {
		t.Errorf("ListArtifacts after attempt 2 = %v, want the two of attempt 1 and bin/app of attempt 2", got)
	}

	// A run's artifacts are those of its jobs, and of no other run.
	b.create(`
name: other
jobs:
  build:
    steps: [ { run: make } ]
`)
	oc := b.claimOne()
	if _, err := s.PutArtifact(b.ctx, ref(oc), &store.Artifact{JobID: oc.Job.ID, Name: "bin/app", SHA256: sha256Hex("app v1"), Size: 6}); err != nil {
		t.Fatalf("PutArtifact in another run: %v", err)
	}
	ra, err := s.ListRunArtifacts(b.ctx, c.Job.RunID)
	if err != nil {
		t.Fatalf("ListRunArtifacts: %v", err)
	}
	var names []string
	for _, a := range ra {
		set := ""
		if a.Set != "" {
			set = a.Set + ":"
		}
		names = append(names, fmt.Sprintf("%s%s@%d", set, a.Name, a.Attempt))
	}
	// Ordered by job, attempt, set ("" first) and name.
	want := "bin/app@1 report.xml@1 dist:bin/app@1 everything:bin/app@1 bin/app@2"
	if got := strings.Join(names, " "); got != want {
		t.Errorf("ListRunArtifacts = %q, want %q", got, want)
	}

	// A digest is in use while any record names it, whatever its run.
	inUse := func(digest string) bool {
		t.Helper()
		ok, err := s.BlobInUse(b.ctx, digest)
		if err != nil {
			t.Fatalf("BlobInUse: %v", err)
		}
		return ok
	}
	if !inUse(sha256Hex("app v1")) || inUse(sha256Hex("never stored")) {
		t.Errorf("BlobInUse: app v1 %v, an unknown digest %v; want true, false",
			inUse(sha256Hex("app v1")), inUse(sha256Hex("never stored")))
	}

	// Only bin/app of attempt 1 expires (the others never do).
	if n, err := s.DeleteExpiredArtifacts(b.ctx, expires.Add(-time.Second)); err != nil || n != 0 {
		t.Errorf("DeleteExpiredArtifacts before the expiry = %d, %v; want 0", n, err)
	}
	if n, err := s.DeleteExpiredArtifacts(b.ctx, expires); err != nil || n != 1 {
		t.Errorf("DeleteExpiredArtifacts at the expiry = %d, %v; want 1", n, err)
	}
	if _, err := s.GetArtifact(b.ctx, a.ID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetArtifact of an expired artifact: %v, want ErrNotFound", err)
	}
	if got := list(); len(got) != 2 || got["bin/app@1"] != nil {
		t.Errorf("ListArtifacts after expiry = %v, want report.xml@1 and bin/app@2", got)
	}
	// The other run's record still names app v1's digest.
	if !inUse(sha256Hex("app v1")) {
		t.Errorf("app v1's digest is not in use after one of its two records expired")
	}
}

func testLogChunks(t *testing.T, h Harness) {
	s, b := setup(t, h)
	_, jobs := b.create(diamondYAML)
	job := jobs[0].ID
	chunk := func(attempt int, first, last int64, data string) *store.LogChunk {
		return &store.LogChunk{JobID: job, Attempt: attempt, FirstSeq: first, LastSeq: last, Bytes: int64(len(data)), Data: []byte(data)}
	}
	add := func(c *store.LogChunk) {
		t.Helper()
		if err := s.AppendLogChunk(b.ctx, c); err != nil {
			t.Fatalf("AppendLogChunk(seqs %d-%d): %v", c.FirstSeq, c.LastSeq, err)
		}
	}
	list := func(attempt int, after int64, max int) []string {
		t.Helper()
		cs, err := s.ListLogChunks(b.ctx, job, attempt, after, max)
		if err != nil {
			t.Fatalf("ListLogChunks: %v", err)
		}
		var out []string
		for _, c := range cs {
			if c.JobID != job || c.Attempt != attempt {
				t.Errorf("chunk of job %s attempt %d in the list of job %s attempt %d", c.JobID, c.Attempt, job, attempt)
			}
			out = append(out, fmt.Sprintf("%d-%d %d %s", c.FirstSeq, c.LastSeq, c.Bytes, c.Data))
		}
		return out
	}
	last := func(attempt int) (int64, int64) {
		t.Helper()
		seq, n, err := s.LastLogSeq(b.ctx, job, attempt)
		if err != nil {
			t.Fatalf("LastLogSeq: %v", err)
		}
		return seq, n
	}
	if got := list(1, 0, 10); len(got) != 0 {
		t.Fatalf("%d chunks before any was added", len(got))
	}
	if seq, n := last(1); seq != 0 || n != 0 {
		t.Fatalf("LastLogSeq of an empty log = %d, %d bytes; want 0, 0", seq, n)
	}

	// A log must start at 1 and continue without gaps or overlaps.
	for _, c := range []*store.LogChunk{chunk(1, 2, 3, "bc"), chunk(1, 0, 3, "abc")} {
		if err := s.AppendLogChunk(b.ctx, c); err == nil {
			t.Errorf("AppendLogChunk(seqs %d-%d) on an empty log succeeded", c.FirstSeq, c.LastSeq)
		}
	}
	add(chunk(1, 1, 3, "abc"))
	add(chunk(2, 1, 1, "x"))
	add(&store.LogChunk{JobID: jobs[1].ID, Attempt: 1, FirstSeq: 1, LastSeq: 9, Bytes: 9, Data: []byte("other job")})
	b.clk.Advance(time.Hour)
	add(chunk(1, 4, 5, "de"))
	for _, c := range []*store.LogChunk{chunk(1, 4, 5, "de"), chunk(1, 1, 3, "abc"), chunk(1, 7, 8, "gh"), chunk(1, 5, 6, "ef")} {
		if err := s.AppendLogChunk(b.ctx, c); !errors.Is(err, store.ErrConflict) {
			t.Errorf("AppendLogChunk(seqs %d-%d) after 1-5 = %v, want ErrConflict", c.FirstSeq, c.LastSeq, err)
		}
	}

	if got, want := list(1, 0, 10), []string{"1-3 3 abc", "4-5 2 de"}; !slices.Equal(got, want) {
		t.Errorf("ListLogChunks(after 0) = %q, want %q", got, want)
	}
	if got, want := list(1, 3, 10), []string{"4-5 2 de"}; !slices.Equal(got, want) {
		t.Errorf("ListLogChunks(after 3) = %q, want %q", got, want)
	}
	if got, want := list(1, 2, 1), []string{"1-3 3 abc"}; !slices.Equal(got, want) {
		t.Errorf("ListLogChunks(after 2, max 1) = %q, want %q", got, want)
	}
	if got := list(1, 5, 10); len(got) != 0 {
		t.Errorf("ListLogChunks(after the end) = %q, want none", got)
	}
	if seq, n := last(1); seq != 5 || n != 5 {
		t.Errorf("LastLogSeq = %d, %d bytes; want 5, 5", seq, n)
	}
	if got, want := list(2, 0, 10), []string{"1-1 1 x"}; !slices.Equal(got, want) {
		t.Errorf("attempt 2's chunks = %q, want %q", got, want)
	}

	// Compaction swaps the chunks for fewer, larger ones.
	if err := s.ReplaceLogChunks(b.ctx, job, 1, []*store.LogChunk{chunk(1, 1, 5, "abcde")}); err != nil {
		t.Fatalf("ReplaceLogChunks: %v", err)
	}
	if got, want := list(1, 4, 10), []string{"1-5 5 abcde"}; !slices.Equal(got, want) {
		t.Errorf("after compaction ListLogChunks(after 4) = %q, want %q", got, want)
	}
	// A finished log may move to the blob store: its chunk names the blob, which is in
	// use while the chunk is.
	digest := sha256Hex("abcde")
	blobbed := &store.LogChunk{JobID: job, Attempt: 1, FirstSeq: 1, LastSeq: 5, Bytes: 5, Location: store.LogBlobLocation(digest)}
	if err := s.ReplaceLogChunks(b.ctx, job, 1, []*store.LogChunk{blobbed}); err != nil {
		t.Fatalf("ReplaceLogChunks into the blob store: %v", err)
	}
	if cs, err := s.ListLogChunks(b.ctx, job, 1, 0, 10); err != nil || len(cs) != 1 || cs[0].Location != blobbed.Location || len(cs[0].Data) != 0 {
		t.Errorf("chunks after moving to the blob store = %+v, %v; want one naming the blob, without data", cs, err)
	}
	if used, err := s.BlobInUse(b.ctx, digest); err != nil || !used {
		t.Errorf("BlobInUse of a log chunk's blob = %v, %v; want true", used, err)
	}
	add(chunk(1, 6, 6, "f"))
	if seq, n := last(1); seq != 6 || n != 6 {
		t.Errorf("LastLogSeq after compaction and one more = %d, %d bytes; want 6, 6", seq, n)
	}

	// Retention: the chunks created before the cut go, the rest stay.
	n, err := s.DeleteLogChunksBefore(b.ctx, b.clk.Now())
	if err != nil {
		t.Fatalf("DeleteLogChunksBefore: %v", err)
	}
	if n != 2 {
		t.Errorf("DeleteLogChunksBefore deleted %d chunks, want 2 (attempt 2's and the other job's)", n)
	}
	if got := list(2, 0, 10); len(got) != 0 {
		t.Errorf("attempt 2 still has %q after retention", got)
	}
	if got := list(1, 0, 10); len(got) != 2 {
		t.Errorf("attempt 1 has %q after retention, want its two recent chunks", got)
	}
	if _, err := s.DeleteLogChunksBefore(b.ctx, b.clk.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if used, err := s.BlobInUse(b.ctx, digest); err != nil || used {
		t.Errorf("BlobInUse after the chunk naming it went = %v, %v; want false", used, err)
	}
}

func testOutbox(t *testing.T, h Harness) {
	s, b := setup(t, h)
	payloads := map[string][]byte{}
	for i := range 3 {
		p := []byte(fmt.Sprintf(`{"run": %d}`, i))
		if err := s.EnqueueOutbox(b.ctx, "run.finished", p); err != nil {
			t.Fatalf("EnqueueOutbox: %v", err)
		}
		payloads[string(p)] = p
	}
	claim := func(max int, retryIn time.Duration) []*store.OutboxMessage {
		t.Helper()
		ms, err := s.ClaimOutbox(b.ctx, max, retryIn)
		if err != nil {
			t.Fatalf("ClaimOutbox: %v", err)
		}
		if len(ms) > max {
			t.Fatalf("ClaimOutbox(%d) returned %d messages", max, len(ms))
		}
		return ms
	}

	first := claim(10, 30*time.Second)
	if len(first) != 3 {
		t.Fatalf("first ClaimOutbox returned %d messages, want 3", len(first))
	}
	attempts := map[uuid.UUID]int{}
	for _, m := range first {
		if m.ID == uuid.Nil || m.Topic != "run.finished" || !bytes.Equal(m.Payload, payloads[string(m.Payload)]) {
			t.Errorf("claimed message %+v does not match what was enqueued", m)
		}
		if !m.DeliveredAt.IsZero() {
			t.Errorf("undelivered message has DeliveredAt %v", m.DeliveredAt)
		}
		wantTime(t, "CreatedAt", m.CreatedAt, epoch)
		attempts[m.ID] = m.Attempts
	}
	if ms := claim(10, 30*time.Second); len(ms) != 0 {
		t.Fatalf("an immediate second ClaimOutbox returned %d messages, want none (hidden for retryIn)", len(ms))
	}
	b.clk.Advance(29 * time.Second)
	if ms := claim(10, 30*time.Second); len(ms) != 0 {
		t.Fatalf("ClaimOutbox before retryIn passed returned %d messages", len(ms))
	}
	b.clk.Advance(2 * time.Second)
	second := claim(10, 30*time.Second)
	if len(second) != 3 {
		t.Fatalf("ClaimOutbox after retryIn returned %d messages, want 3", len(second))
	}
	for _, m := range second {
		if want := attempts[m.ID] + 1; m.Attempts != want {
			t.Errorf("message %s: Attempts %d on its second claim, want %d", m.ID, m.Attempts, want)
		}
	}

	if err := s.MarkDelivered(b.ctx, second[0].ID); err != nil {
		t.Fatalf("MarkDelivered: %v", err)
	}
	b.clk.Advance(31 * time.Second)
	one := claim(1, time.Minute)
	if len(one) != 1 || one[0].ID == second[0].ID {
		t.Fatalf("ClaimOutbox(1) after a delivery returned %d messages (a delivered one: %v)", len(one), len(one) == 1 && one[0].ID == second[0].ID)
	}
	rest := claim(10, time.Minute)
	if len(rest) != 1 || rest[0].ID == second[0].ID || rest[0].ID == one[0].ID {
		t.Fatalf("the last ClaimOutbox returned %d messages, want the one left", len(rest))
	}
	for _, m := range append(one, rest...) {
		if err := s.MarkDelivered(b.ctx, m.ID); err != nil {
			t.Fatalf("MarkDelivered: %v", err)
		}
	}
	b.clk.Advance(time.Hour)
	if ms := claim(10, time.Minute); len(ms) != 0 {
		t.Fatalf("ClaimOutbox returned %d delivered messages", len(ms))
	}
}

func testOutboxConcurrent(t *testing.T, h Harness) {
	s, b := setup(t, h)
	const messages = 50
	for i := range messages {
		if err := s.EnqueueOutbox(b.ctx, "t", []byte(fmt.Sprint(i))); err != nil {
			t.Fatalf("EnqueueOutbox: %v", err)
		}
	}
	var (
		mu   sync.Mutex
		seen = map[uuid.UUID]int{}
		wg   sync.WaitGroup
	)
	start := make(chan struct{})
	for range 8 {
		wg.Go(func() {
			<-start
			for {
				ms, err := s.ClaimOutbox(b.ctx, 5, time.Hour)
				if err != nil {
					t.Errorf("ClaimOutbox: %v", err)
					return
				}
				if len(ms) == 0 {
					return
				}
				mu.Lock()
				for _, m := range ms {
					seen[m.ID]++
				}
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	if len(seen) != messages {
		t.Errorf("claimed %d distinct messages, want %d", len(seen), messages)
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("message %s claimed %d times within retryIn", id, n)
		}
	}
}

// testWriteNotifier: a write that queues nothing and cancels nothing (a claim, a job's
// end that leaves nothing to run) still wakes whoever waits for writes, as one that
// queues a job does.
func testWriteNotifier(t *testing.T, h Harness) {
	s, b := setup(t, h)
	wake, stop := s.WaitForWrites()
	defer stop()
	drain(wake)
	b.create(singleJob)
	waitSignal(t, "CreateRun", wake)
	drain(wake)
	c := b.claimOne()
	waitSignal(t, "a claim", wake)
	drain(wake)
	b.complete(c, store.JobSuccess)
	waitSignal(t, "the job's end", wake)
}

func testNotifier(t *testing.T, h Harness) {
	const chain = `
name: chain
jobs:
  first:
    retry: { max_attempts: 2, backoff: 1s, max_backoff: 1s, on: [failure, lost] }
    steps: [ { run: "true" } ]
  second:
    needs: [first]
    steps: [ { run: "true" } ]
`
	tests := []struct {
		name string
		// prepare runs before listening; trigger must wake the listener.
		prepare func(b *bundle) *store.Claim
		trigger func(b *bundle, c *store.Claim)
	}{
		{"CreateRun", func(b *bundle) *store.Claim { return nil }, func(b *bundle, _ *store.Claim) {
			b.create(chain)
		}},
		{"DAG advancement", func(b *bundle) *store.Claim {
			b.create(chain)
			return b.claimOne()
		}, func(b *bundle, c *store.Claim) {
			b.complete(c, store.JobSuccess)
		}},
		{"PromoteRetries", func(b *bundle) *store.Claim {
			b.create(chain)
			b.complete(b.claimOne(), store.JobFailed)
			return nil
		}, func(b *bundle, _ *store.Claim) {
			b.clk.Advance(2 * time.Second)
			if n := b.promote(); n != 1 {
				b.t.Fatalf("promoted %d jobs, want 1", n)
			}
		}},
		{"ReapExpiredLeases", func(b *bundle) *store.Claim {
			b.create(chain)
			return b.claimOne()
		}, func(b *bundle, _ *store.Claim) {
			b.clk.Advance(leaseTTL + time.Second)
			if n := b.reap(); n != 1 {
				b.t.Fatalf("reaped %d jobs, want 1", n)
			}
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, b := setup(t, h)
			c := tc.prepare(b)
			wake, stop := s.WaitForJobs()
			defer stop()
			other, stopOther := s.WaitForJobs()
			defer stopOther()
			drain(wake)
			drain(other)
			tc.trigger(b, c)
			waitSignal(t, tc.name, wake)
			waitSignal(t, tc.name+", second listener", other)
		})
	}

	t.Run("stopped listener", func(t *testing.T) {
		t.Parallel()
		s, b := setup(t, h)
		_, stop := s.WaitForJobs()
		stop()
		stop() // stopping twice is harmless
		// Wake-ups after a listener stopped must neither block nor panic.
		for range 3 {
			b.create(singleJob)
		}
		wake, stop2 := s.WaitForJobs()
		defer stop2()
		drain(wake)
		b.create(singleJob)
		waitSignal(t, "a listener after another one stopped", wake)
	})
}
