package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/pprof"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// Exit codes. Scripts rely on them (DESIGN.md §10), so they never change meaning.
const (
	exitOK      = 0 // the command did what was asked and found nothing wrong
	exitFailure = 1 // the command ran and the answer is "no" (an invalid pipeline, a failed run)
	exitUsage   = 2 // the command was called wrongly or its input could not be read
)

// app is what a command may touch of the outside world. Run fills it from the process;
// tests fill it with buffers, a fixed environment and, where the output format rather than
// the compiler is under test, a fake compile function.
type app struct {
	stdin     io.Reader
	stdout    io.Writer
	stderr    io.Writer
	lookupEnv func(string) (string, bool)
	compile   func([]byte, pipeline.Options) (*pipeline.Plan, error)
	maxRead   int64 // bytes read of one input at most
	// gantry makes the command that runs gantry itself, for commands that start gantry
	// processes (bench); nil runs this executable.
	gantry func(args ...string) *exec.Cmd
}

// Run executes the gantry command line given by args (without the program name) and
// returns the process exit code: 0 success, 1 a negative result, 2 a usage error.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	a := &app{
		stdin:     stdin,
		stdout:    stdout,
		stderr:    stderr,
		lookupEnv: os.LookupEnv,
		compile:   pipeline.Compile,
		maxRead:   defaultMaxRead,
	}
	return a.run(ctx, args)
}

func (a *app) run(ctx context.Context, args []string) int {
	if path, ok := a.lookupEnv("GANTRY_CPU_PROFILE"); ok && path != "" {
		stop, err := startCPUProfile(path)
		if err != nil {
			fmt.Fprintf(a.stderr, "gantry: GANTRY_CPU_PROFILE: %v\n", err)
			return exitUsage
		}
		defer stop()
	}
	root := a.rootCommand()
	if args == nil {
		// cobra reads os.Args when given nil, which is never what an in-process caller meant.
		args = []string{}
	}
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if cmd == nil {
		cmd = root
	}

	var exit *exitError
	if errors.As(err, &exit) {
		return exit.code
	}
	var usage *usageError
	if errors.As(err, &usage) {
		fmt.Fprintf(a.stderr, "gantry: %v\nRun '%s --help' for usage.\n", usage.err, cmd.CommandPath())
		return exitUsage
	}
	fmt.Fprintf(a.stderr, "gantry: %v\n", err)
	return exitFailure
}

// usageError is a mistake in how gantry was called. It is printed on one line followed by
// a pointer to the command's help, and exits 2.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// exitError ends the command with a given code after the command has already printed
// everything the user needs to see, so Run adds nothing.
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func (a *app) rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "gantry",
		Short: "Gantry is a self-hosted CI/CD pipeline orchestrator",
		Long: "Gantry is a self-hosted CI/CD pipeline orchestrator: one binary that is the\n" +
			"coordinator server, the worker agent and this command-line client.\n\n" +
			"Every flag can also be set with a GANTRY_<FLAG> environment variable\n" +
			"(upper case, dashes as underscores); a flag on the command line wins.",
		// We print errors and usage ourselves so that every failure has exactly one message
		// and a deliberate exit code.
		SilenceErrors: true,
		SilenceUsage:  true,
		// Setting Args makes cobra hand an unknown subcommand to us instead of formatting
		// its own error, so it becomes a usage error like any other.
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
				return usagef("unknown command %q (did you mean %q?)", args[0], s[0])
			}
			return usagef("unknown command %q", args[0])
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			// A bare "gantry" is a usage mistake: show what could have been meant.
			cmd.SetOut(a.stderr)
			if err := cmd.Help(); err != nil {
				return err
			}
			return &exitError{code: exitUsage}
		},
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return flagsFromEnv(cmd.Flags(), a.lookupEnv)
		},
		CompletionOptions:          cobra.CompletionOptions{DisableDefaultCmd: true},
		SuggestionsMinimumDistance: 2,
	}
	root.SetIn(a.stdin)
	root.SetOut(a.stdout)
	root.SetErr(a.stderr)
	root.SetUsageTemplate(usageTemplate)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error {
		return &usageError{err: err}
	})

	// cobra's own help command shows the root help for an unknown topic and exits 0; a
	// typo deserves a usage error like anywhere else.
	root.SetHelpCommand(&cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		RunE: func(cmd *cobra.Command, args []string) error {
			target, rest, err := cmd.Root().Find(args)
			if err != nil || len(rest) > 0 {
				return usagef("unknown help topic %q", strings.Join(args, " "))
			}
			return target.Help()
		},
	})

	// Only commands that work are registered; the others in DESIGN.md §10 join as they land.
	root.AddCommand(
		a.approveCommand(),
		a.approvalsCommand(),
		a.artifactsCommand(),
		a.auditCommand(),
		a.benchCommand(),
		a.burnCommand(),
		a.cancelCommand(),
		a.convertCommand(),
		a.dispatchCommand(),
		a.environmentCommand(),
		a.jobsCommand(),
		a.cacheCommand(),
		a.logsCommand(),
		a.outboxCommand(),
		a.validateCommand(),
		a.planCommand(),
		a.podExecCommand(),
		a.podTarCommand(),
		a.podFilesCommand(),
		a.podHoldCommand(),
		a.podInitCommand(),
		a.projectCommand(),
		a.rejectCommand(),
		a.retryCommand(),
		a.runCommand(),
		a.runsCommand(),
		a.secretCommand(),
		a.serverCommand(),
		a.submitCommand(),
		a.summaryCommand(),
		a.testsCommand(),
		a.tokenCommand(),
		a.upCommand(),
		a.variableCommand(),
		a.versionCommand(),
		a.workflowCommand(),
		a.workerCommand(),
		a.workersCommand(),
	)
	return root
}

// usageTemplate replaces cobra's default so that help lists only real commands (not the
// implicit help command) and reads the same for the root and for subcommands.
const usageTemplate = `Usage:
  {{if .HasAvailableSubCommands}}{{.CommandPath}} <command> [flags]{{else}}{{.UseLine}}{{end}}
{{- if .HasExample}}

Examples:
{{.Example}}
{{- end}}
{{- if .HasAvailableSubCommands}}

Commands:
{{- range .Commands}}{{if .IsAvailableCommand}}
  {{rpad .Name .NamePadding}} {{.Short}}
{{- end}}{{end}}
{{- end}}
{{- if .HasAvailableLocalFlags}}

Flags:
{{.LocalFlags.FlagUsages | trimTrailingWhitespaces}}
{{- end}}
{{- if .HasAvailableSubCommands}}

Run '{{.CommandPath}} <command> --help' for more about a command.
{{- end}}
`

// exactArgs, minArgs and noArgs are cobra's argument checks turned into usage errors, so a
// wrong argument count exits 2 like any other calling mistake.
func exactArgs(n int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) != n {
			return usagef("expected %d %s, got %d", n, plural(n, "argument", "arguments"), len(args))
		}
		return nil
	}
}

// rangeArgs accepts from lo to hi arguments.
func rangeArgs(lo, hi int) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			return usagef("expected %d to %d arguments, got %d", lo, hi, len(args))
		}
		return nil
	}
}

func minArgs(n int, what string) cobra.PositionalArgs {
	return func(_ *cobra.Command, args []string) error {
		if len(args) < n {
			return usagef("missing %s", what)
		}
		return nil
	}
}

func noArgs(_ *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usagef("unexpected argument %q", args[0])
	}
	return nil
}

// plural picks the singular or plural form for n.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// countOf formats n with its noun, as in "1 job" or "3 jobs".
func countOf(n int, one, many string) string {
	return fmt.Sprintf("%d %s", n, plural(n, one, many))
}

// startCPUProfile writes a CPU profile of the whole command to path, for finding where
// the time of a `gantry run` or a `gantry server` goes (GANTRY_CPU_PROFILE=FILE).
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
