package bench

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/testreport"
)

// TestWriteJUnit checks that the report test-reports measures is what it claims to be:
// the worker's parser reads every testcase of it, without a warning, with the statuses
// the writer counted, and a failing test keeps its message and KiB of output.
func TestWriteJUnit(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 49, 50, 51, 1000} {
		path := filepath.Join(t.TempDir(), "report.xml")
		rep, err := writeJUnit(path, n, 7)
		if err != nil {
			t.Fatal(err)
		}
		results, warnings, err := parseReportFile(path)
		if err != nil {
			t.Fatalf("%d testcases: %v", n, err)
		}
		if len(results) != n || len(warnings) > 0 {
			t.Fatalf("%d testcases: parsed %d results, warnings %v", n, len(results), warnings)
		}
		counts := map[testreport.Status]int{}
		flakies := 0
		for _, r := range results {
			counts[r.Status]++
			if r.Status == testreport.Passed && r.FailedAttempts > 0 {
				flakies++
			}
			if !r.Status.Failing() {
				continue
			}
			if !strings.Contains(r.Message, "expected: <") && !strings.Contains(r.Message, "no route to") {
				t.Errorf("%s.%s: message %q", r.Suite, r.Name, r.Message)
			}
			if len(r.Output) < 1<<10 || !strings.Contains(r.Output, "\tat "+r.Suite+"."+r.Name+"(") {
				t.Errorf("%s.%s: %d bytes of output, want its stack trace and log:\n%.300s", r.Suite, r.Name, len(r.Output), r.Output)
			}
		}
		if got := counts[testreport.Failed] + counts[testreport.Errored]; got != rep.failing {
			t.Errorf("%d testcases: %d failing parsed, %d written", n, got, rep.failing)
		}
		if counts[testreport.Skipped] != rep.skipped || flakies != rep.flakies {
			t.Errorf("%d testcases: %d skipped and %d flaky parsed, %d and %d written", n, counts[testreport.Skipped], flakies, rep.skipped, rep.flakies)
		}
		if n == 1000 {
			// About one in ten fails, and a failing testcase is most of the file.
			if rep.failing < 70 || rep.failing > 130 {
				t.Errorf("%d of 1,000 testcases failing, want about 100", rep.failing)
			}
			if per := rep.bytes / int64(n); per < 450 || per > 800 {
				t.Errorf("%d bytes a testcase, want about 600 (30 MB for 50,000)", per)
			}
		}
	}
}

func TestNumberPlaceholders(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"WHERE a = ? AND b IN (?, ?)", "WHERE a = $1 AND b IN ($2, $3)"},
	} {
		if got := numberPlaceholders(c.in); got != c.want {
			t.Errorf("numberPlaceholders(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
