package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"
)

// defaultWidth is what human output fits when the width of the terminal is unknown.
const defaultWidth = 80

// terminal reports whether w is a terminal and, if so, how many columns it has.
func terminal(w io.Writer) (bool, int) {
	f, ok := w.(*os.File)
	if !ok {
		return false, defaultWidth
	}
	ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ)
	if err != nil {
		return false, defaultWidth
	}
	if ws.Col < 20 {
		return true, defaultWidth
	}
	return true, int(ws.Col)
}

// outputWidth is the number of columns human output of a may use.
func (a *app) outputWidth() int {
	_, w := terminal(a.stdout)
	return w
}

// elide shortens s to at most n characters, marking the cut with "…" in the middle so
// that both the start and the end (a matrix job's values) stay visible.
func elide(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	if n <= 1 {
		return string([]rune(s)[:max(n, 0)])
	}
	r := []rune(s)
	head := (n - 1) / 2
	tail := n - 1 - head
	return string(r[:head]) + "…" + string(r[len(r)-tail:])
}

// distinctWidth is the least width, from w up to the longest name, at which elide keeps
// every two different names apart: matrix instances often differ only in the middle of
// their names, which eliding would cut, and two jobs must never show as one.
func distinctWidth(names []string, w int) int {
	longest := 0
	for _, n := range names {
		longest = max(longest, utf8.RuneCountInString(n))
	}
	for ; w < longest; w++ {
		seen := make(map[string]string, len(names))
		clash := false
		for _, n := range names {
			e := elide(n, w)
			if other, ok := seen[e]; ok && other != n {
				clash = true
				break
			}
			seen[e] = n
		}
		if !clash {
			return w
		}
	}
	return max(w, longest)
}

func jobTitles(jobs []jobView) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.title()
	}
	return out
}

// pad right-pads s with spaces to n characters.
func pad(s string, n int) string {
	if c := utf8.RuneCountInString(s); c < n {
		return s + strings.Repeat(" ", n-c)
	}
	return s
}

// ANSI colours for job prefixes: distinct on dark and light backgrounds, none of them
// red, which means failure.
var jobColours = []string{"\x1b[36m", "\x1b[33m", "\x1b[35m", "\x1b[32m", "\x1b[34m", "\x1b[96m", "\x1b[93m", "\x1b[95m"}

const (
	ansiReset     = "\x1b[0m"
	ansiDim       = "\x1b[2m"
	ansiRed       = "\x1b[31m"
	ansiGreen     = "\x1b[32m"
	ansiClearLine = "\r\x1b[K"
)

// formatDuration shows a duration the way a person reads it: 850ms, 4.2s, 3m05s, 2h10m.
func formatDuration(d time.Duration) string {
	switch {
	case d < 0:
		return "-"
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Minute:
		return fmt.Sprintf("%.1fs", d.Seconds())
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", d/time.Minute, d%time.Minute/time.Second)
	default:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", d/time.Hour, d%time.Hour/time.Minute)
	}
}

// formatAge shows how long ago something happened in one unit: 12s, 5m, 3h, 4d.
func formatAge(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", max(d, 0)/time.Second)
	case d < time.Hour:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", d/time.Hour)
	default:
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
}
