//go:build linux

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gantry-ci/gantry/internal/cli"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
)

// The partition's network: one /30 of the test's own, made inside namespaces the test
// makes, so no packet goes anywhere but between them.
const (
	partitionCoordIP  = "10.213.7.1"
	partitionWorkerIP = "10.213.7.2"
	partitionPrefix   = "/30"
	partitionAddr     = partitionCoordIP + ":7431"
	partitionTTL      = 4 * time.Second
	partitionGrace    = time.Second
)

// TestPartition cuts a worker off from its coordinator mid-step with a real network
// partition and checks that the job's two attempts never ran at once. The coordinator
// and a second worker live in one network namespace, the first worker in another, joined
// by a veth pair; taking the coordinator's end down makes the first worker's packets
// vanish, as a partition does. The job's step appends "attempt=N t=<ns>" to a ledger
// every 50ms: the first worker must kill its attempt before the coordinator gives the
// job to the second worker, so every line of attempt 1 comes before every line of
// attempt 2. The run succeeds, and the first attempt's processes are gone.
func TestPartition(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("the partition test makes network namespaces and needs root (CI and make test run as root)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Fatalf("the partition test needs ip (iproute2; make deps installs it): %v", err)
	}
	pn := newPartitionNet(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "gantry.db")
	admin := createToken(t, db, "admin")
	// The workers get their token in their arguments, which the harness passes in the
	// environment (GANTRY_CHAOS_ARGS), not on their command line.
	register := createToken(t, db, "register")

	coord := startInNS(t, pn.coordNS, "coordinator", []string{"server", "--addr", partitionAddr, "--db", "sqlite://" + db,
		"--auth", "on", "--lease-ttl", partitionTTL.String(), "--heartbeat-every", (partitionTTL / 4).String(),
		"--reap-every", "100ms", "--reap-grace", partitionGrace.String(), "--log-format", "json"}, nil)
	if _, err := coord.waitFor(listening, 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, coord.out.Tail(40))
	}
	api := &partitionAPI{t: t, token: admin, client: &http.Client{Timeout: 10 * time.Second,
		Transport: &http.Transport{DialContext: pn.dialCoord, DisableKeepAlives: true}}}

	workerArgs := func(name string) []string {
		return []string{"worker", "--server", "http://" + partitionAddr, "--name", name, "--labels", "partition", "--max-jobs", "2",
			"--work-dir", filepath.Join(dir, name), "--token", register, "--log-format", "json"}
	}
	for _, name := range []string{"w1", "w2"} {
		if err := os.MkdirAll(filepath.Join(dir, name), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	w1 := startInNS(t, pn.workerNS, "w1", workerArgs("w1"), nil)
	if _, err := w1.waitFor(registered, 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, w1.out.Tail(40))
	}

	ledger, pids := filepath.Join(dir, "ledger"), filepath.Join(dir, "pids")
	marker := "partition-" + randomHex(8)
	t.Cleanup(func() { sweepOrphans(t, "PARTITION_MARKER="+marker) })
	// Attempt 1 would write for 20s; the partition must end it long before.
	run, job := api.submit(fmt.Sprintf(`
name: partition
jobs:
  ledger:
    runs_on: [partition]
    env: {LEDGER: %q, PIDS: %q, PARTITION_MARKER: %q}
    steps:
      - run: |
          n=40
          if [ "$GANTRY_ATTEMPT" = 1 ]; then
            n=400
            echo $$ >> "$PIDS"
            sleep 300 &
            echo $! >> "$PIDS"
          fi
          i=0
          while [ $i -lt $n ]; do
            echo "attempt=$GANTRY_ATTEMPT t=$(date +%%s%%N)" >> "$LEDGER"
            sleep 0.05
            i=$((i+1))
          done
`, ledger, pids, marker))

	// Cut the link once attempt 1 is well under way.
	waitLedger(t, ledger, func(es []ledgerLine) bool { return countAttempt(es, 1) >= 5 }, "attempt 1 writing")
	stepPids := waitPidFile(t, pids, 2)
	cut := time.Now()
	ipCmd(t, "-n", pn.coordNS, "link", "set", pn.coordIf, "down")
	t.Logf("link cut at %s", cut.Format("15:04:05.000"))

	// The second worker is on the coordinator's side of the cut.
	w2 := startInNS(t, pn.coordNS, "w2", workerArgs("w2"), nil)
	if _, err := w2.waitFor(registered, 30*time.Second); err != nil {
		t.Fatalf("%v\n%s", err, w2.out.Tail(40))
	}
	status, attempt := api.waitRun(run, 90*time.Second)
	if status != "success" {
		t.Fatalf("run %s, want success\ncoordinator:\n%s\nw1:\n%s\nw2:\n%s", status, coord.out.Tail(30), w1.out.Tail(30), w2.out.Tail(30))
	}
	// The cut-off worker had a claim open when the link went down (it has a free slot);
	// the coordinator ends a claim within half a TTL, before the job is back in the
	// queue, so that claim cannot take it (docs/reliability.md).
	if attempt != 2 {
		t.Errorf("job succeeded at attempt %d, want 2: attempt 1 cut off, attempt 2 on the second worker", attempt)
	}

	// The ledger holds attempt 1's lines and the last attempt's, and no other.
	es, err := readLedgerLines(ledger)
	if err != nil {
		t.Fatal(err)
	}
	first, last := map[int]int64{}, map[int]int64{}
	for _, e := range es {
		if f, ok := first[e.attempt]; !ok || e.ns < f {
			first[e.attempt] = e.ns
		}
		last[e.attempt] = max(last[e.attempt], e.ns)
		if e.attempt != 1 && e.attempt != attempt {
			t.Errorf("a ledger line of attempt %d; want only attempt 1's and the last attempt's (%d)", e.attempt, attempt)
		}
	}
	if n := countAttempt(es, attempt); n != 40 {
		t.Fatalf("the last attempt (%d) wrote %d ledger lines, want 40", attempt, n)
	}
	if n := countAttempt(es, 1); n == 0 || n >= 400 {
		t.Fatalf("attempt 1 wrote %d ledger lines; want some, and not all 400: it must be cut short", n)
	}
	t.Logf("attempt 1: %d lines, its last %s after the cut; attempt %d began %s after it",
		countAttempt(es, 1), time.Unix(0, last[1]).Sub(cut).Round(time.Millisecond), attempt,
		time.Duration(first[attempt]-last[1]).Round(time.Millisecond))
	if last[1] >= first[attempt] {
		t.Errorf("the attempts overlapped: attempt 1 wrote until %s, attempt %d began at %s",
			time.Unix(0, last[1]).Format("15:04:05.000000"), attempt, time.Unix(0, first[attempt]).Format("15:04:05.000000"))
	}
	// Attempt 1's processes died when the worker fenced itself, before the coordinator's
	// reap; by the end of the run they are long gone.
	for _, pid := range stepPids {
		if procAlive(pid) {
			t.Errorf("process %d of the cut-off attempt is still running", pid)
		}
	}
	if !loggedFence(w1.out.String(), job) {
		t.Errorf("the cut-off worker did not log that it fenced the job:\n%s", w1.out.Tail(30))
	}
}

// partitionNet is two network namespaces joined by a veth pair.
type partitionNet struct {
	coordNS, workerNS string
	coordIf, workerIf string
}

// newPartitionNet makes the namespaces and the link, named uniquely for this run, and
// deletes them when the test ends (after the processes in them were killed: cleanups run
// last first).
func newPartitionNet(t *testing.T) *partitionNet {
	t.Helper()
	id := randomHex(3)
	n := &partitionNet{coordNS: "gantry-c-" + id, workerNS: "gantry-w-" + id, coordIf: "gc" + id, workerIf: "gw" + id}
	ipCmd(t, "netns", "add", n.coordNS)
	t.Cleanup(func() { ipCmdNoFail(t, "netns", "delete", n.coordNS) })
	ipCmd(t, "netns", "add", n.workerNS)
	t.Cleanup(func() { ipCmdNoFail(t, "netns", "delete", n.workerNS) })
	ipCmd(t, "link", "add", n.coordIf, "netns", n.coordNS, "type", "veth", "peer", "name", n.workerIf, "netns", n.workerNS)
	ipCmd(t, "-n", n.coordNS, "addr", "add", partitionCoordIP+partitionPrefix, "dev", n.coordIf)
	ipCmd(t, "-n", n.workerNS, "addr", "add", partitionWorkerIP+partitionPrefix, "dev", n.workerIf)
	for _, ns := range []string{n.coordNS, n.workerNS} {
		ipCmd(t, "-n", ns, "link", "set", "lo", "up")
	}
	ipCmd(t, "-n", n.coordNS, "link", "set", n.coordIf, "up")
	ipCmd(t, "-n", n.workerNS, "link", "set", n.workerIf, "up")
	return n
}

// dialCoord dials from inside the coordinator's namespace, where the test's own process
// is not: the socket is made on a thread moved into that namespace for the dial only,
// and keeps the namespace after the thread moves back.
func (n *partitionNet) dialCoord(ctx context.Context, network, addr string) (net.Conn, error) {
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		own, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("open own network namespace: %w", err)}
			return
		}
		defer own.Close()
		target, err := os.Open("/run/netns/" + n.coordNS)
		if err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("open network namespace %s: %w", n.coordNS, err)}
			return
		}
		defer target.Close()
		if err := setns(target); err != nil {
			runtime.UnlockOSThread()
			done <- result{err: fmt.Errorf("enter network namespace %s: %w", n.coordNS, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, addr)
		if rerr := setns(own); rerr != nil {
			// The thread stays locked and in the wrong namespace; it ends with this
			// goroutine instead of going back to the scheduler.
			if c != nil {
				_ = c.Close()
			}
			done <- result{err: fmt.Errorf("leave network namespace %s: %w", n.coordNS, rerr)}
			return
		}
		runtime.UnlockOSThread()
		done <- result{c, err}
	}()
	r := <-done
	return r.c, r.err
}

func setns(f *os.File) error { return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET) }

func ipCmd(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

func ipCmdNoFail(t *testing.T, args ...string) {
	if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
		t.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// startInNS runs `gantry <args>` in the network namespace ns, as startProc does outside.
func startInNS(t *testing.T, ns, name string, args, env []string) *proc {
	t.Helper()
	cmd := exec.Command("ip", "netns", "exec", ns, os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), childEnv+"=1", childArgsEnv+"="+strings.Join(args, "\n")), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &proc{name: name, cmd: cmd, out: &executortest.SyncBuffer{}, exited: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	p.started = time.Now()
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		if err := p.kill(); err != nil {
			t.Error(err)
		}
	})
	return p
}

// createToken makes a token of role in the database the coordinator will open, as
// `gantry token create` does, and returns its secret.
func createToken(t *testing.T, db, role string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	args := []string{"token", "create", "--db", "sqlite://" + db, "--role", role, "--name", "partition " + role}
	if code := cli.Run(t.Context(), args, strings.NewReader(""), &stdout, &stderr); code != 0 {
		t.Fatalf("gantry %s: exit %d: %s", strings.Join(args, " "), code, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// partitionAPI calls the coordinator's API from inside its namespace.
type partitionAPI struct {
	t      *testing.T
	token  string
	client *http.Client
}

func (a *partitionAPI) do(method, path, contentType string, body []byte, out any) {
	a.t.Helper()
	req, err := http.NewRequestWithContext(a.t.Context(), method, "http://"+partitionAddr+path, bytes.NewReader(body))
	if err != nil {
		a.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+a.token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := a.client.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	var buf bytes.Buffer
	if _, err := buf.ReadFrom(res.Body); err != nil {
		a.t.Fatalf("%s %s: read answer: %v", method, path, err)
	}
	if res.StatusCode >= 300 {
		a.t.Fatalf("%s %s: %s: %s", method, path, res.Status, buf.String())
	}
	if err := json.Unmarshal(buf.Bytes(), out); err != nil {
		a.t.Fatalf("%s %s: decode %q: %v", method, path, buf.String(), err)
	}
}

// submit submits a one-job run and returns its id and its job's.
func (a *partitionAPI) submit(yaml string) (string, string) {
	a.t.Helper()
	var run struct {
		ID   string `json:"id"`
		Jobs []struct {
			ID string `json:"id"`
		} `json:"jobs"`
	}
	a.do(http.MethodPost, "/api/v1/runs", "application/yaml", []byte(yaml), &run)
	if len(run.Jobs) != 1 {
		a.t.Fatalf("submitted run %s has %d jobs, want 1", run.ID, len(run.Jobs))
	}
	return run.ID, run.Jobs[0].ID
}

// waitRun polls the run until it ends and returns its status and its only job's attempt.
func (a *partitionAPI) waitRun(id string, within time.Duration) (string, int) {
	a.t.Helper()
	deadline := time.Now().Add(within)
	for {
		var run struct {
			Status string `json:"status"`
			Jobs   []struct {
				Attempt int `json:"attempt"`
			} `json:"jobs"`
		}
		a.do(http.MethodGet, "/api/v1/runs/"+id, "", nil, &run)
		switch run.Status {
		case "success", "failed", "cancelled":
			attempt := 0
			if len(run.Jobs) > 0 {
				attempt = run.Jobs[0].Attempt
			}
			return run.Status, attempt
		}
		if time.Now().After(deadline) {
			a.t.Fatalf("run %s still %s after %s", id, run.Status, within)
		}
		select {
		case <-time.After(100 * time.Millisecond):
		case <-a.t.Context().Done():
			a.t.Fatal(a.t.Context().Err())
		}
	}
}

// ledgerLine is one "attempt=N t=<unix ns>" line of the partition's ledger.
type ledgerLine struct {
	attempt int
	ns      int64
}

func readLedgerLines(path string) ([]ledgerLine, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []ledgerLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e ledgerLine
		if _, err := fmt.Sscanf(sc.Text(), "attempt=%d t=%d", &e.attempt, &e.ns); err != nil {
			return nil, fmt.Errorf("ledger line %q: %w", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

func countAttempt(es []ledgerLine, attempt int) int {
	n := 0
	for _, e := range es {
		if e.attempt == attempt {
			n++
		}
	}
	return n
}

// waitLedger polls the ledger until ok accepts it.
func waitLedger(t *testing.T, path string, ok func([]ledgerLine) bool, what string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		es, err := readLedgerLines(path)
		if err != nil {
			t.Fatal(err)
		}
		if ok(es) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the ledger never showed %s (%d lines)", what, len(es))
		}
		select {
		case <-time.After(20 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// waitPidFile waits until the file lists n pids, one a line, and returns them.
func waitPidFile(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		data, _ := os.ReadFile(path)
		var pids []int
		for _, f := range strings.Fields(string(data)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			pids = append(pids, pid)
		}
		if len(pids) >= n && bytes.HasSuffix(data, []byte("\n")) {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s lists %d pids after 30s, want %d", path, len(pids), n)
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// procAlive says whether the process exists and is not a zombie.
func procAlive(pid int) bool {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(data, ')')
	return i < 0 || i+2 >= len(data) || data[i+2] != 'Z'
}
