package cli

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
)

// summaryConfig is everything `gantry summary` acts on.
type summaryConfig struct {
	clientConfig
	Run     string
	Job     string // a job's id, key or name; "" for every job of the run
	Attempt int
	HTML    bool
}

func (a *app) summaryCommand() *cobra.Command {
	var cfg summaryConfig
	cmd := &cobra.Command{
		Use:   "summary RUN [JOB]",
		Short: "Print the summaries a run's jobs' steps wrote ($GITHUB_STEP_SUMMARY)",
		Long: "Summary prints the Markdown a job's steps wrote to $GANTRY_STEP_SUMMARY (a\n" +
			"workflow's $GITHUB_STEP_SUMMARY), each step's in step order: of JOB (its key,\n" +
			"its name as gantry runs get shows it, or its id), or of every job of the run\n" +
			"that has one, each after a line \"==> JOB <==\". It is the job's latest\n" +
			"attempt unless --attempt says which. --html prints it rendered as the\n" +
			"dashboard shows it, and --json the API's answer. A job whose steps wrote\n" +
			"nothing has no summary: that is said on stderr, and the exit status is 0.\n\n" + runRefHelp + configHelp,
		Example: "  gantry summary web#42\n" +
			"  gantry summary 0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b\n" +
			"  gantry summary 0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b test > summary.md\n" +
			"  gantry summary --attempt 1 --html 0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b 'test (go=1.26)'",
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Run = args[0]
			if len(args) == 2 {
				cfg.Job = args[1]
			}
			return a.summary(cmd.Context(), cfg)
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	f := cmd.Flags()
	f.IntVar(&cfg.Attempt, "attempt", 0, "which attempt of JOB (default: the latest)")
	f.BoolVar(&cfg.HTML, "html", false, "print the summary rendered to HTML, as the dashboard shows it")
	return cmd
}

// summaryView is a job attempt's summary as the API answers it.
type summaryView struct {
	JobID   string `json:"job_id"`
	Job     string `json:"job"`
	Attempt int    `json:"attempt"`
	Bytes   int64  `json:"bytes"`
	Parts   []struct {
		Step  int   `json:"step"`
		Bytes int64 `json:"bytes"`
	} `json:"parts"`
	Markdown string `json:"markdown"`
	HTML     string `json:"html"`
}

// errNoSummaries is a server too old to keep step summaries.
var errNoSummaries = errors.New("the server does not keep step summaries: it is of an older version than this client")

func (a *app) summary(ctx context.Context, cfg summaryConfig) error {
	if _, _, _, err := parseRunRef(cfg.Run); err != nil {
		return err
	}
	if cfg.Attempt < 0 {
		return usagef("--attempt %d: want 1 or more", cfg.Attempt)
	}
	if cfg.Attempt > 0 && cfg.Job == "" {
		return usagef("--attempt needs a JOB: attempts are a job's")
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	if cfg.Run, err = resolveRun(ctx, c, cfg.Run); err != nil {
		return err
	}
	run, _, err := getRun(ctx, c, cfg.Run)
	if err != nil {
		return err
	}
	if cfg.Job == "" {
		return a.runSummaries(ctx, c, cfg, run)
	}
	job, err := findJob(run, cfg.Job)
	if err != nil {
		return err
	}
	path := "/api/v1/jobs/" + job.ID + "/summary"
	if cfg.Attempt > 0 {
		path += "?attempt=" + strconv.Itoa(cfg.Attempt)
	}
	raw, err := c.call(ctx, http.MethodGet, path, nil, http.Header{"Accept": {"application/json"}})
	if err != nil {
		return summaryError(job, err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	var s summaryView
	if err := decodeSummaries(raw, &s); err != nil {
		return err
	}
	if s.Bytes == 0 {
		fmt.Fprintf(a.stderr, "job %s (attempt %d) has no summary\n", job.title(), s.Attempt)
		return nil
	}
	_, err = io.WriteString(a.stdout, summaryText(s, cfg.HTML))
	return err
}

// runSummaries prints the summary of every job of run that has one.
func (a *app) runSummaries(ctx context.Context, c *apiClient, cfg summaryConfig, run runDetails) error {
	include := "markdown"
	if cfg.HTML {
		include = "html"
	}
	raw, err := c.call(ctx, http.MethodGet, "/api/v1/runs/"+run.ID+"/summaries?include="+include, nil, nil)
	if err != nil {
		return summaryError(jobView{}, err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	var ss []summaryView
	if err := decodeSummaries(raw, &ss); err != nil {
		return err
	}
	if len(ss) == 0 {
		fmt.Fprintf(a.stderr, "no job of run %s has a summary\n", run.ID)
		return nil
	}
	titles := map[string]string{}
	for _, j := range run.Jobs {
		titles[j.ID] = j.title()
	}
	var b strings.Builder
	for i, s := range ss {
		if i > 0 {
			b.WriteByte('\n')
		}
		fmt.Fprintf(&b, "==> %s <==\n", cmp.Or(titles[s.JobID], s.Job))
		b.WriteString(summaryText(s, cfg.HTML))
	}
	_, err = io.WriteString(a.stdout, b.String())
	return err
}

// summaryText is what of a summary is printed, ending with a line end.
func summaryText(s summaryView, html bool) string {
	text := s.Markdown
	if html {
		text = s.HTML
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return text
}

// summaryError says what a failed read of summaries means: a 404 from a server that
// knows the run and its jobs (they were just read) is one too old for summaries.
func summaryError(job jobView, err error) error {
	var se *serverError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return errNoSummaries
	}
	if job.ID != "" {
		return fmt.Errorf("get the summary of job %s: %w", job.title(), err)
	}
	return fmt.Errorf("get the run's summaries: %w", err)
}

// findJob is the job of run that name names: its id, its key, or its name as shown.
func findJob(run runDetails, name string) (jobView, error) {
	var byTitle []jobView
	for _, j := range run.Jobs {
		if j.ID == name || j.Key == name {
			return j, nil
		}
		if j.title() == name {
			byTitle = append(byTitle, j)
		}
	}
	if len(byTitle) == 1 {
		return byTitle[0], nil
	}
	keys := make([]string, len(run.Jobs))
	for i, j := range run.Jobs {
		keys[i] = j.Key
	}
	if len(byTitle) > 1 {
		return jobView{}, fmt.Errorf("run %s has %d jobs named %q: give one's key (%s)", run.ID, len(byTitle), name, strings.Join(keys, ", "))
	}
	return jobView{}, fmt.Errorf("run %s has no job %q (its jobs: %s)", run.ID, name, strings.Join(keys, ", "))
}

// getSummaries lists the summaries of a run's jobs, without their text; none from a
// coordinator too old to keep them (a 404: the caller has just read the run).
func getSummaries(ctx context.Context, c *apiClient, runID string) ([]summaryView, error) {
	var out []summaryView
	err := c.getJSON(ctx, "/api/v1/runs/"+runID+"/summaries", &out)
	var se *serverError
	if errors.As(err, &se) && se.Status == http.StatusNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get the summaries of run %s: %w", runID, err)
	}
	return out, nil
}

// printSummaries lists the jobs of run that have a summary, with its size and how many
// steps wrote it, and the command that prints one.
func printSummaries(w io.Writer, run runDetails, ss []summaryView, width int) {
	if len(ss) == 0 {
		return
	}
	titles := map[string]string{}
	for _, j := range run.Jobs {
		titles[j.ID] = j.title()
	}
	var b strings.Builder
	b.WriteString("summaries (gantry summary RUN JOB prints one)\n")
	for _, s := range ss {
		steps := "1 step"
		if len(s.Parts) != 1 {
			steps = fmt.Sprintf("%d steps", len(s.Parts))
		}
		line := fmt.Sprintf("  %s  %s from %s", cmp.Or(titles[s.JobID], s.Job), humanBytes(s.Bytes), steps)
		b.WriteString(elide(line, max(width, 40)))
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

// decodeSummaries reads the server's answer about summaries into v.
func decodeSummaries(raw []byte, v any) error {
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("read the server's answer: %w", err)
	}
	return nil
}
