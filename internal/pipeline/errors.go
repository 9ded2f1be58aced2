package pipeline

import (
	"fmt"
	"sort"
	"strings"
)

// ErrorKind classifies a definition error. Each kind is itself an error, so callers test
// for one with errors.Is(err, pipeline.ErrCycle) whether they hold an *Error or Errors.
type ErrorKind string

// The kinds of definition error. The string value is the stable machine-readable code
// used in JSON output and API responses.
const (
	ErrSyntax           ErrorKind = "syntax"            // the document is not well-formed YAML or JSON
	ErrLimit            ErrorKind = "limit"             // a size, depth, alias or job-count limit was exceeded
	ErrUnknownKey       ErrorKind = "unknown_key"       // a mapping key the schema does not define
	ErrDuplicateKey     ErrorKind = "duplicate_key"     // the same key twice in one mapping
	ErrType             ErrorKind = "type"              // a node of the wrong YAML type
	ErrRequired         ErrorKind = "required"          // a required field is missing or empty
	ErrInvalid          ErrorKind = "invalid"           // a value of the right type but not allowed
	ErrUnknownNeed      ErrorKind = "unknown_need"      // needs names a job that does not exist
	ErrCycle            ErrorKind = "cycle"             // needs form a cycle
	ErrUnknownReference ErrorKind = "unknown_reference" // ${{ }} or if: refers to something undefined
	ErrExpression       ErrorKind = "expression"        // an if: expression does not compile
)

// Error implements error.
func (k ErrorKind) Error() string { return string(k) }

// Error is one mistake in a pipeline definition.
type Error struct {
	Kind ErrorKind `json:"code"`
	// File is the file the mistake is in when it is not the definition compiled: a
	// reusable workflow it calls (.github/workflows/build.yml, or
	// owner/repo/.github/workflows/build.yml@v1). Path, Line and Column are that file's.
	File    string `json:"file,omitempty"`
	Path    string `json:"path"`   // e.g. jobs.deploy.needs[0]; empty for document-level errors
	Line    int    `json:"line"`   // 1-based; 0 when unknown
	Column  int    `json:"column"` // 1-based; 0 when unknown
	Message string `json:"message"`
}

// Error formats the error as "line:col: path: message", after "file:" when the mistake
// is in another file than the definition.
func (e *Error) Error() string {
	var b strings.Builder
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(":")
		if e.Line == 0 {
			b.WriteString(" ")
		}
	}
	if e.Line > 0 {
		fmt.Fprintf(&b, "%d:%d: ", e.Line, e.Column)
	}
	if e.Path != "" {
		b.WriteString(e.Path)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// Unwrap returns the error's kind, so errors.Is matches on it.
func (e *Error) Unwrap() error { return e.Kind }

// Errors is every mistake found in one definition, ordered by position.
type Errors []*Error

// Error joins the errors one per line.
func (es Errors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Unwrap exposes every error to errors.Is and errors.As.
func (es Errors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// sortErrors orders errors by position, those of the definition first and then those of
// each file it calls, keeping discovery order for ties, and drops exact duplicates (the
// same mistake reached twice, for example through a YAML alias, or a called workflow's
// through two calls).
func sortErrors(es Errors) Errors {
	sort.SliceStable(es, func(i, j int) bool {
		if es[i].File != es[j].File {
			return es[i].File < es[j].File
		}
		if es[i].Line != es[j].Line {
			return es[i].Line < es[j].Line
		}
		return es[i].Column < es[j].Column
	})
	out := es[:0]
	seen := make(map[Error]bool, len(es))
	for _, e := range es {
		if seen[*e] {
			continue
		}
		seen[*e] = true
		out = append(out, e)
	}
	return out
}
