package logs

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseCommand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		line string
		ok   bool
		want command
	}{
		{line: "::group::Build", ok: true, want: command{name: "group", data: "Build"}},
		{line: "::endgroup::", ok: true, want: command{name: "endgroup"}},
		{line: "  \t::notice::hi", ok: true, want: command{name: "notice", data: "hi"}},
		{line: "::error file=a.go,line=3,col=4,endLine=5,endColumn=6,title=Bad::boom", ok: true,
			want: command{name: "error", data: "boom", props: map[string]string{
				"file": "a.go", "line": "3", "col": "4", "endLine": "5", "endColumn": "6", "title": "Bad"}}},
		{line: "::warning title=a%3Ab%2Cc%25%0A::x%25y%0Az%0D%3A", ok: true,
			want: command{name: "warning", data: "x%y\nz\r%3A", props: map[string]string{"title": "a:b,c%\n"}}},
		{line: "::error  title=T , junk ,=v,k=::m", ok: true,
			want: command{name: "error", data: "m", props: map[string]string{"title": "T "}}},
		{line: "::error::a::b", ok: true, want: command{name: "error", data: "a::b"}},
		{line: "%2525::notice::x", ok: false},
		{line: "::notice x", ok: false},
		{line: ":: ::x", ok: false},
		{line: "::::x", ok: false},
		{line: "x ::notice::y", ok: false},
		{line: "", ok: false},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			got, ok := parseCommand(tc.line)
			if ok != tc.ok {
				t.Fatalf("parseCommand(%q) ok = %v, want %v", tc.line, ok, tc.ok)
			}
			if ok && !reflect.DeepEqual(got, tc.want) {
				t.Errorf("parseCommand(%q) = %+v, want %+v", tc.line, got, tc.want)
			}
		})
	}
}

// cmdLine is a Line as TestRecorderCommands compares it (no seq or time).
type cmdLine struct {
	stream, text, group, level string
	ann                        *Annotation
}

func TestRecorderCommands(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		debug   bool
		maxLine int
		masks   []string
		writes  []string
		want    []cmdLine
	}{
		{name: "group and endgroup", writes: []string{"::group::Build it\nout\n::endgroup::\nafter\n"},
			want: []cmdLine{{text: "Build it", group: GroupStart}, {text: "out"}, {group: GroupEnd}, {text: "after"}}},
		{name: "group title escaped", writes: []string{"::group::a%0Ab%25\n"},
			want: []cmdLine{{text: "a\nb%", group: GroupStart}}},
		{name: "error with every property", writes: []string{"::error file=src/a.go,line=12,col=3,endLine=14,endColumn=9,title=Vet::unused x\n"},
			want: []cmdLine{{text: "unused x", level: LevelError, ann: &Annotation{Step: 4, File: "src/a.go", Line: 12, Col: 3, EndLine: 14, EndColumn: 9, Title: "Vet"}}}},
		{name: "warning and notice without properties", writes: []string{"::warning::careful\n::notice::fyi\n"},
			want: []cmdLine{{text: "careful", level: LevelWarning, ann: &Annotation{Step: 4}},
				{text: "fyi", level: LevelNotice, ann: &Annotation{Step: 4}}}},
		{name: "bad numbers left out", writes: []string{"::error line=x,col=-2::m\n"},
			want: []cmdLine{{text: "m", level: LevelError, ann: &Annotation{Step: 4}}}},
		{name: "message escapes", writes: []string{"::error title=a%2Cb%3Ac::one%0Atwo%0D%25\n"},
			want: []cmdLine{{text: "one\ntwo\r%", level: LevelError, ann: &Annotation{Step: 4, Title: "a,b:c"}}}},
		{name: "leading blanks", writes: []string{"   ::notice::x\n"},
			want: []cmdLine{{text: "x", level: LevelNotice, ann: &Annotation{Step: 4}}}},
		{name: "debug hidden", writes: []string{"::debug::secret detail\nshown\n"},
			want: []cmdLine{{text: "shown"}}},
		{name: "debug shown in debug mode", debug: true, writes: []string{"::debug::detail\n"},
			want: []cmdLine{{text: "detail", level: LevelDebug}}},
		{name: "unknown commands left alone", writes: []string{"::set-output name=x::1\n::frobnicate::y\n:: not one\n"},
			want: []cmdLine{{text: "::set-output name=x::1"}, {text: "::frobnicate::y"}, {text: ":: not one"}}},
		{name: "stop-commands", writes: []string{"::stop-commands::tok42\n::error::not an error\n::add-mask::shown\n::group::g\nshown\n::tok42::\n::error::an error\n"},
			want: []cmdLine{{text: "::error::not an error"}, {text: "::add-mask::shown"}, {text: "::group::g"}, {text: "shown"},
				{text: "an error", level: LevelError, ann: &Annotation{Step: 4}}}},
		{name: "stop-commands keeps stopped across writes", writes: []string{"::stop-com", "mands::t0k\n::warn", "ing::w\n::t0", "k::\n::warning::w\n"},
			want: []cmdLine{{text: "::warning::w"}, {text: "w", level: LevelWarning, ann: &Annotation{Step: 4}}}},
		{name: "stop-commands refuses a command's name", writes: []string{"::stop-commands::error\n::error::still\n"},
			want: []cmdLine{{stream: System, text: "stop-commands: the token must be set and must not name a command; commands were not stopped"},
				{text: "still", level: LevelError, ann: &Annotation{Step: 4}}}},
		{name: "stop-commands refuses an empty token", writes: []string{"::stop-commands::\n::notice::n\n"},
			want: []cmdLine{{stream: System, text: "stop-commands: the token must be set and must not name a command; commands were not stopped"},
				{text: "n", level: LevelNotice, ann: &Annotation{Step: 4}}}},
		{name: "add-mask still works", writes: []string{"::add-mask::hunter22\npass hunter22\n::error title=hunter22::is hunter22\n"},
			want: []cmdLine{{text: "pass ***"}, {text: "is ***", level: LevelError, ann: &Annotation{Step: 4, Title: "***"}}}},
		{name: "a secret rebuilt by unescaping is masked", masks: []string{"pa%ss"},
			writes: []string{"::error title=pa%25ss::pa%25ss\n"},
			want:   []cmdLine{{text: "***", level: LevelError, ann: &Annotation{Step: 4, Title: "***"}}}},
		{name: "partial command lines", writes: []string{"::gr", "oup::Ti", "tle\n::e", "rror file=f", ".go::m", "sg"},
			want: []cmdLine{{text: "Title", group: GroupStart}, {text: "msg", level: LevelError, ann: &Annotation{Step: 4, File: "f.go"}}}},
		{name: "crlf command", writes: []string{"::endgroup::\r\n"},
			want: []cmdLine{{group: GroupEnd}}},
		{name: "a command cut at the cap is output", maxLine: 16, writes: []string{"::error::" + strings.Repeat("x", 30) + "\n"},
			want: []cmdLine{{text: "::error::xxxxxxx"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sink := &sinkRecorder{t: t}
			r := NewRecorder(sink.sink, RecorderOptions{MaxLineBytes: tc.maxLine, Debug: tc.debug})
			for _, m := range tc.masks {
				r.Mask(m)
			}
			w := r.StepWriter(Stdout, 4)
			for _, s := range tc.writes {
				write(t, w, s)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			var got []cmdLine
			for _, l := range sink.lines {
				got = append(got, cmdLine{stream: l.Stream, text: l.Text, group: l.Group, level: l.Level, ann: l.Annotation})
			}
			for i := range tc.want {
				if tc.want[i].stream == "" {
					tc.want[i].stream = Stdout
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("lines\n got %s\nwant %s", fmtCmdLines(got), fmtCmdLines(tc.want))
			}
		})
	}
}

func fmtCmdLines(ls []cmdLine) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, "\n  %s|%s|%s %q", l.stream, l.group, l.level, l.text)
		if l.ann != nil {
			fmt.Fprintf(&b, " %+v", *l.ann)
		}
	}
	return b.String()
}

// TestRecorderCommandsShareStopAcrossStreams: a stop-commands on stdout stops commands on
// stderr too, as the runner reads one stream; a plain Writer's annotation has no step.
func TestRecorderCommandsShareStopAcrossStreams(t *testing.T) {
	t.Parallel()
	sink := &sinkRecorder{t: t}
	r := NewRecorder(sink.sink, RecorderOptions{})
	out, errw := r.Writer(Stdout), r.Writer(Stderr)
	write(t, out, "::stop-commands::zz9\n")
	write(t, errw, "::error::quiet\n")
	write(t, out, "::zz9::\n")
	write(t, errw, "::error::loud\n")
	if got := sink.texts(); !reflect.DeepEqual(got, []string{"::error::quiet", "loud"}) {
		t.Fatalf("texts %q", got)
	}
	if a := sink.lines[1].Annotation; a == nil || a.Step != -1 || sink.lines[1].Stream != Stderr {
		t.Errorf("annotation %+v on stream %s, want step -1 on stderr", a, sink.lines[1].Stream)
	}
}

// TestRecorderAnnotationPropsCapped: an annotation's title and file are cut at
// MaxAnnotationPropBytes.
func TestRecorderAnnotationPropsCapped(t *testing.T) {
	t.Parallel()
	sink := &sinkRecorder{t: t}
	r := NewRecorder(sink.sink, RecorderOptions{})
	w := r.Writer(Stdout)
	write(t, w, "::warning title="+strings.Repeat("t", 3000)+",file="+strings.Repeat("é", 1000)+"::m\n")
	a := sink.lines[0].Annotation
	if len(a.Title) != MaxAnnotationPropBytes || len(a.File) != MaxAnnotationPropBytes {
		t.Errorf("title %d bytes, file %d bytes; want both %d", len(a.Title), len(a.File), MaxAnnotationPropBytes)
	}
}

// FuzzRecorderCommands: whatever a step prints, however it is split across writes, no
// field of any line holds a registered secret (unescaping a command's text or properties
// can rebuild one), seqs stay dense, and only errors, warnings and notices carry an
// annotation.
func FuzzRecorderCommands(f *testing.F) {
	f.Add("::error title=s3cr3t,file=k3y%3Av%2Cal::x s3cr3t\n", uint8(3))
	f.Add("::group::g%0As3cr3t\n::endgroup::\n::warning::k3y%3Av%2Cal\n", uint8(1))
	f.Add("::stop-commands::t0k\n::add-mask::zzzz\n::t0k::\n::notice::zzzz\n", uint8(5))
	f.Add("::debug::s3%63r3t s3cr3t\r\n::error line=1,col=2::a\rb\n", uint8(0))
	secrets := []string{"s3cr3t", "k3y:v,al"}
	f.Fuzz(func(t *testing.T, out string, split uint8) {
		sink := &sinkRecorder{t: t}
		r := NewRecorder(sink.sink, RecorderOptions{MaxLineBytes: 64, Debug: true})
		for _, s := range secrets {
			r.Mask(s)
		}
		w := r.StepWriter(Stdout, 2)
		step := int(split)%7 + 1
		for p := out; len(p) > 0; {
			n := min(step, len(p))
			write(t, w, p[:n])
			p = p[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		for _, l := range sink.lines {
			fields := []string{l.Text}
			if a := l.Annotation; a != nil {
				fields = append(fields, a.Title, a.File)
				if !l.Annotated() || a.Step != 2 {
					t.Errorf("line %d of level %q has annotation %+v", l.Seq, l.Level, *a)
				}
			}
			for _, field := range fields {
				for _, s := range secrets {
					if strings.Contains(field, s) {
						t.Errorf("line %d holds secret %q: %q", l.Seq, s, field)
					}
				}
			}
			if l.Group == GroupEnd && l.Text != "" {
				t.Errorf("fold end %d has text %q", l.Seq, l.Text)
			}
		}
	})
}
