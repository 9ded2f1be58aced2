package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// cancelStepSource is a step that records when its SIGTERM handler runs: it installs
// the handler, says it is ready by creating READY, and waits; the handler writes its own
// timestamp (unix nanos) to TERMED, through a rename so that a reader never sees half of
// it. The timestamp is taken in the handler, so what is measured ends where the step
// learns of the cancel, not where someone polling for the file does.
//
// Usage: cancelstep READY TERMED.
const cancelStepSource = `#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *termed;
static char tmp[4096];

static void term(int sig) {
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	long long ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
	/* Only async-signal-safe calls here: digits by hand, then write and rename. */
	char buf[32];
	int i = sizeof buf;
	do { buf[--i] = '0' + ns % 10; ns /= 10; } while (ns > 0);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) _exit(3);
	if (write(fd, buf + i, sizeof buf - i) < 0) _exit(3);
	close(fd);
	if (rename(tmp, termed) != 0) _exit(3);
	_exit(0);
}

int main(int argc, char **argv) {
	if (argc < 3) return 2;
	termed = argv[2];
	snprintf(tmp, sizeof tmp, "%s.tmp", termed);
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = term;
	if (sigaction(SIGTERM, &sa, NULL) != 0) return 3;
	int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0) return 3;
	close(fd);
	for (;;) pause();
}
`

// cancelScenario measures how soon a cancel reaches a running step.
func cancelScenario() Scenario {
	const name = "cancel"
	return Scenario{
		Name:   name,
		About:  "200 one-step runs cancelled one at a time while their step runs: cancel request -> the step's SIGTERM handler, through a real worker",
		Stores: []string{SQLite},
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			return withRig(ctx, o, name, store, func(g *rig, r *Result) error {
				step, err := compileC(ctx, g.dir, "cancelstep", cancelStepSource)
				if err != nil {
					return err
				}
				if _, err := g.startWorker(1); err != nil {
					return err
				}
				n := o.scaled(200)
				r.Params["cancels"] = n
				r.countJobs(n, "the jobs run and cancelled")
				files := filepath.Join(g.dir, "cancel")
				if err := os.MkdirAll(files, 0o755); err != nil {
					return fmt.Errorf("make the directory of the steps' files: %w", err)
				}
				cl := g.c.client()
				lat := make([]time.Duration, 0, n)
				for i := range n {
					d, err := cancelOne(ctx, g, cl, step, files, i)
					if err != nil {
						return fmt.Errorf("cancel %d of %d: %w", i+1, n, err)
					}
					lat = append(lat, d)
				}
				r.addLatency("cancel", lat, time.Second)
				r.Notes = append(r.Notes, "from the POST /api/v1/runs/{id}/cancel request to the timestamp the step's "+
					"SIGTERM handler takes (a C program, ready before the cancel is sent): the API, the store, the "+
					"worker's control long-poll, the agent and the executor's SIGTERM to the process group; one run at "+
					"a time, on the default lease timings (a heartbeat every 10 s), so a heartbeat never carries the cancel")
				return nil
			})
		},
	}
}

// cancelOne runs one job until its step is ready, cancels the run, and returns the time
// from the cancel request to the step's SIGTERM handler.
func cancelOne(ctx context.Context, g *rig, cl *client, step, dir string, i int) (time.Duration, error) {
	ready, termed := filepath.Join(dir, fmt.Sprintf("ready-%d", i)), filepath.Join(dir, fmt.Sprintf("termed-%d", i))
	// exec, so that the step is the program itself: a shell between them, killed by the
	// same SIGTERM, would end the step, and the group's SIGKILL that follows could beat
	// the program's handler.
	def := fmt.Sprintf("name: cancel\njobs:\n  slow:\n    cancel_grace: 5s\n    steps: [{run: \"exec '%s' '%s' '%s'\"}]\n", step, ready, termed)
	run, err := cl.submit(ctx, []byte(def))
	if err != nil {
		return 0, err
	}
	exists := func(path string) func() (bool, error) {
		return func() (bool, error) {
			_, err := os.Stat(path)
			if errors.Is(err, os.ErrNotExist) {
				return false, nil
			}
			return err == nil, err
		}
	}
	if err := waitFor(ctx, time.Minute, "the step to be ready", g.processes(), exists(ready)); err != nil {
		return 0, err
	}
	sent := time.Now()
	if err := cl.post(ctx, "/api/v1/runs/"+run.ID+"/cancel", nil, nil); err != nil {
		return 0, fmt.Errorf("cancel run %s: %w", run.ID, err)
	}
	if err := waitFor(ctx, 30*time.Second, "the step's SIGTERM handler", g.processes(), exists(termed)); err != nil {
		return 0, err
	}
	raw, err := os.ReadFile(termed)
	if err != nil {
		return 0, fmt.Errorf("read the step's SIGTERM time: %w", err)
	}
	ns, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read the step's SIGTERM time from %s: %w", termed, err)
	}
	end, err := g.waitRun(ctx, cl, run.ID, 30*time.Second)
	if err != nil {
		return 0, err
	}
	if end.Status != "cancelled" {
		return 0, fmt.Errorf("run %s is %s, want cancelled", run.ID, end.Status)
	}
	return time.Unix(0, ns).Sub(sent), nil
}
