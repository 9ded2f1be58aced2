package ghaexpr

import (
	"math"
	"strings"
	"unicode"
	"unicode/utf8"
)

type tokKind uint8

const (
	tokEnd    tokKind = iota
	tokString         // 'text', with '' for a quote
	tokNumber         // 1, -1.5, 1e3, 0xff, 0o17, and the keywords NaN and Infinity
	tokWord           // a keyword: a context, a function, a property name, true, false, null
	tokPunct          // ( ) [ ] , . *
	tokOp             // ! == != < <= > >= && ||
	tokBad            // anything else; the parser reports it as an unexpected symbol
)

type token struct {
	kind tokKind
	at   int    // byte offset in the expression
	raw  string // the text as written
	str  string // a string literal's value
	num  float64
}

// lex splits an expression into tokens the way GitHub's lexer does. A word or number runs
// to the next boundary character, so "a+b" is one (bad) token, as it is on GitHub, rather
// than three.
func lex(src string) []token {
	var toks []token
	i := 0
	for {
		for i < len(src) {
			r, n := utf8.DecodeRuneInString(src[i:])
			if !unicode.IsSpace(r) {
				break
			}
			i += n
		}
		if i >= len(src) {
			return append(toks, token{kind: tokEnd, at: len(src)})
		}
		start := i
		c := src[i]
		var t token
		switch {
		case strings.IndexByte("()[],*", c) >= 0:
			i++
			t = token{kind: tokPunct, raw: src[start:i]}
		case c == '\'':
			t, i = lexString(src, i)
		case c == '.' && !numberMayFollow(toks):
			i++
			t = token{kind: tokPunct, raw: "."}
		case c == '.' || c == '-' || c == '+' || c >= '0' && c <= '9':
			i = boundary(src, i+1, true)
			t = token{kind: tokNumber, raw: src[start:i], num: parseNumber(src[start:i])}
			if math.IsNaN(t.num) {
				t.kind = tokBad
			}
		case strings.IndexByte("!<>=&|", c) >= 0:
			t, i = lexOp(src, i)
		default:
			i = boundary(src, i+utf8RuneLen(src[i:]), false)
			t = lexWord(src[start:i])
		}
		t.at = start
		toks = append(toks, t)
	}
}

func utf8RuneLen(s string) int {
	_, n := utf8.DecodeRuneInString(s)
	return n
}

// numberMayFollow reports whether a '.' here starts a number (.5) rather than a property
// access: at the start, or after an operator, '(', '[' or ','.
func numberMayFollow(toks []token) bool {
	if len(toks) == 0 {
		return true
	}
	t := toks[len(toks)-1]
	return t.kind == tokOp || t.kind == tokPunct && strings.Contains("([,", t.raw)
}

// boundary returns the offset of the next character that ends a word or number. Inside a
// number '.' does not end it, so 1.5.3 is one (bad) token.
func boundary(src string, i int, number bool) int {
	for i < len(src) {
		r, n := utf8.DecodeRuneInString(src[i:])
		if r == '.' && number {
			i += n
			continue
		}
		if r < utf8.RuneSelf && strings.IndexByte("([)],.!<>=&|", byte(r)) >= 0 || unicode.IsSpace(r) {
			return i
		}
		i += n
	}
	return i
}

func lexString(src string, i int) (token, int) {
	start := i
	var b strings.Builder
	i++
	for i < len(src) {
		if src[i] == '\'' {
			if i+1 < len(src) && src[i+1] == '\'' {
				b.WriteByte('\'')
				i += 2
				continue
			}
			i++
			return token{kind: tokString, raw: src[start:i], str: b.String()}, i
		}
		b.WriteByte(src[i])
		i++
	}
	return token{kind: tokBad, raw: src[start:]}, i
}

func lexOp(src string, i int) (token, int) {
	if i+1 < len(src) {
		switch two := src[i : i+2]; two {
		case "==", "!=", "<=", ">=", "&&", "||":
			return token{kind: tokOp, raw: two}, i + 2
		}
	}
	switch src[i] {
	case '!', '<', '>':
		return token{kind: tokOp, raw: src[i : i+1]}, i + 1
	}
	end := boundary(src, i+1, false)
	return token{kind: tokBad, raw: src[i:end]}, end
}

func lexWord(w string) token {
	switch w {
	case "NaN":
		return token{kind: tokNumber, raw: w, num: math.NaN()}
	case "Infinity":
		return token{kind: tokNumber, raw: w, num: math.Inf(1)}
	}
	if !isKeyword(w) {
		return token{kind: tokBad, raw: w}
	}
	return token{kind: tokWord, raw: w}
}

// isKeyword reports a legal name: a letter or '_', then letters, digits, '_' and '-' (so
// steps.my-step is a name, as on GitHub).
func isKeyword(w string) bool {
	if w == "" {
		return false
	}
	for i := 0; i < len(w); i++ {
		c := w[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '-'):
		default:
			return false
		}
	}
	return true
}
