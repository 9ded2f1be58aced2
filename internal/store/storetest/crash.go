package storetest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

var crashTests = []test{
	{"AcknowledgedWritesSurviveKill", testCrash},
}

// crashEnv names the variable that turns the test binary into the crash test's child; its
// value is the data source to write to.
const crashEnv = "GANTRY_STORETEST_CRASH_DSN"

// ackPrefix starts every line the child prints for an acknowledged write, so that other
// output (a driver's logging, say) is ignored.
const ackPrefix = "ack "

const (
	// crashAcks is how many acknowledgements the parent reads before it kills the child.
	crashAcks = 200
	// crashWriters is how many goroutines of the child write at once, so that the kill
	// lands in the middle of several transactions.
	crashWriters = 4
	// crashWait bounds how long the parent waits for the acknowledgements: a failure
	// deadline, not a pause.
	crashWait = 60 * time.Second
)

// crashYAML is what the child creates: a chain, so that an acknowledged completion of
// the first job also promises that the second one was queued.
const crashYAML = `
name: crash
jobs:
  first:
    steps: [ { run: "true" } ]
  second:
    needs: [first]
    steps: [ { run: "true" } ]
`

// CrashChild must be called first thing in the driver test package's TestMain. When the
// process was started by the crash test it opens the store on the data source the test
// gave it, using the wall clock, and performs acknowledged writes until it is killed,
// never returning; otherwise it returns at once.
//
// Every acknowledgement is one line on stdout, written after the store call returned:
//
//	ack created <run id> <first job id> <second job id>
//	ack claimed <job id>
//	ack completed <job id>
func CrashChild(open func(ctx context.Context, dsn string, clk clock.Clock) (store.Store, error)) {
	dsn := os.Getenv(crashEnv)
	if dsn == "" {
		return
	}
	ctx := context.Background()
	die := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "storetest crash child: "+format+"\n", args...)
		os.Exit(3)
	}
	s, err := open(ctx, dsn, clock.Real{})
	if err != nil {
		die("open store: %v", err)
	}
	plan, err := pipeline.Compile([]byte(crashYAML), pipeline.Options{})
	if err != nil {
		die("compile: %v", err)
	}
	var mu sync.Mutex
	ack := func(format string, args ...any) {
		// One write per line, under a lock: a line is either whole on the pipe or absent.
		line := fmt.Sprintf(ackPrefix+format+"\n", args...)
		mu.Lock()
		defer mu.Unlock()
		if _, err := os.Stdout.WriteString(line); err != nil {
			die("write ack: %v", err)
		}
	}
	for w := range crashWriters {
		go func() {
			for i := 0; ; i++ {
				run, jobs, _, err := s.CreateRun(ctx, store.CreateRunParams{
					Project:        "crash",
					IdempotencyKey: fmt.Sprintf("writer-%d-%d", w, i),
					Definition:     []byte(crashYAML),
					Plan:           plan,
				})
				if err != nil {
					die("writer %d: CreateRun: %v", w, err)
				}
				if len(jobs) != 2 {
					die("writer %d: CreateRun returned %d jobs", w, len(jobs))
				}
				ack("created %s %s %s", run.ID, jobs[0].ID, jobs[1].ID)

				claims, err := s.Claim(ctx, store.ClaimParams{
					WorkerID: fmt.Sprintf("crash-writer-%d", w), Max: 2, LeaseTTL: time.Hour, TimeoutGrace: time.Minute,
				})
				if err != nil {
					die("writer %d: Claim: %v", w, err)
				}
				for _, c := range claims {
					ack("claimed %s", c.Job.ID)
				}
				for _, c := range claims {
					if _, err := s.CompleteJob(ctx, store.CompleteParams{
						LeaseRef: store.LeaseRef{JobID: c.Job.ID, Token: c.Lease.Token}, Status: store.JobSuccess, ExitCode: intPtr(0),
					}); err != nil {
						die("writer %d: CompleteJob: %v", w, err)
					}
					ack("completed %s", c.Job.ID)
				}
			}
		}()
	}
	select {}
}

// crashAck is one acknowledged write.
type crashAck struct {
	op  string
	ids []uuid.UUID
}

func parseAck(line string) (crashAck, bool, error) {
	rest, ok := strings.CutPrefix(line, ackPrefix)
	if !ok {
		return crashAck{}, false, nil
	}
	fields := strings.Fields(rest)
	if len(fields) < 2 {
		return crashAck{}, false, fmt.Errorf("malformed ack %q", line)
	}
	a := crashAck{op: fields[0]}
	for _, f := range fields[1:] {
		id, err := uuid.Parse(f)
		if err != nil {
			return crashAck{}, false, fmt.Errorf("ack %q: %w", line, err)
		}
		a.ids = append(a.ids, id)
	}
	want := map[string]int{"created": 3, "claimed": 1, "completed": 1}[a.op]
	if want == 0 || len(a.ids) != want {
		return crashAck{}, false, fmt.Errorf("malformed ack %q", line)
	}
	return a, true, nil
}

// testCrash runs CrashChild in a child process, kills it with SIGKILL in the middle of
// its writes, and checks that everything it acknowledged is in the store.
func testCrash(t *testing.T, h Harness) {
	if os.Getenv(crashEnv) != "" {
		t.Fatalf("%s is set in the parent test process", crashEnv)
	}
	dsn := h.NewDSN(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+dsn)
	var stderr bytes.Buffer
	cmd.Stderr = &limitedWriter{w: &stderr, n: 64 << 10}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("stdout pipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	var waitOnce sync.Once
	var waitErr error
	reap := func() error {
		waitOnce.Do(func() { waitErr = cmd.Wait() })
		return waitErr
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		reap()
	})

	// Only whole lines count: a line is written in one go after its store call returned.
	lines := make(chan string)
	readDone := make(chan error, 1)
	go func() {
		defer close(lines)
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				readDone <- err
				return
			}
			lines <- strings.TrimSuffix(line, "\n")
		}
	}()

	var acks []crashAck
	deadline := time.After(crashWait)
	killed := false
	for !killed {
		select {
		case line, ok := <-lines:
			if !ok {
				err := reap()
				t.Fatalf("the child stopped after %d acknowledgements (%v); did the driver's TestMain call storetest.CrashChild first?\nstderr:\n%s",
					len(acks), err, stderr.String())
			}
			a, isAck, err := parseAck(line)
			if err != nil {
				t.Fatal(err)
			}
			if isAck {
				acks = append(acks, a)
			}
			if len(acks) >= crashAcks {
				if err := cmd.Process.Kill(); err != nil {
					t.Fatalf("kill child: %v", err)
				}
				killed = true
			}
		case <-deadline:
			cmd.Process.Kill()
			reap() // stderr is complete, and safe to read, once Wait returns
			t.Fatalf("the child acknowledged %d writes in %v, want %d\nstderr:\n%s", len(acks), crashWait, crashAcks, stderr.String())
		}
	}
	// Lines already on the pipe when the child died were acknowledged too.
	for line := range lines {
		if a, isAck, err := parseAck(line); err == nil && isAck {
			acks = append(acks, a)
		}
	}
	if err := <-readDone; err != nil {
		t.Fatalf("read child's stdout: %v", err)
	}
	reap()

	ctx := t.Context()
	s, err := h.Open(ctx, dsn, clock.Real{})
	if err != nil {
		t.Fatalf("reopen the store after the crash: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})

	second := map[uuid.UUID]uuid.UUID{} // first job -> second job of its run
	var created, claimed, completed int
	for _, a := range acks {
		switch a.op {
		case "created":
			created++
			runID, firstID, secondID := a.ids[0], a.ids[1], a.ids[2]
			second[firstID] = secondID
			run, err := s.GetRun(ctx, runID)
			if err != nil {
				t.Errorf("acknowledged run %s: GetRun: %v", runID, err)
				continue
			}
			if run.JobsTotal != 2 {
				t.Errorf("acknowledged run %s has JobsTotal %d, want 2", runID, run.JobsTotal)
			}
			jobs, err := s.ListJobs(ctx, runID)
			if err != nil {
				t.Errorf("acknowledged run %s: ListJobs: %v", runID, err)
				continue
			}
			if len(jobs) != 2 || jobs[0].ID != firstID || jobs[1].ID != secondID {
				t.Errorf("acknowledged run %s has jobs %v, want [%s %s]", runID, jobIDs(jobs), firstID, secondID)
			}
			for _, j := range jobs {
				if steps, err := s.ListSteps(ctx, j.ID); err != nil || len(steps) != 1 {
					t.Errorf("job %s of acknowledged run %s: %d steps, %v; want 1", j.ID, runID, len(steps), err)
				}
			}
		case "claimed":
			claimed++
			j, err := s.GetJob(ctx, a.ids[0])
			if err != nil {
				t.Errorf("acknowledged claim of %s: GetJob: %v", a.ids[0], err)
				continue
			}
			// Nothing reaps here (the leases last an hour): a claimed job is still leased,
			// or finished when its completion landed too.
			if !j.Status.Leased() && !j.Status.Terminal() || j.Attempt < 1 {
				t.Errorf("acknowledged claim of %s was lost: the job is %s at attempt %d", a.ids[0], j.Status, j.Attempt)
			}
		case "completed":
			completed++
			j, err := s.GetJob(ctx, a.ids[0])
			if err != nil {
				t.Errorf("acknowledged completion of %s: GetJob: %v", a.ids[0], err)
				continue
			}
			if j.Status != store.JobSuccess {
				t.Errorf("acknowledged completion of %s: the job is %s, want success", a.ids[0], j.Status)
			}
			if next, ok := second[j.ID]; ok {
				n, err := s.GetJob(ctx, next)
				if err != nil {
					t.Errorf("job after %s: GetJob: %v", j.ID, err)
				} else if n.Status == store.JobPending {
					t.Errorf("acknowledged completion of %s, but the job that needs it is still pending", j.ID)
				}
			}
		}
	}
	t.Logf("checked %d acknowledgements: %d runs created, %d claims, %d completions", len(acks), created, claimed, completed)
	if created == 0 || completed == 0 {
		t.Errorf("the child acknowledged %d runs and %d completions; want some of each", created, completed)
	}

	// The store keeps working after the crash.
	plan := compile(t, singleJob)
	run, _, isNew, err := s.CreateRun(ctx, store.CreateRunParams{Project: "after-crash", Plan: plan})
	if err != nil || !isNew {
		t.Fatalf("CreateRun after the crash: created %v, %v", isNew, err)
	}
	if _, err := s.GetRun(ctx, run.ID); err != nil {
		t.Errorf("GetRun after the crash: %v", err)
	}
	cs, err := s.Claim(ctx, withClaimDefaults(store.ClaimParams{Max: 8}))
	if err != nil || len(cs) == 0 {
		t.Errorf("Claim after the crash: %d jobs, %v; want some", len(cs), err)
	}
}

// limitedWriter keeps at most n bytes and drops the rest, so a chatty child cannot fill
// the parent's memory.
type limitedWriter struct {
	w io.Writer
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		k := min(len(p), l.n)
		l.w.Write(p[:k])
		l.n -= k
	}
	return len(p), nil
}
