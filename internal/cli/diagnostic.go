package cli

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// compileErrors turns what Compile returned into the list of errors to report. Compile
// promises pipeline.Errors; anything else is still shown, as one error without a position,
// so that a compiler bug is visible instead of being reported as "valid".
func compileErrors(err error) []*pipeline.Error {
	var list pipeline.Errors
	if errors.As(err, &list) && len(list) > 0 {
		return list
	}
	var one *pipeline.Error
	if errors.As(err, &one) {
		return []*pipeline.Error{one}
	}
	return []*pipeline.Error{{Kind: "internal", Message: err.Error()}}
}

// writeDiagnostic prints one error the way compilers do, so editors and terminals can jump
// to it:
//
//	file:line:col: path: message
//	<the source line>
//	<spaces up to the column>^
//
// Without a line number there is nothing to point at and only "file: path: message" is
// printed; without a column the source line is shown with no caret.
func writeDiagnostic(w io.Writer, src source, e *pipeline.Error) {
	var b strings.Builder
	b.WriteString(src.name)
	if e.Line > 0 {
		fmt.Fprintf(&b, ":%d", e.Line)
		if e.Column > 0 {
			fmt.Fprintf(&b, ":%d", e.Column)
		}
	}
	b.WriteString(": ")
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	b.WriteByte('\n')
	if text, ok := src.line(e.Line); ok {
		b.WriteString(text)
		b.WriteByte('\n')
		if e.Column > 0 {
			b.WriteString(caretLine(text, e.Column))
			b.WriteByte('\n')
		}
	}
	io.WriteString(w, b.String())
}

// caretLine returns the line that puts a ^ under the 1-based column of text. Columns count
// characters, as the decoder reports them. The padding copies every tab of the text before
// the column and uses a space for anything else, so the caret lines up however wide the
// terminal draws a tab. A column past the end of the text (an error at the end of a line)
// is padded with spaces.
func caretLine(text string, column int) string {
	var b strings.Builder
	n := 0
	for _, r := range text {
		if n >= column-1 {
			break
		}
		if r == '\t' {
			b.WriteByte('\t')
		} else {
			b.WriteByte(' ')
		}
		n++
	}
	for ; n < column-1; n++ {
		b.WriteByte(' ')
	}
	b.WriteByte('^')
	return b.String()
}

// writeSummary ends a text report that found errors with one line a person can read at a
// glance, such as "3 errors in 2 files".
func writeSummary(w io.Writer, errs, files int) {
	fmt.Fprintf(w, "%s in %s\n", countOf(errs, "error", "errors"), countOf(files, "file", "files"))
}
