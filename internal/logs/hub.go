package logs

import (
	"sync"
	"time"
)

// Hub holds the recent lines of the logs being written on this replica and wakes their
// readers. It never waits on a reader: a reader is told that something changed and pulls
// the lines itself, from the hub while they are still in its window and from storage
// when it has fallen further behind. Memory is bounded per log (ringLines, ringBytes)
// and per reader (one page at a time).
type Hub struct {
	mu    sync.Mutex
	feeds map[Key]*feed
}

// The window of recent lines the hub keeps per log.
const (
	ringLines = 4096
	ringBytes = 1 << 20
)

// feedIdle is how long a feed with no readers and no appends stays before it is dropped.
const feedIdle = time.Minute

type feed struct {
	lines   []Line // the window, in seq order, ending just before next
	bytes   int
	next    int64 // the seq after the window; 0 while the hub has seen no lines
	ended   bool
	wake    chan struct{} // closed and replaced on every change
	readers int
	touched time.Time
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{feeds: map[Key]*feed{}} }

func (h *Hub) feed(k Key) *feed {
	f, ok := h.feeds[k]
	if !ok {
		f = &feed{wake: make(chan struct{})}
		h.feeds[k] = f
	}
	f.touched = time.Now()
	return f
}

func (f *feed) changed() {
	close(f.wake)
	f.wake = make(chan struct{})
}

// Publish adds lines just stored, which continue the log, and wakes its readers.
func (h *Hub) Publish(k Key, lines []Line) {
	if len(lines) == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feed(k)
	if f.next != lines[0].Seq {
		// The window does not continue (lines stored through another replica): start
		// it again here.
		f.lines, f.bytes = nil, 0
	}
	for _, l := range lines {
		f.lines = append(f.lines, l)
		f.bytes += len(l.Text) + 64
	}
	drop := 0
	for len(f.lines)-drop > ringLines || (f.bytes > ringBytes && len(f.lines)-drop > 1) {
		f.bytes -= len(f.lines[drop].Text) + 64
		drop++
	}
	if drop > 0 {
		f.lines = append(f.lines[:0:0], f.lines[drop:]...)
	}
	f.next = lines[len(lines)-1].Seq + 1
	f.changed()
}

// Poke wakes k's readers after another replica stored lines or ended the log. The
// window is dropped, since it no longer reaches the log's end: readers go to storage.
func (h *Hub) Poke(k Key, ended bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.feeds[k]; !ok && !ended {
		return
	}
	f := h.feed(k)
	f.lines, f.bytes, f.next = nil, 0, 0
	f.ended = f.ended || ended
	f.changed()
}

// End marks k's log ended here and wakes its readers. The window is dropped: with
// several replicas, lines another replica stored may not have been announced here yet,
// and storage, which holds every line once the attempt ended, answers the final reads.
func (h *Hub) End(k Key) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f := h.feed(k)
	f.lines, f.bytes, f.next = nil, 0, 0
	f.ended = true
	f.changed()
}

// Ended reports whether the hub knows that k's log ended.
func (h *Hub) Ended(k Key) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.feeds[k]
	return ok && f.ended
}

// Watch registers a reader of k and returns the function that ends it.
func (h *Hub) Watch(k Key) func() {
	h.mu.Lock()
	h.feed(k).readers++
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.feed(k).readers--
		h.mu.Unlock()
	}
}

// Changed returns a channel closed at k's next change. Take it before reading, so that a
// change between the read and the wait is not missed.
func (h *Hub) Changed(k Key) <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.feed(k).wake
}

// Lines returns up to max lines after afterSeq from the window, and ok when the window
// answers the question: it holds the line after afterSeq, or afterSeq is its end.
func (h *Hub) Lines(k Key, afterSeq int64, max int) (lines []Line, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, found := h.feeds[k]
	if !found || f.next == 0 {
		return nil, false
	}
	if afterSeq+1 == f.next {
		return nil, true
	}
	if len(f.lines) == 0 || afterSeq+1 < f.lines[0].Seq || afterSeq+1 > f.next {
		return nil, false
	}
	i := int(afterSeq + 1 - f.lines[0].Seq)
	n := min(max, len(f.lines)-i)
	return append([]Line(nil), f.lines[i:i+n]...), true
}

// Sweep drops the feeds that nobody reads and nothing wrote to for feedIdle.
func (h *Hub) Sweep() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, f := range h.feeds {
		if f.readers == 0 && time.Since(f.touched) > feedIdle {
			delete(h.feeds, k)
		}
	}
}
