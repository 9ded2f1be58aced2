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
