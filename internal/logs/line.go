package logs

import (
	"encoding/json"
	"fmt"

	"github.com/google/uuid"
)

// Streams a line can come from; system lines are Gantry's own (a skipped step, a
// truncated log).
const (
	Stdout = "stdout"
	Stderr = "stderr"
	System = "system"
)

// Line is one line of a job attempt's log.
type Line struct {
	Seq    int64  `json:"seq"`
	TS     int64  `json:"ts"` // Unix milliseconds
	Stream string `json:"stream"`
	Text   string `json:"text"`
	// Truncated marks a line cut at the line length cap, or, on a system line, the point
	// where the attempt reached its log size limit and the rest was dropped.
	Truncated bool `json:"truncated,omitempty"`
	// Group marks a fold a step opened with ::group::TITLE (GroupStart; Text is the
	// title) or closed with ::endgroup:: (GroupEnd). A fold ends at its end line, at the
	// next start, or at the next system line (a step's end), whichever comes first.
	Group string `json:"group,omitempty"`
	// Level marks the message of a workflow command: LevelError, LevelWarning and
	// LevelNotice (::error:: and kin, whose Text is the message and which carry an
	// Annotation) or LevelDebug (::debug::, emitted only in debug mode).
	Level string `json:"level,omitempty"`
	// Annotation holds where an error, warning or notice points and the step that raised
	// it; the coordinator keeps it as an annotation of the job (see Config.Annotate).
	Annotation *Annotation `json:"annotation,omitempty"`
}

// Values of Line.Group.
const (
	GroupStart = "start"
	GroupEnd   = "end"
)

// Values of Line.Level.
const (
	LevelError   = "error"
	LevelWarning = "warning"
	LevelNotice  = "notice"
	LevelDebug   = "debug"
)

// Annotation is what a ::error::, ::warning:: or ::notice:: command says besides its
// message: its properties (file, line, col, endLine, endColumn, title; each optional)
// and the step whose output it was in.
type Annotation struct {
	// Step is the index of the step that printed the command; -1 when not known.
	Step      int    `json:"step"`
	Title     string `json:"title,omitempty"`
	File      string `json:"file,omitempty"`
	Line      int    `json:"line,omitempty"`
	Col       int    `json:"col,omitempty"`
	EndLine   int    `json:"end_line,omitempty"`
	EndColumn int    `json:"end_column,omitempty"`
}

// Annotated reports whether l is an error, warning or notice with its annotation.
func (l *Line) Annotated() bool {
	return l.Annotation != nil && (l.Level == LevelError || l.Level == LevelWarning || l.Level == LevelNotice)
}

// Key names one job attempt's log.
type Key struct {
	Job     uuid.UUID
	Attempt int
}

func (k Key) String() string { return fmt.Sprintf("%s/%d", k.Job, k.Attempt) }

// Valid reports what is wrong with a line that came from outside, or nil.
func (l *Line) Valid() error {
	switch {
	case l.Seq < 1:
		return fmt.Errorf("line seq %d: seq starts at 1", l.Seq)
	case l.Stream != Stdout && l.Stream != Stderr && l.Stream != System:
		return fmt.Errorf("line %d: stream %q is not stdout, stderr or system", l.Seq, l.Stream)
	}
	return nil
}

// appendJSON appends l as one line of NDJSON.
func appendJSON(dst []byte, l *Line) []byte {
	b, err := json.Marshal(l)
	if err != nil {
		// A Line has only strings, numbers and a bool; Marshal cannot fail on it.
		panic(fmt.Sprintf("encode log line: %v", err))
	}
	dst = append(dst, b...)
	return append(dst, '\n')
}
