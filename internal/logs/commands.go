package logs

import (
	"strconv"
	"strings"
)

// Workflow commands are lines a step prints to talk to the runner, as GitHub Actions
// defines them: "::NAME PROP=VALUE,PROP=VALUE::DATA". The Recorder acts on these (the
// rest are output like any other line):
//
//	::add-mask::VALUE          VALUE is a secret from now on; the line is not emitted
//	::group::TITLE             a fold starts (Line.Group = GroupStart, Text = TITLE)
//	::endgroup::               the fold ends (Line.Group = GroupEnd)
//	::error PROPS::MESSAGE     a line of LevelError with an Annotation; ::warning:: and
//	::notice:: likewise
//	::debug::MESSAGE           a line of LevelDebug in debug mode, else nothing
//	::stop-commands::TOKEN     no command is acted on until a line "::TOKEN::"; neither
//	line is emitted
//
// As on GitHub, leading blanks before "::" are allowed (not for add-mask, which must start
// the line), DATA is unescaped from %25 %0D %0A, and property values also from %3A %2C.
const (
	cmdGroup        = "group"
	cmdEndGroup     = "endgroup"
	cmdError        = "error"
	cmdWarning      = "warning"
	cmdNotice       = "notice"
	cmdDebug        = "debug"
	cmdStopCommands = "stop-commands"
	cmdAddMask      = "add-mask"
)

// knownCommands are the commands GitHub's runner knows; a stop-commands token that names
// one would let a step's output resume commands by accident, so it is refused, as the
// runner does.
var knownCommands = map[string]bool{
	cmdGroup: true, cmdEndGroup: true, cmdError: true, cmdWarning: true, cmdNotice: true,
	cmdDebug: true, cmdStopCommands: true, cmdAddMask: true, "echo": true, "set-output": true,
	"set-env": true, "add-path": true, "save-state": true, "add-matcher": true, "remove-matcher": true,
}

// MaxAnnotationPropBytes caps an annotation's title and file; longer ones are cut (on a
// character boundary), by the worker and again by the coordinator.
const MaxAnnotationPropBytes = 1 << 10

// command is one parsed workflow command line.
type command struct {
	name  string
	props map[string]string
	data  string
}

var (
	dataUnescaper = strings.NewReplacer("%25", "%", "%0D", "\r", "%0A", "\n")
	propUnescaper = strings.NewReplacer("%25", "%", "%0D", "\r", "%0A", "\n", "%3A", ":", "%2C", ",")
)

// parseCommand reads line as a workflow command, the way GitHub's runner does: ok is
// false when line does not have the form "::NAME[ PROPS]::DATA".
func parseCommand(line string) (c command, ok bool) {
	s := strings.TrimLeft(line, " \t")
	if !strings.HasPrefix(s, "::") {
		return c, false
	}
	end := strings.Index(s[2:], "::")
	if end < 0 {
		return c, false
	}
	info := s[2 : 2+end]
	c.data = dataUnescaper.Replace(s[2+end+2:])
	name, props, hasProps := strings.Cut(info, " ")
	if name == "" {
		return c, false
	}
	c.name = name
	if hasProps {
		for p := range strings.SplitSeq(strings.TrimSpace(props), ",") {
			k, v, found := strings.Cut(p, "=")
			if !found || k == "" || v == "" {
				continue
			}
			if c.props == nil {
				c.props = map[string]string{}
			}
			c.props[k] = propUnescaper.Replace(v)
		}
	}
	return c, true
}

// annotation makes the Annotation of an error, warning or notice from its properties;
// a number that does not parse is left out.
func (c *command) annotation(step int, mask func(string) string) *Annotation {
	num := func(k string) int {
		n, err := strconv.Atoi(c.props[k])
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return &Annotation{
		Step:      step,
		Title:     cutUTF8(mask(c.props["title"]), MaxAnnotationPropBytes),
		File:      cutUTF8(mask(c.props["file"]), MaxAnnotationPropBytes),
		Line:      num("line"),
		Col:       num("col"),
		EndLine:   num("endLine"),
		EndColumn: num("endColumn"),
	}
}

// levels maps the commands that raise a message to the level of its line.
var levels = map[string]string{
	cmdError: LevelError, cmdWarning: LevelWarning, cmdNotice: LevelNotice, cmdDebug: LevelDebug,
}

// command acts on text, a complete masked line, if it is a workflow command the
// Recorder knows, and reports whether it did (the line is then not emitted as output).
// Callers hold r.mu.
func (w *recordWriter) command(b *batch, ts int64, text string) bool {
	r := w.r
	c, ok := parseCommand(text)
	if !ok {
		return false
	}
	if r.stopToken != "" {
		if c.name != r.stopToken {
			return false
		}
		r.stopToken = ""
		return true
	}
	// Unescaping can rebuild a secret that was printed escaped, so mask again.
	mask := func(s string) string {
		if s == "" {
			return s
		}
		m, _ := r.masker.mask(nil, []byte(s), true)
		return strings.ToValidUTF8(string(m), "\uFFFD")
	}
	switch c.name {
	case cmdGroup:
		r.emitLine(b, Line{TS: ts, Stream: w.stream, Text: mask(c.data), Group: GroupStart})
	case cmdEndGroup:
		r.emitLine(b, Line{TS: ts, Stream: w.stream, Group: GroupEnd})
	case cmdError, cmdWarning, cmdNotice:
		r.emitLine(b, Line{TS: ts, Stream: w.stream, Text: mask(c.data), Level: levels[c.name],
			Annotation: c.annotation(w.step, mask)})
	case cmdDebug:
		if r.debug {
			r.emitLine(b, Line{TS: ts, Stream: w.stream, Text: mask(c.data), Level: LevelDebug})
		}
	case cmdStopCommands:
		if c.data == "" || knownCommands[c.data] {
			r.emitLine(b, Line{TS: ts, Stream: System,
				Text: "stop-commands: the token must be set and must not name a command; commands were not stopped"})
			return true
		}
		r.stopToken = c.data
	default:
		return false
	}
	return true
}
