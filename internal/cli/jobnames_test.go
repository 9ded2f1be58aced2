package cli

import (
	"bytes"
	"testing"
)

// TestDistinctWidth: names that eliding at the usual width would make one (matrix
// instances differing in the middle) are shown wider, just enough to keep them apart.
func TestDistinctWidth(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		names []string
		w     int
		want  int
	}{
		{[]string{"build", "lint"}, 5, 5},
		{[]string{"test (go=1.25, os=linux, shard=1)", "test (go=1.26, os=linux, shard=1)"}, 24, 27},
		{[]string{"abcdefgh", "abcdefgh"}, 3, 3}, // the same name twice is one job's
		{[]string{"aaaaaXbbbbb", "aaaaaYbbbbb"}, 4, 11},
	} {
		got := distinctWidth(tc.names, tc.w)
		if got != tc.want {
			t.Errorf("distinctWidth(%q, %d) = %d, want %d", tc.names, tc.w, got, tc.want)
		}
		seen := map[string]string{}
		for _, n := range tc.names {
			e := elide(n, got)
			if other, ok := seen[e]; ok && other != n {
				t.Errorf("%q and %q both show as %q", other, n, e)
			}
			seen[e] = n
		}
	}
}

// TestRunPrinterUsesDisplayNames: gantry run and submit --follow prefix each line with the
// job's display name when it has one, and two instances never share a prefix.
func TestRunPrinterUsesDisplayNames(t *testing.T) {
	t.Parallel()
	jobs := []jobView{
		{ID: "1", Key: "test (go=1.25, os=linux, shard=1)", DisplayName: "unit tests on go 1.25 linux shard 1"},
		{ID: "2", Key: "test (go=1.26, os=linux, shard=1)", DisplayName: "unit tests on go 1.26 linux shard 1"},
		{ID: "3", Key: "lint"},
	}
	p := newRunPrinter(&bytes.Buffer{}, false, jobs)
	if p.prefix["1"] == p.prefix["2"] {
		t.Fatalf("two instances share the prefix %q", p.prefix["1"])
	}
	for _, want := range []struct{ id, has string }{{"1", "unit tests on"}, {"2", "6 linux shard 1"}, {"3", "lint"}} {
		if !bytes.Contains([]byte(p.prefix[want.id]), []byte(want.has)) {
			t.Errorf("prefix of job %s = %q, want it to hold %q", want.id, p.prefix[want.id], want.has)
		}
	}
}
