package testreport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"
)

// ErrFormat is what Parse's error wraps when the input is not a report of its format at
// all. The caller warns and keeps nothing of that file; the job does not fail for it.
var ErrFormat = errors.New("not a report of that format")

// FormatError says why and where an input could not be read as its format at all.
type FormatError struct {
	Format string
	File   string
	Line   int // 0 when not known
	Reason string
}

func (e *FormatError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("read %s as %s: line %d: %s", e.File, e.Format, e.Line, e.Reason)
	}
	return fmt.Sprintf("read %s as %s: %s", e.File, e.Format, e.Reason)
}

// Is makes errors.Is(err, ErrFormat) hold.
func (e *FormatError) Is(target error) bool { return target == ErrFormat }

// Parse reads one report file of the given format. file is its path relative to the
// workspace (warnings name it; TAP uses it as the suite). room is how many more results
// the job may keep (MaxTestsPerJob less those kept from earlier reports): past it, the
// rest are counted and a warning says how many were not kept. It returns the results,
// warnings about what was cut, skipped or not understood, and an error only when the
// input cannot be read as that format at all (not XML / not one JSON event / no TAP
// line): then the caller warns and keeps nothing of that file.
//
// The error wraps ErrFormat (as a *FormatError) when the content is not of the format,
// or is the reader's own error. Results come in the report's order; a test the report
// holds more than once (go test -count=2, a tool's own rerun written as another
// testcase) gives one result each time. Every result has a valid Status and a
// non-empty Name; all strings are valid UTF-8 without NUL and within the bounds. Parse
// reads at most MaxReportBytes of r.
func Parse(format, file string, r io.Reader, room int) ([]Result, []Warning, error) {
	var parse func(*parser, io.Reader) error
	switch format {
	case FormatJUnit:
		parse = parseJUnit
	case FormatGoTestJSON:
		parse = parseGoTestJSON
	case FormatTAP:
		parse = parseTAP
	default:
		return nil, nil, fmt.Errorf("read %s: unknown report format %q", file, format)
	}
	p := &parser{format: format, file: file, room: max(room, 0)}
	lr := &limitReader{r: r, left: MaxReportBytes}
	if err := parse(p, lr); err != nil {
		return nil, nil, err
	}
	if lr.over {
		p.warnAlways(0, fmt.Sprintf("the report is over %d MiB: only its first %d MiB were read",
			MaxReportBytes>>20, MaxReportBytes>>20))
	}
	p.finish()
	return p.results, p.warnings, nil
}

// maxWarnings bounds the warnings one report file gives; past it they are counted in
// one last warning, so a report with a flaw on every line does not flood the job.
const maxWarnings = 20

// parser gathers what one report yields: the results it keeps within room and the
// warnings. Every result goes through add, which makes it safe and bounded.
type parser struct {
	format, file string
	room         int
	results      []Result
	notKept      int
	warnings     []Warning
	moreWarnings int
}

// add keeps r if there is room and returns its index in p.results, or -1 when it is
// only counted.
func (p *parser) add(r Result) int {
	if len(p.results) >= p.room {
		p.notKept++
		return -1
	}
	r.Suite = p.name("suite", r.Suite)
	r.Name = p.name("test name", r.Name)
	if r.Name == "" {
		r.Name = "(no name)"
	}
	r.File = p.name("file", r.File)
	if r.Line < 0 || r.Line > MaxLine {
		p.warnf(0, "test %q: line %d is out of range: taken as 0", cut(r.Name, 200), r.Line)
		r.Line = 0
	}
	if !r.Status.Valid() {
		r.Status = Errored
	}
	if r.Duration < 0 || r.Duration > MaxDuration {
		p.warnf(0, "test %q: duration %v is out of range: taken as 0", cut(r.Name, 200), r.Duration)
		r.Duration = 0
	}
	r.Message = cut(clean(r.Message), MaxMessageBytes)
	if r.Status.Failing() {
		r.Output = cutTail(clean(r.Output), MaxOutputBytes, 0)
	} else {
		r.Output = ""
	}
	r.FailedAttempts = max(r.FailedAttempts, 0)
	p.results = append(p.results, r)
	return len(p.results) - 1
}

// skip counts n results that had no room.
func (p *parser) skip(n int) { p.notKept += n }

// full reports whether no more results can be kept.
func (p *parser) full() bool { return len(p.results) >= p.room }

// name cleans a name and cuts it at MaxNameBytes, warning when it does.
func (p *parser) name(what, s string) string {
	s = clean(s)
	if len(s) > MaxNameBytes {
		p.warn(0, fmt.Sprintf("a %s of %d bytes was cut to %d: %s", what, len(s), MaxNameBytes, cut(s, 80)))
		s = cut(s, MaxNameBytes)
	}
	return s
}

// warn adds a warning, or counts it once maxWarnings are given.
func (p *parser) warn(line int, msg string) {
	if len(p.warnings) >= maxWarnings {
		p.moreWarnings++
		return
	}
	p.warnAlways(line, msg)
}

func (p *parser) warnf(line int, format string, args ...any) {
	p.warn(line, fmt.Sprintf(format, args...))
}

func (p *parser) warnAlways(line int, msg string) {
	p.warnings = append(p.warnings, Warning{File: p.file, Line: max(line, 0), Message: cut(clean(msg), MaxMessageBytes)})
}

// finish adds the warnings that sum up: those not shown and the results not kept.
func (p *parser) finish() {
	if p.moreWarnings > 0 {
		p.warnAlways(0, fmt.Sprintf("%d more warnings like these were not shown", p.moreWarnings))
	}
	if p.notKept > 0 {
		p.warnAlways(0, fmt.Sprintf("%d tests were not kept: the job keeps at most %d test results",
			p.notKept, MaxTestsPerJob))
	}
}

// formatError is the error for an input that is not of p's format at all.
func (p *parser) formatError(line int, reason string) error {
	return &FormatError{Format: p.format, File: p.file, Line: line, Reason: clean(reason)}
}

// seconds turns a duration in seconds as a report writes it into a time.Duration,
// warning (and giving 0) when it is not a finite, non-negative, representable number.
func (p *parser) seconds(line int, f float64) time.Duration {
	// NaN fails both comparisons; 9e9 s is about 285 years, below time.Duration's limit.
	if !(f >= 0 && f < 9e9) {
		p.warnf(line, "duration %v seconds is not understood: taken as 0", f)
		return 0
	}
	return time.Duration(f * float64(time.Second))
}

// limitReader reads at most left bytes of r and notes whether r held more.
type limitReader struct {
	r    io.Reader
	left int64
	over bool
}

func (l *limitReader) Read(b []byte) (int, error) {
	if l.left <= 0 {
		if !l.over {
			var one [1]byte
			if n, _ := io.ReadFull(l.r, one[:]); n > 0 {
				l.over = true
			}
		}
		return 0, io.EOF
	}
	if int64(len(b)) > l.left {
		b = b[:l.left]
	}
	n, err := l.r.Read(b)
	l.left -= int64(n)
	return n, err
}

// maxLineBytes bounds a line of a line-based report (go test -json, TAP). A longer line
// is read cut to this length; the rest of it is skipped.
const maxLineBytes = 1 << 20

// lineReader reads a report line by line, numbering lines from 1.
type lineReader struct {
	br  *bufio.Reader
	n   int
	err error
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{br: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line without its line ending, valid until the next call, and
// whether it was longer than maxLineBytes and cut. ok is false at the end of the input
// or on a read error, which err then holds.
func (l *lineReader) next() (line []byte, long, ok bool) {
	if l.err != nil {
		return nil, false, false
	}
	var buf []byte
	for {
		chunk, err := l.br.ReadSlice('\n')
		switch {
		case err == bufio.ErrBufferFull:
			if !long {
				if len(buf)+len(chunk) > maxLineBytes {
					chunk = chunk[:maxLineBytes-len(buf)]
					long = true
				}
				buf = append(buf, chunk...)
			}
			continue
		case err != nil && err != io.EOF:
			l.err = err
			return nil, false, false
		case err == io.EOF && len(chunk) == 0 && buf == nil:
			l.err = io.EOF
			return nil, false, false
		}
		if buf != nil {
			if !long {
				if len(buf)+len(chunk) > maxLineBytes {
					chunk = chunk[:maxLineBytes-len(buf)]
					long = true
				}
				buf = append(buf, chunk...)
			}
			chunk = buf
		}
		if err == io.EOF {
			l.err = io.EOF
		}
		l.n++
		n := len(chunk)
		if n > 0 && chunk[n-1] == '\n' {
			n--
			if n > 0 && chunk[n-1] == '\r' {
				n--
			}
		}
		return chunk[:n], long, true
	}
}

// readErr is the reader's error that ended the lines, or nil at a plain end.
func (l *lineReader) readErr() error {
	if l.err == io.EOF {
		return nil
	}
	return l.err
}

// atoi parses a non-negative decimal int, false when s is not one or too large.
func atoi(s string) (int, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(s)
	return n, err == nil
}
