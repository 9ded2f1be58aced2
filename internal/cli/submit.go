package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// submitConfig is everything `gantry submit` acts on.
type submitConfig struct {
	clientConfig
	File           string
	Follow         bool
	Project        string
	Ref            string
	SHA            string
	Priority       string
	Env            []string
	SecretEnv      []string
	IdempotencyKey string
	// noWorker, with Follow, is told of a job no live worker can take (followOptions).
	noWorker func(job jobView) error
}

func (a *app) submitCommand() *cobra.Command {
	var cfg submitConfig
	cmd := &cobra.Command{
		Use:   "submit FILE",
		Short: "Submit a pipeline to the coordinator as a new run",
		Long: "Submit sends a pipeline definition (YAML or JSON, as the file is; - reads standard\n" +
			"input) to the coordinator, which starts a run, and prints the run's id and jobs.\n" +
			"A pipeline the coordinator rejects is shown mistake by mistake, with its line.\n\n" +
			"With --follow, every job's log is printed as it is written, each line prefixed\n" +
			"by its job, until the run ends; the exit status is then the run's result: 0\n" +
			"success, 1 failed or cancelled. With --json, the coordinator's answer is\n" +
			"printed (with --follow: the finished run, the logs going to stderr).\n\n" + configHelp,
		Example: "  gantry submit .gantry.yml\n" +
			"  gantry submit --follow .gantry.yml\n" +
			"  gantry submit --project web --ref refs/heads/main --env DEPLOY=staging pipeline.json",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.File = args[0]
			return a.submit(cmd.Context(), cfg)
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	f := cmd.Flags()
	f.BoolVarP(&cfg.Follow, "follow", "f", false, "print the jobs' logs until the run ends; exit with its result")
	f.StringVar(&cfg.Project, "project", "", "project of the run (default: default)")
	f.StringVar(&cfg.Ref, "ref", "", "git ref the run is for (refs/heads/main)")
	f.StringVar(&cfg.SHA, "sha", "", "commit the run is for")
	f.StringVar(&cfg.Priority, "priority", "", "lane of every job: critical, high, normal or low")
	f.StringArrayVar(&cfg.Env, "env", nil, "NAME=VALUE for every job of the run (repeatable)")
	f.StringArrayVar(&cfg.SecretEnv, "secret-env", nil, "NAME (value from this environment) or NAME=VALUE: run env stored encrypted and masked in logs (repeatable)")
	f.StringVar(&cfg.IdempotencyKey, "idempotency-key", "", "submit at most once per key and project; a repeat prints the existing run")
	return cmd
}

// submitted is the coordinator's answer to a submission.
type submitted = runDetails

func (a *app) submit(ctx context.Context, cfg submitConfig) error {
	switch cfg.Priority {
	case "", "critical", "high", "normal", "low":
	default:
		return usagef("--priority %q: want critical, high, normal or low", cfg.Priority)
	}
	env := map[string]string{}
	for _, kv := range cfg.Env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usagef("--env %q: want NAME=VALUE", kv)
		}
		env[k] = v
	}
	secretEnv, err := parseSecretEnv(cfg.SecretEnv, a.lookupEnv)
	if err != nil {
		return err
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	srcs, err := a.readSources([]string{cfg.File})
	if err != nil {
		return err
	}
	src := srcs[0]

	body, contentType := src.data, "application/yaml"
	isJSON := strings.EqualFold(filepath.Ext(cfg.File), ".json") || json.Valid(src.data)
	if isJSON {
		contentType = "application/json"
	}
	if cfg.Project != "" || cfg.Ref != "" || cfg.SHA != "" || cfg.Priority != "" || len(env) > 0 || len(secretEnv) > 0 {
		// The run's options travel in an envelope that carries the definition as text.
		envelope := map[string]any{"pipeline": string(src.data)}
		for k, v := range map[string]string{"project": cfg.Project, "ref": cfg.Ref, "sha": cfg.SHA, "priority": cfg.Priority} {
			if v != "" {
				envelope[k] = v
			}
		}
		if len(env) > 0 {
			envelope["env"] = env
		}
		if len(secretEnv) > 0 {
			envelope["secret_env"] = secretEnv
		}
		body, _ = json.Marshal(envelope)
		contentType = "application/json"
	}
	h := http.Header{"Content-Type": {contentType}}
	if cfg.IdempotencyKey != "" {
		h.Set("Idempotency-Key", cfg.IdempotencyKey)
	}
	raw, err := c.call(ctx, http.MethodPost, "/api/v1/runs", bytes.NewReader(body), h)
	if err != nil {
		var se *serverError
		if errors.As(err, &se) && len(se.Details) > 0 {
			a.writeRejection(src, se)
			return &exitError{code: exitFailure}
		}
		return fmt.Errorf("submit %s: %w", src.name, err)
	}
	var run submitted
	if err := json.Unmarshal(raw, &run); err != nil {
		return fmt.Errorf("read the server's answer: %w", err)
	}

	return a.afterStart(ctx, c, cfg.clientConfig, cfg.Follow, followOptions{noWorker: cfg.noWorker}, run, raw)
}

// afterStart prints a run just started, by gantry submit or dispatch, and with follow
// follows it to its end and exits with its result.
func (a *app) afterStart(ctx context.Context, c *apiClient, cfg clientConfig, follow bool, opts followOptions, run runDetails, raw []byte) error {
	if !follow {
		if cfg.JSON {
			return writeRaw(a.stdout, raw)
		}
		writeSubmitted(a.stdout, run, a.outputWidth())
		return nil
	}
	logs := a.stdout
	if cfg.JSON {
		logs = a.stderr
	} else {
		writeSubmitted(a.stdout, run, a.outputWidth())
	}
	tty, _ := terminal(logs)
	status, err := followRunWith(ctx, c, run.ID, logs, tty, opts)
	if err != nil {
		if ctx.Err() != nil {
			// Ctrl-C stops the watching, not the run.
			fmt.Fprintf(a.stderr, "gantry: stopped following run %s; it goes on (gantry cancel %s stops it)\n", run.ID, run.ID)
			return &exitError{code: exitFailure}
		}
		return err
	}
	if cfg.JSON {
		_, raw, err := getRun(ctx, c, run.ID)
		if err != nil {
			return err
		}
		if err := writeRaw(a.stdout, raw); err != nil {
			return err
		}
	}
	if status != "success" {
		return &exitError{code: exitFailure}
	}
	return nil
}

// writeRejection prints the mistakes the coordinator found in src the way validate does,
// with the offending line and a caret under the column.
func (a *app) writeRejection(src source, se *serverError) {
	for _, d := range se.Details {
		in := src
		if d.File != "" {
			in = source{name: d.File} // a workflow the pipeline calls, which the server read
		}
		writeDiagnostic(a.stderr, in, &pipeline.Error{
			Kind: pipeline.ErrorKind(d.Code), File: d.File, Path: d.Path, Line: d.Line, Column: d.Column, Message: d.Message,
		})
	}
	fmt.Fprintf(a.stderr, "gantry: the server rejected %s: %s\n", src.name, se.Message)
}

// writeSubmitted prints a new run's id and its jobs with their ids, for `gantry logs`.
func writeSubmitted(w io.Writer, run runDetails, width int) {
	var b strings.Builder
	name := ""
	if run.Name != "" {
		name = " (" + run.Name + ")"
	}
	label := run.ID // first: scripts read it as the second word
	if run.Number > 0 {
		label += " " + runLabel(run)
	}
	fmt.Fprintf(&b, "run %s%s: %s\n", label, name, countOf(len(run.Jobs), "job", "jobs"))
	keyW := 0
	for _, j := range run.Jobs {
		keyW = max(keyW, len([]rune(j.title())))
	}
	keyW = distinctWidth(jobTitles(run.Jobs), min(keyW, max(width-2-36-2-2-9-1, 10)))
	for _, j := range run.Jobs {
		line := fmt.Sprintf("  %s  %s  %s", j.ID, pad(elide(j.title(), keyW), keyW), j.Status)
		if room := width - 1 - len([]rune(line)) - 2; j.Reason != "" && room >= 12 {
			// A job decided at submission (a root job whose if: was false) says why, as
			// far as the width allows; the summary and runs get show it whole.
			line += "  " + elide(j.Reason, room)
		}
		b.WriteString(line + "\n")
	}
	io.WriteString(w, b.String())
}
