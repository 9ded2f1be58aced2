package cli

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// runDetails is a run as GET /api/v1/runs/{id} answers it (and, without jobs, as the
// run list carries it).
type runDetails struct {
	ID     string `json:"id"`
	Status string `json:"status"`
	// Number is the run's number in its project; 0 from a server older than numbers.
	Number  int    `json:"number"`
	Project string `json:"project"`
	Name    string `json:"name"`
	Trigger struct {
		Ref    string `json:"ref"`
		Branch string `json:"branch"`
		Tag    string `json:"tag"`
		SHA    string `json:"sha"`
		Event  string `json:"event"`
		Actor  string `json:"actor"`
		// WorkflowRun is the run whose activity started this one (event workflow_run).
		WorkflowRun *struct {
			Name       string `json:"name"`
			Number     int    `json:"number"`
			Action     string `json:"action"`
			Conclusion string `json:"conclusion"`
		} `json:"workflow_run"`
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
	// State is, in a list, what the run does: its status, or waiting_approval, queued or
	// retrying while it waits.
	State string `json:"state"`
	// Reopened lists, in a re-run's answer, the jobs it reopened; nil from a server older
	// than that field.
	Reopened []string `json:"reopened_jobs"`
}

// reopenedCount is how many jobs a re-run reopened: as its answer lists them, or, from an
// older server, the jobs not finished in the run as it answered.
func reopenedCount(run runDetails) int {
	if run.Reopened != nil {
		return len(run.Reopened)
	}
	n := 0
	for _, j := range run.Jobs {
		if !jobTerminal(j.Status) {
			n++
		}
	}
	return n
}

// listStatus is the STATUS of a run in gantry runs: what it waits for while no job runs,
// else its status.
func listStatus(r runDetails) string {
	switch r.State {
	case "waiting_approval":
		return "approval"
	case "queued", "retrying":
		return r.State
	}
	return string(r.Status)
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
		Long: "Runs lists the coordinator's runs, newest first, a page at a time: each run's\n" +
			"PROJECT#NUMBER (which gantry runs get, cancel, retry and logs take), name, status,\n" +
			"branch or tag, commit, event, who started it, how long it took and how long ago it\n" +
			"was created. When more runs follow, the command that lists the next page is\n" +
			"printed on stderr; --json has the ids.\n\n" + configHelp,
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
		Long:    "Get shows a run and its jobs in waves: a job's wave comes after the waves of\nevery job it needs.\n\n" + runRefHelp + configHelp,
		Example: "  gantry runs get web#42\n" +
			"  gantry runs get 0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b\n" +
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

// writeRunList prints runs as a table of width columns: each run's PROJECT#NUMBER, name,
// status (or what it waits for: approval, queued, retrying), branch or tag, short commit, event, actor, duration and age. Names and refs
// share what the other columns leave and are elided to fit.
func writeRunList(w io.Writer, runs []runDetails, width int, now time.Time) {
	const statusW, shaW, durW, ageW, gaps = 9, 7, 8, 4, 2 * 8
	runW, eventW, actorW := len("RUN"), len("EVENT"), len("ACTOR")
	type row struct{ run, name, ref, sha, event, actor string }
	rows := make([]row, len(runs))
	for i, r := range runs {
		rw := row{run: runLabel(r), name: cmp.Or(r.Name, "-"), ref: cmp.Or(r.Trigger.Tag, r.Trigger.Branch, r.Trigger.Ref, "-"),
			sha: cmp.Or(sha7(r.Trigger.SHA), "-"), event: cmp.Or(r.Trigger.Event, "-"), actor: cmp.Or(r.Trigger.Actor, "-")}
		if len(rw.run) > 36 {
			rw.run = elide(rw.run, 36)
		}
		runW = max(runW, utf8.RuneCountInString(rw.run))
		eventW = max(eventW, min(utf8.RuneCountInString(rw.event), 12))
		actorW = max(actorW, min(utf8.RuneCountInString(rw.actor), 12))
		rows[i] = rw
	}
	rest := max(width-runW-statusW-shaW-eventW-actorW-durW-ageW-gaps-1, 16)
	nameW, refW := rest-rest/2, rest/2
	var b strings.Builder
	fmt.Fprintf(&b, "%s  %s  %-*s  %s  %-*s  %s  %s  %*s  %*s\n", pad("RUN", runW), pad("NAME", nameW), statusW, "STATUS",
		pad("REF", refW), shaW, "SHA", pad("EVENT", eventW), pad("ACTOR", actorW), durW, "DURATION", ageW, "AGE")
	for i, r := range runs {
		rw := rows[i]
		line := fmt.Sprintf("%s  %s  %-*s  %s  %-*s  %s  %s  %*s  %*s", pad(rw.run, runW), pad(elide(rw.name, nameW), nameW), statusW,
			listStatus(r), pad(elide(rw.ref, refW), refW), shaW, rw.sha, pad(elide(rw.event, eventW), eventW), pad(elide(rw.actor, actorW), actorW),
			durW, formatDuration(elapsed(r.StartedAt, r.FinishedAt, now)), ageW, formatAge(now.Sub(r.CreatedAt)))
		b.WriteString(line)
		b.WriteByte('\n')
	}
	io.WriteString(w, b.String())
}

// sha7 is a commit's first 7 hex digits, as forges show it.
func sha7(sha string) string {
	if len(sha) > 7 {
		return sha[:7]
	}
	return sha
}

func (a *app) runsGet(ctx context.Context, cfg clientConfig, arg string) error {
	if _, _, _, err := parseRunRef(arg); err != nil {
		return err
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	id, err := resolveRun(ctx, c, arg)
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
	head := run.ID
	if run.Number > 0 {
		head = runLabel(run) + " " + run.ID
	}
	fmt.Fprintf(&b, "%s %s\n", elide(title, max(width-len(head)-1, 8)), head)
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
	if e := run.Trigger.Event; e != "" {
		ev := e
		if w := run.Trigger.WorkflowRun; w != nil {
			// What started it: "workflow_run of build #12 completed success".
			ev += " of " + w.Name
			if w.Number > 0 {
				ev += " #" + strconv.Itoa(w.Number)
			}
			ev += " " + strings.TrimSpace(w.Action+" "+w.Conclusion)
		}
		if run.Trigger.Actor != "" {
			ev += " by " + run.Trigger.Actor
		}
		facts = append(facts, ev)
	}
	// Facts are never cut: one that does not fit goes on the next line.
	line := ""
	for _, f := range facts {
		switch {
		case line == "":
			line = f
		case utf8.RuneCountInString(line)+3+utf8.RuneCountInString(f) > width:
			b.WriteString(line + "\n")
			line = f
		default:
			line += " · " + f
		}
	}
	b.WriteString(line)
	b.WriteByte('\n')
	if len(run.Errors) > 0 {
		b.WriteString("the pipeline file is invalid:")
		b.WriteString((&serverError{Details: run.Errors}).detailLines())
		b.WriteByte('\n')
	}

	// key  status  duration  notes; the key gets what the others leave.
	const statusW, durW, fixedW = 9, 7, 5 + 2 + 9 + 2 + 7
	notes := make(map[string]string, len(run.Jobs))
	reasons := map[string]string{}
	keyW, notesW := 0, 0
	for _, j := range run.Jobs {
		keyW = max(keyW, len([]rune(j.title())))
		var n []string
		if j.MaxAttempts > 1 && j.Attempt > 0 {
			n = append(n, fmt.Sprintf("attempt %d/%d", j.Attempt, j.MaxAttempts))
		}
		if j.ExitCode != nil && *j.ExitCode != 0 && j.Status != "cancelled" {
			// A cancelled job's process was stopped: its exit code (-1) says nothing more.
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
			// Why a job did not run comes last and does not narrow the keys: a reason
			// that does not fit goes on a line of its own.
			reasons[j.ID+"\x00"+j.Key] = j.Reason
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
			if why := reasons[j.ID+"\x00"+j.Key]; why != "" {
				if utf8.RuneCountInString(line)+2+utf8.RuneCountInString(why) <= width {
					line += "  " + why
				} else {
					rail := "│"
					if k == len(wave)-1 {
						rail = " "
					}
					line = strings.TrimRight(line, " ") + "\n  " + rail + "    " + why
				}
			}
			b.WriteString(strings.TrimRight(line, " "))
			b.WriteByte('\n')
		}
	}
	io.WriteString(w, b.String())
}
