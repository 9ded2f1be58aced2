package logs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeCoordinator stores lines the way the coordinator does: each seq once, refusing a
// line that would leave a gap, and answering with the next seq it expects.
type fakeCoordinator struct {
	t       *testing.T
	mu      sync.Mutex
	stored  []Line // stored[i].Seq == i+1
	batches [][]Line
	// limit, when positive, is the number of lines stored before answering truncated.
	limit int
}

func (c *fakeCoordinator) store(lines []Line) (next int64, truncated bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.batches = append(c.batches, lines)
	for i, l := range lines {
		if i > 0 && l.Seq != lines[i-1].Seq+1 {
			c.t.Errorf("batch not contiguous: seq %d after %d", l.Seq, lines[i-1].Seq)
		}
	}
	if first := lines[0].Seq; first > int64(len(c.stored))+1 {
		c.t.Errorf("batch starts at seq %d but the coordinator expects %d: lines were skipped", first, len(c.stored)+1)
	}
	for _, l := range lines {
		switch {
		case c.limit > 0 && len(c.stored) >= c.limit:
			return int64(len(c.stored)) + 1, true
		case l.Seq == int64(len(c.stored))+1:
			c.stored = append(c.stored, l)
		case l.Seq <= int64(len(c.stored)):
			if c.stored[l.Seq-1] != l {
				c.t.Errorf("seq %d re-sent as %+v, first sent as %+v", l.Seq, l, c.stored[l.Seq-1])
			}
		}
	}
	return int64(len(c.stored)) + 1, false
}

func (c *fakeCoordinator) send(_ context.Context, lines []Line) (int64, bool, error) {
	next, truncated := c.store(lines)
	return next, truncated, nil
}

// checkStored asserts the coordinator holds exactly lines 1..n as made by makeLines.
func (c *fakeCoordinator) checkStored(t *testing.T, n int) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.stored) != n {
		t.Fatalf("coordinator stored %d lines, want %d", len(c.stored), n)
	}
	for i, l := range c.stored {
		if want := makeLine(int64(i + 1)); l != want {
			t.Fatalf("stored line %d = %+v, want %+v", i, l, want)
		}
	}
}

// outage is a fakeCoordinator that can be down: its sends then fail as a refused
// connection would.
type outage struct {
	c        *fakeCoordinator
	mu       sync.Mutex
	down     bool
	attempts int
}

func (o *outage) send(ctx context.Context, lines []Line) (int64, bool, error) {
	o.mu.Lock()
	isDown := o.down
	o.attempts++
	o.mu.Unlock()
	if isDown {
		return 0, false, errors.New("connection refused")
	}
	return o.c.send(ctx, lines)
}

func (o *outage) setDown(v bool) {
	o.mu.Lock()
	o.down = v
	o.mu.Unlock()
}

func (o *outage) sends() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.attempts
}

func (c *fakeCoordinator) batchCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.batches)
}

func makeLine(seq int64) Line {
	stream := Stdout
	if seq%3 == 0 {
		stream = Stderr
	}
	return Line{Seq: seq, TS: 1_700_000_000_000 + seq, Stream: stream, Text: fmt.Sprintf("line %d: %s", seq, strings.Repeat("x", int(seq%40)))}
}

func makeLines(from, n int64) []Line {
	lines := make([]Line, 0, n)
	for seq := from; seq < from+n; seq++ {
		lines = append(lines, makeLine(seq))
	}
	return lines
}

type shipperBundle struct {
	dir string
}

func setupShipper(t *testing.T, send SendFunc, opts ShipperOptions) (*Shipper, *shipperBundle) {
	t.Helper()
	b := &shipperBundle{dir: t.TempDir()}
	opts.Dir = b.dir
	if opts.MaxBackoff == 0 {
		opts.MaxBackoff = 20 * time.Millisecond
	}
	opts.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := NewShipper(send, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Abort)
	return s, b
}

// testWriter sends log output to t.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// spoolFiles lists the files in the spool directory.
func (b *shipperBundle) spoolFiles(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(b.dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// waitFor polls cond until it holds, failing the test after a generous deadline.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func closeShipper(t *testing.T, s *Shipper) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return s.Close(ctx)
}

func TestShipperBatchesRespectMaxBytes(t *testing.T) {
	t.Parallel()
	c := &fakeCoordinator{t: t}
	const maxBatch = 1024
	s, b := setupShipper(t, c.send, ShipperOptions{MaxBatchBytes: maxBatch})
	const n = 2000
	s.Add(makeLines(1, n/2))
	for seq := int64(n/2 + 1); seq <= n; seq += 10 {
		s.Add(makeLines(seq, 10))
	}
	waitFor(t, "every line acknowledged", func() bool { return s.Stats().Acked == n })
	if st := s.Stats(); st.SpoolBytes != 0 {
		t.Errorf("spool holds %d bytes after everything was acknowledged", st.SpoolBytes)
	}
	if err := closeShipper(t, s); err != nil {
		t.Fatal(err)
	}
	c.checkStored(t, n)
	for _, batch := range c.batches {
		size := 0
		for i := range batch {
			size += len(appendJSON(nil, &batch[i]))
		}
		if size > maxBatch {
			t.Errorf("batch of %d lines is %d bytes, over %d", len(batch), size, maxBatch)
		}
	}
	if len(c.batches) < n*40/maxBatch {
		t.Errorf("%d batches for %d lines: batches are not filled", len(c.batches), n)
	}
	if files := b.spoolFiles(t); len(files) != 0 {
		t.Errorf("spool files left after Close: %v", files)
	}
}

func TestShipperOversizedLineGoesAlone(t *testing.T) {
	t.Parallel()
	c := &fakeCoordinator{t: t}
	s, _ := setupShipper(t, c.send, ShipperOptions{MaxBatchBytes: 100})
	lines := makeLines(1, 3)
	lines[1].Text = strings.Repeat("long ", 100_000) // bigger than the spool reader's buffer
	s.Add(lines)
	if err := closeShipper(t, s); err != nil {
		t.Fatal(err)
	}
	if len(c.stored) != 3 || c.stored[1] != lines[1] {
		t.Fatalf("stored %d lines; the long one intact: %v", len(c.stored), len(c.stored) > 1 && c.stored[1] == lines[1])
	}
}

func TestShipperLinger(t *testing.T) {
	t.Parallel()
	c := &fakeCoordinator{t: t}
	s, _ := setupShipper(t, c.send, ShipperOptions{Linger: time.Hour, MaxBatchBytes: 1024})
	s.Add(makeLines(1, 1))
	// A full batch does not wait for the linger.
	s.Add(makeLines(2, 100))
	waitFor(t, "a full batch sent", func() bool { return s.Stats().Sent > 0 })
	// Close does not wait for the linger either.
	if err := closeShipper(t, s); err != nil {
		t.Fatal(err)
	}
	c.checkStored(t, 101)
}

// TestShipperUnreliableCoordinator fails sends at random, stores only part of some
// batches, and answers some with a stale next lower than what it stored, which makes the
// shipper re-send lines the coordinator has.
func TestShipperUnreliableCoordinator(t *testing.T) {
	t.Parallel()
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			c := &fakeCoordinator{t: t}
			var mu sync.Mutex
			rng := rand.New(rand.NewPCG(seed, 7))
			roll := func() float64 {
				mu.Lock()
				defer mu.Unlock()
				return rng.Float64()
			}
			resent := false
			send := func(ctx context.Context, lines []Line) (int64, bool, error) {
				if roll() < 0.3 {
					return 0, false, errors.New("connection reset")
				}
				if roll() < 0.2 && len(lines) > 1 {
					lines = lines[:len(lines)/2] // the coordinator stored only part
				}
				next, truncated := c.store(lines)
				if roll() < 0.2 {
					// A stale answer, as from a replica that lags behind.
					resent = true
					next = max(1, next-1-int64(roll()*50))
				}
				if roll() < 0.1 {
					return 0, false, errors.New("answer lost") // stored, but the worker does not know
				}
				return next, truncated, nil
			}
			s, b := setupShipper(t, send, ShipperOptions{MaxBatchBytes: 2048, MaxBackoff: time.Millisecond})
			const n = 5000
			for seq := int64(1); seq <= n; seq += 50 {
				s.Add(makeLines(seq, 50))
			}
			if err := closeShipper(t, s); err != nil {
				t.Fatal(err)
			}
			c.checkStored(t, n)
			st := s.Stats()
			if st.Added != n || st.Acked != n || st.Dropped != 0 {
				t.Errorf("stats %+v, want %d added and acknowledged, none dropped", st, n)
			}
			if !resent || st.Sent <= n {
				t.Errorf("nothing was re-sent (sent %d): the test did not exercise stale answers", st.Sent)
			}
			if files := b.spoolFiles(t); len(files) != 0 {
				t.Errorf("spool files left after Close: %v", files)
			}
		})
	}
}

// TestShipperSkipsStoredLines answers with a next beyond the batch, as when a batch whose
// answer was lost was stored; lines below it, spooled or added later, are never sent.
func TestShipperSkipsStoredLines(t *testing.T) {
	t.Parallel()
	c := &fakeCoordinator{t: t}
	c.stored = makeLines(1, 120)
	s, _ := setupShipper(t, c.send, ShipperOptions{MaxBatchBytes: 200})
	s.Add(makeLines(1, 50))
	waitFor(t, "first lines acknowledged", func() bool { return s.Stats().Acked == 50 })
	if n := c.batchCount(); n != 1 {
		t.Errorf("%d batches for lines the coordinator had, want 1", n)
	}
	s.Add(makeLines(51, 100))
	if err := closeShipper(t, s); err != nil {
		t.Fatal(err)
	}
	c.checkStored(t, 150)
	for _, batch := range c.batches[1:] {
		if batch[0].Seq < 121 {
			t.Errorf("batch starting at %d sent: the coordinator had it", batch[0].Seq)
		}
	}
	if st := s.Stats(); st.Acked != 150 || st.Dropped != 0 {
		t.Errorf("stats %+v, want 150 acknowledged", st)
	}
}

// TestShipperAddNeverBlocks blocks the send func and checks that Add still takes 200,000
// lines: the spool is on disk, so the job is never held up by the network.
func TestShipperAddNeverBlocks(t *testing.T) {
	t.Parallel()
	c := &fakeCoordinator{t: t}
	entered := make(chan struct{}, 1)
	release := make(chan struct{})
	send := func(ctx context.Context, lines []Line) (int64, bool, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
			return 0, false, ctx.Err()
		}
		return c.send(ctx, lines)
	}
	s, _ := setupShipper(t, send, ShipperOptions{SendTimeout: time.Hour})
	s.Add(makeLines(1, 1))
	<-entered // the sender is now stuck in send

	const n = 200_000
	added := make(chan struct{})
	go func() {
		defer close(added)
		for seq := int64(2); seq <= n; seq += 1000 {
			s.Add(makeLines(seq, min(1000, n-seq+1)))
		}
	}()
	select {
	case <-added:
	case <-time.After(2 * time.Minute):
		t.Fatal("Add did not return while send was blocked")
	}
	if st := s.Stats(); st.Added != n || st.Acked != 0 || st.SpoolBytes == 0 {
		t.Fatalf("while send is blocked: stats %+v", st)
	}
	close(release)
	if err := closeShipper(t, s); err != nil {
		t.Fatal(err)
	}
	c.checkStored(t, n)
}

// TestShipperOutage keeps the coordinator away while lines pile up in the spool, then
// brings it back.
func TestShipperOutage(t *testing.T) {
	t.Parallel()
	c := &fakeCoordinator{t: t}
	o := &outage{c: c, down: true}
	s, b := setupShipper(t, o.send, ShipperOptions{MaxBatchBytes: 4096, MaxBackoff: 5 * time.Millisecond})
	const n = 3000
	s.Add(makeLines(1, 1000))
	waitFor(t, "failed send attempts", func() bool { return o.sends() >= 3 })
	size1 := s.Stats().SpoolBytes
	s.Add(makeLines(1001, 2000))
	size2 := s.Stats().SpoolBytes
	if size1 == 0 || size2 <= size1 {
		t.Errorf("spool size %d then %d: it should grow during the outage", size1, size2)
	}
	files := b.spoolFiles(t)
	if len(files) != 1 {
		t.Fatalf("spool files %v, want one", files)
	}
	if fi, err := os.Stat(b.dir + "/" + files[0]); err != nil || fi.Size() != size2 {
		t.Errorf("spool file: %v, %v; want %d bytes", fi, err, size2)
	}
	if st := s.Stats(); st.Acked != 0 {
		t.Errorf("acked %d during the outage", st.Acked)
	}

	o.setDown(false)
	if err := closeShipper(t, s); err != nil {
		t.Fatal(err)
	}
	c.checkStored(t, n)
	if files := b.spoolFiles(t); len(files) != 0 {
		t.Errorf("spool files left after Close: %v", files)
	}
}

// TestShipperMemoryAndSpool sends lines that the Shipper holds in memory, then more
// than memory holds (during an outage, read back from the spool file), then again few.
func TestShipperMemoryAndSpool(t *testing.T) {
	t.Parallel()
	c := &fakeCoordinator{t: t}
	o := &outage{c: c}
	s, _ := setupShipper(t, o.send, ShipperOptions{MaxBatchBytes: 1024, MaxBackoff: 5 * time.Millisecond})
	s.Add(makeLines(1, 10))
	waitFor(t, "the first lines", func() bool { return s.Stats().Acked == 10 })
	o.setDown(true)
	for seq := int64(11); seq <= 1000; seq += 10 {
		s.Add(makeLines(seq, 10))
	}
	o.setDown(false)
	waitFor(t, "the lines of the outage", func() bool { return s.Stats().Acked == 1000 })
	for seq := int64(1001); seq <= 1100; seq++ {
		s.Add(makeLines(seq, 1))
	}
	if err := closeShipper(t, s); err != nil {
		t.Fatal(err)
	}
	c.checkStored(t, 1100)
}

func TestShipperCloseTimesOut(t *testing.T) {
	t.Parallel()
	send := func(ctx context.Context, lines []Line) (int64, bool, error) {
		return 0, false, errors.New("connection refused")
	}
	s, b := setupShipper(t, send, ShipperOptions{})
	s.Add(makeLines(1, 10))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := s.Close(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "10 of 10 lines not delivered") {
		t.Fatalf("Close = %v, want 10 of 10 lines not delivered and the deadline", err)
	}
	if files := b.spoolFiles(t); len(files) != 0 {
		t.Errorf("spool files left after Close: %v", files)
	}
	if st := s.Stats(); st.Dropped != 10 {
		t.Errorf("dropped %d, want 10", st.Dropped)
	}
}

func TestShipperErrStop(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	calls := 0
	send := func(ctx context.Context, lines []Line) (int64, bool, error) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		return 0, false, fmt.Errorf("append logs: %w", ErrStop)
	}
	s, b := setupShipper(t, send, ShipperOptions{})
	s.Add(makeLines(1, 10))
	waitFor(t, "shipper stopped", func() bool { return len(b.spoolFiles(t)) == 0 })
	s.Add(makeLines(11, 5))
	err := closeShipper(t, s)
	if !errors.Is(err, ErrStop) {
		t.Fatalf("Close = %v, want ErrStop", err)
	}
	if st := s.Stats(); st.Added != 15 || st.Dropped != 15 || st.Acked != 0 {
		t.Errorf("stats %+v, want all 15 dropped", st)
	}
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Errorf("send called %d times after ErrStop", calls)
	}
}

func TestShipperTruncated(t *testing.T) {
	t.Parallel()
	c := &fakeCoordinator{t: t, limit: 100}
	s, b := setupShipper(t, c.send, ShipperOptions{MaxBatchBytes: 1024})
	s.Add(makeLines(1, 300))
	waitFor(t, "shipper stopped", func() bool { return len(b.spoolFiles(t)) == 0 })
	batches := c.batchCount()
	s.Add(makeLines(301, 10))
	if err := closeShipper(t, s); err != nil {
		t.Fatalf("Close = %v; a truncated log is not an error", err)
	}
	c.checkStored(t, 100)
	if st := s.Stats(); st.Acked != 100 || st.Dropped != 210 {
		t.Errorf("stats %+v, want 100 acknowledged and 210 dropped", st)
	}
	if c.batchCount() != batches {
		t.Errorf("lines sent after the coordinator truncated the log")
	}
}

func TestShipperAbort(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{}, 1)
	send := func(ctx context.Context, lines []Line) (int64, bool, error) {
		select {
		case entered <- struct{}{}:
		default:
		}
		<-ctx.Done()
		return 0, false, ctx.Err()
	}
	s, b := setupShipper(t, send, ShipperOptions{})
	s.Add(makeLines(1, 10))
	<-entered
	s.Abort()
	if files := b.spoolFiles(t); len(files) != 0 {
		t.Errorf("spool files left after Abort: %v", files)
	}
	s.Add(makeLines(11, 1))
	if st := s.Stats(); st.Dropped != 11 {
		t.Errorf("dropped %d, want 11", st.Dropped)
	}
}

func TestShipperDropsOutOfOrderLines(t *testing.T) {
	t.Parallel()
	c := &fakeCoordinator{t: t}
	s, _ := setupShipper(t, c.send, ShipperOptions{})
	s.Add(makeLines(1, 5))
	s.Add(makeLines(3, 5)) // 3..5 again, then 6 and 7
	if err := closeShipper(t, s); err != nil {
		t.Fatal(err)
	}
	c.checkStored(t, 7)
	if st := s.Stats(); st.Dropped != 3 {
		t.Errorf("dropped %d, want 3", st.Dropped)
	}
}

func TestNewShipperNeedsDir(t *testing.T) {
	t.Parallel()
	if _, err := NewShipper(func(context.Context, []Line) (int64, bool, error) { return 1, false, nil }, ShipperOptions{}); err == nil {
		t.Error("NewShipper without Dir succeeded")
	}
}

// TestRecorderToShipper runs the worker side end to end: output through a Recorder into
// a Shipper and on to the coordinator.
func TestRecorderToShipper(t *testing.T) {
	t.Parallel()
	c := &fakeCoordinator{t: t}
	s, _ := setupShipper(t, c.send, ShipperOptions{})
	r := NewRecorder(s.Add, RecorderOptions{})
	r.Mask("hunter22")
	out, errw := r.Writer(Stdout), r.Writer(Stderr)
	write(t, out, "hello\npassword hunter22\n")
	write(t, errw, "warning\n")
	r.System("step finished")
	_ = out.Close()
	_ = errw.Close()
	if err := closeShipper(t, s); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range c.stored {
		got = append(got, fmt.Sprintf("%d %s %s", l.Seq, l.Stream, l.Text))
	}
	want := []string{"1 stdout hello", "2 stdout password ***", "3 stderr warning", "4 system step finished"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("stored %q, want %q", got, want)
	}
}

// TestShipperSpoolFileOnlyForBacklog: a log sent as it comes never makes a spool file,
// even while a batch is in flight; a directory that does not exist is refused at once,
// not when the first backlog must be written.
func TestShipperSpoolFileOnlyForBacklog(t *testing.T) {
	t.Parallel()
	sending, release := make(chan struct{}, 1), make(chan struct{})
	send := func(ctx context.Context, lines []Line) (int64, bool, error) {
		select {
		case sending <- struct{}{}:
		default:
		}
		<-release
		return lines[len(lines)-1].Seq + 1, false, nil
	}
	s, b := setupShipper(t, send, ShipperOptions{})
	s.Add(makeLines(1, 10))
	<-sending
	s.Add(makeLines(11, 10))
	if files := b.spoolFiles(t); len(files) != 0 {
		t.Errorf("spool files while the backlog fits in memory: %v", files)
	}
	close(release)
	if err := closeShipper(t, s); err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Acked != 20 {
		t.Errorf("acked %d lines, want 20", st.Acked)
	}
	if files := b.spoolFiles(t); len(files) != 0 {
		t.Errorf("spool files after Close: %v", files)
	}

	_, err := NewShipper(send, ShipperOptions{Dir: filepath.Join(t.TempDir(), "missing")})
	if err == nil {
		t.Error("NewShipper with a missing directory succeeded")
	}
}

// TestShipperFinish hands the lines not yet sent to Finish's caller when they fit, and
// sends them as Close does when they do not, or when they were written to the spool
// file; a send in flight when Finish starts is acknowledged first, and what Finish
// returns starts where the coordinator's next does.
func TestShipperFinish(t *testing.T) {
	t.Parallel()
	finish := func(t *testing.T, s *Shipper, max int) []Line {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		lines, err := s.Finish(ctx, max)
		if err != nil {
			t.Fatal(err)
		}
		return lines
	}
	t.Run("fits", func(t *testing.T) {
		t.Parallel()
		c := &fakeCoordinator{t: t}
		s, b := setupShipper(t, c.send, ShipperOptions{Linger: time.Hour})
		s.Add(makeLines(1, 5))
		got := finish(t, s, 1<<20)
		if c.batchCount() != 0 {
			t.Errorf("%d batches sent; the lines should have been handed over", c.batchCount())
		}
		if len(got) != 5 || got[0] != makeLine(1) || got[4] != makeLine(5) {
			t.Fatalf("handed %+v, want lines 1 to 5", got)
		}
		if st := s.Stats(); st.Acked != 5 || st.Dropped != 0 {
			t.Errorf("stats %+v: want the handed lines counted acknowledged, none dropped", st)
		}
		if files := b.spoolFiles(t); len(files) != 0 {
			t.Errorf("spool files left after Finish: %v", files)
		}
		s.Add(makeLines(6, 1))
		if st := s.Stats(); st.Dropped != 1 {
			t.Errorf("a line added after Finish: stats %+v, want it dropped", st)
		}
	})
	t.Run("after a send", func(t *testing.T) {
		t.Parallel()
		c := &fakeCoordinator{t: t}
		release := make(chan struct{})
		var once sync.Once
		inFlight := make(chan struct{})
		send := func(ctx context.Context, lines []Line) (int64, bool, error) {
			once.Do(func() {
				close(inFlight)
				<-release
			})
			return c.send(ctx, lines)
		}
		s, _ := setupShipper(t, send, ShipperOptions{Linger: time.Millisecond})
		s.Add(makeLines(1, 3))
		<-inFlight
		s.Add(makeLines(4, 2))
		done := make(chan []Line)
		go func() { done <- finish(t, s, 1<<20) }()
		// Finish must have begun before the first send returns, or the sender may send
		// lines 4 and 5 itself before Finish asks for them.
		waitFor(t, "Finish to begin", func() bool { return isClosed(s.closing) })
		close(release)
		got := <-done
		c.checkStored(t, 3)
		if len(got) != 2 || got[0] != makeLine(4) || got[1] != makeLine(5) {
			t.Fatalf("handed %+v, want lines 4 and 5", got)
		}
	})
	t.Run("too large", func(t *testing.T) {
		t.Parallel()
		c := &fakeCoordinator{t: t}
		s, _ := setupShipper(t, c.send, ShipperOptions{Linger: time.Hour})
		s.Add(makeLines(1, 50))
		if got := finish(t, s, 100); len(got) != 0 {
			t.Fatalf("handed %d lines over 100 bytes", len(got))
		}
		c.checkStored(t, 50)
	})
	t.Run("spooled to the file", func(t *testing.T) {
		t.Parallel()
		c := &fakeCoordinator{t: t}
		o := &outage{c: c, down: true}
		s, b := setupShipper(t, o.send, ShipperOptions{MaxBatchBytes: 256, MaxBackoff: 5 * time.Millisecond})
		for seq := int64(1); seq <= 200; seq += 10 {
			s.Add(makeLines(seq, 10))
		}
		if len(b.spoolFiles(t)) != 1 {
			t.Fatal("the backlog was not written to the spool file")
		}
		o.setDown(false)
		if got := finish(t, s, 1<<20); len(got) != 0 {
			t.Fatalf("handed %d lines of a backlog in the spool file; they should have been sent", len(got))
		}
		c.checkStored(t, 200)
	})
}

// TestShipperCloseAfterIdleLook adds lines and calls Close just after the sender found
// nothing pending: the lines are sent, not dropped because Close was seen before them.
func TestShipperCloseAfterIdleLook(t *testing.T) {
	t.Parallel()
	c := &fakeCoordinator{t: t}
	var s *Shipper
	var once sync.Once
	armed, fired := make(chan struct{}), make(chan struct{})
	looked := func(pending bool) {
		select {
		case <-armed:
		default:
			return
		}
		if !pending {
			// Between the sender's looks: what a test goroutine may do at any time.
			once.Do(func() {
				s.Add(makeLines(2, 1))
				s.closeOnce.Do(func() { close(s.closing) })
				close(fired)
			})
		}
	}
	s, _ = setupShipper(t, c.send, ShipperOptions{looked: looked})
	s.Add(makeLines(1, 1))
	waitFor(t, "the first line", func() bool { return s.Stats().Acked == 1 })
	close(armed)
	// The sender waits for a line or for Close; wake it to look once more.
	select {
	case s.wake <- struct{}{}:
	default:
	}
	<-fired
	if err := closeShipper(t, s); err != nil {
		t.Fatal(err)
	}
	c.checkStored(t, 2)
}
