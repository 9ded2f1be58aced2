package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// mountTmpfs mounts a tmpfs of size (such as "2m") on a directory of the test's and
// unmounts it when the test ends. It needs root, which the test suite runs as.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a %s tmpfs on %s (the test needs root): %v: %s", size, dir, err, out)
	}
	// Registered after the processes the test starts on it: cleanups run last-in
	// first-out, so they have stopped by then.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// fillDisk writes a file in dir until the file system has no space left, and returns
// its path.
func fillDisk(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "filler")
	// Appending, so that a second call takes back what the server freed meanwhile.
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	for {
		if _, err := f.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			return p
		}
	}
}

// apiAnswer is an answer's status, error code and Retry-After.
type apiAnswer struct {
	status     int
	code, body string
	retryAfter string
}

func call(t *testing.T, method, url, body string) apiAnswer {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/yaml")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var e struct{ Error struct{ Code string } }
	_ = json.Unmarshal(raw, &e)
	return apiAnswer{status: res.StatusCode, code: e.Error.Code, body: string(raw), retryAfter: res.Header.Get("Retry-After")}
}

// TestServerDiskFull: a coordinator whose data directory fills up answers writes 503
// storage_full (not 500) and reports not ready, while a job running on a worker keeps
// its log and result waiting on the worker; once space is freed it is ready again,
// takes new runs, and nothing acknowledged before or during the outage is lost.
func TestServerDiskFull(t *testing.T) {
	t.Parallel()
	data := mountTmpfs(t, "2m")
	// A long lease: heartbeats fail while the disk is full, and the worker must not
	// give its job up meanwhile.
	srv := startServerProcess(t, "sqlite://"+filepath.Join(data, "gantry.db"), "--lease-ttl", "60s", "--heartbeat-every", "2s")
	base := srv.base

	const quick = "name: quick\njobs:\n  a: {steps: [{run: 'echo a'}]}\n  b: {needs: [a], steps: [{run: 'echo b'}]}\n"
	before := submitRun(t, base, quick)

	// A job that prints while the disk fills; it waits for a file the test makes once
	// the disk is full, so that its last lines and its result meet a full disk. After
	// them it prints 64 KiB more: a few short lines could still fit in the free tail of
	// the log file's last block, and so meet no full disk at all.
	gate := filepath.Join(t.TempDir(), "gate")
	slow := submitRun(t, base, fmt.Sprintf(
		"name: slow\njobs:\n  talk:\n    steps:\n      - run: 'for i in $(seq 1 5); do echo early $i; done; while [ ! -e %s ]; do sleep 0.05; done; for i in $(seq 1 5); do echo late $i; done; head -c 65536 /dev/zero | tr \\\\0 x | fold -w 1024'\n", gate))
	startChild(t, []string{"worker", "--server", base, "--max-jobs", "2", "--work-dir", t.TempDir()})
	waitRun(t, base, before.ID, statusIs("success"))
	waitRun(t, base, slow.ID, statusIs("running"))

	filler := fillDisk(t, data)
	if err := os.WriteFile(gate, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a := call(t, http.MethodPost, base+"/api/v1/runs", quick)
	if a.status != http.StatusServiceUnavailable || a.code != "storage_full" || a.retryAfter == "" {
		t.Fatalf("submit on a full disk: %d %s (Retry-After %q), want 503 storage_full with Retry-After", a.status, a.body, a.retryAfter)
	}
	// The failed write may have given back a little space (a rolled-back journal), enough
	// for readyz's probe; the disk is to be full when readyz looks.
	fillDisk(t, data)
	if r := call(t, http.MethodGet, base+"/readyz", ""); r.status != http.StatusServiceUnavailable || r.code != "storage_full" {
		t.Fatalf("readyz on a full disk: %d %s, want 503 storage_full", r.status, r.body)
	}
	// Reads still work.
	if r := call(t, http.MethodGet, base+"/api/v1/runs/"+before.ID, ""); r.status != http.StatusOK {
		t.Fatalf("read a run on a full disk: %d %s", r.status, r.body)
	}
	// The job's late lines, or its result, meet the full disk before space comes back.
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(srv.stderr.String(), `"msg":"write failed: storage full","action":"append logs"`) &&
		!strings.Contains(srv.stderr.String(), `"msg":"write failed: storage full","action":"complete job"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the worker's writes did not meet the full disk:\n%s", srv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the server's log
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(20 * time.Second)
	for {
		r := call(t, http.MethodGet, base+"/readyz", "")
		if r.status == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("readyz after space was freed: %d %s", r.status, r.body)
		}
		time.Sleep(50 * time.Millisecond) // polling the probe, which runs at most every second
	}
	after := submitRun(t, base, quick)
	waitRun(t, base, after.ID, statusIs("success"))

	// The outage lost nothing: the first run is as it was, and the job that ran through
	// it finished with every line it printed, once each.
	if r := waitRun(t, base, before.ID, statusIs("success")); len(r.Jobs) != 2 {
		t.Errorf("the run from before the outage has %d jobs, want 2", len(r.Jobs))
	}
	r := waitRun(t, base, slow.ID, func(r runDetails) bool { return runTerminal(r.Status) })
	if r.Status != "success" || len(r.Jobs) != 1 {
		t.Fatalf("the job running through the outage ended %s (%+v)", r.Status, r.Jobs)
	}
	log := call(t, http.MethodGet, base+"/api/v1/jobs/"+r.Jobs[0].ID+"/logs", "")
	for i := 1; i <= 5; i++ {
		for _, l := range []string{fmt.Sprintf("early %d", i), fmt.Sprintf("late %d", i)} {
			if n := countLines(log.body, l); n != 1 {
				t.Errorf("the log has %q %d times, want once:\n%s", l, n, log.body)
			}
		}
	}
}

// TestServerBlobDiskFull: with the blob directory on a disk of its own that fills up, an
// artifact upload answers 503 storage_full, the blob store logs it, and /readyz reports
// not ready; once space is freed, the worker's retry lands and the artifact is whole.
func TestServerBlobDiskFull(t *testing.T) {
	t.Parallel()
	blobs := mountTmpfs(t, "1m")
	srv := startServerProcess(t, "sqlite://"+filepath.Join(t.TempDir(), "gantry.db"), "--blobs", "file://"+blobs)
	filler := fillDisk(t, blobs)

	run := submitRun(t, srv.base, "name: art\njobs:\n  a:\n    steps: [{run: 'seq 1 20000 > out.txt'}]\n    artifacts: {paths: [out.txt]}\n")
	startChild(t, []string{"worker", "--server", srv.base, "--work-dir", t.TempDir()})
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(srv.stderr.String(), `"msg":"blob upload failed: disk full"`) {
		if time.Now().After(deadline) {
			t.Fatalf("the blob store did not log a full disk:\n%s", srv.stderr.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the server's log
	}
	if r := call(t, http.MethodGet, srv.base+"/readyz", ""); r.status != http.StatusServiceUnavailable || r.code != "storage_full" {
		t.Fatalf("readyz with the blob disk full: %d %s, want 503 storage_full", r.status, r.body)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if r := waitRun(t, srv.base, run.ID, func(r runDetails) bool { return runTerminal(r.Status) }); r.Status != "success" {
		t.Fatalf("run %s", r.Status)
	}
	var arts []struct {
		ID, Name, State string
		Size            int64
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		var r runDetails
		getJSON(t, http.DefaultClient, srv.base+"/api/v1/runs/"+run.ID, &r)
		getJSON(t, http.DefaultClient, srv.base+"/api/v1/jobs/"+r.Jobs[0].ID+"/artifacts", &arts)
		if len(arts) == 1 && arts[0].State == "stored" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the artifact was not stored after space came back: %+v", arts)
		}
		time.Sleep(50 * time.Millisecond) // polling for the worker's retry
	}
	got := call(t, http.MethodGet, srv.base+"/api/v1/artifacts/"+arts[0].ID, "")
	want, _ := exec.Command("seq", "1", "20000").Output()
	if got.status != http.StatusOK || got.body != string(want) {
		t.Fatalf("download: %d, %d bytes, want %d bytes", got.status, len(got.body), len(want))
	}
	if r := call(t, http.MethodGet, srv.base+"/readyz", ""); r.status != http.StatusOK {
		t.Errorf("readyz once the artifact landed: %d %s", r.status, r.body)
	}
}
