package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/gantry-ci/gantry/internal/clock"
)

// ErrStop, returned by a SendFunc, tells the Shipper to stop at once and drop every line
// it holds: the worker lost the job's lease, so nobody will take the lines.
var ErrStop = errors.New("stop shipping logs")

// SendFunc delivers a batch of lines, in seq order, to the coordinator. It answers with
// next, the seq the coordinator expects next (every line below it is stored), and
// truncated when the coordinator stopped storing the attempt's log (its size limit) so the
// rest may be dropped. It must return soon after ctx is done.
type SendFunc func(ctx context.Context, lines []Line) (next int64, truncated bool, err error)

// Defaults for ShipperOptions.
const (
	DefaultMaxBatchBytes = 64 << 10
	DefaultLinger        = 20 * time.Millisecond
	DefaultMaxBackoff    = 5 * time.Second
	DefaultSendTimeout   = 30 * time.Second

	firstBackoff = 100 * time.Millisecond
)

// ShipperOptions configures a Shipper. Dir is required.
type ShipperOptions struct {
	// Dir holds the spool file.
	Dir string
	// MaxBatchBytes caps a batch's size as NDJSON; a batch holds at least one line.
	MaxBatchBytes int
	// Linger is how long a batch waits after its first line for more; a full batch
	// leaves at once. Lines that arrive while a send is in flight wait for it instead.
	Linger time.Duration
	// MaxBackoff caps the wait between retries of a failed send, which starts at 100 ms
	// and doubles.
	MaxBackoff time.Duration
	// SendTimeout bounds each call of the SendFunc.
	SendTimeout time.Duration
	// Clock drives linger and backoff; nil means the wall clock.
	Clock clock.Clock
	// Logger receives send failures; nil discards them.
	Logger *slog.Logger

	// looked, set by tests, is called by the sender each time it has looked for
	// pending lines, with what it found.
	looked func(pending bool)
}

// ShipperStats counts lines through a Shipper.
type ShipperStats struct {
	Added   int64 // lines passed to Add
	Sent    int64 // lines passed to the SendFunc, re-sends included
	Acked   int64 // lines the coordinator said it stored
	Dropped int64 // lines given up on: truncated, ErrStop, Abort, Close timeout, spool errors
	// SpoolBytes is the spool's size, on disk or held in memory until the backlog
	// grows; it returns to 0 when all is acknowledged.
	SpoolBytes int64
}

// Shipper ships a job attempt's lines to the coordinator without ever making the job
// wait: Add appends to a spool file on disk and returns, and one goroutine sends batches
// from the spool in seq order, retrying with backoff while the coordinator is away.
type Shipper struct {
	send     SendFunc
	maxBatch int
	linger   time.Duration
	maxBack  time.Duration
	sendTO   time.Duration
	clock    clock.Clock
	log      *slog.Logger
	looked   func(pending bool)

	ctx       context.Context // cancelled by Abort and by Close when its ctx ends
	cancel    context.CancelFunc
	wake      chan struct{} // Add signals new lines
	closing   chan struct{} // closed by Close
	closeOnce sync.Once
	done      chan struct{} // closed when the sender has exited and removed the spool

	mu sync.Mutex
	sp *spool
	// ack is the position of the first spooled line not acknowledged; ackSeq is the
	// coordinator's last answered next. Lines below ackSeq are never sent again unless a
	// later answer asks for them.
	ack    spoolPos
	ackSeq int64
	// records counts records in the spool file; ackedBase counts acknowledged records
	// that were in the file before it was last emptied.
	records   int64
	ackedBase int64
	lastSeq   int64     // highest seq added, to keep the spool in order
	firstAt   time.Time // when the oldest line not yet taken into a batch was added
	stopped   bool      // the sender has exited; Add drops
	reason    error     // why the sender dropped lines: ErrStop, errTruncated, or nil
	lost      int64     // lines still unacknowledged when the sender exited
	buf       []byte
	spoolErr  bool // the last append failed; log only the first failure of a run
	stats     ShipperStats
	// mem holds the spool's records from memPos on, decoded, while memOK, so that the
	// sender takes its batches from memory instead of reading and decoding the file
	// again; the spool writes them to its file only when they exceed memFactor batches.
	// Past that (a long outage) the spool writes every record and the sender reads the
	// file, until the spool is next emptied. While memOK is false nothing is held.
	mem      []memRecord
	memPos   spoolPos
	memBytes int
	memOK    bool
	// handMax is the most bytes of lines (as NDJSON) Finish takes over instead of their
	// being sent, 0 for Close; handed are the lines the sender gave it.
	handMax int
	handed  []Line
}

// memRecord is a spooled line and the size of its record in the spool file.
type memRecord struct {
	line Line
	size int
}

// memFactor times MaxBatchBytes is how much of the spool a Shipper keeps in memory.
const memFactor = 4

// errTruncated records that the coordinator stopped storing lines.
var errTruncated = errors.New("coordinator truncated the log")

// NewShipper checks opts.Dir, where the spool file is made once there is a backlog to
// write, and starts the sender.
func NewShipper(send SendFunc, opts ShipperOptions) (*Shipper, error) {
	if opts.Dir == "" {
		return nil, errors.New("new log shipper: spool directory is required")
	}
	if send == nil {
		return nil, errors.New("new log shipper: send func is required")
	}
	if opts.MaxBatchBytes <= 0 {
		opts.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.SendTimeout <= 0 {
		opts.SendTimeout = DefaultSendTimeout
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	sp, err := openSpool(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("new log shipper: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Shipper{
		send:     send,
		maxBatch: opts.MaxBatchBytes,
		linger:   opts.Linger,
		maxBack:  opts.MaxBackoff,
		sendTO:   opts.SendTimeout,
		clock:    opts.Clock,
		log:      opts.Logger,
		looked:   opts.looked,
		ctx:      ctx,
		cancel:   cancel,
		wake:     make(chan struct{}, 1),
		closing:  make(chan struct{}),
		done:     make(chan struct{}),
		sp:       sp,
		ackSeq:   1,
		memOK:    true,
	}
	go s.run()
	return s, nil
}

// Add spools lines for sending and returns without waiting on the network. Lines must
// come in increasing seq order; a line at or below the last seq added is dropped. Lines
// added after Close finished, Abort, ErrStop or truncation are dropped.
func (s *Shipper) Add(lines []Line) {
	if len(lines) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats.Added += int64(len(lines))
	if s.stopped {
		s.stats.Dropped += int64(len(lines))
		return
	}
	buf := s.buf[:0]
	n := int64(0)
	memLen := len(s.mem)
	for i := range lines {
		if lines[i].Seq <= s.lastSeq {
			s.stats.Dropped++
			s.log.Warn("log line out of order dropped", "seq", lines[i].Seq, "after", s.lastSeq)
			continue
		}
		s.lastSeq = lines[i].Seq
		before := len(buf)
		buf = appendJSON(buf, &lines[i])
		n++
		if s.memOK {
			s.mem = append(s.mem, memRecord{line: lines[i], size: len(buf) - before})
		}
	}
	if cap(buf) <= 4*s.maxBatch {
		s.buf = buf
	}
	if n == 0 {
		return
	}
	// Whether the sender has anything to do about these lines: they are the first
	// waiting (it starts their linger), or they fill a batch (it stops lingering).
	// Waking it for every line would cost a context switch per line for nothing.
	first := s.firstAt.IsZero()
	if s.memOK && s.memBytes+len(buf) <= memFactor*s.maxBatch {
		s.sp.hold(buf)
		s.memBytes += len(buf)
	} else {
		if err := s.sp.append(buf); err != nil {
			// Records held before stay held (and in memory); these are dropped.
			if s.memOK {
				s.mem = s.mem[:memLen]
			}
			// The job must go on; these lines are lost and the coordinator will see a gap.
			s.stats.Dropped += n
			if !s.spoolErr {
				s.log.Error("log lines dropped: spool write failed", "lines", n, "err", err)
			}
			s.spoolErr = true
			return
		}
		if s.spoolErr {
			s.log.Info("log spool writable again")
			s.spoolErr = false
		}
		// Everything is written now: until the spool is emptied, the sender reads the
		// file.
		s.mem, s.memBytes, s.memOK = nil, 0, false
	}
	s.records += n
	if first {
		s.firstAt = s.clock.Now()
	}
	if first || s.sp.size-s.ack.off >= int64(s.maxBatch) {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// Close sends everything still unacknowledged, retrying while the coordinator is down,
// until all is acknowledged or ctx ends; then it stops the sender and removes the spool.
// It reports the lines that were not delivered; when they were dropped because the
// SendFunc returned ErrStop the error wraps ErrStop. Lines dropped because the
// coordinator truncated the log are not an error.
func (s *Shipper) Close(ctx context.Context) error {
	s.closeOnce.Do(func() { close(s.closing) })
	select {
	case <-s.done:
	case <-ctx.Done():
		s.cancel()
		<-s.done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.lost == 0 || errors.Is(s.reason, errTruncated):
		return nil
	case s.reason != nil:
		return fmt.Errorf("ship logs: %d of %d lines dropped: %w", s.lost, s.stats.Added, s.reason)
	case ctx.Err() != nil:
		return fmt.Errorf("ship logs: %d of %d lines not delivered: %w", s.lost, s.stats.Added, ctx.Err())
	default:
		return fmt.Errorf("ship logs: %d of %d lines not delivered", s.lost, s.stats.Added)
	}
}

// Finish is Close for a caller that can deliver the last lines itself, with the report
// that ends the job. Once nothing is in flight, if every line not yet acknowledged is
// held in memory and they take at most max bytes as NDJSON, the sender stops without
// sending them and Finish returns them, in seq order; otherwise it sends them as Close
// does and returns none. The lines it returns count as acknowledged in Stats: they are
// the caller's to deliver. max above the batch size (MaxBatchBytes) is taken as the
// batch size.
func (s *Shipper) Finish(ctx context.Context, max int) ([]Line, error) {
	s.mu.Lock()
	s.handMax = min(max, s.maxBatch)
	s.mu.Unlock()
	err := s.Close(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.handed, err
}

// handOff takes the lines not yet acknowledged for Finish's caller, when Finish was
// called and they are few enough and all in memory. Only the sender calls it, between
// sends.
func (s *Shipper) handOff() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	start := s.ack
	if s.handMax <= 0 || !s.memOK || s.sp.size-start.off > int64(s.handMax) ||
		start.idx < s.memPos.idx || start.idx-s.memPos.idx > int64(len(s.mem)) {
		return false
	}
	lines, _, end := s.memBatch(start, s.ackSeq)
	if end.off != s.sp.size {
		return false
	}
	s.handed = lines
	s.ack = end
	return true
}

// Abort stops the sender at once, drops every line and removes the spool.
func (s *Shipper) Abort() {
	s.cancel()
	<-s.done
}

// Stats returns the Shipper's counters.
func (s *Shipper) Stats() ShipperStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Acked = s.ackedBase + s.ack.idx
	if s.sp != nil {
		st.SpoolBytes = s.sp.size
	}
	return st
}

// run is the sender goroutine.
func (s *Shipper) run() {
	defer s.exit()
	backoff := time.Duration(0)
	for {
		if s.ctx.Err() != nil {
			return
		}
		// Whether Close was called is read before what is pending: Close comes after
		// the Adds it must send, so lines added after this look are seen below. Read
		// the other way round, lines added (and Close called) between the two looks
		// were taken for none, and the sender stopped without them.
		closing := isClosed(s.closing)
		s.mu.Lock()
		pending := s.sp.size > s.ack.off
		if !pending {
			// No line waits (the coordinator may have acknowledged lines not yet
			// taken), so the next Add is a first one, and wakes the sender.
			s.firstAt = time.Time{}
		}
		firstAt := s.firstAt
		s.mu.Unlock()
		if s.looked != nil {
			s.looked(pending)
		}
		if !pending {
			if closing {
				return
			}
			select {
			case <-s.wake:
			case <-s.closing:
			case <-s.ctx.Done():
			}
			continue
		}
		if !closing && !firstAt.IsZero() && backoff == 0 {
			if wait := s.linger - s.clock.Now().Sub(firstAt); wait > 0 && !s.waitLinger(wait) {
				return
			}
			closing = isClosed(s.closing)
		}
		if closing && s.handOff() {
			return
		}

		lines, start, end, err := s.takeBatch()
		if err != nil {
			// The spool is unreadable; nothing in it can be trusted any more.
			s.log.Error("log spool unreadable; dropping its lines", "err", err)
			return
		}
		if len(lines) == 0 {
			continue // all below the coordinator's next: already stored
		}

		sctx, cancel := context.WithTimeout(s.ctx, s.sendTO)
		next, truncated, err := s.send(sctx, lines)
		cancel()
		s.mu.Lock()
		s.stats.Sent += int64(len(lines))
		s.mu.Unlock()
		first, last := lines[0].Seq, lines[len(lines)-1].Seq

		switch {
		case errors.Is(err, ErrStop):
			s.setReason(ErrStop)
			return
		case err != nil:
			if s.ctx.Err() != nil {
				return
			}
			backoff = s.nextBackoff(backoff)
			s.log.Warn("send log lines failed; will retry", "first_seq", first, "last_seq", last, "retry_in", backoff, "err", err)
			if !s.sleep(backoff) {
				return
			}
			continue
		}

		progress, err := s.acknowledge(next, first, last, start, end)
		if err != nil {
			s.log.Error("log spool unreadable; dropping its lines", "err", err)
			return
		}
		if truncated {
			s.setReason(errTruncated)
			return
		}
		if progress {
			backoff = 0
			continue
		}
		// The coordinator wants lines the spool no longer holds, or stored nothing.
		backoff = s.nextBackoff(backoff)
		s.log.Warn("coordinator acknowledged no new log lines; will retry", "next", next, "first_seq", first, "retry_in", backoff)
		if !s.sleep(backoff) {
			return
		}
	}
}

// waitLinger waits until the oldest pending line has lingered long enough, a full batch
// is pending, or Close starts. It reports false if the sender must stop.
func (s *Shipper) waitLinger(wait time.Duration) bool {
	timer := s.clock.After(wait)
	for {
		select {
		case <-timer:
			return true
		case <-s.closing:
			return true
		case <-s.ctx.Done():
			return false
		case <-s.wake:
			s.mu.Lock()
			full := s.sp.size-s.ack.off >= int64(s.maxBatch)
			s.mu.Unlock()
			if full {
				return true
			}
		}
	}
}

// takeBatch reads the next batch from the spool, skipping lines the coordinator already
// has. It returns the batch and the spool positions where it starts and ends.
func (s *Shipper) takeBatch() (lines []Line, start, end spoolPos, err error) {
	s.mu.Lock()
	start, size, floor := s.ack, s.sp.size, s.ackSeq
	if s.memOK && start.idx >= s.memPos.idx && start.idx-s.memPos.idx <= int64(len(s.mem)) {
		lines, start, end = s.memBatch(start, floor)
		return s.taken(lines, start, end)
	}
	// The file must hold every record the reader may reach.
	err = s.sp.flush()
	s.mu.Unlock()
	if err != nil {
		return nil, start, start, err
	}

	r := s.sp.reader(start, size)
	bytes := 0
	for {
		before := r.pos
		var l Line
		rec, err := r.next(&l)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, start, before, err
		}
		if l.Seq < floor {
			start = r.pos
			continue
		}
		if len(lines) > 0 && bytes+len(rec) > s.maxBatch {
			r.pos = before
			break
		}
		bytes += len(rec)
		lines = append(lines, l)
	}
	end = r.pos
	s.mu.Lock()
	return s.taken(lines, start, end)
}

// memBatch takes the next batch from s.mem, as takeBatch would from the file. Callers
// hold s.mu and have checked that s.mem holds the record at start.
func (s *Shipper) memBatch(start spoolPos, floor int64) (lines []Line, from, end spoolPos) {
	pos, bytes := start, 0
	for _, m := range s.mem[start.idx-s.memPos.idx:] {
		if m.line.Seq < floor {
			pos.off += int64(m.size)
			pos.idx++
			start = pos
			continue
		}
		if len(lines) > 0 && bytes+m.size > s.maxBatch {
			break
		}
		bytes += m.size
		lines = append(lines, m.line)
		pos.off += int64(m.size)
		pos.idx++
	}
	return lines, start, pos
}

// memSeek is spool.seek over s.mem, which holds every record not yet acknowledged while
// memOK. Callers hold s.mu.
func (s *Shipper) memSeek(from spoolPos, seq int64) spoolPos {
	pos := s.memPos
	if from.idx > pos.idx {
		pos = from
	}
	for _, m := range s.mem[min(pos.idx-s.memPos.idx, int64(len(s.mem))):] {
		if m.line.Seq >= seq {
			break
		}
		pos.off += int64(m.size)
		pos.idx++
	}
	return pos
}

// taken records that the batch [start, end) was taken. Callers hold s.mu, which it
// releases.
func (s *Shipper) taken(lines []Line, start, end spoolPos) ([]Line, spoolPos, spoolPos, error) {
	defer s.mu.Unlock()
	s.ack = start
	if end.off == s.sp.size {
		s.firstAt = time.Time{} // everything spooled is in this batch
	}
	if len(lines) == 0 {
		// Every line read was below the coordinator's next; nothing is in flight.
		if err := s.resetIfAcked(); err != nil {
			return nil, start, end, err
		}
	}
	return lines, start, end, nil
}

// acknowledge applies the coordinator's next to the batch [first, last] that occupied
// [start, end) in the spool, and reports whether the coordinator made progress.
func (s *Shipper) acknowledge(next, first, last int64, start, end spoolPos) (bool, error) {
	pos := end
	if next != last+1 {
		from := start
		if next < first {
			// The coordinator lost lines it had stored, or the answer is stale: go back as
			// far as the spool still reaches.
			from = spoolPos{}
		}
		s.mu.Lock()
		size, inMem := s.sp.size, s.memOK
		if inMem {
			pos = s.memSeek(from, next)
		}
		s.mu.Unlock()
		if !inMem {
			var err error
			if pos, err = s.sp.seek(from, size, next); err != nil {
				return false, err
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ack, s.ackSeq = pos, next
	// Forget the acknowledged records held in memory.
	for len(s.mem) > 0 && s.memPos.off < pos.off {
		s.memPos.off += int64(s.mem[0].size)
		s.memPos.idx++
		s.memBytes -= s.mem[0].size
		s.mem = s.mem[1:]
	}
	if err := s.resetIfAcked(); err != nil {
		return false, err
	}
	return next > first || pos.off < start.off, nil
}

// resetIfAcked empties the spool file when every line in it is acknowledged, so a long
// job's spool does not keep what the coordinator already has. Callers hold s.mu and are
// the sender, the only reader of the file.
func (s *Shipper) resetIfAcked() error {
	if s.ack.off != s.sp.size || s.sp.size == 0 {
		return nil
	}
	if err := s.sp.reset(); err != nil {
		return err
	}
	s.ackedBase += s.records
	s.records = 0
	s.ack = spoolPos{}
	s.mem, s.memPos, s.memBytes, s.memOK = s.mem[:0], spoolPos{}, 0, true
	return nil
}

func (s *Shipper) setReason(err error) {
	s.mu.Lock()
	s.reason = err
	s.mu.Unlock()
}

func (s *Shipper) nextBackoff(d time.Duration) time.Duration {
	if d == 0 {
		return min(firstBackoff, s.maxBack)
	}
	return min(2*d, s.maxBack)
}

// sleep waits d; it reports false if the sender must stop.
func (s *Shipper) sleep(d time.Duration) bool {
	select {
	case <-s.clock.After(d):
		return true
	case <-s.ctx.Done():
		return false
	}
}

// exit drops what is left, removes the spool and lets Close and Abort return.
func (s *Shipper) exit() {
	s.mu.Lock()
	s.stopped = true
	s.lost = s.records - s.ack.idx
	s.stats.Dropped += s.lost
	if err := s.sp.remove(); err != nil {
		s.log.Warn("remove log spool", "err", err)
	}
	s.sp.size = 0
	s.mu.Unlock()
	s.cancel()
	close(s.done)
}

func isClosed(c chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
