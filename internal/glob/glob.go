package glob

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Pattern is one compiled filter pattern.
type Pattern struct {
	src string
	re  *regexp.Regexp
}

// SyntaxError says why a pattern is not valid and where.
type SyntaxError struct {
	Pattern string
	Offset  int // byte offset of the mistake in Pattern
	Msg     string
}

// Error implements error.
func (e *SyntaxError) Error() string {
	return fmt.Sprintf("pattern %q: %s (at offset %d)", e.Pattern, e.Msg, e.Offset)
}

// Compile parses a pattern. Patterns are translated to anchored RE2 expressions, which
// match in time linear in the input whatever the pattern: a pattern comes from a pipeline
// file anyone who can push may write.
func Compile(pattern string) (*Pattern, error) {
	if pattern == "" {
		return nil, &SyntaxError{Pattern: pattern, Msg: "empty pattern"}
	}
	var b strings.Builder
	b.WriteString(`\A(?s:`)
	// atom is the regexp of the last thing a ? or + may repeat; "" when nothing may be
	// (at the start, after a star or after a quantifier).
	atom := ""
	flush := func() {
		b.WriteString(atom)
		atom = ""
	}
	for i := 0; i < len(pattern); {
		c := pattern[i]
		switch c {
		case '*':
			flush()
			if strings.HasPrefix(pattern[i:], "**/") {
				b.WriteString(`(?:.*/)?`)
				i += 3
			} else if strings.HasPrefix(pattern[i:], "**") {
				b.WriteString(`.*`)
				i += 2
			} else {
				b.WriteString(`[^/]*`)
				i++
			}
		case '?', '+':
			if atom == "" {
				return nil, &SyntaxError{Pattern: pattern, Offset: i, Msg: fmt.Sprintf("%c must follow a character or [...] class it repeats; write \\%c for the character itself", c, c)}
			}
			b.WriteString(`(?:` + atom + `)`)
			b.WriteByte(c)
			atom = ""
			i++
		case '[':
			flush()
			class, n, err := parseClass(pattern, i)
			if err != nil {
				return nil, err
			}
			atom = class
			i += n
		case ']':
			return nil, &SyntaxError{Pattern: pattern, Offset: i, Msg: "] without a matching ["}
		case '\\':
			flush()
			if i+1 == len(pattern) {
				return nil, &SyntaxError{Pattern: pattern, Offset: i, Msg: `trailing \ escapes nothing`}
			}
			r, size := firstRune(pattern[i+1:])
			atom = regexp.QuoteMeta(r)
			i += 1 + size
		default:
			flush()
			r, size := firstRune(pattern[i:])
			atom = regexp.QuoteMeta(r)
			i += size
		}
	}
	flush()
	b.WriteString(`)\z`)
	re, err := regexp.Compile(b.String())
	if err != nil {
		// The translation above only emits valid expressions; reaching this is a bug, but
		// it must surface as an invalid pattern rather than a panic.
		return nil, &SyntaxError{Pattern: pattern, Msg: err.Error()}
	}
	return &Pattern{src: pattern, re: re}, nil
}

func firstRune(s string) (string, int) {
	for i := range s {
		if i > 0 {
			return s[:i], i
		}
	}
	return s, len(s)
}

// parseClass reads the [...] class starting at pattern[start] and returns its regexp and
// how many bytes it spans. Ranges may only join two letters of one case or two digits, as
// in GitHub's syntax; anything else in a class is a character listed.
func parseClass(pattern string, start int) (string, int, error) {
	var b strings.Builder
	b.WriteByte('[')
	i := start + 1
	members := 0
	for {
		if i >= len(pattern) {
			return "", 0, &SyntaxError{Pattern: pattern, Offset: start, Msg: "[ without a matching ]"}
		}
		c := pattern[i]
		if c == ']' {
			break
		}
		lit, size := firstRune(pattern[i:])
		if c == '\\' {
			if i+1 == len(pattern) {
				return "", 0, &SyntaxError{Pattern: pattern, Offset: i, Msg: `trailing \ escapes nothing`}
			}
			var n int
			lit, n = firstRune(pattern[i+1:])
			size = 1 + n
		}
		if i+size+1 < len(pattern) && pattern[i+size] == '-' && pattern[i+size+1] != ']' && c != '\\' {
			hi := pattern[i+size+1]
			if size != 1 || !sameRangeClass(c, hi) || c > hi {
				return "", 0, &SyntaxError{Pattern: pattern, Offset: i, Msg: fmt.Sprintf("bad range %s-%c: ranges join a-z, A-Z or 0-9 in order", lit, hi)}
			}
			fmt.Fprintf(&b, "%c-%c", c, hi)
			i += size + 2
			members++
			continue
		}
		b.WriteString(quoteClass(lit))
		i += size
		members++
	}
	if members == 0 {
		return "", 0, &SyntaxError{Pattern: pattern, Offset: start, Msg: "[] lists no character"}
	}
	b.WriteByte(']')
	return b.String(), i + 1 - start, nil
}

func sameRangeClass(lo, hi byte) bool {
	in := func(c, a, z byte) bool { return c >= a && c <= z }
	return (in(lo, 'a', 'z') && in(hi, 'a', 'z')) ||
		(in(lo, 'A', 'Z') && in(hi, 'A', 'Z')) ||
		(in(lo, '0', '9') && in(hi, '0', '9'))
}

// quoteClass escapes a character for use inside a regexp character class.
func quoteClass(s string) string {
	if len(s) == 1 && strings.ContainsRune(`\]^-[`, rune(s[0])) {
		return `\` + s
	}
	return s
}

// String returns the pattern as written.
func (p *Pattern) String() string { return p.src }

// Match reports whether s matches the whole pattern.
func (p *Pattern) Match(s string) bool { return p.re.MatchString(s) }

// List is an ordered list of patterns, some of them negated with a leading !.
type List struct {
	items []listItem
}

type listItem struct {
	negate bool
	p      *Pattern
}

// CompileList compiles every pattern of a list; the error names the first bad one.
func CompileList(patterns []string) (*List, error) {
	l := &List{}
	for _, src := range patterns {
		negate := strings.HasPrefix(src, "!")
		body := src
		if negate {
			body = src[1:]
		}
		p, err := Compile(body)
		if err != nil {
			var se *SyntaxError
			if errors.As(err, &se) {
				// Report against the pattern as written, ! included.
				off := se.Offset
				if negate {
					off++
				}
				return nil, &SyntaxError{Pattern: src, Offset: off, Msg: se.Msg}
			}
			return nil, err
		}
		l.items = append(l.items, listItem{negate: negate, p: p})
	}
	return l, nil
}

// Match reports whether the list includes s: the last pattern that matches s decides, and
// s is excluded when none does.
func (l *List) Match(s string) bool {
	for i := len(l.items) - 1; i >= 0; i-- {
		if l.items[i].p.Match(s) {
			return !l.items[i].negate
		}
	}
	return false
}

// HasPositive reports whether the list has a pattern without !. A list of exclusions only
// matches nothing, which is never what its author meant.
func (l *List) HasPositive() bool {
	for _, it := range l.items {
		if !it.negate {
			return true
		}
	}
	return false
}
