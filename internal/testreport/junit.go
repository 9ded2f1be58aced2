package testreport

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// parseJUnit reads a JUnit XML report token by token, never as a tree: a report of tens
// of megabytes costs the memory of one testcase at a time. The root is <testsuites> or a
// bare <testsuite>; testsuites may nest. A testcase's suite is its classname, or else
// the innermost named testsuite's name, or else the report's file. A report that breaks
// off (a job killed while its tool wrote it) keeps the testcases complete before the
// break, with a warning.
func parseJUnit(p *parser, r io.Reader) error {
	cr := &xmlCleanReader{r: r}
	d := xml.NewDecoder(cr)
	// Test tools declare all sorts of encodings and nearly always write UTF-8; bytes
	// that are not UTF-8 were already replaced by the clean reader and counted.
	d.CharsetReader = func(_ string, in io.Reader) (io.Reader, error) { return in, nil }
	j := &junit{p: p, d: d, r: cr, out: tail{max: MaxOutputBytes}}
	err := j.read()
	if err == nil && cr.replaced > 0 {
		p.warnf(0, "%d characters that XML does not allow (invalid UTF-8, control characters) were replaced by U+FFFD", cr.replaced)
	}
	return err
}

type junit struct {
	p     *parser
	d     *xml.Decoder
	r     *xmlCleanReader
	out   tail   // the current testcase's output, reused from one testcase to the next
	head  []byte // the start of a failure's or skip's text, for its message
	tests int    // testcases read to their end
}

func (j *junit) read() error {
	var suites []string // names of the open testsuite(s) elements, innermost last
	for {
		tok, err := j.d.Token()
		if err != nil {
			return j.broken(err, len(suites) > 0)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			if len(suites) == 0 && name != "testsuites" && name != "testsuite" {
				line, _ := j.d.InputPos()
				return j.p.formatError(line, fmt.Sprintf("the root element is <%s>, not <testsuites> or <testsuite>", cut(name, 80)))
			}
			switch name {
			case "testsuites", "testsuite":
				suites = append(suites, attr(t, "name"))
			case "testcase":
				suite := j.p.file
				for i := len(suites) - 1; i >= 0; i-- {
					if suites[i] != "" {
						suite = suites[i]
						break
					}
				}
				if err := j.testcase(t, suite); err != nil {
					return j.broken(err, true)
				}
			default:
				// properties, a suite's own system-out, anything a tool adds.
				if err := j.d.Skip(); err != nil {
					return j.broken(err, true)
				}
			}
		case xml.EndElement:
			// Only testsuite(s) elements end here: Skip and testcase read the others
			// to their end, and the strict decoder checks that ends match.
			suites = suites[:len(suites)-1]
			if len(suites) == 0 {
				return nil
			}
		}
	}
}

// broken turns a decoder error into Parse's answer: before the root element it is not
// a JUnit report at all; after it, the report broke off and what was complete is kept.
// An error of the reader itself is returned as it is.
func (j *junit) broken(err error, inRoot bool) error {
	if rerr := j.r.err; rerr != nil && rerr != io.EOF {
		return fmt.Errorf("read %s: %w", j.p.file, rerr)
	}
	line, _ := j.d.InputPos()
	msg := err.Error()
	var syn *xml.SyntaxError
	if errors.As(err, &syn) {
		line, msg = syn.Line, syn.Msg
	}
	switch {
	case err == io.EOF && !inRoot:
		return j.p.formatError(0, "no XML element in it")
	case !inRoot:
		return j.p.formatError(line, "not XML: "+msg)
	}
	// The strict decoder reports an element left open at the end as a syntax error,
	// so a plain end inside the root is never seen; it would be read the same way.
	j.p.warnf(line, "the report breaks off here (%s): the %d testcases complete before it are kept", msg, j.tests)
	return nil
}

// testcase reads one <testcase> to its end and adds its result.
func (j *junit) testcase(start xml.StartElement, suite string) error {
	line, _ := j.d.InputPos()
	res := Result{Suite: suite, Status: Passed}
	var rawTime, rawLine string
	for _, a := range start.Attr {
		if a.Name.Space != "" {
			continue
		}
		switch a.Name.Local {
		case "name":
			res.Name = a.Value
		case "classname":
			if a.Value != "" {
				res.Suite = a.Value
			}
		case "file":
			res.File = a.Value
		case "line":
			rawLine = a.Value
		case "time":
			rawTime = a.Value
		}
	}
	if res.Name == "" {
		j.p.warnf(line, "a testcase without a name is kept as %q", "(no name)")
	}
	if rawLine != "" {
		if n, ok := atoi(strings.TrimSpace(rawLine)); ok {
			res.Line = n
		} else {
			j.p.warnf(line, "testcase %q: line %q is not a line number", cut(res.Name, 200), cut(rawLine, 40))
		}
	}
	if rawTime != "" {
		if f, ok := parseSeconds(rawTime); ok {
			res.Duration = j.p.seconds(line, f)
		} else {
			j.p.warnf(line, "testcase %q: time %q is not a number of seconds: taken as 0", cut(res.Name, 200), cut(rawTime, 40))
		}
	}

	j.out.Reset()
	var attemptMsg string
	for {
		tok, err := j.d.Token()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			switch t.Name.Local {
			case "failure", "error":
				st := Failed
				if t.Name.Local == "error" {
					st = Errored
				}
				msg := attr(t, "message")
				if err := j.text(msg == ""); err != nil {
					return err
				}
				if !res.Status.Failing() {
					res.Message = firstNonEmpty(msg, firstParagraph(j.head), attr(t, "type"))
				}
				// An error outranks a failure: the test could not run to a verdict.
				if res.Status != Errored {
					res.Status = st
				}
			case "skipped":
				msg := attr(t, "message")
				if err := j.textHead(msg == ""); err != nil {
					return err
				}
				if res.Status == Passed {
					res.Status = Skipped
					res.Message = firstNonEmpty(msg, firstParagraph(j.head))
				}
			case "flakyFailure", "flakyError", "rerunFailure", "rerunError":
				res.FailedAttempts++
				if attemptMsg == "" {
					attemptMsg = firstNonEmpty(attr(t, "message"), attr(t, "type"))
				}
				if err := j.d.Skip(); err != nil {
					return err
				}
			case "system-out", "system-err":
				if err := j.text(false); err != nil {
					return err
				}
			default:
				if err := j.d.Skip(); err != nil {
					return err
				}
			}
		case xml.EndElement:
			if res.Status == Passed && res.FailedAttempts > 0 {
				res.Message = attemptMsg
			}
			if res.Status.Failing() {
				res.Output = j.out.String()
			}
			j.tests++
			j.p.add(res)
			return nil
		}
	}
}

// headMax is how much of a failure's text is looked at for its message: enough for a
// first paragraph as long as a message may be.
const headMax = 2 * MaxMessageBytes

// text reads the current element's text to its end into the testcase's output, and its
// start into j.head when head is set.
func (j *junit) text(head bool) error {
	if n := j.out.Len(); n > 0 && j.out.buf[n-1] != '\n' {
		j.out.writeString("\n")
	}
	return j.readText(&j.out, head)
}

// textHead reads the current element's text to its end, keeping only its start in
// j.head when head is set.
func (j *junit) textHead(head bool) error { return j.readText(nil, head) }

func (j *junit) readText(out *tail, head bool) error {
	j.head = j.head[:0]
	for depth := 1; depth > 0; {
		tok, err := j.d.Token()
		if err != nil {
			return err
		}
		switch t := tok.(type) {
		case xml.StartElement:
			depth++
		case xml.EndElement:
			depth--
		case xml.CharData:
			if out != nil {
				out.write(t)
			}
			if head && len(j.head) < headMax {
				j.head = append(j.head, t[:min(len(t), headMax-len(j.head))]...)
			}
		}
	}
	return nil
}

// attr returns the value of start's attribute name, without a namespace.
func attr(start xml.StartElement, name string) string {
	for _, a := range start.Attr {
		if a.Name.Local == name && a.Name.Space == "" {
			return a.Value
		}
	}
	return ""
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if strings.TrimSpace(v) != "" {
			return v
		}
	}
	return ""
}

// firstParagraph is the message a failure's text gives when it has no message
// attribute: its first lines up to a blank line, at most five of them.
func firstParagraph(b []byte) string {
	s := strings.TrimLeft(string(b), " \t\r\n")
	var lines []string
	for len(lines) < 5 && s != "" {
		line, rest, _ := strings.Cut(s, "\n")
		line = strings.TrimRight(line, " \t\r")
		if line == "" {
			break
		}
		lines = append(lines, line)
		s = rest
	}
	return strings.Join(lines, "\n")
}

// parseSeconds reads a testcase's time: a plain decimal number of seconds, optionally
// with an exponent, or with commas between groups of three digits as some tools write
// it ("1,234.5"). Anything else, a lone decimal comma included, is not understood.
func parseSeconds(s string) (float64, bool) {
	s = strings.TrimSpace(s)
	if strings.IndexByte(s, ',') >= 0 {
		whole, frac, hasFrac := strings.Cut(s, ".")
		groups := strings.Split(whole, ",")
		if len(groups[0]) == 0 || len(groups[0]) > 3 {
			return 0, false
		}
		for _, g := range groups[1:] {
			if len(g) != 3 {
				return 0, false
			}
		}
		s = strings.Join(groups, "")
		if hasFrac {
			s += "." + frac
		}
	}
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9', c == '.', c == 'e', c == 'E', c == '+', c == '-':
		default:
			return 0, false
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// xmlCleanReader hands a report's bytes on to the XML decoder with what XML 1.0 does not
// allow replaced by U+FFFD: invalid UTF-8, control characters other than tab, newline
// and carriage return, U+FFFE and U+FFFF, and character references to any of these
// (&#27; for the escape that colours terminal output). Test tools copy a test's output
// into the report as they got it, and one such byte would otherwise end the report
// there. A UTF-8 byte order mark at the start is dropped.
type xmlCleanReader struct {
	r        io.Reader
	buf      []byte // raw bytes; buf[:n] were read and not yet cleaned
	n        int
	clean    []byte // cleaned bytes; out is what the decoder has not taken yet
	out      []byte
	err      error
	started  bool
	replaced int
}

// maxCharRef is the longest character reference the reader recognises across the end
// of one read: "&#x10FFFF;" with a few leading zeros.
const maxCharRef = 16

func (c *xmlCleanReader) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		c.fill()
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

func (c *xmlCleanReader) fill() {
	if c.buf == nil {
		c.buf = make([]byte, 64<<10)
	}
	m, err := c.r.Read(c.buf[c.n:])
	c.n += m
	if err != nil {
		c.err = err
	}
	data := c.buf[:c.n]
	if !c.started {
		if len(data) < 3 && c.err == nil {
			return
		}
		c.started = true
		if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
			data = data[3:]
		}
	}
	end := len(data)
	if c.err == nil {
		end = c.safeEnd(data)
	}
	c.clean = c.clean[:0]
	from := 0
	for i := 0; i < end; {
		b := data[i]
		if b >= 0x20 && b < 0x80 && b != '&' || b == '\t' || b == '\n' || b == '\r' {
			i++
			continue
		}
		size := 1
		bad := false
		switch {
		case b == '&':
			size, bad = badCharRef(data[i:end])
		case b < 0x20:
			bad = true
		default:
			var r rune
			r, size = utf8.DecodeRune(data[i:end])
			bad = r == utf8.RuneError && size == 1 || r == 0xFFFE || r == 0xFFFF
		}
		if bad {
			c.clean = append(c.clean, data[from:i]...)
			c.clean = append(c.clean, "\uFFFD"...)
			c.replaced++
			from = i + size
		}
		i += size
	}
	c.clean = append(c.clean, data[from:end]...)
	c.out = c.clean
	c.n = copy(c.buf, data[end:])
}

// safeEnd is where cleaning data may stop without splitting a rune or a character
// reference that the next read completes.
func (c *xmlCleanReader) safeEnd(data []byte) int {
	end := len(data)
	for k := 1; k <= utf8.UTFMax && k <= len(data); k++ {
		b := data[len(data)-k]
		if b < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(b) {
			if !utf8.FullRune(data[len(data)-k:]) {
				end = len(data) - k
			}
			break
		}
	}
	from := max(0, len(data)-maxCharRef)
	if k := bytes.LastIndexByte(data[from:], '&'); k >= 0 && bytes.IndexByte(data[from+k:], ';') < 0 {
		end = min(end, from+k)
	}
	return end
}

// badCharRef reports whether s starts with a character reference to a character XML
// does not allow, and its length. Named entities and text are never bad.
func badCharRef(s []byte) (int, bool) {
	if len(s) < 3 || s[1] != '#' {
		return 1, false
	}
	semi := bytes.IndexByte(s[:min(len(s), maxCharRef)], ';')
	if semi < 0 {
		return 1, false
	}
	digits, base := string(s[2:semi]), 10
	if strings.HasPrefix(digits, "x") {
		digits, base = digits[1:], 16
	}
	v, err := strconv.ParseUint(digits, base, 32)
	if err != nil {
		return 1, false // the decoder says what is wrong with it
	}
	r := rune(v)
	ok := r == 0x09 || r == 0x0A || r == 0x0D ||
		r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF
	return semi + 1, !ok
}
