package testreport

import (
	"strings"
	"testing"
)

// TestBatches: batches keep the results' order, hold at most BatchResults and are cut
// at BatchBytes of text; passed tests carry no text; masked text is bounded again.
func TestBatches(t *testing.T) {
	big := strings.Repeat("x", MaxOutputBytes)
	var rs []Result
	for i := range 2500 {
		r := Result{Name: "T", Status: Passed, Message: "kept out", Line: i}
		if i >= 2000 {
			r.Status, r.Output = Failed, big
		}
		rs = append(rs, r)
	}
	bs := Batches(rs, func(s string) string { return s + "!" })
	perByte := BatchBytes / (MaxOutputBytes + len("kept out!"))
	want := []int{1000, 1000, perByte, 500 - perByte}
	if len(bs) != len(want) {
		t.Fatalf("%d batches, want %d", len(bs), len(want))
	}
	line := 0
	for i, b := range bs {
		if len(b) != want[i] {
			t.Errorf("batch %d holds %d, want %d", i, len(b), want[i])
		}
		for _, w := range b {
			if w.Line != line {
				t.Fatalf("result %d comes as %d: out of order", line, w.Line)
			}
			line++
			switch {
			case w.Status == "passed" && (w.Message != "" || w.Output != ""):
				t.Fatalf("a passed test carries text: %+v", w)
			case w.Status == "failed" && (len(w.Output) != MaxOutputBytes || w.Message != "kept out!"):
				t.Fatalf("a failed test's text: %d bytes of output, message %q", len(w.Output), w.Message)
			}
		}
	}
}
