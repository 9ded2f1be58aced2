package testreport

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TAP streams as the tools that write them most write them.
var (
	// tape (TAP 13): assertions as tests, a YAML block of operator, expected, actual
	// and at, comments for the test names and the counts at the end.
	tapTape = `TAP version 13
# calculator
ok 1 adds
not ok 2 subtracts
  ---
    operator: equal
    expected: 1
    actual:   3
    at: Test.<anonymous> (/home/ci/test/calc.js:9:5)
    stack: |-
      Error: subtracts
          at Test.assert [as _assert] (/home/ci/node_modules/tape/lib/test.js:314:54)
  ...

1..2
# tests 2
# pass  1
# fail  1
`

	// node-tap (TAP 14): a subtest per file or t.test, announced by "# Subtest" at
	// the parent's indentation, found and wanted, at as a map, time in the comment.
	tapNodeTap = `TAP version 14
# Subtest: math
    ok 1 - adds
    not ok 2 - subtracts
      ---
      found: 3
      wanted: 1
      at:
        fileName: test/math.js
        lineNumber: 8
        columnNumber: 5
      stack: |
        Test.<anonymous> (test/math.js:8:5)
      ...
    1..2
not ok 1 - math # time=12.345ms
# Subtest: strings
    ok 1 - concat # time=1.5ms
    1..1
ok 2 - strings # time=3ms
1..2
`

	// node --test (TAP 13): every test announced by "# Subtest", describe blocks as
	// parents, duration_ms, location and error in the YAML block.
	tapNodeTest = `TAP version 13
# Subtest: Calculator
    # Subtest: adds
    ok 1 - adds
      ---
      duration_ms: 0.612
      ...
    # Subtest: subtracts
    not ok 2 - subtracts
      ---
      duration_ms: 0.803
      location: '/home/ci/src/calc.test.js:9:3'
      failureType: 'testCodeFailure'
      error: |-
        Expected values to be strictly equal:

        2 !== 1

      code: 'ERR_ASSERTION'
      name: 'AssertionError'
      expected: 1
      actual: 2
      operator: 'strictEqual'
      stack: |-
        TestContext.<anonymous> (file:///home/ci/src/calc.test.js:10:12)
      ...
    1..2
not ok 1 - Calculator
  ---
  duration_ms: 2.1
  type: 'suite'
  failureType: 'subtestsFailed'
  error: '1 subtest failed'
  code: 'ERR_TEST_FAILURE'
  ...
# Subtest: standalone
ok 2 - standalone # SKIP not on CI
  ---
  duration_ms: 0.1
  ...
1..2
# tests 3
# suites 1
# pass 1
# fail 1
# skipped 1
`

	// Perl's Test::More (TAP 12): no version line, diagnostics as comments after the
	// failing test, directives in any case, the plan at the end.
	tapPerl = `ok 1 - use Foo;
not ok 2 - frobnicates
#   Failed test 'frobnicates'
#   at t/foo.t line 12.
#          got: '1'
#     expected: '2'
ok 3 # skip no network
not ok 4 - parses dates # TODO not implemented
#   Failed (TODO) test 'parses dates'
ok 5 - \# is not a directive # Todo done early
ok 6 - with a \\ backslash
1..6
# Looks like you failed 1 test of 6.
`

	// The TAP 14 specification's own subtest example.
	tapSpec14 = `TAP version 14
1..2

# Subtest: foo.tap
    1..2
    ok 1
    ok 2 - this passed
ok 1 - foo.tap

# Subtest: bar.tap
    ok 1 - object should be a Bar
    not ok 2 - object.isBar should return true
      ---
      found: false
      wanted: true
      at:
        file: test/bar.ts
        line: 43
        column: 8
      ...
    ok 3 - object can bake bread
    1..3
not ok 2 - bar.tap
  ---
  fail: 1
  ...
`
)

func TestParseTAP(t *testing.T) {
	t.Parallel()
	const f = "t/report.tap"
	tests := []struct {
		name     string
		in       string
		want     []Result
		warnings []string
	}{
		{
			name: "tape",
			in:   tapTape,
			want: []Result{
				{Suite: f, Name: "adds", Status: Passed},
				{Suite: f, Name: "subtracts", File: "/home/ci/test/calc.js", Line: 9, Status: Failed,
					Message: "expected: 1\nactual: 3",
					Output:  "  ---\n    operator: equal\n    expected: 1\n    actual:   3\n    at: Test.<anonymous> (/home/ci/test/calc.js:9:5)\n    stack: |-\n      Error: subtracts\n          at Test.assert [as _assert] (/home/ci/node_modules/tape/lib/test.js:314:54)\n  ...\n"},
			},
		},
		{
			name: "node-tap",
			in:   tapNodeTap,
			want: []Result{
				{Suite: f, Name: "math/adds", Status: Passed},
				{Suite: f, Name: "math/subtracts", File: "test/math.js", Line: 8, Status: Failed,
					Message: "wanted: 1\nfound: 3",
					Output:  "      ---\n      found: 3\n      wanted: 1\n      at:\n        fileName: test/math.js\n        lineNumber: 8\n        columnNumber: 5\n      stack: |\n        Test.<anonymous> (test/math.js:8:5)\n      ...\n"},
				{Suite: f, Name: "math", Status: Failed, Duration: 12345 * time.Microsecond},
				{Suite: f, Name: "strings/concat", Status: Passed, Duration: 1500 * time.Microsecond},
				{Suite: f, Name: "strings", Status: Passed, Duration: 3 * time.Millisecond},
			},
		},
		{
			name: "node --test",
			in:   tapNodeTest,
			want: []Result{
				{Suite: f, Name: "Calculator/adds", Status: Passed, Duration: 612 * time.Microsecond},
				{Suite: f, Name: "Calculator/subtracts", File: "/home/ci/src/calc.test.js", Line: 9, Status: Failed, Duration: 803 * time.Microsecond,
					Message: "Expected values to be strictly equal:\n\n2 !== 1",
					Output:  tapNodeTest[strings.Index(tapNodeTest, "      ---\n      duration_ms: 0.803"):strings.Index(tapNodeTest, "    1..2")]},
				{Suite: f, Name: "Calculator", Status: Failed, Duration: 2100 * time.Microsecond, Message: "1 subtest failed",
					Output: "  ---\n  duration_ms: 2.1\n  type: 'suite'\n  failureType: 'subtestsFailed'\n  error: '1 subtest failed'\n  code: 'ERR_TEST_FAILURE'\n  ...\n"},
				{Suite: f, Name: "standalone", Status: Skipped, Duration: 100 * time.Microsecond, Message: "not on CI"},
			},
		},
		{
			name: "perl Test::More",
			in:   tapPerl,
			want: []Result{
				{Suite: f, Name: "use Foo;", Status: Passed},
				{Suite: f, Name: "frobnicates", Status: Failed,
					Output: "#   Failed test 'frobnicates'\n#   at t/foo.t line 12.\n#          got: '1'\n#     expected: '2'\n"},
				{Suite: f, Name: "(test 3)", Status: Skipped, Message: "no network"},
				{Suite: f, Name: "parses dates", Status: Skipped, Message: "TODO not implemented"},
				{Suite: f, Name: "# is not a directive", Status: Passed},
				{Suite: f, Name: `with a \ backslash`, Status: Passed},
			},
		},
		{
			name: "the TAP 14 specification's subtests",
			in:   tapSpec14,
			want: []Result{
				{Suite: f, Name: "foo.tap/(test 1)", Status: Passed},
				{Suite: f, Name: "foo.tap/this passed", Status: Passed},
				{Suite: f, Name: "foo.tap", Status: Passed},
				{Suite: f, Name: "bar.tap/object should be a Bar", Status: Passed},
				{Suite: f, Name: "bar.tap/object.isBar should return true", File: "test/bar.ts", Line: 43, Status: Failed,
					Message: "wanted: true\nfound: false",
					Output:  "      ---\n      found: false\n      wanted: true\n      at:\n        file: test/bar.ts\n        line: 43\n        column: 8\n      ...\n"},
				{Suite: f, Name: "bar.tap/object can bake bread", Status: Passed},
				{Suite: f, Name: "bar.tap", Status: Failed, Output: "  ---\n  fail: 1\n  ...\n"},
			},
		},
		{
			name: "tests the plan counts and the report does not hold",
			in:   "1..4\nok 1 - a\nok 3 - c\n",
			want: []Result{
				{Suite: f, Name: "a", Status: Passed},
				{Suite: f, Name: "c", Status: Passed},
				{Suite: f, Name: "(test 2)", Status: Errored, Message: "not run: the plan 1..4 counts it, the report does not hold it"},
				{Suite: f, Name: "(test 4)", Status: Errored, Message: "not run: the plan 1..4 counts it, the report does not hold it"},
			},
			warnings: []string{"test 3 where 2 was expected"},
		},
		{
			name: "bail out with a plan: the tests not run are errored, nothing after is read",
			in:   "TAP version 14\n1..4\nok 1 - a\n# Subtest: b\n    1..3\n    ok 1 - b1\n    Bail out! database down\n    ok 2 - b2\nok 2 - b\n",
			want: []Result{
				{Suite: f, Name: "a", Status: Passed},
				{Suite: f, Name: "b/b1", Status: Passed},
				{Suite: f, Name: "b/(test 2)", Status: Errored, Message: "not run: Bail out! database down"},
				{Suite: f, Name: "b/(test 3)", Status: Errored, Message: "not run: Bail out! database down"},
				{Suite: f, Name: "(test 2)", Status: Errored, Message: "not run: Bail out! database down"},
				{Suite: f, Name: "(test 3)", Status: Errored, Message: "not run: Bail out! database down"},
				{Suite: f, Name: "(test 4)", Status: Errored, Message: "not run: Bail out! database down"},
			},
		},
		{
			name: "bail out with no plan: one errored result",
			in:   "ok 1 - a\nnot ok 2 - b\nBail out!\n",
			want: []Result{
				{Suite: f, Name: "a", Status: Passed},
				{Suite: f, Name: "b", Status: Failed},
				{Suite: f, Name: TAPBailOutName, Status: Errored, Message: "Bail out!"},
			},
		},
		{
			name: "a skipped file",
			in:   "TAP version 13\n1..0 # SKIP no database here\n",
			want: []Result{{Suite: f, Name: TAPSkippedName, Status: Skipped, Message: "no database here"}},
		},
		{
			name: "a plan at the end with tests past it",
			in:   "ok 1\nok 2\nok 3\n1..2\n",
			want: []Result{
				{Suite: f, Name: "(test 1)", Status: Passed},
				{Suite: f, Name: "(test 2)", Status: Passed},
				{Suite: f, Name: "(test 3)", Status: Passed},
			},
			warnings: []string{"1 tests are past the plan 1..2"},
		},
		{
			name:     "no plan: the report may have been cut",
			in:       "TAP version 14\nok 1 - a\nnot ok 2 - b\n  ---\n  message: partial",
			want:     []Result{{Suite: f, Name: "a", Status: Passed}, {Suite: f, Name: "b", Status: Failed, Output: "  ---\n  message: partial\n"}},
			warnings: []string{"no plan", `a YAML block that does not end with "..." was not read`},
		},
		{
			name: "YAML not understood, lines not TAP, numbers given twice",
			in:   "1..3\nnot ok 1 - a\n  ---\n  message: [unclosed\n  ...\nnoise from the test\nok 1 - b\n  ---\nok 3 - c\n",
			want: []Result{
				{Suite: f, Name: "a", Status: Failed, Output: "  ---\n  message: [unclosed\n  ...\nnoise from the test\n"},
				{Suite: f, Name: "b", Status: Passed},
				{Suite: f, Name: "c", Status: Passed},
				{Suite: f, Name: "(test 2)", Status: Errored, Message: "not run: the plan 1..3 counts it, the report does not hold it"},
			},
			warnings: []string{"a YAML block is not understood", "test 1 where 2 was expected", "test number 1 is given twice", `does not end with "..."`},
		},
		{
			name: "subtests with no parent line are named after their Subtest comment",
			in:   "# Subtest: lost\n    ok 1 - inner\n    1..1\n1..1\n",
			want: []Result{
				{Suite: f, Name: "lost/inner", Status: Passed},
				{Suite: f, Name: "(test 1)", Status: Errored, Message: "not run: the plan 1..1 counts it, the report does not hold it"},
			},
		},
		{
			name:     "a second plan and an unknown version",
			in:       "TAP version 15\n1..1\nok 1 - a\n1..1\n",
			want:     []Result{{Suite: f, Name: "a", Status: Passed}},
			warnings: []string{`TAP version "15"`, `a second plan "1..1" is ignored`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			results, warnings, err := Parse(FormatTAP, f, strings.NewReader(tt.in), MaxTestsPerJob)
			if err != nil {
				t.Fatal(err)
			}
			checkResults(t, f, results, warnings, MaxTestsPerJob)
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

func TestParseTAPNotTAP(t *testing.T) {
	t.Parallel()
	for name, in := range map[string]string{
		"empty":     "",
		"prose":     "hello\nworld\n",
		"junit":     junitPytest,
		"go json":   `{"Action":"pass","Package":"p","Test":"TestA"}`,
		"okay-ish":  "okay then\nnot okay\n",
		"comments":  "# only\n# comments\n",
		"bad plans": "1..x\n1..\n",
	} {
		t.Run(name, func(t *testing.T) {
			results, warnings, err := Parse(FormatTAP, "r.tap", strings.NewReader(in), 10)
			if !errors.Is(err, ErrFormat) || results != nil || warnings != nil {
				t.Fatalf("err = %v with %d results, %d warnings; want ErrFormat alone", err, len(results), len(warnings))
			}
		})
	}
}

// TestParseTAPHugePlan proves a plan far larger than the room costs no more than the
// room: the tests it counts are made only while there is room, the rest counted.
func TestParseTAPHugePlan(t *testing.T) {
	t.Parallel()
	results, warnings, err := Parse(FormatTAP, "r.tap", strings.NewReader("1..999999999\nok 1\nBail out! stop\n"), 100)
	if err != nil {
		t.Fatal(err)
	}
	checkResults(t, "r.tap", results, warnings, 100)
	if len(results) != 100 || results[99].Name != "(test 100)" || !hasWarning(warnings, 0, "999999899 tests were not kept") {
		t.Fatalf("%d results, the last %+v, warnings %v", len(results), results[len(results)-1], warnings)
	}
}

func FuzzParseTAP(f *testing.F) {
	for _, s := range []string{tapTape, tapNodeTap, tapNodeTest, tapPerl, tapSpec14,
		"1..4\nok 1 - a\nok 3 - c\n",
		"TAP version 14\n1..4\nok 1 - a\n# Subtest: b\n    1..3\n    ok 1 - b1\n    Bail out! database down\n",
		"1..0 # SKIP x\n",
		"# Subtest\n        ok 1\n    # Subtest: x\n    ok\nnot ok 2 # todo\n  ---\n  at: 'a:1:2'\n  duration_ms: 1e308\n  ...\n",
	} {
		f.Add([]byte(s), uint8(10))
		f.Add([]byte(s), uint8(1))
	}
	f.Fuzz(func(t *testing.T, data []byte, room uint8) {
		fuzzParse(t, FormatTAP, data, room)
	})
}
