package logs

import (
	"encoding/base64"
	"encoding/hex"
	"iter"
	"slices"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// minSecretBytes is the shortest secret piece that is masked: masking "a" or "\t" would
// turn the whole log into asterisks and protect nothing.
const minSecretBytes = 3

// minFormBits is how much of a value an encoded form (base64, hex) must carry to be
// masked. Shorter forms turn up by chance in any long base64 or hex output (commit
// hashes, digests, blobs): a form of 32 bits or more does so at a given position at most
// once in 2^32. So a base64 form needs 6 characters and a hex form 8.
const minFormBits = 32

// maxEscapeSkip bounds the bytes of ANSI escape sequences one match may step over, so
// output made of escapes alone cannot keep a partial match, and its bytes, open for ever.
const maxEscapeSkip = 256

// maxEscapeLen bounds one CSI or OSC sequence the matcher steps over.
const maxEscapeLen = 128

// patternKind says how the text that a pattern matches is read.
type patternKind uint8

const (
	// kindExact matches its bytes as they are.
	kindExact patternKind = iota
	// kindFold matches its bytes after the text passes through the pattern's fold table.
	kindFold
	// kindJSON matches a value as the content of a JSON string: each character either as
	// it is or escaped in any way JSON allows (\", \\, \/, \n, \uXXXX in either case,
	// surrogate pairs), which covers what every JSON encoder writes.
	kindJSON
	// kindPercent matches a value percent-encoded: each byte either as it is, as %XX in
	// either case, or a space as "+", which covers query and path escaping, escaping of
	// every byte, and every language's choice of what to leave alone.
	kindPercent
)

// pattern is one form of a secret the masker looks for.
type pattern struct {
	kind patternKind
	// text is the form (kindExact, kindFold, already folded) or the value (kindJSON,
	// kindPercent).
	text string
	fold *[256]byte
}

// hexFold reads hex digits in either case; b64Fold reads the URL-safe base64 alphabet as
// the standard one.
var hexFold, b64Fold = func() (h, b [256]byte) {
	for i := range 256 {
		h[i], b[i] = byte(i), byte(i)
	}
	for c := 'A'; c <= 'F'; c++ {
		h[c] = byte(c - 'A' + 'a')
	}
	b['-'], b['_'] = '+', '/'
	return h, b
}()

// masker replaces registered secrets, in each form registered, with "***".
//
// Matches may skip ANSI escape sequences (CSI, OSC) between two bytes of a form, so
// colour codes inserted into a value do not hide it; the sequences inside a masked span
// are kept after the "***", so the colours of the rest of the line do not change.
// Overlapping matches are masked as one span.
type masker struct {
	patterns []pattern
	// byFirst lists, for each byte, the patterns a match may start with it, and pairs
	// holds the first two bytes a match may start with (anySecond: any second byte), so
	// most positions of a log are passed over with a lookup or two.
	byFirst   [256][]int32
	pairs     [1 << 16 / 64]uint64
	anySecond [256]bool
}

// empty reports whether nothing is registered.
func (m *masker) empty() bool { return m == nil || len(m.patterns) == 0 }

// add registers secret's lines exactly; it reports whether any new piece was added.
func (m *masker) add(secret string) bool {
	added := false
	for piece := range strings.FieldsFuncSeq(secret, func(c rune) bool { return c == '\n' || c == '\r' }) {
		if len(piece) >= minSecretBytes {
			added = m.addPattern(pattern{kind: kindExact, text: piece}) || added
		}
	}
	return added
}

// addSecret registers a delivered secret value: its lines exactly, and the whole value
// JSON-escaped, percent-encoded, in hex (either case), and in base64 (standard and URL
// alphabets, padded or not) at each of the three alignments it can have inside a longer
// base64 stream, such as "user:value" in an HTTP Basic authorization header. It reports
// whether any new form was added.
func (m *masker) addSecret(value string) bool {
	added := m.add(value)
	if len(value) < minSecretBytes {
		return added
	}
	added = m.addPattern(pattern{kind: kindJSON, text: value}) || added
	added = m.addPattern(pattern{kind: kindPercent, text: value}) || added
	if h := hex.EncodeToString([]byte(value)); len(h)*4 >= minFormBits {
		added = m.addPattern(pattern{kind: kindFold, text: h, fold: &hexFold}) || added
	}
	for _, f := range base64Forms(value) {
		if len(f)*6 >= minFormBits {
			added = m.addPattern(pattern{kind: kindFold, text: f, fold: &b64Fold}) || added
		}
	}
	return added
}

// base64Forms returns the standard-alphabet base64 of value wherever it may sit in a
// longer stream. For each offset 0, 1 and 2 of value within a 3-byte group, it encodes
// value behind that many bytes and keeps the characters that depend on value alone: the
// stable middle, which is what any stream with value at that offset holds. Where value
// can also end the stream, the last character (its bits of value followed by zeros) and
// the padding are forms of their own, so the end of "user:value" is masked as well.
func base64Forms(value string) []string {
	var out []string
	for off := range 3 {
		buf := make([]byte, off+len(value))
		copy(buf[off:], value)
		enc := base64.StdEncoding.EncodeToString(buf)
		start := (8*off + 5) / 6     // characters holding bits of the leading bytes
		stable := 8 * len(buf) / 6   // characters holding bits of buf alone
		last := (8*len(buf) + 5) / 6 // the unpadded end
		for _, end := range []int{stable, last, len(enc)} {
			if end > start && !slices.Contains(out, enc[start:end]) {
				out = append(out, enc[start:end])
			}
		}
	}
	return out
}

// addPattern registers p unless it is already there.
func (m *masker) addPattern(p pattern) bool {
	for _, q := range m.patterns {
		if q.kind == p.kind && q.text == p.text && q.fold == p.fold {
			return false
		}
	}
	id := int32(len(m.patterns))
	m.patterns = append(m.patterns, p)
	for first, seconds := range p.starts() {
		if !slices.Contains(m.byFirst[first], id) {
			m.byFirst[first] = append(m.byFirst[first], id)
		}
		if seconds == nil {
			m.anySecond[first] = true
		}
		for _, b := range seconds {
			k := int(first)<<8 | int(b)
			m.pairs[k/64] |= 1 << (k % 64)
		}
	}
	return true
}

// starts yields each byte a match of p may start with, and the bytes that may follow it
// (nil: any byte).
func (p *pattern) starts() iter.Seq2[byte, []byte] {
	v := p.text
	// A match may step over an escape sequence after its first character.
	lit := func(alts ...byte) []byte { return append(alts, esc) }
	return func(yield func(byte, []byte) bool) {
		switch p.kind {
		case kindExact:
			yield(v[0], lit(v[1]))
		case kindFold:
			var seconds []byte
			for b := range 256 {
				if p.fold[b] == v[1] {
					seconds = append(seconds, byte(b))
				}
			}
			for b := range 256 {
				if p.fold[b] == v[0] && !yield(byte(b), lit(seconds...)) {
					return
				}
			}
		case kindJSON:
			if !yield(v[0], lit(v[1], '\\')) {
				return
			}
			if v[0] == '\\' {
				yield('\\', nil)
				return
			}
			escaped := []byte{'u'}
			if e, ok := jsonShort[v[0]]; ok {
				escaped = append(escaped, e)
			}
			yield('\\', escaped)
		case kindPercent:
			next := lit(v[1], '%')
			if v[1] == ' ' {
				next = append(next, '+')
			}
			if !yield(v[0], next) {
				return
			}
			if v[0] == ' ' && !yield('+', next) {
				return
			}
			if v[0] == '%' {
				yield('%', nil)
				return
			}
			const digits = "0123456789ABCDEF"
			hi := digits[v[0]>>4]
			yield('%', []byte{hi, hi | 0x20})
		}
	}
}

// jsonShort maps the bytes JSON has a two-character escape for to the escape's letter.
var jsonShort = map[byte]byte{'"': '"', '\\': '\\', '/': '/', '\b': 'b', '\f': 'f', '\n': 'n', '\r': 'r', '\t': 't'}

// matchResult is what matching a pattern at a position found.
type matchResult uint8

const (
	noMatch matchResult = iota
	matched
	// needMore: the text ends inside what may still become a match.
	needMore
)

// mask appends src to dst with every secret replaced. Unless final, it stops at the first
// position where the rest of src may be the start of a secret, since more input could
// complete it, and returns how many bytes of src it consumed.
func (m *masker) mask(dst, src []byte, final bool) ([]byte, int) {
	if m.empty() {
		return append(dst, src...), len(src)
	}
	start := 0                // src[start:] is not in dst yet
	spanAt, spanEnd := -1, -1 // the span being masked, if spanAt >= 0
	for i := 0; i < len(src); i++ {
		if spanAt >= 0 && i >= spanEnd {
			dst = append(dst, src[start:spanAt]...)
			dst = appendMasked(dst, src[spanAt:spanEnd])
			start, spanAt = spanEnd, -1
		}
		c := src[i]
		ids := m.byFirst[c]
		if len(ids) == 0 {
			continue
		}
		if k := int(c)<<8 | int(src[min(i+1, len(src)-1)]); i+1 < len(src) && !m.anySecond[c] && m.pairs[k/64]&(1<<(k%64)) == 0 {
			continue
		}
		end := -1
		for _, id := range ids {
			n, res := m.patterns[id].matchAt(src[i:])
			if res == needMore && !final {
				// Keep the open span too: what follows may extend it.
				cut := i
				if spanAt >= 0 {
					cut = spanAt
				}
				return append(dst, src[start:cut]...), cut
			}
			if res == matched && i+n > end {
				end = i + n
			}
		}
		switch {
		case end < 0:
		case spanAt < 0:
			spanAt, spanEnd = i, end
		case end > spanEnd:
			spanEnd = end
		}
	}
	if spanAt >= 0 {
		dst = append(dst, src[start:spanAt]...)
		dst = appendMasked(dst, src[spanAt:spanEnd])
		start = spanEnd
	}
	return append(dst, src[start:]...), len(src)
}

// appendMasked appends the mask for span, followed by the ANSI escape sequences in it, so
// that a colour set or reset inside a secret still applies to the rest of the line.
func appendMasked(dst, span []byte) []byte {
	dst = append(dst, maskText...)
	for i := 0; i < len(span); i++ {
		if span[i] != esc {
			continue
		}
		if n, res := escapeLen(span[i:]); res == matched {
			dst = append(dst, span[i:i+n]...)
			i += n - 1
		}
	}
	return dst
}

// matchAt reports how many bytes at the start of t match p. Between two characters of the
// form it steps over ANSI escape sequences.
func (p *pattern) matchAt(t []byte) (int, matchResult) {
	v := p.text
	j, k, skipped := 0, 0, 0
	for k < len(v) {
		if j >= len(t) {
			return 0, needMore
		}
		if k > 0 && t[j] == esc && v[k] != esc {
			n, res := escapeLen(t[j:])
			if res != matched {
				return 0, res
			}
			if skipped += n; skipped > maxEscapeSkip {
				return 0, noMatch
			}
			j += n
			continue
		}
		used, n, res := 1, 1, matched
		switch p.kind {
		case kindExact:
			if t[j] != v[k] {
				return 0, noMatch
			}
		case kindFold:
			if p.fold[t[j]] != v[k] {
				return 0, noMatch
			}
		case kindJSON:
			used, n, res = jsonUnit(t[j:], v[k:])
		case kindPercent:
			used, res = percentUnit(t[j:], v[k])
		}
		if res != matched {
			return 0, res
		}
		j += used
		k += n
	}
	return j, matched
}

// percentUnit matches one byte b of a value at the start of t, percent-encoded or not. It
// returns how many bytes of t it used.
func percentUnit(t []byte, b byte) (int, matchResult) {
	if t[0] == '%' {
		switch {
		case len(t) >= 3 && isHex(t[1]) && isHex(t[2]):
			if unhex(t[1])<<4|unhex(t[2]) == b {
				return 3, matched
			}
		case len(t) == 2 && isHex(t[1]), len(t) == 1:
			return 0, needMore
		}
	}
	if t[0] == b || (b == ' ' && t[0] == '+') {
		return 1, matched
	}
	return 0, noMatch
}

// jsonUnit matches the start of v at the start of t, read as the content of a JSON
// string: one character, escaped or not. It returns how many bytes of t it used and how
// many of v it matched.
func jsonUnit(t []byte, v string) (used, n int, res matchResult) {
	if t[0] != '\\' {
		if t[0] == v[0] {
			return 1, 1, matched
		}
		return 0, 0, noMatch
	}
	if len(t) < 2 {
		return 0, 0, needMore
	}
	var d byte
	switch t[1] {
	case '"', '\\', '/':
		d = t[1]
	case 'b':
		d = '\b'
	case 'f':
		d = '\f'
	case 'n':
		d = '\n'
	case 'r':
		d = '\r'
	case 't':
		d = '\t'
	case 'u':
		r, used, res := jsonRune(t)
		if res == needMore {
			return 0, 0, needMore
		}
		if res == matched {
			var buf [utf8.UTFMax]byte
			enc := buf[:utf8.EncodeRune(buf[:], r)]
			if strings.HasPrefix(v, string(enc)) {
				return used, len(enc), matched
			}
		}
	}
	if d != 0 && d == v[0] {
		return 2, 1, matched
	}
	if v[0] == '\\' { // a backslash the JSON left as it is
		return 1, 1, matched
	}
	return 0, 0, noMatch
}

// jsonRune reads a \uXXXX escape at the start of t, and the low half that must follow a
// high surrogate.
func jsonRune(t []byte) (rune, int, matchResult) {
	hi, res := hex4(t)
	if res != matched {
		return 0, 0, res
	}
	if !utf16.IsSurrogate(hi) {
		return hi, 6, matched
	}
	if len(t) < 12 {
		return 0, 0, needMore
	}
	lo, res := hex4(t[6:])
	if res != matched {
		return 0, 0, res
	}
	r := utf16.DecodeRune(hi, lo)
	if r == utf8.RuneError {
		return 0, 0, noMatch
	}
	return r, 12, matched
}

// hex4 reads "\uXXXX" at the start of t.
func hex4(t []byte) (rune, matchResult) {
	if len(t) < 2 || t[0] != '\\' || t[1] != 'u' {
		if len(t) < 2 {
			return 0, needMore
		}
		return 0, noMatch
	}
	var r rune
	for i := 2; i < 6; i++ {
		if i >= len(t) {
			return 0, needMore
		}
		if !isHex(t[i]) {
			return 0, noMatch
		}
		r = r<<4 | rune(unhex(t[i]))
	}
	return r, matched
}

const esc = 0x1b

// escapeLen reports the length of the ANSI escape sequence at the start of t: a CSI
// (ESC [ parameters intermediates final) or an OSC (ESC ] ... BEL or ESC \).
func escapeLen(t []byte) (int, matchResult) {
	if len(t) < 2 {
		return 0, needMore
	}
	switch t[1] {
	case '[':
		for i := 2; i < len(t) && i < maxEscapeLen; i++ {
			switch c := t[i]; {
			case c >= 0x40 && c <= 0x7e:
				return i + 1, matched
			case c < 0x20 || c > 0x3f:
				return 0, noMatch
			}
		}
	case ']':
		for i := 2; i < len(t) && i < maxEscapeLen; i++ {
			switch {
			case t[i] == 0x07:
				return i + 1, matched
			case t[i] == esc:
				if i+1 == len(t) {
					return 0, needMore
				}
				if t[i+1] == '\\' {
					return i + 2, matched
				}
				return 0, noMatch
			}
		}
	default:
		return 0, noMatch
	}
	if len(t) >= maxEscapeLen {
		return 0, noMatch
	}
	return 0, needMore
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}
