package testreport

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// goTestModule is a throwaway module whose tests end every way go test -json reports:
// passing, failing, skipped, subtests, a panic that strands a paused parallel test, a
// timeout, a TestMain that exits non-zero after its tests passed, and a build failure.
var goTestModule = map[string]string{
	"go.mod": "module example.com/gtj\n\ngo 1.22\n",
	"ok/ok_test.go": `package ok

import (
	"fmt"
	"testing"
)

func TestPass(t *testing.T) { t.Log("fine") }
func TestFail(t *testing.T) {
	fmt.Println("printed before")
	t.Errorf("got %d, want %d\nsecond line", 1, 2)
	t.Fatal("stop")
}
func TestSkip(t *testing.T) { t.Skip("not today") }
func TestSub(t *testing.T) {
	t.Run("ok", func(t *testing.T) {})
	t.Run("bad one", func(t *testing.T) { t.Error("sub failed") })
}
`,
	"panics/panics_test.go": `package panics

import "testing"

func TestFirst(t *testing.T) {}
func TestWaits(t *testing.T) { t.Parallel() }
func TestPanic(t *testing.T) {
	panic("boom")
}
`,
	"timeout/timeout_test.go": `package timeout

import (
	"testing"
	"time"
)

func TestQuick(t *testing.T) {}

// TestSlow outlives go test's -timeout on purpose: the report of a timeout is the
// subject, and nothing waits on it but go test's own alarm.
func TestSlow(t *testing.T) { time.Sleep(time.Minute) }
`,
	"exits/exits_test.go": `package exits

import (
	"os"
	"testing"
)

func TestOK(t *testing.T) {}

func TestMain(m *testing.M) {
	m.Run()
	os.Exit(3)
}
`,
	"broken/broken_test.go": `package broken

import "testing"

func TestX(t *testing.T) { undefined() }
`,
}

// TestParseGoTestJSONReal runs the real go test -json on goTestModule and reads what it
// wrote: the parser is proven against the tool, not against a guess of its output.
func TestParseGoTestJSONReal(t *testing.T) {
	t.Parallel()
	goBin, err := exec.LookPath("go")
	if err != nil {
		// The suite runs under go test; a PATH without it is a broken setup, not a reason
		// to prove less.
		t.Fatalf("no go command on PATH to run the real go test -json: %v", err)
	}
	dir := t.TempDir()
	for name, src := range goTestModule {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goBin, "test", "-json", "-timeout=1s", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=", "GOTOOLCHAIN=local", "GOPROXY=off")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("go test: %v\n%s", err, stderr.Bytes())
	}
	if err == nil {
		t.Fatalf("go test passed on a module made to fail:\n%s", out)
	}

	results, warnings, err := Parse(FormatGoTestJSON, "go-test.json", bytes.NewReader(out), MaxTestsPerJob)
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, "go-test.json", results, warnings, MaxTestsPerJob)
	if len(warnings) > 0 {
		t.Errorf("warnings: %v", warnings)
	}
	sort.SliceStable(results, func(a, b int) bool {
		if results[a].Suite != results[b].Suite {
			return results[a].Suite < results[b].Suite
		}
		return results[a].Name < results[b].Name
	})
	type want struct {
		suite, name string
		status      Status
		message     string // a prefix of the message
		file        string // a suffix of the file
		line        int
		output      string // a part of the output
	}
	const m = "example.com/gtj/"
	wants := []want{
		{m + "broken", PackageTestName, Errored, "build failed:\nbroken/broken_test.go:5:", "broken/broken_test.go", 5, "undefined"},
		{m + "exits", PackageTestName, Errored, "its tests passed, then the test binary failed", "", 0, "PASS\n"},
		{m + "exits", "TestOK", Passed, "", "", 0, ""},
		{m + "ok", "TestFail", Failed, "ok_test.go:11: got 1, want 2\n    second line\nok_test.go:12: stop", "ok_test.go", 11, "printed before\n"},
		{m + "ok", "TestPass", Passed, "", "ok_test.go", 8, ""},
		{m + "ok", "TestSkip", Skipped, "ok_test.go:14: not today", "ok_test.go", 14, ""},
		{m + "ok", "TestSub", Failed, "", "", 0, "--- FAIL: TestSub"},
		{m + "ok", "TestSub/bad_one", Failed, "ok_test.go:17: sub failed", "ok_test.go", 17, "--- FAIL: TestSub/bad_one"},
		{m + "ok", "TestSub/ok", Passed, "", "", 0, ""},
		{m + "panics", "TestFirst", Passed, "", "", 0, ""},
		{m + "panics", "TestPanic", Failed, "panic: boom", "panics/panics_test.go", 8, "goroutine"},
		{m + "panics", "TestWaits", Errored, "did not finish: panic: boom", "", 0, ""},
		{m + "timeout", "TestQuick", Passed, "", "", 0, ""},
		{m + "timeout", "TestSlow", Errored, "did not finish: panic: test timed out after 1s", "", 0, "panic: test timed out"},
	}
	if len(results) != len(wants) {
		for _, r := range results {
			t.Logf("%s %s %s %q", r.Suite, r.Name, r.Status, r.Message)
		}
		t.Fatalf("%d results, want %d", len(results), len(wants))
	}
	for i, w := range wants {
		r := results[i]
		if r.Suite != w.suite || r.Name != w.name || r.Status != w.status ||
			!strings.HasPrefix(r.Message, w.message) || !strings.HasSuffix(r.File, w.file) || (w.file == "") != (r.File == "") ||
			r.Line != w.line && w.file != "" || !strings.Contains(r.Output, w.output) {
			t.Errorf("result %d: %s %s %s %q at %s:%d, output %.200q\nwant %s %s %s %q… at …%s:%d, output with %q",
				i, r.Suite, r.Name, r.Status, r.Message, r.File, r.Line, r.Output,
				w.suite, w.name, w.status, w.message, w.file, w.line, w.output)
		}
		if r.Status.Failing() && r.Output == "" {
			t.Errorf("%s: failing with no output", r.Name)
		}
		if strings.Contains(r.Output, "=== RUN") {
			t.Errorf("%s: output keeps go test's === RUN lines: %q", r.Name, r.Output)
		}
	}
}

func TestParseGoTestJSON(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string
		want     []Result
		warnings []string
	}{
		{
			name: "go test's own lines mixed in are skipped with one warning",
			in: `# example.com/x
x_test.go:3:1: syntax error
{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:7: nope\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"--- FAIL: TestA (1.50s)\n"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":1.5}
not json {
{"Action":"fail","Package":"p","Elapsed":1.6}
`,
			want: []Result{{Suite: "p", Name: "TestA", File: "a_test.go", Line: 7, Status: Failed, Duration: sec(1.5),
				Message: "a_test.go:7: nope", Output: "    a_test.go:7: nope\n--- FAIL: TestA (1.50s)\n"}},
			warnings: []string{"3 lines that are not go test -json events were skipped, the first here"},
		},
		{
			name: "run twice with -count=2: two results",
			in: `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.01}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":0.02}
{"Action":"fail","Package":"p","Elapsed":0.1}
`,
			want: []Result{
				{Suite: "p", Name: "TestA", Status: Passed, Duration: sec(0.01)},
				{Suite: "p", Name: "TestA", Status: Failed, Duration: sec(0.02)},
			},
		},
		{
			name: "cut while tests ran: the running tests are errored",
			in: `{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"run","Package":"p","Test":"TestA/sub"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"=== RUN   TestA/sub\n"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"working\n"}
{"Action":"output","Package":"p","Test":"TestA/sub","Output":"work`,
			want: []Result{
				{Suite: "p", Name: "TestA", Status: Errored, Message: "did not finish: the report ends before the test did"},
				{Suite: "p", Name: "TestA/sub", Status: Errored, Message: "did not finish: the report ends before the test did", Output: "working\n"},
			},
			warnings: []string{"the report ends before package p did", "1 lines that are not go test -json events"},
		},
		{
			name: "a build failure with its build output elsewhere in the report",
			in: `{"ImportPath":"example.com/dep","Action":"build-output","Output":"# example.com/dep\n"}
{"ImportPath":"example.com/dep","Action":"build-output","Output":"dep/dep.go:2:23: cannot use \"s\" as int value in return statement\n"}
{"ImportPath":"example.com/dep","Action":"build-fail"}
{"Action":"start","Package":"example.com/use"}
{"Action":"output","Package":"example.com/use","Output":"FAIL\texample.com/use [build failed]\n"}
{"Action":"fail","Package":"example.com/use","Elapsed":0,"FailedBuild":"example.com/dep"}
{"Action":"start","Package":"example.com/other"}
{"Action":"fail","Package":"example.com/other","Elapsed":0,"FailedBuild":"example.com/other [example.com/other.test]"}
`,
			want: []Result{
				{Suite: "example.com/use", Name: PackageTestName, File: "dep/dep.go", Line: 2, Status: Errored,
					Message: "build failed:\ndep/dep.go:2:23: cannot use \"s\" as int value in return statement",
					Output:  "# example.com/dep\ndep/dep.go:2:23: cannot use \"s\" as int value in return statement\n"},
				{Suite: "example.com/other", Name: PackageTestName, Status: Errored,
					Message: "build failed: example.com/other [example.com/other.test]"},
			},
		},
		{
			name: "a package with no tests, one that passed, one that failed with no reason",
			in: `{"Action":"start","Package":"a"}
{"Action":"output","Package":"a","Output":"?   \ta\t[no test files]\n"}
{"Action":"skip","Package":"a","Elapsed":0}
{"Action":"pass","Package":"b","Elapsed":0.2}
{"Action":"output","Package":"c","Output":"FAIL\tc\t0.01s\n"}
{"Action":"fail","Package":"c","Elapsed":0.01}
`,
			want: []Result{{Suite: "c", Name: PackageTestName, Status: Errored, Duration: sec(0.01),
				Message: "the package failed with no test failing and no reason in its output", Output: "FAIL\tc\t0.01s\n"}},
		},
		{
			name: "events of unknown actions and bad elapsed times",
			in: `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"attr","Package":"p","Test":"TestA","Key":"k","Value":"v"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":-3}
{"Action":"skip","Package":"p","Test":"TestB","Elapsed":1e300}
`,
			want: []Result{
				{Suite: "p", Name: "TestA", Status: Passed},
				{Suite: "p", Name: "TestB", Status: Skipped},
			},
			warnings: []string{"duration -3 seconds", "duration 1e+300 seconds"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			results, warnings, err := Parse(FormatGoTestJSON, "go.json", strings.NewReader(tt.in), MaxTestsPerJob)
			if err != nil {
				t.Fatal(err)
			}
			checkResults(t, "go.json", results, warnings, MaxTestsPerJob)
			sameResults(t, results, tt.want)
			for _, w := range tt.warnings {
				if !hasWarning(warnings, 0, w) {
					t.Errorf("no warning says %q: %v", w, warnings)
				}
			}
			if len(tt.warnings) == 0 && len(warnings) > 0 {
				t.Errorf("unexpected warnings %v", warnings)
			}
		})
	}
}

// TestParseGoTestJSONLong feeds a test 40 KiB of failure lines: its output keeps the
// last MaxOutputBytes, its message the last MaxMessageBytes of the failure lines, and
// its location the first.
func TestParseGoTestJSONLong(t *testing.T) {
	t.Parallel()
	x := strings.Repeat("x", 1000)
	in := `{"Action":"run","Package":"p","Test":"TestLoud"}` + "\n" +
		strings.Repeat(`{"Action":"output","Package":"p","Test":"TestLoud","Output":"    loud_test.go:9: `+x+`\n"}`+"\n", 40) +
		`{"Action":"output","Package":"p","Test":"TestLoud","Output":"not a failure line\n"}` + "\n" +
		`{"Action":"output","Package":"p","Test":"TestLoud","Output":"    loud_test.go:10: the last word\n"}` + "\n" +
		`{"Action":"fail","Package":"p","Test":"TestLoud","Elapsed":0}` + "\n"
	results, warnings, err := Parse(FormatGoTestJSON, "go.json", strings.NewReader(in), 10)
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, "go.json", results, warnings, 10)
	if len(results) != 1 || len(warnings) != 0 {
		t.Fatalf("results %v, warnings %v", results, warnings)
	}
	r := results[0]
	// 40 lines of 1016 bytes, the last of 30 and 40 newlines between them: 40710 bytes,
	// of which the marker naming them (29 bytes) and the last 4067 are kept.
	wantMsg := "(cut: 36643 bytes before) …" + x[:985] + "\n" + strings.Repeat("loud_test.go:9: "+x+"\n", 3) + "loud_test.go:10: the last word"
	if r.Message != wantMsg {
		t.Errorf("message %d bytes: %.100q…%.100q", len(r.Message), r.Message, r.Message[max(0, len(r.Message)-100):])
	}
	if r.File != "loud_test.go" || r.Line != 9 {
		t.Errorf("location %s:%d, want loud_test.go:9", r.File, r.Line)
	}
	if len(r.Output) != MaxOutputBytes || !strings.HasPrefix(r.Output, "(cut: ") ||
		!strings.HasSuffix(r.Output, x+"\nnot a failure line\n    loud_test.go:10: the last word\n") {
		t.Errorf("output %d bytes: %.100q…%.100q", len(r.Output), r.Output, r.Output[max(0, len(r.Output)-100):])
	}
}

func TestParseGoTestJSONNotJSON(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"empty":            "",
		"blank lines":      "\n\n  \n",
		"go test -v":       "=== RUN   TestA\n--- PASS: TestA (0.00s)\nPASS\nok  \tp\t0.01s\n",
		"json, not events": "{\"a\": 1}\n[1, 2]\n",
		"junit":            junitJest,
	} {
		t.Run(name, func(t *testing.T) {
			results, warnings, err := Parse(FormatGoTestJSON, "r.json", strings.NewReader(in), 10)
			if !errors.Is(err, ErrFormat) || results != nil || warnings != nil {
				t.Fatalf("err = %v with %d results, %d warnings; want ErrFormat alone", err, len(results), len(warnings))
			}
		})
	}
}

func FuzzParseGoTestJSON(f *testing.F) {
	seeds := []string{
		`{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"    a_test.go:7: nope\n        more\n"}
{"Action":"output","Package":"p","Test":"TestA","Output":"panic: x\n\t/a/b_test.go:3 +0x1\n"}
{"Action":"fail","Package":"p","Test":"TestA","Elapsed":1.5}
{"Action":"run","Package":"p","Test":"TestB"}
{"Action":"fail","Package":"p","Elapsed":1.6}`,
		`{"ImportPath":"d","Action":"build-output","Output":"d/d.go:1:1: x\n"}
{"ImportPath":"d","Action":"build-fail"}
{"Action":"fail","Package":"u","FailedBuild":"d"}`,
		"not json\n{\"Action\":\"pass\",\"Package\":\"p\",\"Test\":\"\\u0000\\xff\"}",
	}
	for _, s := range seeds {
		f.Add([]byte(s), uint8(10))
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, room uint8) {
		fuzzParse(t, FormatGoTestJSON, data, room)
	})
}
