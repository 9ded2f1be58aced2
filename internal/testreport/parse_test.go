package testreport

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
	"time"
	"unicode/utf8"
)

func TestParseUnknownFormat(t *testing.T) {
	t.Parallel()
	_, _, err := Parse("xunit", "r.xml", strings.NewReader("<testsuite/>"), 10)
	if err == nil || errors.Is(err, ErrFormat) {
		t.Fatalf("err = %v, want an error that is not ErrFormat", err)
	}
}

// reports of five tests each, one per format, the third failing.
var fiveTests = map[string]string{
	FormatJUnit: `<testsuite name="s">
<testcase name="t1"/><testcase name="t2"/><testcase name="t3"><failure message="m"/></testcase>
<testcase name="t4"/><testcase name="t5"/></testsuite>`,
	FormatGoTestJSON: `{"Action":"pass","Package":"p","Test":"t1"}
{"Action":"pass","Package":"p","Test":"t2"}
{"Action":"fail","Package":"p","Test":"t3"}
{"Action":"pass","Package":"p","Test":"t4"}
{"Action":"pass","Package":"p","Test":"t5"}
{"Action":"fail","Package":"p"}`,
	FormatTAP: "1..5\nok 1 t1\nok 2 t2\nnot ok 3 t3\nok 4 t4\nok 5 t5\n",
}

func TestParseRoom(t *testing.T) {
	t.Parallel()
	for _, format := range slices.Sorted(maps.Keys(fiveTests)) {
		for _, room := range []int{-1, 0, 2, 5, 9} {
			t.Run(fmt.Sprintf("%s/%d", format, room), func(t *testing.T) {
				results, warnings, err := Parse(format, "r", strings.NewReader(fiveTests[format]), room)
				if err != nil {
					t.Fatal(err)
				}
				checkResults(t, "r", results, warnings, max(room, 0))
				kept := min(max(room, 0), 5)
				var names []string
				for _, r := range results {
					names = append(names, r.Name)
				}
				want := []string{"t1", "t2", "t3", "t4", "t5"}[:kept]
				if strings.Join(names, " ") != strings.Join(want, " ") {
					t.Errorf("kept %q, want %q", names, want)
				}
				var cutWarning string
				for _, w := range warnings {
					if strings.Contains(w.Message, "not kept") {
						cutWarning = w.Message
					}
				}
				if wantCut := 5 - kept; wantCut > 0 {
					if !strings.HasPrefix(cutWarning, fmt.Sprintf("%d tests were not kept", wantCut)) {
						t.Errorf("warnings %v: none says %d tests were not kept", warnings, wantCut)
					}
				} else if cutWarning != "" {
					t.Errorf("warning %q with room for all", cutWarning)
				}
			})
		}
	}
}

// TestParseBounds feeds each format a test whose name, message and output are far over
// their bounds, written with invalid UTF-8 and NUL where the format lets them through.
func TestParseBounds(t *testing.T) {
	t.Parallel()
	longName := strings.Repeat("n", 3*MaxNameBytes)
	longMsg := strings.Repeat("m", 3*MaxMessageBytes)
	longOut := "FIRST" + strings.Repeat("o", 3*MaxOutputBytes) + "LAST"
	inputs := map[string]string{
		FormatJUnit: `<testsuite name="s"><testcase name="` + longName + `"><failure message="` + longMsg +
			`"/><system-out>` + longOut + `</system-out></testcase></testsuite>`,
		FormatGoTestJSON: `{"Action":"run","Package":"p","Test":"` + longName + `"}
{"Action":"output","Package":"p","Test":"` + longName + `","Output":"    x_test.go:1: ` + longMsg + `\n"}
{"Action":"output","Package":"p","Test":"` + longName + `","Output":"` + longOut + `\u0000\n"}
{"Action":"fail","Package":"p","Test":"` + longName + `"}`,
		FormatTAP: "not ok 1 - " + longName + "\x00\xff\n  ---\n  message: " + longMsg + "\n  ...\n# " + longOut + "\n1..1\n",
	}
	for _, format := range slices.Sorted(maps.Keys(inputs)) {
		t.Run(format, func(t *testing.T) {
			results, warnings, err := Parse(format, "r", strings.NewReader(inputs[format]), 10)
			if err != nil {
				t.Fatal(err)
			}
			checkResults(t, "r", results, warnings, 10)
			if len(results) != 1 {
				t.Fatalf("%d results, want 1: %+v", len(results), results)
			}
			r := results[0]
			if !strings.HasPrefix(r.Name, "nnnn") || !strings.HasSuffix(r.Name, "bytes more)") {
				t.Errorf("name not cut with a marker: %q…%q", r.Name[:10], r.Name[len(r.Name)-30:])
			}
			if !strings.HasPrefix(r.Message, "mmmm") && !strings.Contains(r.Message[:40], "mmmm") || !strings.Contains(r.Message, "(cut: ") {
				t.Errorf("message not cut with a marker: %q…", r.Message[:40])
			}
			if !strings.Contains(r.Output[len(r.Output)-10:], "LAST") || strings.Contains(r.Output, "FIRST") || !strings.HasPrefix(r.Output, "(cut: ") {
				t.Errorf("output does not keep the tail: %q…%q", r.Output[:40], r.Output[len(r.Output)-20:])
			}
			var warned bool
			for _, w := range warnings {
				// 3072 bytes, and in TAP six more for the two bytes replaced by U+FFFD.
				warned = warned || strings.Contains(w.Message, "test name of 30") && strings.Contains(w.Message, "bytes was cut to 1024")
			}
			if !warned {
				t.Errorf("no warning of the cut name in %v", warnings)
			}
		})
	}
}

// TestParseReaderError proves a failing reader is the error, not a format's: the report
// may be fine, the disk is not.
func TestParseReaderError(t *testing.T) {
	t.Parallel()
	errDisk := errors.New("disk on fire")
	for _, format := range slices.Sorted(maps.Keys(fiveTests)) {
		t.Run(format, func(t *testing.T) {
			r := io.MultiReader(strings.NewReader(fiveTests[format][:40]), iotest.ErrReader(errDisk))
			results, warnings, err := Parse(format, "r", r, 10)
			if !errors.Is(err, errDisk) || errors.Is(err, ErrFormat) || results != nil || warnings != nil {
				t.Fatalf("err = %v with %d results, %d warnings; want the reader's error alone", err, len(results), len(warnings))
			}
		})
	}
}

func TestLimitReader(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in       string
		left     int64
		want     string
		wantOver bool
	}{
		{"abc", 3, "abc", false},
		{"abcd", 3, "abc", true},
		{"", 0, "", false},
	} {
		l := &limitReader{r: strings.NewReader(tt.in), left: tt.left}
		got, err := io.ReadAll(l)
		if err != nil || string(got) != tt.want || l.over != tt.wantOver {
			t.Errorf("%q limited to %d: read %q, over %v, err %v; want %q, over %v", tt.in, tt.left, got, l.over, err, tt.want, tt.wantOver)
		}
	}
}

func TestLineReader(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", maxLineBytes+10)
	lr := newLineReader(strings.NewReader("a\r\nb\n\n" + long + "\nlast"))
	type line struct {
		s    string
		long bool
	}
	var got []line
	for {
		l, isLong, ok := lr.next()
		if !ok {
			break
		}
		got = append(got, line{string(l), isLong})
	}
	want := []line{{"a", false}, {"b", false}, {"", false}, {long[:maxLineBytes], true}, {"last", false}}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d = %.20q (long %v), want %.20q (long %v)", i+1, got[i].s, got[i].long, want[i].s, want[i].long)
		}
	}
	if lr.n != 5 || lr.readErr() != nil {
		t.Errorf("n = %d, err = %v; want 5, nil", lr.n, lr.readErr())
	}
}

// checkResults asserts what Parse promises of every answer: valid statuses, bounded
// and safe strings, no more results than room, warnings that name the file.
func checkResults(t *testing.T, file string, results []Result, warnings []Warning, room int) {
	t.Helper()
	if len(results) > room {
		t.Fatalf("%d results with room for %d", len(results), room)
	}
	safe := func(what, s string, max int) {
		t.Helper()
		if len(s) > max || !utf8.ValidString(s) || strings.IndexByte(s, 0) >= 0 {
			t.Fatalf("%s of %d bytes (max %d), valid UTF-8 %v, NUL %v: %.80q", what, len(s), max,
				utf8.ValidString(s), strings.IndexByte(s, 0) >= 0, s)
		}
	}
	for i, r := range results {
		if !r.Status.Valid() {
			t.Fatalf("result %d: status %q", i, r.Status)
		}
		if r.Name == "" {
			t.Fatalf("result %d: no name", i)
		}
		safe("suite", r.Suite, MaxNameBytes)
		safe("name", r.Name, MaxNameBytes)
		safe("file", r.File, MaxNameBytes)
		safe("message", r.Message, MaxMessageBytes)
		safe("output", r.Output, MaxOutputBytes)
		if r.Output != "" && !r.Status.Failing() {
			t.Fatalf("result %d: %s with output", i, r.Status)
		}
		if r.Line < 0 || r.Line > MaxLine || r.Duration < 0 || r.Duration > MaxDuration || r.FailedAttempts < 0 {
			t.Fatalf("result %d: line %d, duration %v, failed attempts %d", i, r.Line, r.Duration, r.FailedAttempts)
		}
	}
	if len(warnings) > maxWarnings+3 {
		t.Fatalf("%d warnings", len(warnings))
	}
	for _, w := range warnings {
		if w.File != file || w.Message == "" || w.Line < 0 {
			t.Fatalf("warning %+v", w)
		}
		safe("warning", w.Message, MaxMessageBytes)
	}
}

// fuzzParse is the body of each format's fuzz test. Besides what every answer must
// hold, the results with little room must be the start of those with much room: room
// only cuts, it never changes what is kept.
func fuzzParse(t *testing.T, format string, data []byte, room uint8) {
	results, warnings, err := Parse(format, "f", bytes.NewReader(data), int(room))
	if err != nil {
		if results != nil || warnings != nil || !errors.Is(err, ErrFormat) {
			t.Fatalf("error %v with %d results, %d warnings; is ErrFormat %v", err, len(results), len(warnings), errors.Is(err, ErrFormat))
		}
		return
	}
	checkResults(t, "f", results, warnings, int(room))
	all, _, err := Parse(format, "f", bytes.NewReader(data), 255)
	if err != nil {
		t.Fatalf("room %d read it, room 255 did not: %v", room, err)
	}
	if len(results) != min(int(room), len(all)) {
		t.Fatalf("room %d kept %d of the %d room 255 kept", room, len(results), len(all))
	}
	for i := range results {
		if results[i] != all[i] {
			t.Fatalf("result %d with room %d: %s\nwith room 255: %s", i, room, short(results[i]), short(all[i]))
		}
	}
}

// sameResults compares results field by field, naming the first difference.
func sameResults(t *testing.T, got, want []Result) {
	t.Helper()
	for i := 0; i < max(len(got), len(want)); i++ {
		switch {
		case i >= len(got):
			t.Errorf("result %d missing: want %s", i, short(want[i]))
		case i >= len(want):
			t.Errorf("result %d extra: %s", i, short(got[i]))
		case got[i] != want[i]:
			t.Errorf("result %d:\n got %s\nwant %s", i, short(got[i]), short(want[i]))
		}
	}
}

// short shows a result with its long strings cut, for a failing test's message.
func short(r Result) string {
	return fmt.Sprintf("{%.200q %.200q %q:%d %s %v %.300q output %.300q attempts %d}",
		r.Suite, r.Name, r.File, r.Line, r.Status, r.Duration, r.Message, r.Output, r.FailedAttempts)
}

func sec(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// hasWarning reports whether a warning at line (0: any) contains part.
func hasWarning(ws []Warning, line int, part string) bool {
	for _, w := range ws {
		if (line == 0 || w.Line == line) && strings.Contains(w.Message, part) {
			return true
		}
	}
	return false
}
