package markdown

import (
	"bytes"
	"html"
	"io"
	"strings"
	"sync"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/renderer"
	"github.com/yuin/goldmark/util"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// md is GitHub's flavour as its summaries use it: tables (alignment as the align
// attribute, since a page's CSP may forbid style attributes), task lists,
// strikethrough, bare URLs as links. Raw HTML is never written as it is (goldmark
// without WithUnsafe); rawHTML decides what of it shows. Headings get no id, so a
// summary cannot take an id the page holding it uses. It is made when first used, not
// when every gantry process starts.
var md = sync.OnceValue(func() goldmark.Markdown {
	return goldmark.New(
		goldmark.WithExtensions(
			extension.NewTable(extension.WithTableCellAlignMethod(extension.TableCellAlignAttribute)),
			extension.Strikethrough,
			extension.TaskList,
			extension.Linkify,
		),
		goldmark.WithRendererOptions(renderer.WithNodeRenderers(util.Prioritized(rawHTML{}, 100))),
	)
})

// Render writes src rendered as an HTML fragment to w.
//
// What it writes holds no element that runs or loads anything by itself: goldmark
// leaves out link and image URLs of the javascript:, vbscript:, file: and data: schemes
// (but images of data:image/png, gif, jpeg and webp). Raw HTML in src shows as the text
// it is, escaped, except the comments, which are left out as GitHub does, and a few
// tags GitHub allows too, written without attributes (AllowedTags), so
// <details><summary>Logs</summary> folds as on GitHub. The fragment may hold tags that
// do not balance (a </details> without its start): parse it as a fragment of its own.
func Render(w io.Writer, src []byte) error {
	return md().Convert(src, w)
}

// HTML is src rendered, as Render writes it.
func HTML(src string) (string, error) {
	var b bytes.Buffer
	if err := Render(&b, []byte(src)); err != nil {
		return "", err
	}
	return b.String(), nil
}

// AllowedTags are the HTML tags a summary may hold as they are, without attributes
// (details also with open): they format text and nothing else.
var AllowedTags = []string{
	"b", "blockquote", "br", "code", "dd", "del", "details", "div", "dl", "dt", "em", "h1", "h2", "h3", "h4", "h5",
	"h6", "hr", "i", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strike",
	"strong", "sub", "summary", "sup", "table", "tbody", "td", "tfoot", "th", "thead", "tr", "tt", "ul", "var",
}

var allowed = func() map[string]bool {
	m := map[string]bool{}
	for _, t := range AllowedTags {
		m[t] = true
	}
	return m
}()

// rawHTML renders goldmark's raw HTML nodes, blocks and inline, with safeHTML.
type rawHTML struct{}

func (rawHTML) RegisterFuncs(reg renderer.NodeRendererFuncRegisterer) {
	reg.Register(ast.KindHTMLBlock, renderHTMLBlock)
	reg.Register(ast.KindRawHTML, renderRawHTML)
}

func renderHTMLBlock(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkContinue, nil
	}
	// The whole block at once, closure too, so that a comment over many lines is one.
	n := node.(*ast.HTMLBlock)
	var b bytes.Buffer
	for i := range n.Lines().Len() {
		line := n.Lines().At(i)
		b.Write(line.Value(source))
	}
	if n.HasClosure() {
		b.Write(n.ClosureLine.Value(source))
	}
	out := safeHTML(b.String())
	if !strings.Contains(out, "<") {
		// Text only, the raw HTML escaped: a paragraph of its own, as it reads.
		if text := strings.TrimSpace(out); text != "" {
			out = "<p>" + text + "</p>\n"
		} else {
			out = ""
		}
	}
	_, err := w.WriteString(out)
	return ast.WalkContinue, err
}

func renderRawHTML(w util.BufWriter, source []byte, node ast.Node, entering bool) (ast.WalkStatus, error) {
	if !entering {
		return ast.WalkSkipChildren, nil
	}
	n := node.(*ast.RawHTML)
	var b bytes.Buffer
	for i := range n.Segments.Len() {
		seg := n.Segments.At(i)
		b.Write(seg.Value(source))
	}
	_, err := w.WriteString(safeHTML(b.String()))
	return ast.WalkSkipChildren, err
}

// htmlPiece finds, in raw HTML, a comment or a tag of the form an allowed one may have:
// a name alone (or details with open), opening, closing or self-closing.
var htmlPiece = lazyre.New(`(?s)<!--.*?-->|</?([A-Za-z][A-Za-z0-9]*)(\s+open)?\s*/?>`)

// safeHTML is raw HTML as a summary shows it: comments left out, allowed tags written
// anew from their name alone, and everything else escaped, to show as text.
func safeHTML(raw string) string {
	var b strings.Builder
	last := 0
	for _, m := range htmlPiece.Regexp().FindAllStringSubmatchIndex(raw, -1) {
		piece := raw[m[0]:m[1]]
		if strings.HasPrefix(piece, "<!--") {
			b.WriteString(html.EscapeString(raw[last:m[0]]))
			last = m[1]
			continue
		}
		name := strings.ToLower(raw[m[2]:m[3]])
		open, closing := m[4] >= 0, strings.HasPrefix(piece, "</")
		if !allowed[name] || open && (name != "details" || closing) {
			continue // escaped with the text around it
		}
		b.WriteString(html.EscapeString(raw[last:m[0]]))
		switch {
		case closing:
			b.WriteString("</" + name + ">")
		case open:
			b.WriteString("<details open>")
		default:
			b.WriteString("<" + name + ">")
		}
		last = m[1]
	}
	b.WriteString(html.EscapeString(raw[last:]))
	return b.String()
}
