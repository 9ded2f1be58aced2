package cli

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// runDetails is a run as GET /api/v1/runs/{id} answers it (and, without jobs, as the
// run list carries it).
type runDetails struct {
	ID      string `json:"id"`
	Status  string `json:"status"`
	Project string `json:"project"`
	Name    string `json:"name"`
	Trigger struct {
		Ref    string `json:"ref"`
		Branch string `json:"branch"`
		SHA    string `json:"sha"`
		Event  string `json:"event"`
	} `json:"trigger"`
	// RefVerified is nil from a server that does not say.
	RefVerified     *bool     `json:"ref_verified"`
	CreatedAt       time.Time `json:"created_at"`
	StartedAt       time.Time `json:"started_at"`
	FinishedAt      time.Time `json:"finished_at"`
	JobsTotal       int       `json:"jobs_total"`
	JobsFinished    int       `json:"jobs_finished"`
	CancelRequested bool      `json:"cancel_requested"`
	// Seq is the run's change feed position: ?since=Seq lists only jobs changed after it.
	Seq  int64     `json:"seq"`
	Jobs []jobView `json:"jobs"`
	// Errors say why a run failed before it had jobs: its pipeline file is invalid.
	Errors []serverDetail `json:"errors"`
	// Failure says why the run failed; nil when it did not.
	Failure *failureView `json:"failure"`
}

// jobView is a job of a run as the API shows it.
type jobView struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	Key         string    `json:"key"`
	DisplayName string    `json:"display_name"`
	Status      string    `json:"status"`
	Attempt     int       `json:"attempt"`
	MaxAttempts int       `json:"max_attempts"`
	FailureKind string    `json:"failure_kind"`
	ExitCode    *int      `json:"exit_code"`
	Reason      string    `json:"reason"` // why a skipped or cancelled job did not run
	WorkerID    string    `json:"worker_id"`
	QueuedAt    time.Time `json:"queued_at"`
	StartedAt   time.Time `json:"started_at"`
	FinishedAt  time.Time `json:"finished_at"`
	Needs       []string  `json:"needs"`
	// Waiting says why a job no worker holds has not started; nil otherwise.
	Waiting *waitingView `json:"waiting"`
}

// title is what a job is shown as: its name: from the definition, else its key.
func (j jobView) title() string {
	if j.DisplayName != "" {
		return j.DisplayName
	}
	return j.Key
}

// runTerminal reports whether a run status is final (until a user retries the run).
func runTerminal(status string) bool {
	return status == "success" || status == "failed" || status == "cancelled"
}

// jobTerminal reports whether a job status is final.
func jobTerminal(status string) bool {
	return runTerminal(status) || status == "skipped"
}

// elapsed is how long something that started at start ran: until end, or until now when
// it has not ended. Without a start it is negative (shown as "-").
func elapsed(start, end, now time.Time) time.Duration {
	if start.IsZero() {
		return -1
	}
	if end.IsZero() {
		end = now
	}
	return end.Sub(start)
}

// getRun reads run id with its jobs.
func getRun(ctx context.Context, c *apiClient, id string) (runDetails, []byte, error) {
	var r runDetails
	raw, err := c.getRaw(ctx, "/api/v1/runs/"+id, &r)
	if err != nil {
		return r, nil, fmt.Errorf("get run %s: %w", id, err)
	}
	return r, raw, nil
}

// runsListConfig is everything `gantry runs` acts on.
type runsListConfig struct {
	clientConfig
	Project string
	Status  string
	Ref     string
	Branch  string
	Event   string
	Actor   string
	Limit   int
	Cursor  string
}

func (a *app) runsCommand() *cobra.Command {
	var cfg runsListConfig
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List runs, newest first; show one with runs get",
		Long: "Runs lists the coordinator's runs, newest first, a page at a time: the id, name,\n" +
			"status, how long the run took and how long ago it was created. When more runs\n" +
			"follow, the command that lists the next page is printed on stderr.\n\n" + configHelp,
		Example: "  gantry runs\n" +
			"  gantry runs --status failed --project web --limit 20\n" +
			"  gantry runs get 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.runsList(cmd.Context(), cfg)
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	f := cmd.Flags()
	f.StringVar(&cfg.Project, "project", "", "only runs of this project")
	f.StringVar(&cfg.Status, "status", "", "only runs in this status: pending, running, success, failed or cancelled")
	f.StringVar(&cfg.Ref, "ref", "", "only runs whose trigger ref is exactly this (refs/heads/main)")
	f.StringVar(&cfg.Branch, "branch", "", "only runs of this branch (main)")
	f.StringVar(&cfg.Event, "event", "", "only runs of this event: push, pull_request, tag, schedule, dispatch, api...")
	f.StringVar(&cfg.Actor, "actor", "", "only runs started by this user or forge account")
	f.IntVar(&cfg.Limit, "limit", 20, "runs per page, 1 to 500")
	f.StringVar(&cfg.Cursor, "cursor", "", "the page after this run id (printed at the end of a full page)")

	var getCfg clientConfig
	get := &cobra.Command{
		Use:     "get RUN",
		Aliases: []string{"show"},
		Short:   "Show a run's jobs, wave by wave, with their status and durations",
		Long:    "Get shows a run and its jobs in waves: a job's wave comes after the waves of\nevery job it needs.\n\n" + configHelp,
		Example: "  gantry runs get 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b\n" +
			"  gantry runs show 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b --json | jq .status",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.runsGet(cmd.Context(), getCfg, args[0])
		},
	}
	a.clientFlags(get, &getCfg)
	cmd.AddCommand(get, a.runsRerunCommand())
	return cmd
}

func (a *app) runsList(ctx context.Context, cfg runsListConfig) error {
	switch cfg.Status {
	case "", "pending", "running", "success", "failed", "cancelled":
	default:
		return usagef("--status %q: want pending, running, success, failed or cancelled", cfg.Status)
	}
	if cfg.Limit < 1 || cfg.Limit > 500 {
		return usagef("--limit %d: want 1 to 500", cfg.Limit)
	}
	if cfg.Cursor != "" {
		if _, err := uuid.Parse(cfg.Cursor); err != nil {
			return usagef("--cursor %q is not a run id", cfg.Cursor)
		}
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	q := url.Values{}
	for k, v := range map[string]string{"project": cfg.Project, "status": cfg.Status, "ref": cfg.Ref, "cursor": cfg.Cursor,
		"branch": cfg.Branch, "event": cfg.Event, "actor": cfg.Actor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	q.Set("limit", strconv.Itoa(cfg.Limit))
	var page struct {
		Runs       []runDetails `json:"runs"`
		NextCursor string       `json:"next_cursor"`
	}
	raw, err := c.getRaw(ctx, "/api/v1/runs?"+q.Encode(), &page)
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	if len(page.Runs) == 0 {
		fmt.Fprintln(a.stdout, "no runs")
		return nil
	}
	writeRunList(a.stdout, page.Runs, a.outputWidth(), time.Now())
	if page.NextCursor != "" {
		fmt.Fprintf(a.stderr, "more: gantry runs --cursor %s\n", page.NextCursor)
	}
	return nil
}

// writeRunList prints runs as a table of width columns; names are elided to fit.
func writeRunList(w io.Writer, runs []runDetails, width int, now time.Time) {
	const idW, statusW, durW, ageW = 36, 9, 8, 4
	nameW := max(width-idW-statusW-durW-ageW-2*4-1, 8)
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s  %-*s  %-*s  %*s  %*s\n", idW, "ID", nameW, "NAME", statusW, "STATUS", durW, "DURATION", ageW, "AGE")
	for _, r := range runs {
		name := r.Name
		if name == "" {
			name = "-"
		}
		if r.Project != "" && r.Project != "default" {
			name = r.Project + "/" + name
		}
		fmt.Fprintf(&b, "%-*s  %s  %-*s  %*s  %*s\n", idW, r.ID, pad(elide(name, nameW), nameW), statusW, r.Status,
			durW, formatDuration(elapsed(r.StartedAt, r.FinishedAt, now)), ageW, formatAge(now.Sub(r.CreatedAt)))
	}
	io.WriteString(w, b.String())
}

func (a *app) runsGet(ctx context.Context, cfg clientConfig, id string) error {
	if _, err := uuid.Parse(id); err != nil {
		return usagef("run id %q is not a UUID", id)
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	run, raw, err := getRun(ctx, c, id)
	if err != nil {
		return err
	}
	if cfg.JSON {
		return writeRaw(a.stdout, raw)
	}
	as, err := getAnnotations(ctx, c, id)
	if err != nil {
		return err
	}
	ss, err := getSummaries(ctx, c, id)
	if err != nil {
		return err
	}
	printRunTree(a.stdout, run, a.outputWidth())
	if len(run.Errors) == 0 { // the tree already lists an invalid file's errors
		printFailure(a.stdout, run.Failure, a.outputWidth())
	}
	printAnnotations(a.stdout, as, a.outputWidth())
	printSummaries(a.stdout, run, ss, a.outputWidth())
	return nil
}

// jobWaves puts each job in its wave: 0 for a job that needs nothing, else one more than
// the latest wave of the jobs it needs. A need that names no job of the run is ignored.
func jobWaves(jobs []jobView) [][]jobView {
	byKey := make(map[string]int, len(jobs))
	for i, j := range jobs {
		byKey[j.Key] = i
	}
	wave := make([]int, len(jobs))
	done := make([]bool, len(jobs))
	var waveOf func(i int, depth int) int
	waveOf = func(i, depth int) int {
		if done[i] || depth > len(jobs) {
			return wave[i]
		}
		w := 0
		for _, n := range jobs[i].Needs {
			if k, ok := byKey[n]; ok {
				w = max(w, waveOf(k, depth+1)+1)
			}
		}
		wave[i], done[i] = w, true
		return w
	}
	var out [][]jobView
	for i := range jobs {
		w := waveOf(i, 0)
		for len(out) <= w {
			out = append(out, nil)
		}
		out[w] = append(out[w], jobs[i])
	}
	return out
}

// printRunTree prints a run and its jobs wave by wave, each job with its status and how
// long it ran, in width columns (long job keys are elided).
func printRunTree(w io.Writer, run runDetails, width int) {
	now := time.Now()
	width = max(width, 40)
	var b strings.Builder
	title := run.Name
	if title == "" {
		title = "run"
	}
	fmt.Fprintf(&b, "%s %s\n", elide(title, max(width-len(run.ID)-1, 8)), run.ID)
	facts := []string{run.Status}
	if run.CancelRequested && !runTerminal(run.Status) {
		facts[0] += " (cancelling)"
	}
	facts = append(facts, fmt.Sprintf("%d/%d jobs done", run.JobsFinished, run.JobsTotal))
	if d := elapsed(run.StartedAt, run.FinishedAt, now); d >= 0 {
		facts = append(facts, formatDuration(d))
	}
	if run.Project != "" {
		facts = append(facts, "project "+run.Project)
	}
	if ref := run.Trigger.Ref; ref != "" {
		if run.Trigger.SHA != "" {
			ref += "@" + run.Trigger.SHA
		}
		if run.RefVerified != nil && !*run.RefVerified {
			// Given by hand: it counts for no environment's branch rules, cache or status.
			ref += " (unverified)"
		}
		facts = append(facts, ref)
	}
	b.WriteString(elide(strings.Join(facts, " · "), width))
	b.WriteByte('\n')
	if len(run.Errors) > 0 {
		b.WriteString("the pipeline file is invalid:")
		b.WriteString((&serverError{Details: run.Errors}).detailLines())
		b.WriteByte('\n')
	}

	// key  status  duration  notes; the key gets what the others leave.
	const statusW, durW, fixedW = 9, 7, 5 + 2 + 9 + 2 + 7
	notes := make(map[string]string, len(run.Jobs))
	keyW, notesW := 0, 0
	for _, j := range run.Jobs {
		keyW = max(keyW, len([]rune(j.title())))
		var n []string
		if j.MaxAttempts > 1 && j.Attempt > 0 {
			n = append(n, fmt.Sprintf("attempt %d/%d", j.Attempt, j.MaxAttempts))
		}
		if j.ExitCode != nil && *j.ExitCode != 0 {
			n = append(n, fmt.Sprintf("exit %d", *j.ExitCode))
		}
		if j.FailureKind != "" && j.FailureKind != "failure" && j.FailureKind != j.Status {
			n = append(n, j.FailureKind)
		}
		if len(n) > 0 {
			notes[j.ID+"\x00"+j.Key] = "  " + strings.Join(n, ", ")
			notesW = max(notesW, len(notes[j.ID+"\x00"+j.Key]))
		}
		if j.Reason != "" {
			// Why a job did not run comes last and does not narrow the keys: a long
			// reason is cut at the line's end instead.
			notes[j.ID+"\x00"+j.Key] += "  " + j.Reason
		}
	}
	keyW = distinctWidth(jobTitles(run.Jobs), min(keyW, max(width-fixedW-notesW, 12)))
	for i, wave := range jobWaves(run.Jobs) {
		fmt.Fprintf(&b, "wave %d\n", i+1)
		for k, j := range wave {
			branch := "├─"
			if k == len(wave)-1 {
				branch = "└─"
			}
			line := fmt.Sprintf("  %s %s  %-*s  %*s%s", branch, pad(elide(j.title(), keyW), keyW), statusW, j.Status,
				durW, formatDuration(elapsed(j.StartedAt, j.FinishedAt, now)), notes[j.ID+"\x00"+j.Key])
			if r := []rune(line); len(r) > width {
				// Only the notes can still be too long: cut them at the end.
				line = string(r[:width-1]) + "…"
			}
			b.WriteString(strings.TrimRight(line, " "))
			b.WriteByte('\n')
		}
	}
	io.WriteString(w, b.String())
}
