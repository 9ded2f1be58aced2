package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// validateConfig is everything `gantry validate` acts on.
type validateConfig struct {
	Files []string // paths; "-" reads standard input
	JSON  bool     // one JSON document instead of text
	// Check, with a --project, also asks the coordinator which environments the project
	// defines.
	Check projectCheck
	// Actions, when it asks to, resolves the actions steps use and checks their with:.
	Actions actionsCheck
}

func (a *app) validateCommand() *cobra.Command {
	var cfg validateConfig
	cmd := &cobra.Command{
		Use:   "validate FILE...",
		Short: "Check pipeline definitions and list every mistake",
		Long: "Validate compiles each pipeline definition (YAML or JSON) exactly as the server\n" +
			"would and lists every mistake with its file, line, column and path.\n\n" +
			"Exit status: 0 all files are valid, 1 a file is invalid, 2 usage error or a\n" +
			"file that cannot be read. A FILE of - reads standard input.\n\n" +
			"With --project P it also asks the coordinator (--server, a read token) which\n" +
			"environments P defines, and warns of each job that names one P does not: such a\n" +
			"job runs with no rules. A warning does not change the exit status.\n\n" +
			"Without --resolve-actions or --actions-source it checks the uses: of each step\n" +
			"only for its syntax, offline. With either, it resolves each action a step uses\n" +
			"(owner/repo[/dir]@ref) in the actions source, through a mirror cache (--mirrors),\n" +
			"and checks the step's with: against the action's action.yml as GitHub does: a\n" +
			"required input without a default that the step does not give is an error, an\n" +
			"input the action does not declare a warning; an action that cannot be resolved\n" +
			"is an error naming it and the source tried.",
		Example: "  gantry validate .gantry.yml\n" +
			"  gantry validate --project web --server https://ci.example.com .gantry.yml\n" +
			"  gantry validate --json pipelines/*.yml\n" +
			"  gantry validate --resolve-actions .github/workflows/ci.yml\n" +
			"  gantry validate --actions-source https://git.example.com/mirrors ci.yml\n" +
			"  cat pipeline.json | gantry validate -",
		Args: minArgs(1, "pipeline file to validate"),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Files = args
			return a.validate(cmd.Context(), cfg)
		},
	}
	cmd.Flags().BoolVar(&cfg.JSON, "json", false, "print one JSON document instead of text")
	a.projectCheckFlags(cmd, &cfg.Check)
	cfg.Actions.flags(cmd)
	return cmd
}

// fileResult is the outcome of compiling one source.
type fileResult struct {
	src  source
	plan *pipeline.Plan    // nil when invalid
	errs []*pipeline.Error // empty when valid
	// warnings are what is wrong with a valid definition in the project it was checked
	// against (an environment the project does not define), and what the actions its
	// steps use warn of (an input an action does not declare).
	warnings []validateWarning
	// workflows are the reusable workflows it calls that were read, whose lines its
	// errors may be at; nil when it calls none.
	workflows *fileWorkflows
}

func (a *app) validate(ctx context.Context, cfg validateConfig) error {
	resolver, err := cfg.Actions.resolver(newLogger(a.stderr, "warn", "text"))
	if err != nil {
		return err
	}
	srcs, err := a.readSources(cfg.Files)
	if err != nil {
		return err
	}
	results := make([]fileResult, len(srcs))
	plans := make([]*pipeline.Plan, len(srcs))
	for i, src := range srcs {
		// Other repositories' reusable workflows are read from the actions source as
		// the actions are, when asked to; otherwise only their callers are checked.
		results[i] = a.compileSource(src, a.workflowsOf(ctx, src, resolver), true)
		results[i].warnings = append(results[i].warnings, results[i].workflows.skippedWarnings("give --resolve-actions to read it from the actions source")...)
		plans[i] = results[i].plan
	}
	warnings, err := a.environmentWarnings(ctx, cfg.Check, plans)
	if err != nil {
		return err
	}
	for i := range warnings {
		for _, w := range warnings[i] {
			results[i].warnings = append(results[i].warnings, validateWarning{message: w})
		}
	}
	if resolver != nil {
		for i := range results {
			if results[i].plan == nil {
				continue
			}
			errs, warns, err := checkActions(ctx, resolver, results[i].src, results[i].plan)
			if err != nil {
				return err
			}
			results[i].errs = append(results[i].errs, errs...)
			results[i].warnings = append(results[i].warnings, warns...)
		}
	}
	invalid := false
	for _, r := range results {
		invalid = invalid || len(r.errs) > 0
	}

	if cfg.JSON {
		err = writeValidateJSON(a.stdout, results)
	} else {
		err = writeValidateText(a.stdout, results)
	}
	if err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	if invalid {
		return &exitError{code: exitFailure}
	}
	return nil
}

// compileSource compiles one definition with the default limits, the ones a server uses
// unless configured otherwise, reading the reusable workflows it calls through w.
// reusable checks a reusable workflow as a workflow calling it would
// (pipeline.Options.CheckReusable), for a plan that is shown, not run: what it leaves
// to the call is in the result's warnings.
func (a *app) compileSource(src source, w *fileWorkflows, reusable bool) fileResult {
	opts := pipeline.Options{Path: src.name, CheckReusable: reusable}
	if w != nil {
		opts.Workflows = w
	}
	plan, err := a.compile(src.data, opts)
	switch {
	case err != nil:
		return fileResult{src: src, errs: compileErrors(err), workflows: w}
	case plan == nil:
		return fileResult{src: src, errs: []*pipeline.Error{{Kind: "internal", Message: "compiler returned no plan and no error"}}, workflows: w}
	default:
		r := fileResult{src: src, plan: plan, workflows: w}
		for _, e := range plan.Warnings {
			msg := e.Message
			if e.Path != "" {
				msg = e.Path + ": " + msg
			}
			r.warnings = append(r.warnings, validateWarning{line: e.Line, column: e.Column, message: msg, file: e.File})
		}
		return r
	}
}

// writeValidateText prints "file: ok (N jobs)" for each valid file and every error of the
// invalid ones, then each file's warnings, then a summary line when there were errors.
func writeValidateText(w io.Writer, results []fileResult) error {
	ew := &errWriter{w: w}
	for _, r := range results {
		if len(r.errs) == 0 {
			fmt.Fprintf(ew, "%s: ok (%s)\n", r.src.name, countOf(len(r.plan.Jobs), "job", "jobs"))
		} else {
			writeErrors(ew, r)
		}
		for _, w := range r.warnings {
			writeWarning(ew, r, w)
		}
	}
	errs, files := 0, 0
	for _, r := range results {
		if len(r.errs) > 0 {
			errs += len(r.errs)
			files++
		}
	}
	if errs > 0 {
		writeSummary(ew, errs, files)
	}
	return ew.err
}

// writeWarning prints a warning of r as writeDiagnostic prints an error, at its line of
// the file it is in.
func writeWarning(w io.Writer, r fileResult, warn validateWarning) {
	e := &pipeline.Error{File: warn.file, Line: warn.line, Column: warn.column, Message: "warning: " + warn.message}
	writeDiagnostic(w, r.workflows.sourceOf(r.src, e), e)
}

// writeErrors prints every error of one source in the compiler style of writeDiagnostic,
// each at its line of the file it is in: the source, or a workflow the source calls.
func writeErrors(w io.Writer, r fileResult) {
	for _, e := range r.errs {
		writeDiagnostic(w, r.workflows.sourceOf(r.src, e), e)
	}
}

// The JSON report. Its field names are a contract with scripts, so they are spelled out
// here rather than borrowed from pipeline's own JSON tags.
type (
	validateReport struct {
		Files []validateFile `json:"files"`
	}
	validateFile struct {
		File   string          `json:"file"`
		Valid  bool            `json:"valid"`
		Jobs   int             `json:"jobs"`
		Errors []validateError `json:"errors"`
		// Warnings are given with --project, --resolve-actions or --actions-source, and
		// for a reusable workflow the settings decided when a workflow calls it.
		Warnings []string `json:"warnings,omitempty"`
	}
	validateError struct {
		Code string `json:"code"`
		// File is the reusable workflow the error is in, as the report names it; empty
		// for the file validated.
		File    string `json:"file,omitempty"`
		Path    string `json:"path"`
		Line    int    `json:"line"`
		Column  int    `json:"column"`
		Message string `json:"message"`
	}
)

func writeValidateJSON(w io.Writer, results []fileResult) error {
	report := validateReport{Files: make([]validateFile, len(results))}
	for i, r := range results {
		f := validateFile{File: r.src.name, Valid: len(r.errs) == 0, Errors: []validateError{}}
		for _, w := range r.warnings {
			f.Warnings = append(f.Warnings, w.message)
		}
		if r.plan != nil {
			f.Jobs = len(r.plan.Jobs)
		}
		for _, e := range r.errs {
			in := ""
			if e.File != "" {
				in = r.workflows.sourceOf(r.src, e).name
			}
			f.Errors = append(f.Errors, validateError{
				Code:    string(e.Kind),
				File:    in,
				Path:    e.Path,
				Line:    e.Line,
				Column:  e.Column,
				Message: e.Message,
			})
		}
		report.Files[i] = f
	}
	return writeJSON(w, report)
}

// writeJSON writes v indented, without escaping <, > and & so expressions such as
// `a && b` stay readable.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// errWriter remembers the first write error so that report code can print freely and check
// once at the end.
type errWriter struct {
	w   io.Writer
	err error
}

func (ew *errWriter) Write(p []byte) (int, error) {
	if ew.err != nil {
		return 0, ew.err
	}
	n, err := ew.w.Write(p)
	ew.err = err
	return n, err
}
