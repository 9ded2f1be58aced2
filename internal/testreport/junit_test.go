package testreport

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// JUnit reports as the tools that write them most write them.
var (
	// pytest --junitxml, junit_family=xunit2 (the default): one testsuite named pytest
	// inside testsuites, the module as classname, failures with the assertion as the
	// message and the traceback as text, captured output in system-out/system-err.
	junitPytest = `<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest" errors="1" failures="1" skipped="2" tests="5" time="0.058" timestamp="2026-05-01T10:00:00.123456+00:00" hostname="ci-runner"><testcase classname="tests.test_math" name="test_add" time="0.001" /><testcase classname="tests.test_math" name="test_sub" time="0.002"><failure message="assert 1 == 2&#10; +  where 1 = sub(3, 2)">def test_sub():
&gt;       assert sub(3, 2) == 2
E       assert 1 == 2
E        +  where 1 = sub(3, 2)

tests/test_math.py:8: AssertionError</failure><system-out>subtracting 2 from 3
</system-out><system-err>warning: deprecated
</system-err></testcase><testcase classname="tests.test_math" name="test_skip" time="0.000"><skipped type="pytest.skip" message="not on linux">/home/ci/tests/test_math.py:11: not on linux</skipped></testcase><testcase classname="tests.test_math" name="test_xfail" time="0.001"><skipped type="pytest.xfail" message="known bug #12" /></testcase><testcase classname="tests.test_db" name="test_connect[postgres]" time="0.050"><error message="failed on setup with &quot;ConnectionRefusedError: [Errno 111] Connection refused&quot;">@pytest.fixture
    def db():
&gt;       return connect()
E       ConnectionRefusedError: [Errno 111] Connection refused

tests/conftest.py:5: ConnectionRefusedError</error></testcase></testsuite></testsuites>`

	// Maven surefire: a bare testsuite per class, with properties; flaky tests that
	// passed on a rerun carry flakyFailure, tests that failed every rerun carry
	// rerunFailure; times past a thousand seconds come with a grouping comma.
	junitSurefire = `<?xml version="1.0" encoding="UTF-8"?>
<testsuite xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:noNamespaceSchemaLocation="https://maven.apache.org/surefire/maven-surefire-plugin/xsd/surefire-test-report-3.0.xsd" version="3.0" name="com.example.CalculatorTest" time="1,234.567" tests="5" errors="1" skipped="1" failures="2">
  <properties>
    <property name="java.version" value="17.0.2"/>
    <property name="user.dir" value="/home/ci/project"/>
  </properties>
  <testcase name="testAdd" classname="com.example.CalculatorTest" time="0.003"/>
  <testcase name="testDivide" classname="com.example.CalculatorTest" time="1,200.5">
    <failure message="expected: &lt;2&gt; but was: &lt;3&gt;" type="org.opentest4j.AssertionFailedError"><![CDATA[org.opentest4j.AssertionFailedError: expected: <2> but was: <3>
	at com.example.CalculatorTest.testDivide(CalculatorTest.java:25)
]]></failure>
    <system-out><![CDATA[dividing 6 by 2
]]></system-out>
    <rerunFailure message="expected: &lt;2&gt; but was: &lt;3&gt;" type="org.opentest4j.AssertionFailedError">
      <stackTrace><![CDATA[org.opentest4j.AssertionFailedError: expected: <2> but was: <3>]]></stackTrace>
    </rerunFailure>
  </testcase>
  <testcase name="testFlaky" classname="com.example.CalculatorTest" time="0.004">
    <flakyFailure message="Read timed out" type="java.net.SocketTimeoutException">
      <stackTrace><![CDATA[java.net.SocketTimeoutException: Read timed out]]></stackTrace>
      <system-out><![CDATA[connecting
]]></system-out>
    </flakyFailure>
    <flakyError type="java.lang.IllegalStateException">
      <stackTrace><![CDATA[java.lang.IllegalStateException]]></stackTrace>
    </flakyError>
  </testcase>
  <testcase name="testNull" classname="com.example.CalculatorTest" time="0.001">
    <error type="java.lang.NullPointerException"><![CDATA[java.lang.NullPointerException
	at com.example.CalculatorTest.testNull(CalculatorTest.java:40)
]]></error>
  </testcase>
  <testcase name="testSkip" classname="com.example.CalculatorTest" time="0">
    <skipped message="not ready"/>
  </testcase>
</testsuite>
`

	// jest-junit: testsuites named after the runner, a testsuite per describe block,
	// classname and name both "{describe} {title}", failures with no message attribute
	// and the error and stack as text, an empty skipped element.
	junitJest = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="jest tests" tests="3" failures="1" errors="0" time="1.234">
  <testsuite name="Calculator" errors="0" failures="1" skipped="1" timestamp="2026-05-01T10:00:00" time="0.8" tests="3">
    <testcase classname="Calculator adds" name="Calculator adds" time="0.003">
    </testcase>
    <testcase classname="Calculator subtracts" name="Calculator subtracts" time="0.004" file="src/calc.test.js">
      <failure>Error: expect(received).toBe(expected) // Object.is equality

Expected: 1
Received: 2
    at Object.toBe (/home/ci/src/calc.test.js:9:25)</failure>
    </testcase>
    <testcase classname="Calculator skips" name="Calculator skips" time="0">
      <skipped/>
    </testcase>
  </testsuite>
</testsuites>
`

	// go-junit-report v2: a testsuite per package with properties, go test's output in
	// CDATA, message attributes that only say Failed or Skipped, a build failure as an
	// error testcase.
	junitGoJUnitReport = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" failures="2" errors="1" skipped="1">
	<testsuite name="example.com/calc" tests="3" failures="1" errors="0" id="0" hostname="ci" skipped="1" time="0.005" timestamp="2026-05-01T10:00:00Z">
		<properties>
			<property name="go.version" value="go1.26.8 linux/amd64"></property>
		</properties>
		<testcase name="TestAdd" classname="example.com/calc" time="0.000"></testcase>
		<testcase name="TestSub/negative" classname="example.com/calc" time="0.001">
			<failure message="Failed"><![CDATA[    calc_test.go:21: got -1, want 1]]></failure>
		</testcase>
		<testcase name="TestSkip" classname="example.com/calc" time="0.000">
			<skipped message="Skipped"><![CDATA[    calc_test.go:30: not today]]></skipped>
		</testcase>
		<system-out><![CDATA[PASS but not really]]></system-out>
	</testsuite>
	<testsuite name="example.com/broken" tests="1" failures="0" errors="1" id="1" hostname="ci" time="0.000" timestamp="2026-05-01T10:00:00Z">
		<testcase name="[build failed]" classname="example.com/broken" time="0.000">
			<error message="Build error"><![CDATA[broken/x.go:3:1: syntax error: non-declaration statement outside function body]]></error>
		</testcase>
	</testsuite>
</testsuites>
`
)

func TestParseJUnit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		in       string
		want     []Result
		warnings []string // parts of warnings that must be given, in any order
	}{
		{
			name: "pytest",
			in:   junitPytest,
			want: []Result{
				{Suite: "tests.test_math", Name: "test_add", Status: Passed, Duration: sec(0.001)},
				{Suite: "tests.test_math", Name: "test_sub", Status: Failed, Duration: sec(0.002),
					Message: "assert 1 == 2\n +  where 1 = sub(3, 2)",
					Output:  "def test_sub():\n>       assert sub(3, 2) == 2\nE       assert 1 == 2\nE        +  where 1 = sub(3, 2)\n\ntests/test_math.py:8: AssertionError\nsubtracting 2 from 3\nwarning: deprecated\n"},
				{Suite: "tests.test_math", Name: "test_skip", Status: Skipped, Message: "not on linux"},
				{Suite: "tests.test_math", Name: "test_xfail", Status: Skipped, Duration: sec(0.001), Message: "known bug #12"},
				{Suite: "tests.test_db", Name: "test_connect[postgres]", Status: Errored, Duration: sec(0.05),
					Message: `failed on setup with "ConnectionRefusedError: [Errno 111] Connection refused"`,
					Output:  "@pytest.fixture\n    def db():\n>       return connect()\nE       ConnectionRefusedError: [Errno 111] Connection refused\n\ntests/conftest.py:5: ConnectionRefusedError"},
			},
		},
		{
			name: "maven surefire",
			in:   junitSurefire,
			want: []Result{
				{Suite: "com.example.CalculatorTest", Name: "testAdd", Status: Passed, Duration: sec(0.003)},
				{Suite: "com.example.CalculatorTest", Name: "testDivide", Status: Failed, Duration: sec(1200.5),
					Message:        "expected: <2> but was: <3>",
					Output:         "org.opentest4j.AssertionFailedError: expected: <2> but was: <3>\n\tat com.example.CalculatorTest.testDivide(CalculatorTest.java:25)\ndividing 6 by 2\n",
					FailedAttempts: 1},
				{Suite: "com.example.CalculatorTest", Name: "testFlaky", Status: Passed, Duration: sec(0.004),
					Message: "Read timed out", FailedAttempts: 2},
				{Suite: "com.example.CalculatorTest", Name: "testNull", Status: Errored, Duration: sec(0.001),
					Message: "java.lang.NullPointerException\n\tat com.example.CalculatorTest.testNull(CalculatorTest.java:40)",
					Output:  "java.lang.NullPointerException\n\tat com.example.CalculatorTest.testNull(CalculatorTest.java:40)\n"},
				{Suite: "com.example.CalculatorTest", Name: "testSkip", Status: Skipped, Message: "not ready"},
			},
		},
		{
			name: "jest-junit",
			in:   junitJest,
			want: []Result{
				{Suite: "Calculator adds", Name: "Calculator adds", Status: Passed, Duration: sec(0.003)},
				{Suite: "Calculator subtracts", Name: "Calculator subtracts", File: "src/calc.test.js", Status: Failed, Duration: sec(0.004),
					Message: "Error: expect(received).toBe(expected) // Object.is equality",
					Output:  "Error: expect(received).toBe(expected) // Object.is equality\n\nExpected: 1\nReceived: 2\n    at Object.toBe (/home/ci/src/calc.test.js:9:25)"},
				{Suite: "Calculator skips", Name: "Calculator skips", Status: Skipped},
			},
		},
		{
			name: "go-junit-report",
			in:   junitGoJUnitReport,
			want: []Result{
				{Suite: "example.com/calc", Name: "TestAdd", Status: Passed},
				{Suite: "example.com/calc", Name: "TestSub/negative", Status: Failed, Duration: sec(0.001),
					Message: "Failed", Output: "    calc_test.go:21: got -1, want 1"},
				{Suite: "example.com/calc", Name: "TestSkip", Status: Skipped, Message: "Skipped"},
				{Suite: "example.com/broken", Name: "[build failed]", Status: Errored, Message: "Build error",
					Output: "broken/x.go:3:1: syntax error: non-declaration statement outside function body"},
			},
		},
		{
			name: "nested testsuites take the innermost named suite",
			in: `<testsuites><testsuite name="outer"><testsuite name="inner"><testcase name="a"/></testsuite>
				<testsuite><testcase name="b"/></testsuite><testcase name="c" classname=""/></testsuite></testsuites>`,
			want: []Result{
				{Suite: "inner", Name: "a", Status: Passed},
				{Suite: "outer", Name: "b", Status: Passed},
				{Suite: "outer", Name: "c", Status: Passed},
			},
		},
		{
			name: "no suite name: the file",
			in:   `<testsuites><testsuite><testcase name="a" file="a_test.py" line="12"/></testsuite></testsuites>`,
			want: []Result{{Suite: "report.xml", Name: "a", File: "a_test.py", Line: 12, Status: Passed}},
		},
		{
			name: "an error outranks a failure; the first failing element gives the message",
			in: `<testsuite name="s"><testcase name="both"><failure message="first"/><error message="second"/></testcase>
				<testcase name="failed and skipped"><skipped message="s"/><failure message="f"/></testcase></testsuite>`,
			want: []Result{
				{Suite: "s", Name: "both", Status: Errored, Message: "first"},
				{Suite: "s", Name: "failed and skipped", Status: Failed, Message: "f"},
			},
		},
		{
			name: "message from the text's first paragraph, else the type",
			in: `<testsuite name="s"><testcase name="a"><failure>

  line one
line two
line three
line four
line five
line six</failure></testcase><testcase name="b"><failure type="AssertionError"/></testcase></testsuite>`,
			want: []Result{
				{Suite: "s", Name: "a", Status: Failed, Message: "line one\nline two\nline three\nline four\nline five",
					Output: "\n\n  line one\nline two\nline three\nline four\nline five\nline six"},
				{Suite: "s", Name: "b", Status: Failed, Message: "AssertionError"},
			},
		},
		{
			name: "output is kept for failing tests only",
			in: `<testsuite name="s"><testcase name="p"><system-out>chatter</system-out></testcase>
				<testcase name="f"><system-err>err</system-err><failure message="m">body</failure></testcase></testsuite>`,
			want: []Result{
				{Suite: "s", Name: "p", Status: Passed},
				{Suite: "s", Name: "f", Status: Failed, Message: "m", Output: "err\nbody"},
			},
		},
		{
			name: "times and lines not understood",
			in: `<testsuite name="s"><testcase name="a" time="1,5"/><testcase name="b" time="-1"/><testcase name="c" time="NaN"/>
				<testcase name="d" time="1e-3"/><testcase name="e" time=" 2.5 "/><testcase name="f" line="x12"/><testcase name="g" time="1e300"/>
				<testcase name="h" line="99999999999" time="9000000"/></testsuite>`,
			want: []Result{
				{Suite: "s", Name: "a", Status: Passed},
				{Suite: "s", Name: "b", Status: Passed},
				{Suite: "s", Name: "c", Status: Passed},
				{Suite: "s", Name: "d", Status: Passed, Duration: sec(0.001)},
				{Suite: "s", Name: "e", Status: Passed, Duration: sec(2.5)},
				{Suite: "s", Name: "f", Status: Passed},
				{Suite: "s", Name: "g", Status: Passed},
				{Suite: "s", Name: "h", Status: Passed},
			},
			warnings: []string{`time "1,5" is not a number of seconds`, "duration -1 seconds", `time "NaN"`, `line "x12" is not a line number`, "duration 1e+300 seconds",
				`test "h": line 99999999999 is out of range`, `test "h": duration 2500h0m0s is out of range`},
		},
		{
			name:     "a testcase without a name",
			in:       `<testsuite name="s"><testcase classname="c"><failure message="m"/></testcase></testsuite>`,
			want:     []Result{{Suite: "c", Name: "(no name)", Status: Failed, Message: "m"}},
			warnings: []string{`testcase without a name`},
		},
		{
			name:     "cut off inside a testcase: the complete ones are kept",
			in:       `<?xml version="1.0"?><testsuites><testsuite name="s"><testcase name="a"/><testcase name="b"><failure message="m">partial`,
			want:     []Result{{Suite: "s", Name: "a", Status: Passed}},
			warnings: []string{"the report breaks off here (unexpected EOF): the 1 testcases complete before it are kept"},
		},
		{
			name:     "cut off between testcases",
			in:       "<testsuite name=\"s\">\n<testcase name=\"a\"/>\n<testcase name=\"b\"/>\n<testca",
			want:     []Result{{Suite: "s", Name: "a", Status: Passed}, {Suite: "s", Name: "b", Status: Passed}},
			warnings: []string{"breaks off here", "2 testcases complete"},
		},
		{
			name: "characters XML does not allow are replaced, not fatal",
			in: "\xef\xbb\xbf<?xml version=\"1.0\" encoding=\"ISO-8859-1\"?><testsuite name=\"s\"><testcase name=\"colour\"><failure message=\"red &#27;[31mX&#x1b;[0m\">" +
				"\x1b[31mred\x1b[0m caf\xe9 &#0; &amp;#27; ok</failure></testcase><testcase name=\"after\"/></testsuite>",
			want: []Result{
				{Suite: "s", Name: "colour", Status: Failed, Message: "red \uFFFD[31mX\uFFFD[0m",
					Output: "\uFFFD[31mred\uFFFD[0m caf\uFFFD \uFFFD &#27; ok"},
				{Suite: "s", Name: "after", Status: Passed},
			},
			warnings: []string{"6 characters that XML does not allow"},
		},
		{
			name: "elements a tool adds are skipped",
			in: `<testsuite name="s"><properties><property name="a" value="b"/></properties>
				<testcase name="a"><properties><property name="attachment" value="x.png"/></properties><custom><testcase name="inner"/></custom></testcase>
				<system-out>suite output</system-out><anything/></testsuite>`,
			want: []Result{{Suite: "s", Name: "a", Status: Passed}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			results, warnings, err := Parse(FormatJUnit, "report.xml", strings.NewReader(tt.in), MaxTestsPerJob)
			if err != nil {
				t.Fatal(err)
			}
			checkResults(t, "report.xml", results, warnings, MaxTestsPerJob)
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

func TestParseJUnitNotJUnit(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"empty":          "",
		"text":           "PASS\nok  \texample.com/x\t0.01s\n",
		"html":           "<!DOCTYPE html><html><body>404</body></html>",
		"json":           `{"Action":"pass"}`,
		"bare testcase":  `<testcase name="a"/>`,
		"broken at once": `<testsuite name="a" <testcase/>`,
		"binary":         "\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR",
	} {
		t.Run(name, func(t *testing.T) {
			results, warnings, err := Parse(FormatJUnit, "r.xml", strings.NewReader(in), 10)
			var fe *FormatError
			if !errors.Is(err, ErrFormat) || !errors.As(err, &fe) || fe.File != "r.xml" || fe.Format != FormatJUnit {
				t.Fatalf("err = %v, want a FormatError for r.xml", err)
			}
			if results != nil || warnings != nil {
				t.Errorf("results %v, warnings %v with the error", results, warnings)
			}
		})
	}
}

// TestParseJUnitMany reads a report of many testcases; the benchmark measures a larger
// one, this proves the count and the room on one of a size a test can afford.
func TestParseJUnitMany(t *testing.T) {
	t.Parallel()
	report := junitReport(5000)
	results, warnings, err := Parse(FormatJUnit, "r.xml", bytes.NewReader(report), 4000)
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, "r.xml", results, warnings, 4000)
	if len(results) != 4000 || !hasWarning(warnings, 0, "1000 tests were not kept") {
		t.Fatalf("%d results, warnings %v; want 4000 and 1000 not kept", len(results), warnings)
	}
	var failed int
	for _, r := range results {
		if r.Status == Failed {
			failed++
			if !strings.HasPrefix(r.Message, "expected 1 but was 2") || len(r.Output) < 500 {
				t.Fatalf("failed result %+v", r)
			}
		}
	}
	if failed != 4000/10 {
		t.Errorf("%d failed, want %d", failed, 4000/10)
	}
}

// junitReport writes a surefire-like report of n testcases, one in ten failing with a
// stack trace and about 5 KiB of output: some 600 bytes a testcase on average.
func junitReport(n int) []byte {
	var b bytes.Buffer
	b.WriteString("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n")
	for i := 0; i < n; i++ {
		if i%1000 == 0 {
			if i > 0 {
				b.WriteString("</testsuite>\n")
			}
			fmt.Fprintf(&b, "<testsuite name=\"com.example.Suite%d\" tests=\"1000\" time=\"12.5\">\n", i/1000)
		}
		if i%10 != 0 {
			fmt.Fprintf(&b, "  <testcase name=\"testSomethingThatWorks%d\" classname=\"com.example.pkg%d.SomeTest\" time=\"0.%03d\"/>\n", i, i/1000, i%1000)
			continue
		}
		fmt.Fprintf(&b, "  <testcase name=\"testSomethingThatBreaks%d\" classname=\"com.example.pkg%d.SomeTest\" time=\"1.%03d\">\n", i, i/1000, i%1000)
		b.WriteString("    <failure message=\"expected 1 but was 2\" type=\"org.opentest4j.AssertionFailedError\"><![CDATA[org.opentest4j.AssertionFailedError: expected 1 but was 2\n")
		for f := 0; f < 25; f++ {
			fmt.Fprintf(&b, "\tat com.example.pkg.SomeTest.frame%d(SomeTest.java:%d)\n", f, 10+f)
		}
		b.WriteString("]]></failure>\n    <system-out><![CDATA[")
		for l := 0; l < 50; l++ {
			fmt.Fprintf(&b, "2026-05-01 10:00:%02d INFO  com.example.Service - handling request %d &amp; more\n", l%60, l)
		}
		b.WriteString("]]></system-out>\n  </testcase>\n")
	}
	b.WriteString("</testsuite>\n</testsuites>\n")
	return b.Bytes()
}

func BenchmarkParseJUnit50k(b *testing.B) {
	report := junitReport(50_000)
	b.SetBytes(int64(len(report)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		results, _, err := Parse(FormatJUnit, "r.xml", bytes.NewReader(report), MaxTestsPerJob)
		if err != nil || len(results) != 50_000 {
			b.Fatalf("%d results, err %v", len(results), err)
		}
	}
}

func FuzzParseJUnit(f *testing.F) {
	for _, s := range []string{junitPytest, junitSurefire, junitJest, junitGoJUnitReport,
		`<testsuite name="s"><testcase name="a" time="1,234.5" line="3"><failure>x</failure><flakyFailure message="m"/></testcase></testsuite>`,
		"<testsuites><testsuite name=\"s\"><testcase name=\"a\"><system-out>\x1b[31m&#27;</system-out><error/></testcase>",
	} {
		f.Add([]byte(s), uint8(10))
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, room uint8) {
		fuzzParse(t, FormatJUnit, data, room)
	})
}
