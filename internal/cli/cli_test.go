package cli

import (
	"bytes"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// invocation describes one in-process run of the command line.
type invocation struct {
	args  []string
	env   map[string]string // the whole environment the command sees
	stdin string
	// compile replaces pipeline.Compile where a test is about output or exit codes rather
	// than about what the compiler finds; nil uses the real compiler.
	compile func([]byte, pipeline.Options) (*pipeline.Plan, error)
	// gantry makes the command that runs `gantry <args>` as a process of its own; nil
	// re-executes the test binary as gantry.
	gantry func(args ...string) *exec.Cmd
}

type outcome struct {
	code           int
	stdout, stderr string
}

func runCLI(t *testing.T, inv invocation) outcome {
	t.Helper()
	var stdout, stderr bytes.Buffer
	a := &app{
		stdin:  strings.NewReader(inv.stdin),
		stdout: &stdout,
		stderr: &stderr,
		lookupEnv: func(name string) (string, bool) {
			v, ok := inv.env[name]
			return v, ok
		},
		compile: inv.compile,
		maxRead: defaultMaxRead,
		gantry:  inv.gantry,
	}
	if a.gantry == nil {
		a.gantry = childCommand
	}
	if a.compile == nil {
		a.compile = pipeline.Compile
	}
	code := a.run(t.Context(), inv.args)
	return outcome{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// usageLines is what every usage error prints on stderr: one line, then the help pointer.
func usageLines(msg, cmdPath string) string {
	return "gantry: " + msg + "\nRun '" + cmdPath + " --help' for usage.\n"
}

func TestUsageErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantStderr string
	}{
		{
			name:       "unknown command",
			args:       []string{"frobnicate"},
			wantStderr: usageLines(`unknown command "frobnicate"`, "gantry"),
		},
		{
			name:       "unknown command close to a real one",
			args:       []string{"validte", "x.yml"},
			wantStderr: usageLines(`unknown command "validte" (did you mean "validate"?)`, "gantry"),
		},
		{
			name:       "unknown root flag",
			args:       []string{"--bogus"},
			wantStderr: usageLines("unknown flag: --bogus", "gantry"),
		},
		{
			name:       "unknown subcommand flag",
			args:       []string{"validate", "--bogus", "x.yml"},
			wantStderr: usageLines("unknown flag: --bogus", "gantry validate"),
		},
		{
			name:       "unknown shorthand flag",
			args:       []string{"plan", "-x", "x.yml"},
			wantStderr: usageLines("unknown shorthand flag: 'x' in -x", "gantry plan"),
		},
		{
			name:       "validate without files",
			args:       []string{"validate"},
			wantStderr: usageLines("missing pipeline file to validate", "gantry validate"),
		},
		{
			name:       "validate bad bool value",
			args:       []string{"validate", "--json=maybe", "x.yml"},
			wantStderr: usageLines(`invalid argument "maybe" for "--json" flag: strconv.ParseBool: parsing "maybe": invalid syntax`, "gantry validate"),
		},
		{
			name:       "plan without file",
			args:       []string{"plan"},
			wantStderr: usageLines("expected 1 argument, got 0", "gantry plan"),
		},
		{
			name:       "plan with two files",
			args:       []string{"plan", "a.yml", "b.yml"},
			wantStderr: usageLines("expected 1 argument, got 2", "gantry plan"),
		},
		{
			// The format is checked while flags are parsed, before the (missing) file is read.
			name:       "plan unknown format",
			args:       []string{"plan", "--format", "svg", "missing.yml"},
			wantStderr: usageLines(`invalid argument "svg" for "--format" flag: must be one of text, json, dot`, "gantry plan"),
		},
		{
			name:       "plan unknown format from the environment",
			args:       []string{"plan", "missing.yml"},
			env:        map[string]string{"GANTRY_FORMAT": "svg"},
			wantStderr: usageLines(`invalid value "svg" for GANTRY_FORMAT: must be one of text, json, dot`, "gantry plan"),
		},
		{
			name:       "version with an argument",
			args:       []string{"version", "now"},
			wantStderr: usageLines(`unexpected argument "now"`, "gantry version"),
		},
		{
			name:       "help on an unknown topic",
			args:       []string{"help", "deploy"},
			wantStderr: usageLines(`unknown help topic "deploy"`, "gantry help"),
		},
		{
			name:       "stdin twice",
			args:       []string{"validate", "-", "-"},
			wantStderr: usageLines("standard input (-) given more than once", "gantry validate"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: tt.args, env: tt.env})
			if got.code != exitUsage {
				t.Errorf("exit code = %d, want %d", got.code, exitUsage)
			}
			if got.stderr != tt.wantStderr {
				t.Errorf("stderr =\n%s\nwant\n%s", got.stderr, tt.wantStderr)
			}
			if got.stdout != "" {
				t.Errorf("stdout = %q, want nothing", got.stdout)
			}
		})
	}
}

func TestBareGantryPrintsHelpAndFails(t *testing.T) {
	t.Parallel()
	got := runCLI(t, invocation{})
	if got.code != exitUsage {
		t.Errorf("exit code = %d, want %d", got.code, exitUsage)
	}
	if got.stdout != "" {
		t.Errorf("stdout = %q, want nothing: help for a mistake belongs on stderr", got.stdout)
	}
	if !strings.Contains(got.stderr, "Commands:") {
		t.Errorf("stderr does not show the commands:\n%s", got.stderr)
	}
}

// TestHelpListsOnlyWorkingCommands pins the command list: a command appears in help only
// once it does something.
func TestHelpListsOnlyWorkingCommands(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: args})
			if got.code != exitOK {
				t.Fatalf("exit code = %d, want 0; stderr:\n%s", got.code, got.stderr)
			}
			var listed []string
			inCommands := false
			for line := range strings.SplitSeq(got.stdout, "\n") {
				switch {
				case line == "Commands:":
					inCommands = true
				case inCommands && strings.HasPrefix(line, "  "):
					listed = append(listed, strings.Fields(line)[0])
				default:
					inCommands = false
				}
			}
			want := []string{"approvals", "approve", "artifacts", "audit", "bench", "cache", "cancel", "convert", "dispatch", "environment", "jobs", "logs", "outbox", "plan", "project", "reject", "retry", "run", "runs", "secret", "server", "submit", "summary", "tests", "token", "up", "validate", "var", "version", "worker", "workers", "workflow"}
			if strings.Join(listed, " ") != strings.Join(want, " ") {
				t.Errorf("help lists commands %q, want %q; help:\n%s", listed, want, got.stdout)
			}
		})
	}
}

func TestSubcommandHelp(t *testing.T) {
	t.Parallel()
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"validate", "--help"}, []string{"gantry validate FILE... [flags]", "--json"}},
		{[]string{"plan", "-h"}, []string{"gantry plan FILE [flags]", "--format format", "(default text)"}},
		{[]string{"help", "plan"}, []string{"gantry plan FILE [flags]"}},
		{[]string{"version", "--help"}, []string{"gantry version [flags]"}},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: tt.args})
			if got.code != exitOK {
				t.Fatalf("exit code = %d, want 0; stderr:\n%s", got.code, got.stderr)
			}
			for _, w := range tt.want {
				if !strings.Contains(got.stdout, w) {
					t.Errorf("help does not contain %q:\n%s", w, got.stdout)
				}
			}
		})
	}
}

func TestVersion(t *testing.T) {
	t.Parallel()
	// Through the exported entry point, as main calls it.
	var stdout, stderr bytes.Buffer
	code := Run(t.Context(), []string{"version"}, strings.NewReader(""), &stdout, &stderr)
	if code != exitOK {
		t.Fatalf("exit code = %d, want 0; stderr:\n%s", code, stderr.String())
	}
	want := "gantry " + buildVersion() + " (" + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + ")\n"
	if stdout.String() != want {
		t.Errorf("stdout = %q, want %q", stdout.String(), want)
	}
	if !strings.HasPrefix(stdout.String(), "gantry dev (go") {
		t.Errorf("an unstamped test binary should report version dev, got %q", stdout.String())
	}
}
