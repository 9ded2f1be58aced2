package logs

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// DefaultMaxLineBytes is the line length cap a Recorder uses unless told otherwise.
const DefaultMaxLineBytes = 64 << 10

// crEmitInterval is how long carriage-return progress output may go without a line end
// before its latest segment is emitted anyway, so live viewers see progress.
const crEmitInterval = time.Second

// maskText replaces a secret in emitted text.
const maskText = "***"

// addMaskPrefix starts the workflow command that registers a secret from a step's output.
const addMaskPrefix = "::add-mask::"

// feedChunk bounds how much of one Write is masked before the length cap is checked, so
// a huge write to a line that is already over the cap is not copied in full.
const feedChunk = 4 << 10

// errWriterClosed is returned by Write after Close.
var errWriterClosed = errors.New("log writer is closed")

// RecorderOptions tunes a Recorder; the zero value is usable.
type RecorderOptions struct {
	// MaxLineBytes caps the length of a line's text; 0 means DefaultMaxLineBytes.
	MaxLineBytes int
	// Now is the time source for line timestamps; nil means time.Now.
	Now func() time.Time
	// Debug emits ::debug:: messages (as lines of LevelDebug); without it they are
	// dropped. The worker sets it when the job's env has ACTIONS_STEP_DEBUG=true, as
	// GitHub does.
	Debug bool
}

// Recorder turns a job attempt's output into numbered, masked lines and hands them to a
// sink. It is safe for concurrent use; every writer and System share one seq counter.
//
// Line rules:
//   - "\n" ends a line.
//   - "\r" ends a segment that the text after it overwrites (progress bars): a line emits
//     only its last non-empty segment, so "\r\n" is an ordinary line end and "50%\r60%\n"
//     emits "60%". So that live viewers still see progress, when a "\r" arrives at least
//     one second after the oldest segment that was collapsed and not emitted, the segment
//     it ends is emitted as a line at once. The check runs only when output arrives; there
//     is no timer, so the rule is deterministic given the Now option.
//   - Registered secrets are replaced with "***" before anything else, even when a secret
//     arrives split across writes or has ANSI colour codes inside it (see masker).
//   - Invalid UTF-8 becomes U+FFFD.
//   - A line longer than MaxLineBytes is cut on a rune boundary, marked Truncated, and the
//     rest of it up to the next "\n" is discarded.
//   - A line that is exactly "::add-mask::VALUE" registers VALUE as a secret and is not
//     emitted.
//   - Other workflow commands (::group::, ::error::, ::stop-commands:: and the rest, see
//     commands.go) are acted on once their line is complete and masked; a command of a
//     kind the Recorder does not know is output as it is. A line cut at the length cap is
//     never a command.
//   - Close emits a last line that has no line end.
type Recorder struct {
	sink    func([]Line)
	maxLine int
	now     func() time.Time
	debug   bool

	mu  sync.Mutex
	seq int64
	// stopToken is set between ::stop-commands::TOKEN and ::TOKEN::; no command is acted
	// on meanwhile. It is the job's, not a writer's: GitHub's runner reads one stream.
	stopToken string
	masker    masker
	writers   map[*recordWriter]struct{}
}

// NewRecorder returns a Recorder that passes the lines completed by each Write, Close or
// System call to sink, in seq order. Sink is never called concurrently; it is called with
// the Recorder's lock held, so it must be quick (Shipper.Add is) and must not call back
// into the Recorder. Sink must not keep the slice.
func NewRecorder(sink func([]Line), opts RecorderOptions) *Recorder {
	if opts.MaxLineBytes <= 0 {
		opts.MaxLineBytes = DefaultMaxLineBytes
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Recorder{
		sink:    sink,
		maxLine: opts.MaxLineBytes,
		now:     opts.Now,
		debug:   opts.Debug,
		writers: make(map[*recordWriter]struct{}),
	}
}

// Writer returns a writer for one stream (Stdout or Stderr) of one step. Each writer keeps
// its own partial line, so a step's stdout and stderr writers may be used concurrently;
// one writer must not be written from two goroutines at once. Write never fails before
// Close, so a log problem never fails a step.
func (r *Recorder) Writer(stream string) io.WriteCloser {
	return r.StepWriter(stream, -1)
}

// StepWriter is Writer for the output of the step of index step, which the annotations
// its ::error::, ::warning:: and ::notice:: commands raise carry (Annotation.Step).
func (r *Recorder) StepWriter(stream string, step int) io.WriteCloser {
	w := &recordWriter{r: r, stream: stream, step: step, cmd: true}
	r.mu.Lock()
	r.writers[w] = struct{}{}
	r.mu.Unlock()
	return w
}

// System emits text as system lines, one per line of text, masked and capped like output.
func (r *Recorder) System(text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b batch
	ts := r.now().UnixMilli()
	for piece := range strings.SplitSeq(text, "\n") {
		masked, _ := r.masker.mask(nil, []byte(piece), true)
		s := strings.ToValidUTF8(string(masked), "\uFFFD")
		cut := false
		if len(s) > r.maxLine {
			s, cut = cutUTF8(s, r.maxLine), true
		}
		r.emit(&b, ts, System, s, cut)
	}
	r.flush(&b)
}

// Annotate emits a system line that raises an annotation of the step of index step, of
// level (LevelError, LevelWarning or LevelNotice) with title: what the worker itself has
// to say about a step, listed with the job's annotations as the step's own ::warning::
// would be. The message is one line, masked and capped as System's are.
func (r *Recorder) Annotate(step int, level, title, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	mask := func(s string, max int) string {
		m, _ := r.masker.mask(nil, []byte(strings.ReplaceAll(s, "\n", " ")), true)
		return cutUTF8(strings.ToValidUTF8(string(m), "\uFFFD"), max)
	}
	var b batch
	r.emitLine(&b, Line{TS: r.now().UnixMilli(), Stream: System, Text: mask(message, r.maxLine), Level: level, Annotation: &Annotation{Step: step, Title: mask(title, MaxAnnotationPropBytes)}})
	r.flush(&b)
}

// MaskText returns text with every registered secret masked, as a line of the log would
// be; text of many lines is read as one, so a form that spans lines is masked too.
func (r *Recorder) MaskText(text string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	masked, _ := r.masker.mask(nil, []byte(text), true)
	return string(masked)
}

// Mask registers a secret: from now on no emitted line contains it. A multi-line secret is
// registered line by line, and pieces shorter than three bytes are ignored. Output that a
// writer holds but has not emitted yet is masked too.
func (r *Recorder) Mask(secret string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addMask(secret)
}

// Lines returns how many lines the Recorder has emitted, which is also the last seq.
func (r *Recorder) Lines() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seq
}

func (r *Recorder) addMask(secret string) {
	r.rescan(r.masker.add(secret))
}

// rescan masks again what writers hold, if added says a new form was registered.
func (r *Recorder) rescan(added bool) {
	if !added {
		return
	}
	// Bytes a writer already decided on were checked against the old secrets only; check
	// them again so a secret registered mid-line is masked in that line as well.
	for w := range r.writers {
		if len(w.done) > 0 {
			w.raw = append(w.done, w.raw...)
			w.done = nil
			w.advance(false)
		}
		if len(w.lastSeg) > 0 {
			w.lastSeg, _ = r.masker.mask(nil, w.lastSeg, true)
		}
	}
}

// batch collects the lines one call emits, so the sink sees them in one call.
type batch struct {
	lines []Line
}

// emit numbers a line and adds it to b. Callers hold r.mu.
func (r *Recorder) emit(b *batch, ts int64, stream, text string, truncated bool) {
	r.emitLine(b, Line{TS: ts, Stream: stream, Text: text, Truncated: truncated})
}

// emitLine numbers l and adds it to b. Callers hold r.mu.
func (r *Recorder) emitLine(b *batch, l Line) {
	r.seq++
	l.Seq = r.seq
	b.lines = append(b.lines, l)
}

// flush hands b's lines to the sink. Callers hold r.mu, which keeps sink calls ordered
// and never concurrent.
func (r *Recorder) flush(b *batch) {
	if len(b.lines) > 0 {
		r.sink(b.lines)
	}
}

// recordWriter is the io.WriteCloser for one stream. All its state is guarded by r.mu.
type recordWriter struct {
	r      *Recorder
	stream string
	step   int // the step's index, -1 when not known
	closed bool

	// raw holds bytes of the current segment that may still be the start of a secret;
	// done holds the segment's bytes that are masked and final.
	raw  []byte
	done []byte
	// lastSeg is the latest non-empty segment ended by a lone "\r" and not emitted yet;
	// segSince is when the oldest such collapsed segment arrived (zero if none).
	lastSeg  []byte
	segSince time.Time
	// segEmitted records that a segment of the current line was emitted, so an empty
	// final segment does not emit a blank line after it.
	segEmitted bool
	// discard drops the rest of a line that was cut at the length cap.
	discard bool
	// dirty is set once the current line has any byte, so Close knows there is a line.
	dirty bool
	// cmd is set while the current line may still be "::add-mask::VALUE"; cmdBuf holds
	// its raw bytes, unmasked, because VALUE may contain an already registered secret.
	cmd    bool
	cmdBuf []byte
}

// Write splits p into lines; it always consumes all of p.
func (w *recordWriter) Write(p []byte) (int, error) {
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.closed {
		return 0, errWriterClosed
	}
	var b batch
	var ts int64 // the time lines completed by this write are stamped with
	var now time.Time
	clock := func() (time.Time, int64) {
		if now.IsZero() {
			now = r.now()
			ts = now.UnixMilli()
		}
		return now, ts
	}
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			w.feed(&b, p, clock)
			break
		}
		w.feed(&b, p[:i], clock)
		if p[i] == '\n' {
			_, ts := clock()
			w.endLine(&b, ts)
		} else {
			w.loneCR(&b, clock)
		}
		p = p[i+1:]
	}
	r.flush(&b)
	return n, nil
}

// Close emits the pending partial line, if any. Close is idempotent.
func (w *recordWriter) Close() error {
	r := w.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	delete(r.writers, w)
	if w.dirty {
		var b batch
		w.endLine(&b, r.now().UnixMilli())
		r.flush(&b)
	}
	return nil
}

// feed adds segment text (no "\r" or "\n") to the current line.
func (w *recordWriter) feed(b *batch, p []byte, clock func() (time.Time, int64)) {
	if len(p) == 0 {
		return
	}
	w.dirty = true
	if w.discard {
		return
	}
	w.trackCmd(p)
	if w.cmd && len(w.cmdBuf) > 2*w.r.maxLine+len(addMaskPrefix) {
		// Masking can keep done short while the command's raw bytes grow; bound them.
		_, ts := clock()
		w.cut(b, ts)
		return
	}
	for len(p) > 0 && !w.discard {
		k := min(len(p), feedChunk)
		w.raw = append(w.raw, p[:k]...)
		p = p[k:]
		w.advance(false)
		// Cut only when the masked bytes pass the cap by a whole rune, so a rune split
		// across writes is not cut into U+FFFD just before the cap.
		if len(w.done) >= w.r.maxLine+utf8.UTFMax {
			_, ts := clock()
			w.cut(b, ts)
		}
	}
}

// advance moves the bytes of raw that can no longer be the start of a secret to done.
func (w *recordWriter) advance(final bool) {
	var used int
	w.done, used = w.r.masker.mask(w.done, w.raw, final)
	w.raw = append(w.raw[:0], w.raw[used:]...)
}

// cut emits the first MaxLineBytes of the current segment as a truncated line and
// discards the rest of the line.
func (w *recordWriter) cut(b *batch, ts int64) {
	r := w.r
	if w.cmd && r.stopToken == "" {
		// Never show any part of a mask command, not even cut.
		r.emit(b, ts, System, "an ::add-mask:: line longer than the line limit was dropped; nothing was masked", false)
	} else {
		s := strings.ToValidUTF8(string(w.done), "\uFFFD")
		r.emit(b, ts, w.stream, cutUTF8(s, r.maxLine), true)
	}
	w.discard = true
	w.resetSegment()
	w.lastSeg, w.segSince = nil, time.Time{}
}

// loneCR ends a segment that the following text overwrites. "\r\n" needs no look-ahead:
// its "\r" ends the segment and its "\n" then ends the line with an empty segment, which
// emits the segment the "\r" ended.
func (w *recordWriter) loneCR(b *batch, clock func() (time.Time, int64)) {
	w.dirty = true
	if w.discard {
		return
	}
	w.trackCmd([]byte{'\r'})
	w.advance(true)
	if len(w.done) == 0 {
		return // an empty segment overwrites nothing worth keeping
	}
	w.lastSeg, w.done = w.done, w.lastSeg[:0]
	now, ts := clock()
	if w.segSince.IsZero() {
		w.segSince = now
		return
	}
	if now.Sub(w.segSince) >= crEmitInterval && !w.cmd {
		w.emitText(b, ts, w.lastSeg)
		w.lastSeg, w.segSince = w.lastSeg[:0], time.Time{}
		w.segEmitted = true
	}
}

// endLine ends the current line and emits it unless it was discarded, already emitted
// as a progress segment, or is a mask command.
func (w *recordWriter) endLine(b *batch, ts int64) {
	defer w.resetLine()
	if w.discard {
		return
	}
	if w.cmd && len(w.cmdBuf) >= len(addMaskPrefix) && w.r.stopToken == "" {
		w.r.addMask(string(w.cmdBuf[len(addMaskPrefix):]))
		return
	}
	w.advance(true)
	text := w.done
	if len(text) == 0 {
		if len(w.lastSeg) > 0 {
			text = w.lastSeg
		} else if w.segEmitted {
			return
		}
	}
	if len(text) <= w.r.maxLine && w.command(b, ts, strings.ToValidUTF8(string(text), "\uFFFD")) {
		return
	}
	w.emitText(b, ts, text)
}

func (w *recordWriter) emitText(b *batch, ts int64, text []byte) {
	s := strings.ToValidUTF8(string(text), "\uFFFD")
	cut := false
	if len(s) > w.r.maxLine {
		// Invalid bytes grow into 3-byte U+FFFD, so a line under the cap can exceed it here.
		s, cut = cutUTF8(s, w.r.maxLine), true
	}
	w.r.emit(b, ts, w.stream, s, cut)
}

// trackCmd follows whether the current line is still a possible "::add-mask::" command.
func (w *recordWriter) trackCmd(p []byte) {
	if !w.cmd {
		return
	}
	w.cmdBuf = append(w.cmdBuf, p...)
	n := min(len(w.cmdBuf), len(addMaskPrefix))
	if string(w.cmdBuf[:n]) != addMaskPrefix[:n] {
		w.cmd, w.cmdBuf = false, w.cmdBuf[:0]
	}
}

func (w *recordWriter) resetSegment() {
	w.raw, w.done = w.raw[:0], w.done[:0]
}

func (w *recordWriter) resetLine() {
	w.resetSegment()
	w.lastSeg, w.segSince, w.segEmitted = w.lastSeg[:0], time.Time{}, false
	w.discard, w.dirty = false, false
	w.cmd, w.cmdBuf = true, w.cmdBuf[:0]
	// Do not let one huge line pin its buffers for the rest of the step.
	if cap(w.done) > 2*w.r.maxLine {
		w.done = nil
	}
	if cap(w.cmdBuf) > 2*w.r.maxLine {
		w.cmdBuf = nil
	}
}

// cutUTF8 returns the longest prefix of s of at most n bytes that ends on a rune boundary.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
