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
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"
)

// logsConfig is everything `gantry logs` acts on.
type logsConfig struct {
	clientConfig
	Job      string
	Follow   bool
	Attempt  int
	AfterSeq int64
}

func (a *app) logsCommand() *cobra.Command {
	var cfg logsConfig
	cmd := &cobra.Command{
		Use:   "logs JOB",
		Short: "Print a job's log, or follow it live with -f",
		Long: "Logs prints the log of a job (its latest attempt unless --attempt says which);\n" +
			"the job ids are printed by gantry submit and gantry runs get --json.\n\n" +
			"With -f the log is followed live until the job ends, across its retries when\n" +
			"no --attempt is given; a dropped connection resumes where it stopped. The exit\n" +
			"status is then the job's result: 0 success, 1 failed or cancelled. With\n" +
			"--json every line is printed as the API's JSON, one per line.\n\n" + configHelp,
		Example: "  gantry logs 0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b\n" +
			"  gantry logs -f 0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b\n" +
			"  gantry logs --attempt 1 --after-seq 200 --json 0196a1c2-3b4d-7e5f-8a9b-1c1d2e3f4a5b",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg.Job = args[0]
			return a.logs(cmd.Context(), cfg)
		},
	}
	a.clientFlags(cmd, &cfg.clientConfig)
	f := cmd.Flags()
	f.BoolVarP(&cfg.Follow, "follow", "f", false, "follow the log until the job ends; exit with its result")
	f.IntVar(&cfg.Attempt, "attempt", 0, "which attempt's log (default: the latest)")
	f.Int64Var(&cfg.AfterSeq, "after-seq", 0, "start after this line number")
	return cmd
}

func (a *app) logs(ctx context.Context, cfg logsConfig) error {
	if _, err := uuid.Parse(cfg.Job); err != nil {
		return usagef("job id %q is not a UUID", cfg.Job)
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
	w := bufio.NewWriter(a.stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // as the API writes lines: a log is not HTML
	emit := func(l logLine) {
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
