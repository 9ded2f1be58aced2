package testreport

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestCut(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 600) // 1200 bytes, two per rune
	tests := []struct {
		name string
		s    string
		max  int
		want string
	}{
		{"fits", "abc", 3, "abc"},
		{"empty", "", 10, ""},
		// The marker naming 100 bytes is 25 bytes long: 15 are kept.
		{"ascii", strings.Repeat("x", 100), 40, strings.Repeat("x", 15) + "… (cut: 85 bytes more)"},
		// 1024 less the 26-byte marker is 998, a rune boundary in a run of é.
		{"utf8", long, 1024, strings.Repeat("é", 499) + "… (cut: 202 bytes more)"},
		// 1025 less 26 is 999, inside an é: the cut backs up to 998.
		{"utf8 mid-rune", long, 1025, strings.Repeat("é", 499) + "… (cut: 202 bytes more)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cut(tt.s, tt.max)
			if got != tt.want {
				t.Errorf("cut = %q, want %q", got, tt.want)
			}
			if len(got) > tt.max || !utf8.ValidString(got) {
				t.Errorf("cut is %d bytes (max %d), valid UTF-8 %v", len(got), tt.max, utf8.ValidString(got))
			}
		})
	}
}

func TestCutTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		s       string
		max     int
		dropped int64
		want    string
	}{
		{"fits", "abc", 3, 0, "abc"},
		{"dropped before", "abc", 40, 5, "(cut: 5 bytes before) …abc"},
		// The marker naming 63 bytes is 26 bytes long: 14 are kept.
		{"ascii", strings.Repeat("x", 60) + "END", 40, 0, "(cut: 49 bytes before) …xxxxxxxxxxxEND"},
		// 31 less the 26-byte marker keeps 5 bytes, which start inside an é: 4 are kept.
		{"utf8", strings.Repeat("a", 30) + "ééé", 31, 0, "(cut: 32 bytes before) …éé"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cutTail(tt.s, tt.max, tt.dropped)
			if got != tt.want {
				t.Errorf("cutTail = %q, want %q", got, tt.want)
			}
			if len(got) > tt.max || !utf8.ValidString(got) {
				t.Errorf("cutTail is %d bytes (max %d), valid UTF-8 %v", len(got), tt.max, utf8.ValidString(got))
			}
		})
	}
}

func TestTail(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		writes []string
		max    int
		want   string
	}{
		{"under", []string{"ab", "cd"}, 40, "abcd"},
		// The marker naming 200 bytes is 27 bytes long: 13 are kept.
		{"many small writes", strings.Split(strings.Repeat("0123456789", 20), ""), 40, "(cut: 187 bytes before) …7890123456789"},
		{"one big write", []string{"start", strings.Repeat("y", 100), "end"}, 40, "(cut: 95 bytes before) …yyyyyyyyyyend"},
		// The kept bytes start inside "é": the partial rune is dropped, never replaced.
		{"rune split", []string{strings.Repeat("é", 30)}, 40, "(cut: 46 bytes before) …ééééééé"},
		{"invalid and NUL", []string{"a\x00b\xffc"}, 40, "a\uFFFDb\uFFFDc"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tl := tail{max: tt.max}
			for _, w := range tt.writes {
				tl.writeString(w)
			}
			got := tl.String()
			if got != tt.want {
				t.Errorf("tail = %q, want %q", got, tt.want)
			}
			if len(got) > tt.max {
				t.Errorf("tail is %d bytes, max %d", len(got), tt.max)
			}
		})
	}
}

func TestClean(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"plain":         "plain",
		"nul\x00inside": "nul\uFFFDinside",
		"bad\xc3(utf8":  "bad\uFFFD(utf8",
		"ünïcødé":       "ünïcødé",
	} {
		if got := clean(in); got != want {
			t.Errorf("clean(%q) = %q, want %q", in, got, want)
		}
	}
}
