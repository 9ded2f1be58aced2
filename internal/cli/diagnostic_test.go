package cli

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

func TestCaretLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		text   string
		column int
		want   string
	}{
		{"first column", "jobs:", 1, "^"},
		{"after spaces", "    stepz: []", 5, "    ^"},
		{"tabs are copied", "\t\tkey: value", 3, "\t\t^"},
		{"tabs mixed with text", "a\tb\tc", 5, " \t \t^"},
		{"column past the end of the line", "key:", 7, "      ^"},
		{"tab then past the end", "\tx", 5, "\t   ^"},
		{"empty line", "", 3, "  ^"},
		{"columns count characters, not bytes", "é: ü", 4, "   ^"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := caretLine(tt.text, tt.column); got != tt.want {
				t.Errorf("caretLine(%q, %d) = %q, want %q", tt.text, tt.column, got, tt.want)
			}
		})
	}
}

func TestSourceLine(t *testing.T) {
	t.Parallel()
	src := source{name: "f.yml", data: []byte("one\r\ntwo\n\nfour")}
	tests := []struct {
		n    int
		want string
		ok   bool
	}{
		{0, "", false},
		{1, "one", true}, // CRLF endings are trimmed too
		{2, "two", true},
		{3, "", true},
		{4, "four", true}, // last line without a newline
		{5, "", false},
	}
	for _, tt := range tests {
		got, ok := src.line(tt.n)
		if got != tt.want || ok != tt.ok {
			t.Errorf("line(%d) = %q, %v; want %q, %v", tt.n, got, ok, tt.want, tt.ok)
		}
	}
	if _, ok := (source{data: []byte("a\n")}).line(2); ok {
		t.Error("line after the final newline exists; want none")
	}
}

func TestWriteDiagnostic(t *testing.T) {
	t.Parallel()
	const doc = "name: demo\njobs:\n  build:\n\tstepz: []\n    steps: [\"x\"]\n"
	src := source{name: "p.yml", data: []byte(doc)}
	tests := []struct {
		name string
		err  pipeline.Error
		want string
	}{
		{
			name: "position, path and caret",
			err:  pipeline.Error{Kind: pipeline.ErrType, Path: "jobs.build.steps[0]", Line: 5, Column: 13, Message: "expected a mapping, found a string"},
			want: "p.yml:5:13: jobs.build.steps[0]: expected a mapping, found a string\n" +
				"    steps: [\"x\"]\n" +
				"            ^\n",
		},
		{
			name: "tab before the column",
			err:  pipeline.Error{Kind: pipeline.ErrSyntax, Line: 4, Column: 2, Message: "found a tab character that violates indentation"},
			want: "p.yml:4:2: found a tab character that violates indentation\n" +
				"\tstepz: []\n" +
				"\t^\n",
		},
		{
			name: "column beyond the line",
			err:  pipeline.Error{Kind: pipeline.ErrRequired, Path: "jobs.build", Line: 3, Column: 10, Message: "steps is required"},
			want: "p.yml:3:10: jobs.build: steps is required\n" +
				"  build:\n" +
				"         ^\n",
		},
		{
			name: "line 0 has no source",
			err:  pipeline.Error{Kind: pipeline.ErrLimit, Path: "jobs", Message: "6000 jobs after matrix expansion, more than the limit of 5000"},
			want: "p.yml: jobs: 6000 jobs after matrix expansion, more than the limit of 5000\n",
		},
		{
			name: "line 0 and no path",
			err:  pipeline.Error{Kind: pipeline.ErrLimit, Message: "document is larger than 1 MiB"},
			want: "p.yml: document is larger than 1 MiB\n",
		},
		{
			name: "line without column shows the line but no caret",
			err:  pipeline.Error{Kind: pipeline.ErrSyntax, Line: 2, Message: "mapping values are not allowed in this context"},
			want: "p.yml:2: mapping values are not allowed in this context\n" +
				"jobs:\n",
		},
		{
			name: "line past the end of the document",
			err:  pipeline.Error{Kind: pipeline.ErrSyntax, Line: 9, Column: 1, Message: "unexpected end of document"},
			want: "p.yml:9:1: unexpected end of document\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b strings.Builder
			e := tt.err
			writeDiagnostic(&b, src, &e)
			if b.String() != tt.want {
				t.Errorf("got\n%s\nwant\n%s", b.String(), tt.want)
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	a := &pipeline.Error{Kind: pipeline.ErrCycle, Path: "jobs.a.needs[0]", Line: 3, Column: 12, Message: "cycle"}
	b := &pipeline.Error{Kind: pipeline.ErrUnknownNeed, Path: "jobs.b.needs[0]", Line: 5, Column: 12, Message: "unknown"}
	tests := []struct {
		name string
		err  error
		want []*pipeline.Error
	}{
		{"Errors", pipeline.Errors{a, b}, []*pipeline.Error{a, b}},
		{"wrapped Errors", fmt.Errorf("compile: %w", pipeline.Errors{a}), []*pipeline.Error{a}},
		{"a single *Error", a, []*pipeline.Error{a}},
		{"something else", errors.New("boom"), []*pipeline.Error{{Kind: "internal", Message: "boom"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := compileErrors(tt.err)
			if len(got) != len(tt.want) {
				t.Fatalf("got %d errors, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if *got[i] != *tt.want[i] {
					t.Errorf("error %d = %+v, want %+v", i, *got[i], *tt.want[i])
				}
			}
		})
	}
}

func TestFormatSize(t *testing.T) {
	t.Parallel()
	tests := map[int64]string{0: "0 bytes", 1000: "1000 bytes", 1 << 20: "1 MiB", 64 << 20: "64 MiB", 1<<20 + 1: "1048577 bytes"}
	for n, want := range tests {
		if got := formatSize(n); got != want {
			t.Errorf("formatSize(%d) = %q, want %q", n, got, want)
		}
	}
}
