package markdown

import (
	"strings"
	"testing"

	"golang.org/x/net/html"
)

func TestRender(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, src string
		want      []string // each in the output
		not       []string // none in the output
	}{
		{name: "heading without an id", src: "# Title\n", want: []string{"<h1>Title</h1>"}},
		{name: "table with alignment as an attribute",
			src:  "| a | b |\n|:--|--:|\n| 1 | <2> |\n",
			want: []string{"<table>", `<th align="left">a</th>`, `<td align="right">&lt;2&gt;</td>`}, not: []string{"style="}},
		{name: "task list, strikethrough, bare URL",
			src:  "- [x] done\n- [ ] ~~gone~~ https://example.com/x\n",
			want: []string{`<input checked="" disabled="" type="checkbox"`, "<del>gone</del>", `<a href="https://example.com/x">`}},
		{name: "script block shows as text",
			src:  "<script>alert(1)</script>\n",
			want: []string{"<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"}, not: []string{"<script"}},
		{name: "inline handler shows as text",
			src:  "see <img src=x onerror=alert(1)> here\n",
			want: []string{"see &lt;img src=x onerror=alert(1)&gt; here"}, not: []string{"<img"}},
		{name: "allowed tag with an attribute shows as text",
			src:  "<div onclick=\"alert(1)\">hi</div>\n",
			want: []string{"&lt;div onclick=&#34;alert(1)&#34;&gt;hi</div>"}, not: []string{"<div "}},
		{name: "javascript link has no URL",
			src:  "[click](javascript:alert(1)) ![i](javascript:alert(2))\n",
			want: []string{`<a href="">click</a>`, `<img src="" alt="i">`}, not: []string{"javascript:"}},
		{name: "details folds",
			src:  "<details open><summary>Logs</summary>\n\n| a |\n|---|\n| 1 |\n\n</details>\n",
			want: []string{"<details open><summary>Logs</summary>", "<table>", "</details>"}},
		{name: "closing tag with open is text", src: "x </details open> y\n", want: []string{"x &lt;/details open&gt; y"}},
		{name: "comments are left out",
			src:  "<!-- hidden\nacross lines -->\nshown <!-- inline --> too\n",
			want: []string{"<p>shown  too</p>"}, not: []string{"hidden", "inline", "&lt;!--"}},
		{name: "self-closing br", src: "a<br/>b\n", want: []string{"a<br>b"}},
		{name: "a block of comments only leaves nothing", src: "<!-- a -->\n\nb\n", want: []string{"<p>b</p>"}, not: []string{"<p></p>"}},
		{name: "a block with an allowed tag is not a paragraph",
			src: "<details>\n<summary>x</summary>\n</details>\n", want: []string{"<details>\n<summary>x</summary>\n</details>"}, not: []string{"<p>"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := HTML(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("HTML(%q) = %q, lacks %q", tc.src, got, w)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(got, n) {
					t.Errorf("HTML(%q) = %q, holds %q", tc.src, got, n)
				}
			}
			checkSafe(t, tc.src, got)
		})
	}
}

// rendered are the elements goldmark writes for Markdown, beside AllowedTags.
var rendered = map[string]bool{"a": true, "img": true, "input": true}

// checkSafe fails t unless out, read as a browser reads it, has only the elements a
// summary may have, no event handler, no style, and no URL that runs code.
func checkSafe(t *testing.T, src, out string) {
	t.Helper()
	z := html.NewTokenizer(strings.NewReader(out))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return
		case html.StartTagToken, html.SelfClosingTagToken:
			tok := z.Token()
			if !allowed[tok.Data] && !rendered[tok.Data] {
				t.Fatalf("HTML(%q) has a <%s>:\n%s", src, tok.Data, out)
			}
			for _, a := range tok.Attr {
				v := strings.ToLower(strings.TrimSpace(a.Val))
				switch {
				case strings.HasPrefix(a.Key, "on"), a.Key == "style", a.Key == "srcdoc", a.Key == "id", a.Key == "name":
					t.Fatalf("HTML(%q) has attribute %s on <%s>:\n%s", src, a.Key, tok.Data, out)
				case (a.Key == "href" || a.Key == "src") && (strings.HasPrefix(v, "javascript:") || strings.HasPrefix(v, "vbscript:") ||
					strings.HasPrefix(v, "data:text")):
					t.Fatalf("HTML(%q) has %s=%q:\n%s", src, a.Key, a.Val, out)
				}
			}
		}
	}
}

// FuzzRender: whatever a step writes, its rendered summary holds nothing that runs.
func FuzzRender(f *testing.F) {
	for _, s := range []string{
		"# T\n| a | b |\n|---|---|\n| 1 | 2 |\n",
		"<script>alert(1)</script>",
		"<img src=x onerror=alert(1)>",
		"<details open><summary>x</summary>\n\n*y*\n</details>",
		"[a](javascript:alert(1))",
		"<a href=\"javascript:alert(1)\">x</a>",
		"<!-- <script> -->",
		"```html\n<script>\n```\n",
		"<svg><script>alert(1)</script></svg>",
		"<DIV><B/>x</b></DiV>",
		"www.example.com/<script>",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		out, err := HTML(src)
		if err != nil {
			t.Fatal(err)
		}
		checkSafe(t, src, out)
	})
}
