package testreport

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
)

// PackageTestName is the name of the one result a go test -json report gives a package
// that failed with no test of it failing: its build failed, its TestMain exited, or it
// panicked outside any test. Its message says which, from the package's output.
const PackageTestName = "(package)"

// goEvent is one line of go test -json (test2json) output. Actions are start, run,
// pause, cont, output, bench, pass, fail, skip, and since Go 1.24 build-output and
// build-fail, which name the package by ImportPath; the package's fail event then names
// the build that failed in FailedBuild. Other actions are ignored.
type goEvent struct {
	Action      string
	Package     string
	Test        string
	Elapsed     *float64
	Output      string
	ImportPath  string
	FailedBuild string
}

// goTest is a test that has started and not ended yet.
type goTest struct {
	name       string
	seq        int // order it started in, for the tests that never end
	out        tail
	msg        tail   // its failure lines, see goTest.write
	inMsg      string // the indentation of the failure line that may continue
	file       string
	line       int
	fileIsTest bool
	panic      string // its first "panic: " line
	frameFile  string // the first _test.go stack frame after the panic
	frameLine  int
}

type goPackage struct {
	tests   map[string]*goTest
	seq     int
	out     tail
	panic   string // the first "panic: " line in any of its output
	last    string // its last output line that is not go test's own summary
	passed  bool   // its test binary printed PASS
	failing bool   // a result of it failed or errored
	started bool
}

type goBuild struct {
	out    tail
	errors []string // the first lines that are not "# pkg" headers
}

func parseGoTestJSON(p *parser, r io.Reader) error {
	g := &goJSON{p: p, pkgs: map[string]*goPackage{}, builds: map[string]*goBuild{}}
	lr := newLineReader(r)
	var events, other, firstOther int
	for {
		line, long, ok := lr.next()
		if !ok {
			break
		}
		trimmed := bytes.TrimSpace(line)
		if len(trimmed) == 0 {
			continue
		}
		var e goEvent
		if long || trimmed[0] != '{' || json.Unmarshal(trimmed, &e) != nil || e.Action == "" {
			if other == 0 {
				firstOther = lr.n
			}
			other++
			continue
		}
		events++
		g.event(lr.n, &e)
	}
	if err := lr.readErr(); err != nil {
		return fmt.Errorf("read %s: %w", p.file, err)
	}
	if events == 0 {
		if other == 0 {
			return p.formatError(0, "it is empty")
		}
		return p.formatError(firstOther, "no line of it is a go test -json event")
	}
	g.end(lr.n)
	if other > 0 {
		p.warnf(firstOther, "%d lines that are not go test -json events were skipped, the first here", other)
	}
	return nil
}

type goJSON struct {
	p      *parser
	pkgs   map[string]*goPackage
	order  []string // packages in the order they appeared, for the end
	builds map[string]*goBuild
}

func (g *goJSON) pkg(name string) *goPackage {
	pk := g.pkgs[name]
	if pk == nil {
		pk = &goPackage{tests: map[string]*goTest{}, out: tail{max: MaxOutputBytes}}
		g.pkgs[name] = pk
		g.order = append(g.order, name)
	}
	return pk
}

func (g *goJSON) event(line int, e *goEvent) {
	switch e.Action {
	case "build-output":
		b := g.builds[e.ImportPath]
		if b == nil {
			b = &goBuild{out: tail{max: MaxOutputBytes}}
			g.builds[e.ImportPath] = b
		}
		b.out.writeString(e.Output)
		for _, l := range strings.Split(strings.TrimRight(e.Output, "\n"), "\n") {
			if l != "" && !strings.HasPrefix(l, "#") && len(b.errors) < 10 {
				b.errors = append(b.errors, l)
			}
		}
		return
	case "build-fail":
		return
	}
	pk := g.pkg(e.Package)
	if e.Test == "" {
		switch e.Action {
		case "start":
			pk.started = true
		case "output", "bench":
			pk.out.writeString(e.Output)
			for _, l := range strings.Split(strings.TrimRight(e.Output, "\n"), "\n") {
				pk.see(l)
			}
		case "pass", "fail", "skip":
			g.endPackage(line, e, pk)
		}
		return
	}
	t := pk.tests[e.Test]
	switch e.Action {
	case "run":
		if t != nil {
			// Run again before it ended: the first run never ended.
			g.unfinished(e.Package, pk, t, "it was run again before it ended")
		}
		pk.seq++
		pk.tests[e.Test] = &goTest{name: e.Test, seq: pk.seq, out: tail{max: MaxOutputBytes}, msg: tail{max: MaxMessageBytes}}
	case "output", "bench":
		if t == nil {
			// Output of a test that was not seen to start (older go versions, a cut
			// report): it belongs to the package then.
			pk.out.writeString(e.Output)
			return
		}
		t.write(e.Output, pk)
	case "pass", "fail", "skip":
		res := Result{Suite: e.Package, Name: e.Test, Status: Passed}
		if e.Elapsed != nil {
			res.Duration = g.p.seconds(line, *e.Elapsed)
		}
		switch e.Action {
		case "fail":
			res.Status = Failed
		case "skip":
			res.Status = Skipped
		}
		if t != nil {
			res.File, res.Line = t.location()
			switch {
			case res.Status == Failed && t.panic != "":
				res.Message = t.panic
			case res.Status != Passed:
				res.Message = t.msg.String()
			}
			if res.Status == Failed {
				res.Output = t.out.String()
			}
			delete(pk.tests, e.Test)
		}
		if res.Status == Failed {
			pk.failing = true
		}
		g.p.add(res)
	}
}

// see notes what a package-level output line tells about why the package failed.
func (pk *goPackage) see(l string) {
	if pk.panic == "" && strings.HasPrefix(l, "panic: ") {
		pk.panic = l
	}
	if l == "PASS" {
		pk.passed = true
	}
	switch {
	case strings.TrimSpace(l) == "",
		l == "FAIL", l == "PASS",
		strings.HasPrefix(l, "FAIL\t"), strings.HasPrefix(l, "ok  \t"), strings.HasPrefix(l, "?   \t"):
	default:
		pk.last = l
	}
}

// write takes in a piece of a test's output. The lines go test writes around a test
// (=== RUN, === PAUSE, === CONT, === NAME) are left out. Lines that t.Error, t.Fatal,
// t.Log and t.Skip write ("    name_test.go:12: text", continued by lines indented four
// more spaces) make the message of a failed or skipped test; the last MaxMessageBytes
// of them are kept, since a test's last words are the ones that stopped it.
func (t *goTest) write(s string, pk *goPackage) {
	for len(s) > 0 {
		l, rest, nl := strings.Cut(s, "\n")
		s = rest
		if frame, ok := strings.CutPrefix(l, "=== "); ok &&
			(strings.HasPrefix(frame, "RUN ") || strings.HasPrefix(frame, "PAUSE ") ||
				strings.HasPrefix(frame, "CONT ") || strings.HasPrefix(frame, "NAME ")) {
			continue
		}
		t.out.writeString(l)
		if nl {
			t.out.writeString("\n")
		}
		t.see(l, pk)
	}
}

func (t *goTest) see(l string, pk *goPackage) {
	if strings.HasPrefix(l, "panic: ") {
		if t.panic == "" {
			t.panic = l
		}
		if pk.panic == "" {
			pk.panic = l
		}
	}
	// The first _test.go stack frame after the test's own panic ("\t/path/x_test.go:19
	// +0x25") is where it panicked; a timeout's stack starts in the alarm, not the test.
	if t.panic != "" && t.frameFile == "" && strings.HasPrefix(l, "\t") &&
		!strings.HasPrefix(t.panic, "panic: test timed out") {
		if f, n, ok := goLocation(strings.TrimPrefix(l, "\t"), " "); ok && strings.HasSuffix(f, "_test.go") {
			t.frameFile, t.frameLine = f, n
		}
	}
	if t.inMsg != "" && strings.HasPrefix(l, t.inMsg) && strings.HasPrefix(l[len(t.inMsg):], "    ") {
		t.msg.writeString("\n")
		t.msg.writeString(l[len(t.inMsg):])
		return
	}
	t.inMsg = ""
	indent := l[:len(l)-len(strings.TrimLeft(l, " "))]
	if indent == "" {
		return
	}
	f, n, ok := goLocation(l[len(indent):], ": ")
	if !ok {
		return
	}
	if t.file == "" || !t.fileIsTest && strings.HasSuffix(f, "_test.go") {
		t.file, t.line, t.fileIsTest = f, n, strings.HasSuffix(f, "_test.go")
	}
	if t.msg.Len() > 0 {
		t.msg.writeString("\n")
	}
	t.msg.writeString(l[len(indent):])
	t.inMsg = indent
}

// location is where the test's report points: its first "name_test.go:NN:" line, or
// else its first "name.go:NN:" line, or else the first _test.go frame of its panic.
func (t *goTest) location() (string, int) {
	if t.file != "" {
		return t.file, t.line
	}
	return t.frameFile, t.frameLine
}

// goLocation reads "name.go:NN" followed by sep at the start of s.
func goLocation(s, sep string) (string, int, bool) {
	i := strings.Index(s, ".go:")
	if i <= 0 || strings.ContainsAny(s[:i], " \t") {
		return "", 0, false
	}
	rest := s[i+len(".go:"):]
	j := 0
	for j < len(rest) && rest[j] >= '0' && rest[j] <= '9' {
		j++
	}
	if j == 0 || !strings.HasPrefix(rest[j:], sep) && !(sep == " " && j == len(rest)) {
		return "", 0, false
	}
	n, ok := atoi(rest[:j])
	return s[:i+len(".go")], n, ok
}

// unfinished adds the result of a test that started and never ended: the test binary
// panicked in another test or outside one, timed out, or the report was cut. It
// counts as errored, with why as its message.
func (g *goJSON) unfinished(pkgName string, pk *goPackage, t *goTest, why string) {
	res := Result{Suite: pkgName, Name: t.name, Status: Errored}
	res.File, res.Line = t.location()
	res.Message = "did not finish: " + why
	if t.out.Len() > 0 {
		res.Output = t.out.String()
	} else {
		res.Output = pk.out.String()
	}
	pk.failing = true
	g.p.add(res)
}

// endPackage ends a package: its tests that never ended are errored, and a package that
// failed with no failing result gets one errored result of its own.
func (g *goJSON) endPackage(line int, e *goEvent, pk *goPackage) {
	why := pk.reason()
	for _, t := range pk.running() {
		g.unfinished(e.Package, pk, t, why)
	}
	pk.tests = map[string]*goTest{}
	pk.started = false
	if e.Action != "fail" || pk.failing {
		pk.failing = false
		return
	}
	res := Result{Suite: e.Package, Name: PackageTestName, Status: Errored}
	if e.Elapsed != nil {
		res.Duration = g.p.seconds(line, *e.Elapsed)
	}
	if e.FailedBuild != "" {
		res.Message = "build failed: " + e.FailedBuild
		if b := g.builds[e.FailedBuild]; b != nil {
			if len(b.errors) > 0 {
				res.Message = "build failed:\n" + strings.Join(b.errors, "\n")
				if f, n, ok := goLocation(b.errors[0], ":"); ok {
					res.File, res.Line = f, n
				}
			}
			res.Output = b.out.String()
		}
	} else {
		res.Message = why
		res.Output = pk.out.String()
	}
	g.p.add(res)
}

// reason says from its output why a package's tests did not all end.
func (pk *goPackage) reason() string {
	switch {
	case pk.panic != "":
		return pk.panic
	case pk.last != "":
		return pk.last
	case pk.passed:
		// What a TestMain does after m.Run (a leak check, os.Exit) prints nothing of
		// its own when it fails quietly.
		return "its tests passed, then the test binary failed (in TestMain, or exiting on its own)"
	}
	return "the package failed with no test failing and no reason in its output"
}

// running is the package's tests that have not ended, in the order they started.
func (pk *goPackage) running() []*goTest {
	ts := make([]*goTest, 0, len(pk.tests))
	for _, t := range pk.tests {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(a, b int) bool { return ts[a].seq < ts[b].seq })
	return ts
}

// end closes what the report left open: a package with no pass, fail or skip event
// means go test was stopped, or the report was cut, while it ran.
func (g *goJSON) end(line int) {
	for _, name := range g.order {
		pk := g.pkgs[name]
		running := pk.running()
		if len(running) == 0 && !pk.started {
			continue
		}
		g.p.warnf(line, "the report ends before package %s did", cut(name, 200))
		for _, t := range running {
			g.unfinished(name, pk, t, "the report ends before the test did")
		}
		pk.tests = nil
	}
}
