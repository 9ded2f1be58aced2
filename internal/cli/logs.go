package cli

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// logsConfig is everything `gantry logs` acts on.
type logsConfig struct {
	clientConfig
	Job string
	// Run, when set, names the run (see parseRunRef) whose job Job names by key or name.
	Run      string
	Follow   bool
	Attempt  int
	AfterSeq int64
	// Step, when set, keeps only one step's lines: its name or its number from 1.
	Step string
}

func (a *app) logsCommand() *cobra.Command {
	var cfg logsConfig
	cmd := &cobra.Command{
		Use:   "logs JOB | logs RUN JOB",
		Short: "Print a job's log, or follow it live with -f",
		Long: "Logs prints the log of a job (its latest attempt unless --attempt says which):\n" +
			"a job id, as gantry submit and gantry runs get --json print them, or a run and\n" +
			"the job's key or name in it (gantry logs web#42 build). --step keeps one step's\n" +
			"lines: its name, or its number from 1 as gantry runs get --json lists steps.\n\n" +
			runRefHelp +
			"With -f the log is followed live until the job ends, across its retries when\n" +
			"no --attempt is given; a dropped connection resumes where it stopped. The exit\n" +
			"status is then the job's result: 0 success, 1 failed or cancelled. With\n" +
			"--json every line is printed as the API's JSON, one per line.\n\n" + configHelp,
		Example: "  gantry logs web#42 build\n" +
			"  gantry logs web#42 'test (go=1.26)' --step 2\n" +
			"  gantry logs 0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b\n" +
			"  gantry logs -f 0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b\n" +
			"  gantry logs --attempt 1 --after-seq 200 --json 0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b",
		Args: rangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Job = args[len(args)-1]
			if len(args) == 2 {
				cfg.Run = args[0]
			}
			return a.logs(cmd.Context(), cfg)
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	f := cmd.Flags()
	f.BoolVarP(&cfg.Follow, "follow", "f", false, "follow the log until the job ends; exit with its result")
	f.IntVar(&cfg.Attempt, "attempt", 0, "which attempt's log (default: the latest)")
	f.Int64Var(&cfg.AfterSeq, "after-seq", 0, "start after this line number")
	f.StringVar(&cfg.Step, "step", "", "only this step's lines: its name or its number from 1")
	return cmd
}

func (a *app) logs(ctx context.Context, cfg logsConfig) error {
	if cfg.Run != "" {
		if _, _, _, err := parseRunRef(cfg.Run); err != nil {
			return err
		}
	} else if _, err := uuid.Parse(cfg.Job); err != nil {
		return usagef("job id %q is not a UUID; name a job of a run as RUN JOB (gantry logs web#42 build)", cfg.Job)
	}
	if cfg.Attempt < 0 {
		return usagef("--attempt %d: want 1 or more", cfg.Attempt)
	}
	if cfg.AfterSeq < 0 {
		return usagef("--after-seq %d: want 0 or more", cfg.AfterSeq)
	}
	c, err := cfg.client()
	if err != nil {
		return err
	}
	if cfg.Run != "" {
		if cfg.Job, err = findRunJob(ctx, c, cfg.Run, cfg.Job); err != nil {
			return err
		}
	}
	keep, restart := func(logLine) bool { return true }, func() {}
	if cfg.Step != "" {
		f, err := newStepFilter(ctx, c, cfg.Job, cfg.Step)
		if err != nil {
			return err
		}
		keep, restart = f.keep, f.restart
	}
	w := bufio.NewWriter(a.stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // as the API writes lines: a log is not HTML
	emit := func(l logLine) {
		if !keep(l) {
			return
		}
		if cfg.JSON {
			_ = enc.Encode(l)
			return
		}
		if text, ok := l.display(); ok {
			w.WriteString(text)
			w.WriteByte('\n')
		}
	}
	if !cfg.Follow {
		return readLog(ctx, c, cfg.Job, cfg.Attempt, cfg.AfterSeq, emit)
	}

	attempt, after := cfg.Attempt, cfg.AfterSeq
	for {
		end, err := c.streamLog(ctx, cfg.Job, attempt, after, func(l logLine) {
			emit(l)
			// A live log is only live if it reaches the terminal as it comes.
			w.Flush()
		})
		if err != nil {
			return err
		}
		if cfg.Attempt != 0 || jobTerminal(end.Status) {
			return jobResult(end.Status)
		}
		// Another attempt follows: wait until it is claimed, then follow it from its start.
		next, status, err := waitNextAttempt(ctx, c, cfg.Job, end.Attempt)
		if err != nil {
			return err
		}
		if next == 0 {
			return jobResult(status)
		}
		w.Flush()
		fmt.Fprintf(a.stderr, "--- attempt %d ---\n", next)
		attempt, after = next, 0
		restart()
	}
}

// jobResult is the exit of a followed job: 0 when it succeeded.
func jobResult(status string) error {
	if status == "success" {
		return nil
	}
	return &exitError{code: exitFailure}
}

// waitNextAttempt polls job until an attempt after attempt was claimed, and returns its
// number; or 0 and the job's status when the job ended without another attempt.
func waitNextAttempt(ctx context.Context, c *apiClient, job string, attempt int) (int, string, error) {
	t := time.NewTicker(followPoll)
	defer t.Stop()
	for {
		var j jobView
		if err := c.getJSON(ctx, "/api/v1/jobs/"+job, &j); err != nil {
			return 0, "", fmt.Errorf("get job %s: %w", job, err)
		}
		if j.Attempt > attempt {
			return attempt + 1, j.Status, nil
		}
		if jobTerminal(j.Status) {
			return 0, j.Status, nil
		}
		select {
		case <-ctx.Done():
			return 0, "", ctx.Err()
		case <-t.C:
		}
	}
}

// logPage is how many lines one read of a log asks for.
const logPage = 10000

// readLog reads an attempt's stored lines after seq after, a page at a time.
func readLog(ctx context.Context, c *apiClient, job string, attempt int, after int64, line func(logLine)) error {
	for {
		q := url.Values{"after_seq": {strconv.FormatInt(after, 10)}, "limit": {strconv.Itoa(logPage)}}
		if attempt > 0 {
			q.Set("attempt", strconv.Itoa(attempt))
		}
		n, next, err := readLogPage(ctx, c, "/api/v1/jobs/"+job+"/logs?"+q.Encode(), func(l logLine) {
			line(l)
			after = l.Seq
		})
		if err != nil {
			return fmt.Errorf("read the log of job %s: %w", job, err)
		}
		if attempt == 0 {
			// The following pages must be of the same attempt, even if a new one starts.
			attempt = next
		}
		if n < logPage {
			return nil
		}
	}
}

// readLogPage reads one page of NDJSON lines and returns how many there were and the
// attempt the server read.
func readLogPage(ctx context.Context, c *apiClient, path string, line func(logLine)) (int, int, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	resp, err := c.send(ctx, http.MethodGet, path, nil, http.Header{"Accept": {"application/x-ndjson"}})
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	attempt, _ := strconv.Atoi(resp.Header.Get("X-Gantry-Attempt"))
	dec := json.NewDecoder(resp.Body)
	n := 0
	for {
		var l logLine
		if err := dec.Decode(&l); err == io.EOF {
			return n, attempt, nil
		} else if err != nil {
			return n, attempt, err
		}
		line(l)
		n++
	}
}

// findRunJob returns the id of the job of the run arg names whose key, or name as
// gantry runs get shows it, is job.
func findRunJob(ctx context.Context, c *apiClient, arg, job string) (string, error) {
	id, err := resolveRun(ctx, c, arg)
	if err != nil {
		return "", err
	}
	run, _, err := getRun(ctx, c, id)
	if err != nil {
		return "", err
	}
	j, err := findJob(run, job)
	if err != nil {
		return "", err
	}
	return j.ID, nil
}

// stepFilter keeps the lines of one step of a job's log: from the system line that
// starts the step ("step NAME", which the worker writes before each step it runs) to
// the line that starts or skips a later step.
type stepFilter struct {
	name string
	// nth is which of the steps so named it is, from 0.
	nth int
	// later are the start lines of the steps after it.
	later  map[string]bool
	seen   int
	inside bool
	done   bool
}

func newStepFilter(ctx context.Context, c *apiClient, job, step string) (*stepFilter, error) {
	var j struct {
		Steps []struct {
			Index int    `json:"index"`
			Name  string `json:"name"`
		} `json:"steps"`
	}
	if err := c.getJSON(ctx, "/api/v1/jobs/"+job, &j); err != nil {
		return nil, fmt.Errorf("get job %s: %w", job, err)
	}
	at := -1
	if n, err := strconv.Atoi(step); err == nil {
		if n < 1 || n > len(j.Steps) {
			return nil, usagef("--step %d: the job has %s, numbered from 1", n, countOf(len(j.Steps), "step", "steps"))
		}
		at = n - 1
	} else {
		for i, st := range j.Steps {
			if st.Name == step {
				at = i
				break
			}
		}
		if at < 0 {
			names := make([]string, len(j.Steps))
			for i, st := range j.Steps {
				names[i] = fmt.Sprintf("%d %s", i+1, st.Name)
			}
			return nil, usagef("--step %q: the job has no step so named; its steps: %s", step, strings.Join(names, ", "))
		}
	}
	f := &stepFilter{name: j.Steps[at].Name, later: map[string]bool{}}
	for i, st := range j.Steps {
		if i < at && st.Name == f.name {
			f.nth++
		}
		if i > at {
			f.later["step "+st.Name] = true
		}
	}
	return f, nil
}

func (f *stepFilter) keep(l logLine) bool {
	if f.done {
		return false
	}
	if l.Stream == "system" {
		if !f.inside && l.Text == "step "+f.name {
			if f.seen == f.nth {
				f.inside = true
				return true
			}
			f.seen++
			return false
		}
		if f.inside && (f.later[l.Text] || l.Text == "step "+f.name || f.skipsLater(l.Text)) {
			f.inside, f.done = false, true
			return false
		}
	}
	return f.inside
}

// restart readies the filter for another attempt's log.
func (f *stepFilter) restart() { f.seen, f.inside, f.done = 0, false, false }

// skipsLater says whether a system line tells that a later step was skipped.
func (f *stepFilter) skipsLater(text string) bool {
	head, _, ok := strings.Cut(text, ": skipped")
	return ok && f.later[head]
}
