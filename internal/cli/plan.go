package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// planConfig is everything `gantry plan` acts on.
type planConfig struct {
	File   string // path; "-" reads standard input
	Format planFormat
	// Check, with a --project, also asks the coordinator which environments the project
	// defines.
	Check projectCheck
}

// planFormat is the --format flag. As a pflag.Value it rejects unknown formats while flags
// are parsed, so a bad format is a usage error before any file is read.
type planFormat string

const (
	formatText planFormat = "text"
	formatJSON planFormat = "json"
	formatDot  planFormat = "dot"
)

var planFormats = []planFormat{formatText, formatJSON, formatDot}

func (f *planFormat) String() string { return string(*f) }
func (f *planFormat) Type() string   { return "format" }

func (f *planFormat) Set(s string) error {
	for _, known := range planFormats {
		if planFormat(s) == known {
			*f = known
			return nil
		}
	}
	names := make([]string, len(planFormats))
	for i, known := range planFormats {
		names[i] = string(known)
	}
	return fmt.Errorf("must be one of %s", strings.Join(names, ", "))
}

func (a *app) planCommand() *cobra.Command {
	cfg := planConfig{Format: formatText}
	cmd := &cobra.Command{
		Use:   "plan FILE",
		Short: "Print the jobs and waves a pipeline will run as",
		Long: "Plan compiles a pipeline definition and prints what a run of it will contain:\n" +
			"every job after matrix expansion, grouped in waves (a wave's jobs can run at\n" +
			"the same time once the earlier waves are done), with what each one needs.\n\n" +
			"Formats: text (for people), json (the full plan), dot (a Graphviz graph:\n" +
			"gantry plan --format dot FILE | dot -Tsvg > plan.svg).\n\n" +
			"Exit status: 0 the plan was printed, 1 the definition is invalid (its errors\n" +
			"are listed as by validate), 2 usage error or an unreadable file.\n\n" +
			"With --project P it also asks the coordinator (--server, a read token) which\n" +
			"environments P defines, and warns on stderr of each job that names one P does\n" +
			"not: such a job runs with no rules.",
		Example: "  gantry plan .gantry.yml\n" +
			"  gantry plan --format json .gantry.yml",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.File = args[0]
			return a.plan(cmd.Context(), cfg)
		},
	}
	cmd.Flags().Var(&cfg.Format, "format", "output format: text, json or dot")
	a.projectCheckFlags(cmd, &cfg.Check)
	return cmd
}

func (a *app) plan(ctx context.Context, cfg planConfig) error {
	srcs, err := a.readSources([]string{cfg.File})
	if err != nil {
		return err
	}
	r := a.compileSource(srcs[0], a.workflowsOf(ctx, srcs[0], nil), true)
	if len(r.errs) > 0 {
		// The same report as validate, so one habit reads both.
		if err := writeValidateText(a.stdout, []fileResult{r}); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		return &exitError{code: exitFailure}
	}

	warnings, err := a.environmentWarnings(ctx, cfg.Check, []*pipeline.Plan{r.plan})
	if err != nil {
		return err
	}
	// On stderr, so that --format json and dot stay what they are.
	for _, w := range r.warnings {
		writeWarning(a.stderr, r, w)
	}
	for _, w := range warnings {
		for _, line := range w {
			fmt.Fprintf(a.stderr, "%s: warning: %s\n", r.src.name, line)
		}
	}
	switch cfg.Format {
	case formatJSON:
		err = writeJSON(a.stdout, r.plan)
	case formatDot:
		err = writePlanDot(a.stdout, r.plan)
	default:
		err = writePlanText(a.stdout, r.plan)
	}
	if err != nil {
		return fmt.Errorf("write plan: %w", err)
	}
	return nil
}
