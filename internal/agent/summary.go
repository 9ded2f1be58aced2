package agent

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/stepsummary"
)

// featureSummaries is the coordinator's feature (api: the register answer's features)
// of step summaries, POST /api/v1/agent/jobs/{id}/summary.
const featureSummaries = "summaries"

// summaryTitle is the title of the annotations about a step's summary.
const summaryTitle = "Step summary"

// summaries takes each step's $GANTRY_STEP_SUMMARY ($GITHUB_STEP_SUMMARY) after it ran,
// whatever its outcome, as GitHub's runner does, and sends what it holds to the
// coordinator with the step's reports. What cannot be kept (over 1 MiB, past the
// summaries of 20 steps) is dropped whole, with a warning annotation of the step that
// says why.
type summaries struct {
	files *stepFiles
	rec   *logs.Recorder
	// send queues a step's summary, the job's part part, for the coordinator; step is
	// the step the warnings about it are of. Nil when the coordinator keeps none.
	send func(part, step int, markdown string)
	// kept are the parts whose summary was sent.
	kept map[int]bool
	// told is set once the log said that the coordinator keeps no summaries.
	told bool
}

func newSummaries(files *stepFiles, rec *logs.Recorder, send func(part, step int, markdown string)) *summaries {
	return &summaries{files: files, rec: rec, send: send, kept: map[int]bool{}}
}

// take reads what a step wrote to its summary file, empties the file for the next step,
// and sends the summary as the job's part: the step's index, or for the pre or post of
// an action, which run before and after the job's steps, one after the last (see
// store.SummaryPart).
// step is the step the warnings are about, name what the log calls it. The text sent is
// masked as the log is, and made UTF-8 without NUL; an empty or blank one is no summary.
func (s *summaries) take(part, step int, name string) {
	text, err := s.files.takeSummary()
	var tooLarge *errSummaryTooLarge
	switch {
	case errors.As(err, &tooLarge):
		s.warn(step, fmt.Sprintf("step %s: the step summary is not kept: %v", name, err))
		return
	case err != nil:
		s.warn(step, fmt.Sprintf("step %s: the step summary could not be read, and is not kept: %v", name, err))
		return
	case strings.TrimSpace(text) == "":
		return
	}
	text = strings.ReplaceAll(strings.ToValidUTF8(s.rec.MaskText(text), "\uFFFD"), "\x00", "\uFFFD")
	if len(text) > stepsummary.MaxBytes {
		// Made longer by the replacement of bytes that are not UTF-8.
		s.warn(step, fmt.Sprintf("step %s: the step summary is not kept: %v", name, &errSummaryTooLarge{size: int64(len(text))}))
		return
	}
	if s.send == nil {
		if !s.told {
			s.told = true
			s.rec.System("step summaries are not kept: the coordinator is of a version that does not keep them")
		}
		return
	}
	if !s.kept[part] && len(s.kept) >= stepsummary.MaxSteps {
		s.warn(step, fmt.Sprintf("step %s: the step summary is not kept: a job keeps the summaries of %d steps, and the steps before it used them all",
			name, stepsummary.MaxSteps))
		return
	}
	s.kept[part] = true
	s.send(part, step, text)
}

func (s *summaries) warn(step int, msg string) {
	s.rec.Annotate(step, logs.LevelWarning, summaryTitle, msg)
}
