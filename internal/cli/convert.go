package cli

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// convertConfig is everything `gantry convert` acts on.
type convertConfig struct {
	File string // path; "-" reads standard input
}

func (a *app) convertCommand() *cobra.Command {
	var cfg convertConfig
	cmd := &cobra.Command{
		Use:   "convert FILE",
		Short: "Print a GitHub Actions workflow in Gantry's pipeline language",
		Long: "Convert translates a GitHub Actions workflow into Gantry's own pipeline\n" +
			"language and prints it as YAML. The result plans exactly as the workflow does:\n" +
			"gantry run, validate and the server accept the workflow as it is, and convert\n" +
			"is for moving to the Gantry form for good.\n\n" +
			"Exit status: 0 the definition was printed, 1 the workflow is invalid or uses\n" +
			"what Gantry does not support (every error is listed, as by validate), 2 usage\n" +
			"error, an unreadable file, or a file that is not a workflow.",
		Example: "  gantry convert .github/workflows/ci.yml > .gantry.yml",
		Args:    exactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			cfg.File = args[0]
			return a.convert(cfg)
		},
	}
	return cmd
}

func (a *app) convert(cfg convertConfig) error {
	srcs, err := a.readSources([]string{cfg.File})
	if err != nil {
		return err
	}
	src := srcs[0]
	// A conversion writes out the jobs of the reusable workflows the file calls: those
	// of its repository are read from the working tree; another repository's are not
	// fetched, and such a call cannot be converted.
	w := a.workflowsOf(context.Background(), src, nil)
	w.refuse = "gantry convert reads only the reusable workflows of the file's own repository (./.github/workflows/...); gantry run and gantry validate --resolve-actions read others"
	out, err := pipeline.ConvertWorkflow(src.data, pipeline.Options{Path: src.name, Workflows: w})
	switch {
	case errors.Is(err, pipeline.ErrNotWorkflow):
		return usagef("%s: %v", src.name, err)
	case err != nil:
		r := fileResult{src: src, errs: compileErrors(err), workflows: w}
		if err := writeValidateText(a.stdout, []fileResult{r}); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		return &exitError{code: exitFailure}
	}
	if _, err := a.stdout.Write(out); err != nil {
		return fmt.Errorf("write definition: %w", err)
	}
	return nil
}
