package testreport

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Names of the results TAP gives that are not tests the report names.
const (
	// TAPSkippedName is the one Skipped result of a report whose plan is "1..0 # SKIP
	// reason": the whole file was skipped.
	TAPSkippedName = "(file)"
	// TAPBailOutName is the one Errored result of a "Bail out!" that left no planned
	// test unrun, or came with no plan: each planned test that did not run is an
	// Errored result of its own instead, named like an unnamed test, "(test N)".
	TAPBailOutName = "(bail out)"
)

// maxTAPPlan bounds the plan a TAP report may declare; a larger plan is not a count of
// tests anyone runs, and would only make as many "not run" results.
const maxTAPPlan = 1_000_000_000

// maxYAMLBytes bounds a TAP diagnostic block that is parsed; a longer one still goes
// to the test's output.
const maxYAMLBytes = 64 << 10

// parseTAP reads a TAP stream (versions 12 to 14): an optional version line, a plan at
// the start or the end, test lines with their SKIP and TODO directives, a YAML
// diagnostic block after a test line, "Bail out!", and subtests indented four spaces
// (TAP 14), named "parent/child". Lines it does not know are ignored, as TAP says, but
// kept in the output of the test before them.
//
// A SKIP test is Skipped whether ok or not. A failing TODO test is not a failure: it is
// Skipped, with "TODO" and its reason as the message; a TODO test that passes is Passed.
// Tests the plan counts that the report does not hold are Errored, "not run".
func parseTAP(p *parser, r io.Reader) error {
	t := &tap{p: p}
	t.stack = []*tapContext{newTAPContext(0, "")}
	lr := newLineReader(r)
	for {
		line, long, ok := lr.next()
		if !ok {
			break
		}
		if long {
			p.warnf(lr.n, "a line over %d bytes was cut", maxLineBytes)
		}
		if t.line(lr.n, string(line)) {
			break
		}
	}
	if err := lr.readErr(); err != nil {
		return fmt.Errorf("read %s: %w", p.file, err)
	}
	if !t.tap {
		return p.formatError(0, "no TAP line (version, plan, test line or Bail out!) in it")
	}
	if !t.bailed {
		t.end(lr.n)
	}
	return nil
}

// tapContext is one TAP stream: the top one, or a subtest's inside it.
type tapContext struct {
	depth     int
	name      string // the "# Subtest: name" that announced it, if any
	plan      int    // -1 until a plan is read
	planLine  int    // where the plan was, or a plan too large to count
	planAfter bool   // the plan came after the first test line: it ended the stream
	warnAfter bool   // a test line after such a plan was warned about
	tests     int    // test lines read
	next      int    // number of the next test line that gives none
	seen      map[int]bool
	results   []int  // indices in parser.results of the results this stream gave
	subtest   string // a "# Subtest: name" at this depth, naming the child to come
}

func newTAPContext(depth int, name string) *tapContext {
	return &tapContext{depth: depth, name: name, plan: -1, next: 1, seen: map[int]bool{}}
}

// tapTest is the last test line read, whose YAML block and comments may still follow.
type tapTest struct {
	res    Result
	ctx    *tapContext
	indent int
	out    tail
	// yamlOK holds until the first line after the test line: a YAML block must
	// follow its test line.
	yamlOK     bool
	inYAML     bool
	yamlIndent string
	yaml       []byte
	yamlLine   int
}

type tap struct {
	p      *parser
	stack  []*tapContext
	test   *tapTest
	child  *tapContext // a subtest just closed by the test line being read
	tap    bool        // a TAP line was read
	first  bool        // a non-empty line was read
	bailed bool
	notRun int // "not run" results given since the count was reset
}

func (t *tap) top() *tapContext { return t.stack[len(t.stack)-1] }

// line reads one line; it returns true after a bail out, when nothing more is read.
func (t *tap) line(n int, line string) bool {
	if tt := t.test; tt != nil && tt.inYAML {
		if strings.TrimRight(line, " \t\r") == tt.yamlIndent+"..." {
			tt.out.writeString(line + "\n")
			tt.inYAML = false
			t.applyYAML(tt)
			return false
		}
		if strings.HasPrefix(line, tt.yamlIndent) || strings.TrimSpace(line) == "" {
			tt.out.writeString(line + "\n")
			if len(tt.yaml) <= maxYAMLBytes {
				tt.yaml = append(append(tt.yaml, strings.TrimPrefix(line, tt.yamlIndent)...), '\n')
			}
			return false
		}
		tt.inYAML = false
		t.p.warnf(tt.yamlLine, "a YAML block that does not end with \"...\" was not read")
	}
	if !t.first {
		line = strings.TrimPrefix(line, "\xef\xbb\xbf")
	}
	body := strings.TrimLeft(line, " ")
	indent := len(line) - len(body)
	body = strings.TrimRight(body, " \t\r")
	if body == "" {
		return false
	}
	firstLine := !t.first
	t.first = true
	if tt := t.test; tt != nil && tt.yamlOK {
		tt.yamlOK = false
		if body == "---" && indent > tt.indent && indent < tt.indent+4 {
			tt.inYAML, tt.yamlIndent, tt.yamlLine = true, line[:indent], n
			tt.yaml = tt.yaml[:0]
			tt.out.writeString(line + "\n")
			return false
		}
	}

	switch {
	case strings.HasPrefix(body, "Bail out!"):
		t.tap = true
		t.bail(n, strings.TrimSpace(strings.TrimPrefix(body, "Bail out!")))
		return true
	case firstLine && indent == 0 && strings.HasPrefix(body, "TAP version "):
		t.tap = true
		if v := strings.TrimPrefix(body, "TAP version "); v != "13" && v != "14" {
			t.p.warnf(n, "TAP version %q is not one this reads (13 or 14): read as 14", cut(v, 40))
		}
		return false
	}
	kind := tapKind(body)
	level := indent / 4
	if kind == "" || kind == "comment" || indent%4 != 0 || level > t.top().depth+1 {
		t.other(line)
		return false
	}
	if level == t.top().depth+1 {
		// A deeper line starts a subtest's stream.
		name := t.top().subtest
		t.top().subtest = ""
		t.finishTest()
		if kind == "subtest" && name == "" {
			// "# Subtest: name" at the child's indentation names the child itself.
			t.stack = append(t.stack, newTAPContext(level, subtestName(body)))
			return false
		}
		t.stack = append(t.stack, newTAPContext(level, name))
	}
	for t.top().depth > level+1 {
		t.adopt(t.closeTop(""))
	}
	if t.top().depth == level+1 {
		child := t.closeTop("")
		if kind == "test" {
			t.child = child // named after the test line, read next
		} else {
			t.adopt(child)
		}
	}
	ctx := t.top()
	switch kind {
	case "subtest":
		t.finishTest()
		ctx.subtest = subtestName(body)
	case "plan":
		t.tap = true
		t.plan(n, ctx, body)
	case "test":
		t.tap = true
		t.testLine(n, ctx, indent, body)
	}
	return false
}

// other takes a line that is no part of TAP's structure: a comment or anything else.
// It goes to the output of the test before it.
func (t *tap) other(line string) {
	if t.test != nil {
		t.test.out.writeString(line + "\n")
	}
}

// tapKind says what a line is, its indentation removed: "test", "plan", "subtest" (a
// "# Subtest" comment), "comment", or "" for anything else.
func tapKind(body string) string {
	switch {
	case body == "ok" || body == "not ok" ||
		strings.HasPrefix(body, "ok ") || strings.HasPrefix(body, "not ok ") ||
		strings.HasPrefix(body, "ok\t") || strings.HasPrefix(body, "not ok\t"):
		return "test"
	case strings.HasPrefix(body, "1.."):
		if _, _, ok := parsePlan(body); ok {
			return "plan"
		}
		return ""
	case strings.HasPrefix(body, "#"):
		c := strings.TrimSpace(body[1:])
		if c == "Subtest" || strings.HasPrefix(c, "Subtest:") {
			return "subtest"
		}
		return "comment"
	}
	return ""
}

func subtestName(body string) string {
	c := strings.TrimSpace(body[1:])
	return strings.TrimSpace(strings.TrimPrefix(strings.TrimPrefix(c, "Subtest"), ":"))
}

// parsePlan reads "1..N" and an optional "# directive" after it. N is -1 for a plan
// too large to count against.
func parsePlan(body string) (int, string, bool) {
	num, directive, _ := strings.Cut(strings.TrimPrefix(body, "1.."), "#")
	num = strings.TrimSpace(num)
	if num == "" || strings.TrimLeft(num, "0123456789") != "" {
		return 0, "", false
	}
	n, ok := atoi(num)
	if !ok || n > maxTAPPlan {
		n = -1
	}
	return n, strings.TrimSpace(directive), true
}

func (t *tap) plan(n int, ctx *tapContext, body string) {
	t.finishTest()
	count, directive, _ := parsePlan(body)
	switch {
	case ctx.planLine > 0:
		t.p.warnf(n, "a second plan %q is ignored", cut(body, 80))
		return
	case count < 0:
		t.p.warnf(n, "plan %q is too large to count against: ignored", cut(body, 80))
		ctx.planLine = n
		return
	}
	ctx.plan, ctx.planLine, ctx.planAfter = count, n, ctx.tests > 0
	if count == 0 && ctx.tests > 0 {
		t.p.warnf(n, "plan 1..0 comes after %d tests", ctx.tests)
	}
	if count == 0 && ctx.depth == 0 && ctx.tests == 0 {
		if word, reason := directiveWord(directive); word == "skip" {
			t.p.add(Result{Suite: t.p.file, Name: TAPSkippedName, Status: Skipped, Message: firstNonEmpty(reason, "skipped")})
		}
	}
}

// directiveWord reads a "# SKIP reason" or "# TODO reason" comment, case-insensitive,
// the word may run on ("# skipped: no network"). word is "skip", "todo" or "".
func directiveWord(c string) (word, reason string) {
	c = strings.TrimSpace(c)
	lower := strings.ToLower(c)
	for _, w := range []string{"skip", "todo"} {
		if strings.HasPrefix(lower, w) {
			end := strings.IndexAny(c, " \t")
			if end < 0 {
				return w, ""
			}
			return w, strings.TrimSpace(c[end:])
		}
	}
	return "", ""
}

func (t *tap) testLine(n int, ctx *tapContext, indent int, body string) {
	t.finishTest()
	failed := strings.HasPrefix(body, "not ok")
	rest := strings.TrimLeft(strings.TrimPrefix(strings.TrimPrefix(body, "not "), "ok"), " \t")
	num := -1
	if digits := rest[:len(rest)-len(strings.TrimLeft(rest, "0123456789"))]; digits != "" {
		after := rest[len(digits):]
		if v, ok := atoi(digits); ok && (after == "" || after[0] == ' ' || after[0] == '\t') {
			num, rest = v, strings.TrimLeft(after, " \t")
		}
	}
	desc, comment, hasComment := cutComment(rest)
	desc = strings.TrimSpace(desc)
	if desc == "-" {
		desc = ""
	} else if d, ok := strings.CutPrefix(desc, "- "); ok {
		desc = strings.TrimSpace(d)
	}

	ctx.subtest = ""
	if ctx.planAfter && !ctx.warnAfter {
		ctx.warnAfter = true
		t.p.warnf(n, "a test line after the plan that ended the stream")
	}
	if num < 0 {
		num = ctx.next
	} else if num != ctx.next {
		t.p.warnf(n, "test %d where %d was expected", num, ctx.next)
	}
	ctx.next = num + 1
	ctx.tests++
	if ctx.seen[num] {
		t.p.warnf(n, "test number %d is given twice", num)
	}
	ctx.seen[num] = true
	if ctx.plan >= 0 && num > ctx.plan {
		t.p.warnf(n, "test %d is past the plan 1..%d", num, ctx.plan)
	}

	res := Result{Suite: t.p.file, Name: desc, Status: Passed}
	if res.Name == "" {
		res.Name = fmt.Sprintf("(test %d)", num)
	}
	if failed {
		res.Status = Failed
	}
	if hasComment {
		switch word, reason := directiveWord(comment); word {
		case "skip":
			res.Status, res.Message = Skipped, reason
		case "todo":
			if failed {
				res.Status, res.Message = Skipped, strings.TrimSpace("TODO "+reason)
			}
		default:
			res.Duration = tapTime(comment)
		}
	}
	t.test = &tapTest{res: res, ctx: ctx, indent: indent, out: tail{max: MaxOutputBytes}, yamlOK: true}
	if child := t.child; child != nil {
		// The subtest this line closed is this test's: its results are named after it.
		t.child = nil
		if desc == "" && child.name != "" {
			t.test.res.Name = child.name
		}
		t.rename(child, t.test.res.Name)
		ctx.results = append(ctx.results, child.results...)
	}
}

// finishTest adds the pending test's result.
func (t *tap) finishTest() {
	tt := t.test
	if tt == nil {
		return
	}
	t.test = nil
	if tt.inYAML {
		t.p.warnf(tt.yamlLine, "a YAML block that does not end with \"...\" was not read")
	}
	res := tt.res
	if res.Status.Failing() {
		res.Output = tt.out.String()
	}
	if i := t.p.add(res); i >= 0 {
		tt.ctx.results = append(tt.ctx.results, i)
	}
}

// closeTop ends the innermost stream, adding a result for each test its plan counts
// that it did not hold, and pops it. why is those results' message, or "" for the
// plain one.
func (t *tap) closeTop(why string) *tapContext {
	ctx := t.top()
	t.finishTest()
	t.missing(ctx, why)
	t.stack = t.stack[:len(t.stack)-1]
	return ctx
}

// adopt gives a closed subtest whose parent test line never came to the stream above
// it, its results named after its "# Subtest" comment when it had one.
func (t *tap) adopt(child *tapContext) {
	if child.name != "" {
		t.rename(child, child.name)
	}
	parent := t.top()
	parent.results = append(parent.results, child.results...)
}

func (t *tap) rename(ctx *tapContext, parent string) {
	for _, i := range ctx.results {
		t.p.results[i].Name = t.p.name("test name", parent+"/"+t.p.results[i].Name)
	}
}

func (t *tap) missing(ctx *tapContext, why string) {
	if ctx.plan < 0 {
		return
	}
	have, past := 0, 0
	for num := range ctx.seen {
		if num >= 1 && num <= ctx.plan {
			have++
		} else if num > ctx.plan {
			past++
		}
	}
	if ctx.planAfter && past > 0 {
		t.p.warnf(ctx.planLine, "%d tests are past the plan 1..%d", past, ctx.plan)
	}
	if why == "" {
		why = fmt.Sprintf("not run: the plan 1..%d counts it, the report does not hold it", ctx.plan)
	}
	left := ctx.plan - have
	for num := 1; left > 0; num++ {
		if ctx.seen[num] {
			continue
		}
		if t.p.full() {
			t.p.skip(left)
			t.notRun += left
			return
		}
		i := t.p.add(Result{Suite: t.p.file, Name: fmt.Sprintf("(test %d)", num), Status: Errored, Message: why})
		ctx.results = append(ctx.results, i)
		t.notRun++
		left--
	}
}

// bail ends the report at a "Bail out!": each test a plan counts that did not run is
// Errored, and when there is none, one result says the run bailed out.
func (t *tap) bail(n int, reason string) {
	why := strings.TrimSpace("not run: Bail out! " + reason)
	t.notRun = 0
	for len(t.stack) > 1 {
		t.adopt(t.closeTop(why))
	}
	t.finishTest()
	t.missing(t.top(), why)
	if t.notRun == 0 {
		t.p.add(Result{Suite: t.p.file, Name: TAPBailOutName, Status: Errored, Message: strings.TrimSpace("Bail out! " + reason)})
	}
	t.bailed = true
}

// end closes the streams left open at the end of the report.
func (t *tap) end(n int) {
	for len(t.stack) > 1 {
		t.adopt(t.closeTop(""))
	}
	top := t.top()
	if top.planLine == 0 && top.tests > 0 {
		t.p.warnf(n, "the report has no plan: it may have been cut short")
	}
	t.closeTop("")
}

// cutComment splits a test line's rest at its first "#" not escaped as "\#", and
// unescapes "\#" and "\\" in the description.
func cutComment(s string) (desc, comment string, ok bool) {
	if !strings.ContainsAny(s, "#\\") {
		return s, "", false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\' && i+1 < len(s) && (s[i+1] == '#' || s[i+1] == '\\'):
			b.WriteByte(s[i+1])
			i++
		case c == '#':
			return b.String(), s[i+1:], true
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), "", false
}

// tapTime reads the "time=12.5ms" some TAP producers put in a test line's comment.
func tapTime(comment string) time.Duration {
	for _, f := range strings.Fields(comment) {
		v, ok := strings.CutPrefix(f, "time=")
		if !ok {
			continue
		}
		unit := time.Second
		if s, ok := strings.CutSuffix(v, "ms"); ok {
			v, unit = s, time.Millisecond
		} else if s, ok := strings.CutSuffix(v, "s"); ok {
			v = s
		}
		if f, err := strconv.ParseFloat(v, 64); err == nil && f >= 0 && f*float64(unit) < 9e18 {
			return time.Duration(f * float64(unit))
		}
	}
	return 0
}

// applyYAML takes what a test's diagnostic block says: its message (message, or error
// as node's test runner writes it), where the test is (at: {file, line} or "file:line",
// location, or file and line keys), and duration_ms.
func (t *tap) applyYAML(tt *tapTest) {
	if len(tt.yaml) > maxYAMLBytes {
		t.p.warnf(tt.yamlLine, "a YAML block over %d KiB was not read", maxYAMLBytes>>10)
		return
	}
	m, err := decodeYAML(tt.yaml)
	if err != nil {
		t.p.warnf(tt.yamlLine, "a YAML block is not understood: %v", err)
		return
	}
	res := &tt.res
	if res.Status != Passed && res.Message == "" {
		res.Message = firstNonEmpty(yamlString(m["message"]), yamlString(m["error"]),
			yamlPair(m, "wanted", "found"), yamlPair(m, "expected", "actual"))
	}
	if at, ok := m["at"].(map[string]any); ok {
		res.File = firstNonEmpty(yamlString(at["file"]), yamlString(at["fileName"]), yamlString(at["filename"]))
		res.Line = yamlInt(at["line"], at["lineNumber"])
	} else if s := yamlString(m["at"]); s != "" {
		res.File, res.Line = splitLocation(s)
	}
	if res.File == "" {
		if s := yamlString(m["location"]); s != "" {
			res.File, res.Line = splitLocation(s)
		}
	}
	if res.File == "" {
		res.File, res.Line = yamlString(m["file"]), yamlInt(m["line"])
	}
	if ms, ok := m["duration_ms"]; ok && res.Duration == 0 {
		var f float64
		switch v := ms.(type) {
		case int:
			f = float64(v)
		case float64:
			f = v
		}
		res.Duration = t.p.seconds(tt.yamlLine, f/1000)
	}
}

// decodeYAML reads a diagnostic block into a map. It recovers from a panic in the YAML
// library: the block is the report's, and a flaw in reading it must not take the
// worker down.
func decodeYAML(b []byte) (m map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			m, err = nil, fmt.Errorf("the YAML reader failed on it: %v", r)
		}
	}()
	err = yaml.Unmarshal(b, &m)
	return m, err
}

func yamlString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case int, int64, uint64, float64, bool:
		return fmt.Sprint(v)
	}
	return ""
}

// yamlPair is the message of a block that gives only what was wanted and what was
// found, as assertion libraries write them.
func yamlPair(m map[string]any, want, got string) string {
	w, wok := m[want]
	g, gok := m[got]
	if !wok || !gok {
		return ""
	}
	return want + ": " + yamlValue(w) + "\n" + got + ": " + yamlValue(g)
}

// yamlValue shows a scalar as it is and anything else as YAML.
func yamlValue(v any) string {
	if s := yamlString(v); s != "" || v == nil {
		return s
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return "\n" + strings.TrimRight(string(b), "\n")
}

func yamlInt(vs ...any) int {
	for _, v := range vs {
		switch v := v.(type) {
		case int:
			if v > 0 {
				return v
			}
		case string:
			if n, ok := atoi(v); ok {
				return n
			}
		}
	}
	return 0
}

// splitLocation reads "path:line" or "path:line:column", as node's test runner writes
// where a test is, or a stack frame that ends with one in parentheses.
func splitLocation(s string) (string, int) {
	if i := strings.LastIndexByte(s, '('); i >= 0 && strings.HasSuffix(s, ")") {
		s = s[i+1 : len(s)-1]
	}
	s = strings.TrimPrefix(s, "file://")
	path, last, ok := cutLastColon(s)
	if !ok {
		return s, 0
	}
	if p, line, ok := cutLastColon(path); ok {
		n, _ := atoi(line)
		return p, n
	}
	n, _ := atoi(last)
	return path, n
}

// cutLastColon splits s at its last colon when what follows is a number.
func cutLastColon(s string) (string, string, bool) {
	i := strings.LastIndexByte(s, ':')
	if i <= 0 {
		return s, "", false
	}
	if _, ok := atoi(s[i+1:]); !ok {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}
