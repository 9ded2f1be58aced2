package logs

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"
)

// maskSecrets are the values the masking tests register: a plain token, one with URL
// syntax and a space, and one with quotes, a backslash, a newline, HTML characters and
// non-ASCII (one outside the BMP, which JSON writes as a surrogate pair).
var maskSecrets = []string{
	"ghp_16C7e42F292c6912E7710c838347Ae178B4a",
	"s3cr3t/value+with?odd&chars= x",
	"p@ss \"quoted\" \\ back\nslash ünïcödé 🔑 <&>",
}

// literalForms returns whole-string encodings of v that no masked log may hold.
func literalForms(v string) []string {
	out := []string{v}
	for _, l := range strings.Split(v, "\n") {
		if len(l) >= minSecretBytes {
			out = append(out, l)
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		out = append(out, enc.EncodeToString([]byte(v)))
	}
	j, _ := json.Marshal(v)
	h := hex.EncodeToString([]byte(v))
	return append(out, url.QueryEscape(v), url.PathEscape(v), h, strings.ToUpper(h), string(j[1:len(j)-1]))
}

// jsonEscape writes v as the content of a JSON string the way encoders other than Go's
// do: asciiOnly escapes every non-ASCII character as \uXXXX (surrogate pairs beyond the
// BMP), all escapes every character, upper writes the hex digits in upper case, and
// slash escapes "/" as PHP does.
func jsonEscape(v string, asciiOnly, all, upper, slash bool) string {
	var b strings.Builder
	u := func(r rune) {
		s := fmt.Sprintf(`\u%04x`, r)
		if upper {
			s = `\u` + strings.ToUpper(s[2:])
		}
		b.WriteString(s)
	}
	for _, r := range v {
		switch {
		case r > 0xffff && (asciiOnly || all):
			hi, lo := utf16.EncodeRune(r)
			u(hi)
			u(lo)
		case all || r < 0x20 && r != '\n' || r >= utf8.RuneSelf && asciiOnly:
			u(r)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '"' || r == '\\':
			b.WriteString(`\` + string(r))
		case r == '/' && slash:
			b.WriteString(`\/`)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// percentAll percent-encodes every byte of v.
func percentAll(v string, upper bool) string {
	var b strings.Builder
	for i := range len(v) {
		s := fmt.Sprintf("%%%02x", v[i])
		if upper {
			s = strings.ToUpper(s)
		}
		b.WriteString(s)
	}
	return b.String()
}

// lowerEscapes writes the hex digits of the %XX escapes in s in lower case.
func lowerEscapes(s string) string {
	b := []byte(s)
	for i := range b {
		if b[i] == '%' && i+2 < len(b) {
			copy(b[i+1:i+3], strings.ToLower(string(b[i+1:i+3])))
		}
	}
	return string(b)
}

// maskCase is one line holding a form of a secret, and what the log must show instead.
type maskCase struct {
	name string
	line string
	want string
}

// maskCases returns, for secret, a line for each form that is masked, with the text
// around the form that must survive.
func maskCases(secret string) []maskCase {
	var out []maskCase
	add := func(name, before, form, after string) {
		out = append(out, maskCase{name, before + form + after, before + maskText + after})
	}
	if !strings.ContainsAny(secret, "\r\n") {
		add("plain", "token ", secret, " end")
		for i := 1; i < len(secret); i++ {
			if utf8.RuneStart(secret[i]) {
				line := "x " + secret[:i] + "\x1b[0m\x1b]8;;https://example.com\x07" + secret[i:] + " y"
				out = append(out, maskCase{fmt.Sprintf("ansi split at %d", i), line, "x ***\x1b[0m\x1b]8;;https://example.com\x07 y"})
			}
		}
		add("coloured", "\x1b[1;31m", secret, "\x1b[0m done")
	}
	gojson, _ := json.Marshal(secret)
	var nohtml bytes.Buffer
	enc := json.NewEncoder(&nohtml)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(secret)
	add("json go", `{"token":"`, string(gojson[1:len(gojson)-1]), `"}`)
	add("json no html escaping", `{"token":"`, strings.TrimSuffix(nohtml.String(), "\"\n")[1:], `"}`)
	add("json ascii only", `{"token": "`, jsonEscape(secret, true, false, false, false), `"}`)
	add("json ascii only upper", `{"token": "`, jsonEscape(secret, true, false, true, true), `"}`)
	add("json every character", `{"token": "`, jsonEscape(secret, true, true, false, false), `"}`)
	add("json every character upper", `{"token": "`, jsonEscape(secret, true, true, true, false), `"}`)

	add("query escape", "GET /?token=", url.QueryEscape(secret), "&x=1")
	add("query escape lower hex", "GET /?token=", lowerEscapes(url.QueryEscape(secret)), "&x=1")
	add("path escape", "GET /", url.PathEscape(secret), "/x")
	add("path escape, %20 for space", "GET /", strings.ReplaceAll(url.QueryEscape(secret), "+", "%20"), "/x")
	add("every byte", "v=", percentAll(secret, true), ";")
	add("every byte lower", "v=", percentAll(secret, false), ";")

	add("hex", "hex ", hex.EncodeToString([]byte(secret)), " .")
	add("hex upper", "hex ", strings.ToUpper(hex.EncodeToString([]byte(secret))), " .")

	for _, e := range []struct {
		name string
		enc  *base64.Encoding
	}{{"std", base64.StdEncoding}, {"raw std", base64.RawStdEncoding}, {"url", base64.URLEncoding}, {"raw url", base64.RawURLEncoding}} {
		add("base64 "+e.name, "b64 ", e.enc.EncodeToString([]byte(secret)), " .")
		// Inside a longer stream, at each alignment, ending the stream or not. What
		// survives is the characters that hold bits of the bytes around the secret.
		for pre := range 6 {
			for _, post := range []int{0, 2} {
				stream := append(bytes.Repeat([]byte{0xa5}, pre), secret...)
				stream = append(stream, bytes.Repeat([]byte{0xff}, post)...)
				s := e.enc.EncodeToString(stream)
				start := (8*pre + 5) / 6
				end := 8 * (pre + len(secret)) / 6
				if post == 0 {
					end = len(s)
				}
				add(fmt.Sprintf("base64 %s after %d bytes, %d after", e.name, pre, post), "b64 "+s[:start], s[start:end], s[end:]+" .")
			}
		}
	}
	user := base64.StdEncoding.EncodeToString([]byte("deploy-bot:" + secret))
	add("basic auth", "Authorization: Basic "+user[:(8*len("deploy-bot:")+5)/6], user[(8*len("deploy-bot:")+5)/6:], "")
	return out
}

// recordLines writes parts to a recorder that was given maskSecrets and returns the
// emitted texts.
func recordLines(t *testing.T, parts ...string) []string {
	t.Helper()
	r, b := setupRecorder(t, 1<<16)
	for _, s := range maskSecrets {
		r.MaskSecret(s)
	}
	w := r.Writer(Stdout)
	for _, p := range parts {
		write(t, w, p)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.sink.texts()
}

// TestRecorderMasksEncodedSecrets writes each masked form of each secret in one write and
// split in two at every byte, and checks that exactly the form became "***".
func TestRecorderMasksEncodedSecrets(t *testing.T) {
	t.Parallel()
	for si, secret := range maskSecrets {
		for _, c := range maskCases(secret) {
			t.Run(fmt.Sprintf("secret %d/%s", si, c.name), func(t *testing.T) {
				t.Parallel()
				if got := recordLines(t, c.line+"\n"); !slices.Equal(got, []string{c.want}) {
					t.Fatalf("one write %q:\ngot  %q\nwant %q", c.line, got, c.want)
				}
				for i := 1; i < len(c.line); i++ {
					if got := recordLines(t, c.line[:i], c.line[i:]); !slices.Equal(got, []string{c.want}) {
						t.Fatalf("split at %d %q | %q:\ngot  %q\nwant %q", i, c.line[:i], c.line[i:], got, c.want)
					}
				}
				for _, v := range maskSecrets {
					for _, f := range literalForms(v) {
						if strings.Contains(c.want, f) {
							t.Fatalf("the expected line %q holds %q: the case is wrong", c.want, f)
						}
					}
				}
			})
		}
	}
}

// TestServiceMasksEncodedSecrets: the coordinator masks the same forms in stored lines.
func TestServiceMasksEncodedSecrets(t *testing.T) {
	t.Parallel()
	m := newSecretMasker(maskSecrets)
	for _, secret := range maskSecrets {
		for _, c := range maskCases(secret) {
			if got, _ := m.mask(nil, []byte(c.line), true); string(got) != c.want {
				t.Errorf("%s: got %q, want %q", c.name, got, c.want)
			}
		}
	}
}

// TestRecorderLeavesUnrelatedOutput: output that merely looks encoded (base64 blobs, hex
// digests, JSON with escapes, percent-encoded URLs, colours, a secret's prefix split by a
// colour code) is emitted as it is.
func TestRecorderLeavesUnrelatedOutput(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(7, 11))
	var lines []string
	for i := range 500 {
		blob := make([]byte, 40+i%60)
		for j := range blob {
			blob[j] = byte(rng.Uint32())
		}
		j, _ := json.Marshal(map[string]string{"msg": string(blob[:8]) + "\"\\\n<é🔑"})
		lines = append(lines,
			base64.StdEncoding.EncodeToString(blob),
			"Authorization: Basic "+base64.StdEncoding.EncodeToString(blob[:i%30+1]),
			base64.RawURLEncoding.EncodeToString(blob),
			"commit "+hex.EncodeToString(blob[:20])+" sha256:"+strings.ToUpper(hex.EncodeToString(blob[:32])),
			strings.ToValidUTF8(string(j), "\uFFFD"),
			"GET /search?q="+url.QueryEscape(string(blob[:10]))+"&p="+url.PathEscape("a b/c"),
			fmt.Sprintf("\x1b[3%dmline %d\x1b[0m \x1b]8;;https://example.com/%d\x1b\\link\x1b]8;;\x1b\\", i%8, i, i),
		)
	}
	lines = append(lines,
		"ghp_16C7e42F292c\x1b[0m6912E7710c838347Ae178B4", // a colour code inside a part of a secret
		"s3cr3t/value+with?odd&chars=",
		"%73%33%63%72%33%74%2F%76%61%6C%75%65",
		hex.EncodeToString([]byte(maskSecrets[0][:20])),
	)
	for i, l := range lines {
		lines[i] = strings.ToValidUTF8(l, "\uFFFD")
	}
	got := recordLines(t, strings.Join(lines, "\n")+"\n")
	if len(got) != len(lines) {
		t.Fatalf("%d lines, want %d", len(got), len(lines))
	}
	for i := range lines {
		if got[i] != lines[i] {
			t.Errorf("line %d changed:\n%q\n%q", i, lines[i], got[i])
		}
	}
}

// TestRecorderShortFormsLeftAlone: an encoded form that carries under 32 bits of a value
// is not masked, since forms that short turn up by chance in any hex or base64 output;
// the value itself still is.
func TestRecorderShortFormsLeftAlone(t *testing.T) {
	t.Parallel()
	r, b := setupRecorder(t, 0)
	r.MaskSecret("k9!")
	w := r.Writer(Stdout)
	write(t, w, "digest 6b3921 b64 azkh k9!\n")
	if got, want := b.sink.texts(), []string{"digest 6b3921 b64 azkh ***"}; !slices.Equal(got, want) {
		t.Errorf("texts %q, want %q", got, want)
	}
}

// TestRecorderMasksOverlapsWhole: two secrets that overlap in the text are masked as one
// span, so the end of the second does not survive the first's mask.
func TestRecorderMasksOverlapsWhole(t *testing.T) {
	t.Parallel()
	r, b := setupRecorder(t, 0)
	r.MaskSecret("abcd1234")
	r.Mask("1234wxyz")
	w := r.Writer(Stdout)
	write(t, w, "<abcd1234wxyz> <1234wxyz> <abcd1234abcd1234>\n")
	if got, want := b.sink.texts(), []string{"<***> <***> <******>"}; !slices.Equal(got, want) {
		t.Errorf("texts %q, want %q", got, want)
	}
}

// TestRecorderEscapesDoNotHoldBack: a secret's prefix followed by escape sequences that
// never end it does not keep the line's bytes back for ever: past the bound the bytes are
// let through.
func TestRecorderEscapesDoNotHoldBack(t *testing.T) {
	t.Parallel()
	m := newSecretMasker(maskSecrets[:1])
	src := []byte("ok ghp_16C7" + strings.Repeat("\x1b[0m", maxEscapeSkip))
	got, n := m.mask(nil, src, false)
	if n != len(src) || string(got) != string(src) {
		t.Errorf("mask consumed %d of %d bytes: %q", n, len(src), got)
	}
	src = []byte("ok ghp_16C7\x1b[0m")
	if got, n := m.mask(nil, src, false); n != len("ok ") || string(got) != "ok " {
		t.Errorf("a prefix with one escape: consumed %d (%q), want it held back after \"ok \"", n, got)
	}
}

// FuzzMaskerSplit: masking a text in two calls, split anywhere, gives what masking it in
// one call gives, and what is masked never holds a line of the secret.
func FuzzMaskerSplit(f *testing.F) {
	for _, s := range maskSecrets {
		for i, c := range maskCases(s) {
			f.Add(s, c.line, i%len(c.line))
		}
	}
	f.Add("abcd", "xabcdabcdefabc\x1b[0mdx", 7)
	f.Fuzz(func(t *testing.T, secret, text string, split int) {
		if split < 0 || split > len(text) || strings.ContainsAny(secret, "*\x1b") {
			return
		}
		m := &masker{}
		m.addSecret(secret)
		whole, n := m.mask(nil, []byte(text), true)
		if n != len(text) {
			t.Fatalf("a final mask consumed %d of %d bytes", n, len(text))
		}
		first, used := m.mask(nil, []byte(text[:split]), false)
		if used > split {
			t.Fatalf("consumed %d bytes of %d", used, split)
		}
		rest, _ := m.mask(nil, []byte(text[used:]), true)
		if got := string(first) + string(rest); got != string(whole) {
			t.Fatalf("split at %d: %q, in one call: %q", split, got, whole)
		}
		for piece := range strings.FieldsFuncSeq(secret, func(c rune) bool { return c == '\n' || c == '\r' }) {
			if len(piece) >= minSecretBytes && strings.Contains(string(whole), piece) {
				t.Fatalf("masked %q to %q, which holds %q", text, whole, piece)
			}
		}
	})
}
