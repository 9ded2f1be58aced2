package logs

import (
	"fmt"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sinkRecorder collects what a Recorder emits and checks the sink contract as it goes.
type sinkRecorder struct {
	t      *testing.T
	mu     sync.Mutex
	busy   atomic.Bool
	calls  [][]Line
	lines  []Line
	nextSq int64
}

func (s *sinkRecorder) sink(lines []Line) {
	if !s.busy.CompareAndSwap(false, true) {
		s.t.Errorf("sink called concurrently")
	}
	defer s.busy.Store(false)
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(lines) == 0 {
		s.t.Errorf("sink called with no lines")
	}
	for _, l := range lines {
		s.nextSq++
		if l.Seq != s.nextSq {
			s.t.Errorf("line seq %d, want %d", l.Seq, s.nextSq)
			s.nextSq = l.Seq
		}
	}
	s.calls = append(s.calls, slices.Clone(lines))
	s.lines = append(s.lines, lines...)
}

func (s *sinkRecorder) texts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, l := range s.lines {
		out = append(out, l.Text)
	}
	return out
}

// fakeNow is a settable time source for RecorderOptions.Now.
type fakeNow struct {
	mu sync.Mutex
	t  time.Time
}

func (f *fakeNow) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.t
}

func (f *fakeNow) Advance(d time.Duration) {
	f.mu.Lock()
	f.t = f.t.Add(d)
	f.mu.Unlock()
}

type recorderBundle struct {
	sink *sinkRecorder
	now  *fakeNow
}

func setupRecorder(t *testing.T, maxLine int) (*Recorder, *recorderBundle) {
	t.Helper()
	b := &recorderBundle{
		sink: &sinkRecorder{t: t},
		now:  &fakeNow{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)},
	}
	r := NewRecorder(b.sink.sink, RecorderOptions{MaxLineBytes: maxLine, Now: b.now.Now})
	return r, b
}

func write(t *testing.T, w io.Writer, s string) {
	t.Helper()
	n, err := w.Write([]byte(s))
	if err != nil || n != len(s) {
		t.Fatalf("Write(%q) = %d, %v", s, n, err)
	}
}

func TestRecorderLines(t *testing.T) {
	t.Parallel()
	type want struct {
		text      string
		truncated bool
	}
	tests := []struct {
		name    string
		maxLine int
		masks   []string
		writes  []string
		want    []want
	}{
		{name: "partial lines across writes", writes: []string{"hel", "lo\nwor", "ld"},
			want: []want{{text: "hello"}, {text: "world"}}},
		{name: "empty lines", writes: []string{"a\n\nb\n"},
			want: []want{{text: "a"}, {text: ""}, {text: "b"}}},
		{name: "nothing after the last newline", writes: []string{"a\n"},
			want: []want{{text: "a"}}},
		{name: "crlf", writes: []string{"a\r\nb\r", "\nc\r\n"},
			want: []want{{text: "a"}, {text: "b"}, {text: "c"}}},
		{name: "cr progress collapses", writes: []string{"10%\r20%\r", "30%\n"},
			want: []want{{text: "30%"}}},
		{name: "cr progress ended by crlf", writes: []string{"10%\r20%\r\r\n"},
			want: []want{{text: "20%"}}},
		{name: "cr progress at close", writes: []string{"50%\r60%\r"},
			want: []want{{text: "60%"}}},
		{name: "cr then final text", writes: []string{"50%\rdone\nnext\n"},
			want: []want{{text: "done"}, {text: "next"}}},
		{name: "invalid utf-8", writes: []string{"a\xffb\xc3\n"},
			want: []want{{text: "a\uFFFDb\uFFFD"}}},
		{name: "rune split across writes", writes: []string{"h\xc3", "\xa9\n"},
			want: []want{{text: "hé"}}},
		{name: "line at the cap", maxLine: 10, writes: []string{"0123456789\n"},
			want: []want{{text: "0123456789"}}},
		{name: "long line cut and rest discarded", maxLine: 10, writes: []string{"0123456789abcdefghij\nnext\n"},
			want: []want{{text: "0123456789", truncated: true}, {text: "next"}}},
		{name: "long line across writes with cr in the discarded rest", maxLine: 10,
			writes: []string{"xxxxxxxx", "yyyyyy", "zz\rqq", "q\nok\n"},
			want:   []want{{text: "xxxxxxxxyy", truncated: true}, {text: "ok"}}},
		{name: "cut on a rune boundary", maxLine: 10, writes: []string{"aaaaaaaaaé" + strings.Repeat("b", 20) + "\n"},
			want: []want{{text: "aaaaaaaaa", truncated: true}}},
		{name: "invalid bytes grow past the cap", maxLine: 10, writes: []string{"\xffa\xffa\xffa\xffa\n"},
			want: []want{{text: "\uFFFDa\uFFFDa", truncated: true}}},
		{name: "secret", masks: []string{"hunter22"}, writes: []string{"pw=hunter22;hunter22\n"},
			want: []want{{text: "pw=***;***"}}},
		{name: "secret prefix that does not complete", masks: []string{"hunter22"}, writes: []string{"hunt", "er2", "!\nhunter2"},
			want: []want{{text: "hunter2!"}, {text: "hunter2"}}},
		{name: "overlapping secrets", masks: []string{"cde", "abcdef"}, writes: []string{"abcdef cde abcde\n"},
			want: []want{{text: "*** *** ab***"}}},
		{name: "multi-line secret", masks: []string{"line-one\r\nline-two\nab"}, writes: []string{"line-one, line-two, ab\n"},
			want: []want{{text: "***, ***, ab"}}},
		{name: "add-mask", writes: []string{"::add-mask::s3cr3t\n", "x s3cr3t\n"},
			want: []want{{text: "x ***"}}},
		{name: "add-mask split across writes", writes: []string{"::add-", "mask::s3cr", "3t\r\nx s3", "cr3t"},
			want: []want{{text: "x ***"}}},
		{name: "add-mask of a value holding a known secret", masks: []string{"abc"}, writes: []string{"::add-mask::xxabcxx\nxxabcxx abc\n"},
			want: []want{{text: "*** ***"}}},
		{name: "add-mask at close", writes: []string{"::add-mask::s3cr3t"}},
		{name: "empty add-mask", writes: []string{"::add-mask::\n"}},
		{name: "not add-mask", writes: []string{"echo ::add-mask::abc\n::add-mas\n"},
			want: []want{{text: "echo ::add-mask::abc"}, {text: "::add-mas"}}},
		{name: "long add-mask is dropped whole", maxLine: 20, writes: []string{"::add-mask::" + strings.Repeat("v", 30) + "\nok\n"},
			want: []want{{text: "an ::add-mask:: line longer than the line limit was dropped; nothing was masked"}, {text: "ok"}}},
		{name: "long add-mask of masked text is dropped whole", maxLine: 20, masks: []string{"abcdefgh"},
			writes: []string{"::add-mask::" + strings.Repeat("abcdefgh", 7) + "\nok\n"},
			want:   []want{{text: "an ::add-mask:: line longer than the line limit was dropped; nothing was masked"}, {text: "ok"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r, b := setupRecorder(t, tt.maxLine)
			for _, m := range tt.masks {
				r.Mask(m)
			}
			w := r.Writer(Stdout)
			for _, s := range tt.writes {
				write(t, w, s)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var got []want
			for _, l := range b.sink.lines {
				got = append(got, want{text: l.Text, truncated: l.Truncated})
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("lines:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestRecorderLineFields(t *testing.T) {
	t.Parallel()
	r, b := setupRecorder(t, 0)
	w := r.Writer(Stderr)
	write(t, w, "one\ntwo\nthr")
	b.now.Advance(time.Second)
	write(t, w, "ee\n")
	r.System("step skipped")

	if len(b.sink.calls) != 3 || len(b.sink.calls[0]) != 2 {
		t.Fatalf("sink calls %v: want one per call that completed lines", b.sink.calls)
	}
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC).UnixMilli()
	want := []Line{
		{Seq: 1, TS: start, Stream: Stderr, Text: "one"},
		{Seq: 2, TS: start, Stream: Stderr, Text: "two"},
		{Seq: 3, TS: start + 1000, Stream: Stderr, Text: "three"},
		{Seq: 4, TS: start + 1000, Stream: System, Text: "step skipped"},
	}
	if !slices.Equal(b.sink.lines, want) {
		t.Errorf("lines:\n got %+v\nwant %+v", b.sink.lines, want)
	}
	if got := r.Lines(); got != 4 {
		t.Errorf("Lines() = %d, want 4", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write([]byte("late\n")); err == nil {
		t.Error("Write after Close succeeded")
	}
}

func TestRecorderSystemIsMasked(t *testing.T) {
	t.Parallel()
	r, b := setupRecorder(t, 0)
	r.Mask("hunter22")
	r.System("login with hunter22\nsecond")
	if got, want := b.sink.texts(), []string{"login with ***", "second"}; !slices.Equal(got, want) {
		t.Errorf("texts %q, want %q", got, want)
	}
}

func TestRecorderMaskRegisteredMidLine(t *testing.T) {
	t.Parallel()
	r, b := setupRecorder(t, 0)
	w := r.Writer(Stdout)
	write(t, w, "token=abc")
	r.Mask("abcdef")
	write(t, w, "def\n")
	if got, want := b.sink.texts(), []string{"token=***"}; !slices.Equal(got, want) {
		t.Errorf("texts %q, want %q", got, want)
	}
}

// TestRecorderMaskEverySplit writes a line holding a secret in two and in three writes at
// every split point, and byte by byte.
func TestRecorderMaskEverySplit(t *testing.T) {
	t.Parallel()
	const secret = "s3cr3t-v@lue"
	const text = "before s3cr3t-v@lue s3cr3t-v@lu after s3cr3t-v@lue"
	const want = "before *** s3cr3t-v@lu after ***"
	check := func(t *testing.T, parts []string) {
		t.Helper()
		for _, end := range []string{"\n", ""} { // ended by a newline, or by Close
			r, b := setupRecorder(t, 0)
			r.Mask(secret)
			w := r.Writer(Stdout)
			for _, p := range parts {
				write(t, w, p)
			}
			write(t, w, end)
			_ = w.Close()
			if got := b.sink.texts(); !slices.Equal(got, []string{want}) {
				t.Fatalf("writes %q: got %q, want %q", parts, got, want)
			}
		}
	}
	for i := 0; i <= len(text); i++ {
		check(t, []string{text[:i], text[i:]})
		for j := i; j <= len(text); j++ {
			check(t, []string{text[:i], text[i:j], text[j:]})
		}
	}
	var bytewise []string
	for i := range len(text) {
		bytewise = append(bytewise, text[i:i+1])
	}
	check(t, bytewise)
}

// TestRecorderSecretAtCap puts a secret at every position around the line cap: the cut
// line must hold the mask (or part of it), never part of the secret.
func TestRecorderSecretAtCap(t *testing.T) {
	t.Parallel()
	const maxLine = 20
	const secret = "TOPSECRET"
	for pos := 5; pos <= 30; pos++ {
		line := strings.Repeat("x", pos) + secret + "tail"
		masked := strings.Repeat("x", pos) + "***" + "tail"
		want, truncated := masked, false
		if len(masked) > maxLine {
			want, truncated = masked[:maxLine], true
		}
		for _, bytewise := range []bool{false, true} {
			r, b := setupRecorder(t, maxLine)
			r.Mask(secret)
			w := r.Writer(Stdout)
			if bytewise {
				for i := range len(line) {
					write(t, w, line[i:i+1])
				}
			} else {
				write(t, w, line)
			}
			write(t, w, "\nnext\n")
			got := b.sink.lines
			if len(got) != 2 || got[0].Text != want || got[0].Truncated != truncated || got[1].Text != "next" {
				t.Fatalf("secret at %d (bytewise %v): got %+v, want %q truncated=%v then next", pos, bytewise, got, want, truncated)
			}
			if strings.Contains(got[0].Text, "TOP") {
				t.Fatalf("secret at %d: %q leaks a prefix of the secret", pos, got[0].Text)
			}
		}
	}
}

func TestRecorderCRProgressEmitsAfterASecond(t *testing.T) {
	t.Parallel()
	r, b := setupRecorder(t, 0)
	w := r.Writer(Stdout)
	write(t, w, "10%\r") // collapsed: the oldest pending segment
	b.now.Advance(500 * time.Millisecond)
	write(t, w, "20%\r") // collapsed: only 0.5 s since 10%
	b.now.Advance(600 * time.Millisecond)
	write(t, w, "30%\r") // 1.1 s since 10%: emitted
	if got, want := b.sink.texts(), []string{"30%"}; !slices.Equal(got, want) {
		t.Fatalf("after 1.1 s: texts %q, want %q", got, want)
	}
	b.now.Advance(100 * time.Millisecond)
	write(t, w, "40%\r") // the timer starts again at 40%
	b.now.Advance(900 * time.Millisecond)
	write(t, w, "50%\r")
	write(t, w, "\n") // the line ends: its latest segment is emitted
	write(t, w, "a\rb\n")
	b.now.Advance(2 * time.Second)
	write(t, w, "c\rd")
	b.now.Advance(2 * time.Second)
	write(t, w, "\r\n") // an emitted segment is not repeated by the line end
	if got, want := b.sink.texts(), []string{"30%", "50%", "b", "d"}; !slices.Equal(got, want) {
		t.Errorf("texts %q, want %q", got, want)
	}
}

// TestRecorderConcurrentStreams writes stdout and stderr from two goroutines, as an
// executor's pipe readers do, and checks seq is dense and each stream keeps its order.
func TestRecorderConcurrentStreams(t *testing.T) {
	t.Parallel()
	r, b := setupRecorder(t, 0)
	r.Mask("secret-token")
	const perStream = 2000
	var wg sync.WaitGroup
	for i, stream := range []string{Stdout, Stderr} {
		wg.Go(func() {
			var out strings.Builder
			for n := range perStream {
				fmt.Fprintf(&out, "%s line %d secret-token\n", stream, n)
			}
			data := out.String()
			rng := rand.New(rand.NewPCG(uint64(i), 1))
			w := r.Writer(stream)
			for len(data) > 0 {
				k := min(len(data), 1+rng.IntN(100))
				if _, err := w.Write([]byte(data[:k])); err != nil {
					t.Error(err)
					return
				}
				data = data[k:]
			}
			_ = w.Close()
		})
	}
	wg.Wait()
	lines := b.sink.lines
	if len(lines) != 2*perStream {
		t.Fatalf("%d lines, want %d", len(lines), 2*perStream)
	}
	next := map[string]int{}
	for i, l := range lines {
		if l.Seq != int64(i+1) {
			t.Fatalf("line %d has seq %d", i, l.Seq)
		}
		if want := fmt.Sprintf("%s line %d ***", l.Stream, next[l.Stream]); l.Text != want {
			t.Fatalf("seq %d: %q, want %q", l.Seq, l.Text, want)
		}
		next[l.Stream]++
	}
}

// TestRecorderAnnotate: the worker's own annotation is one masked system line of its
// level, carrying the step and a masked title, numbered like any other line.
func TestRecorderAnnotate(t *testing.T) {
	t.Parallel()
	r, b := setupRecorder(t, 0)
	r.Mask("hunter22")
	r.System("before")
	r.Annotate(3, LevelWarning, "title hunter22", "two\nlines hunter22")
	b.sink.mu.Lock()
	defer b.sink.mu.Unlock()
	if len(b.sink.lines) != 2 {
		t.Fatalf("%d lines, want 2", len(b.sink.lines))
	}
	l := b.sink.lines[1]
	if l.Seq != 2 || l.Stream != System || l.Level != LevelWarning || l.Text != "two lines ***" || !l.Annotated() {
		t.Errorf("line %+v, want a masked warning system line, seq 2", l)
	}
	if a := l.Annotation; a.Step != 3 || a.Title != "title ***" {
		t.Errorf("annotation %+v, want step 3, title masked", *a)
	}
}

// TestRecorderMaskText: text of many lines is masked as a log line is, in every form
// MaskSecret registers, a secret's form that spans lines too; text without one is
// unchanged.
func TestRecorderMaskText(t *testing.T) {
	t.Parallel()
	r, _ := setupRecorder(t, 0)
	r.MaskSecret(testSecret)
	r.Mask("abc\ndef")
	for _, s := range secretTexts() {
		got := r.MaskText("| cell |\n" + s + "\n")
		if strings.Contains(got, testSecret) || !strings.Contains(got, maskText) || !strings.HasPrefix(got, "| cell |\n") {
			t.Errorf("MaskText(%q) = %q", s, got)
		}
	}
	if got := r.MaskText("x abc\ndef y"); strings.Contains(got, "abc") || strings.Contains(got, "def") {
		t.Errorf("a secret's lines: %q", got)
	}
	if got := r.MaskText("nothing here\n"); got != "nothing here\n" {
		t.Errorf("text without a secret: %q", got)
	}
}
