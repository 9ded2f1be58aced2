package bench

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gantry-ci/gantry/internal/source/sourcetest"
)

// hookPipeline is the pipeline file of the webhook scenarios' repository: one job of one
// step, with no on:, so every push runs it.
const hookPipeline = "name: hooks\njobs:\n  build:\n    steps: [{run: \"test -f README\"}]\n"

// zeroSHA is the before of a push that made its branch.
var zeroSHA = strings.Repeat("0", 40)

// hookProject is a git repository on disk that the scenario made (pushed to with the git
// binary, read by the coordinator over file://), connected to a project of the
// coordinator that takes its GitHub webhooks.
type hookProject struct {
	cl     *client
	name   string
	secret string
	bare   string
	work   string // a clone that commits and pushes
	env    []string
	pushes int
}

// newHookRepo makes a bare repository under dir holding the pipeline file and a README,
// and a clone of it that pushes.
func newHookRepo(ctx context.Context, dir string) (*hookProject, error) {
	h := &hookProject{bare: filepath.Join(dir, "repo.git"), work: filepath.Join(dir, "work"), env: sourcetest.Env(dir)}
	if _, err := h.git(ctx, "init", "--quiet", "--bare", "-b", "main", h.bare); err != nil {
		return nil, err
	}
	if _, err := h.git(ctx, "init", "--quiet", "-b", "main", h.work); err != nil {
		return nil, err
	}
	for name, content := range map[string]string{".gantry.yml": hookPipeline, "README": "bench\n"} {
		if err := os.WriteFile(filepath.Join(h.work, name), []byte(content), 0o644); err != nil {
			return nil, fmt.Errorf("write %s of the repository: %w", name, err)
		}
	}
	for _, args := range [][]string{
		{"add", "-A"}, {"commit", "--quiet", "-m", "first"}, {"remote", "add", "origin", h.bare},
		{"push", "--quiet", "origin", "HEAD:refs/heads/main"},
	} {
		if _, err := h.git(ctx, append([]string{"-C", h.work}, args...)...); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// git runs the git binary with the repository's environment and returns its trimmed
// output.
func (h *hookProject) git(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = h.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("git %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out)), nil
}

// connect makes the coordinator's project of the repository at url, a GitHub one with a
// webhook secret.
func (h *hookProject) connect(ctx context.Context, c *coordinator, name, url string, conns int) error {
	h.cl, h.name, h.secret = newClient(c.base, conns), name, "bench-webhook-secret-"+name
	err := h.cl.post(ctx, "/api/v1/projects", map[string]any{
		"name": name, "repo_url": url, "provider": "github", "webhook_secret": h.secret,
	}, nil)
	if err != nil {
		return fmt.Errorf("create project %s of %s: %w", name, url, err)
	}
	return nil
}

// push commits a change to one file in the clone and pushes it to main, and returns the
// branch's commit before and after.
func (h *hookProject) push(ctx context.Context) (before, after string, err error) {
	h.pushes++
	if before, err = h.git(ctx, "-C", h.work, "rev-parse", "HEAD"); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(filepath.Join(h.work, "change.txt"), []byte(strconv.Itoa(h.pushes)+"\n"), 0o644); err != nil {
		return "", "", fmt.Errorf("write the change of push %d: %w", h.pushes, err)
	}
	for _, args := range [][]string{
		{"add", "change.txt"}, {"commit", "--quiet", "-m", "push " + strconv.Itoa(h.pushes)},
		{"push", "--quiet", "origin", "HEAD:refs/heads/main"},
	} {
		if _, err := h.git(ctx, append([]string{"-C", h.work}, args...)...); err != nil {
			return "", "", err
		}
	}
	if after, err = h.git(ctx, "-C", h.work, "rev-parse", "HEAD"); err != nil {
		return "", "", err
	}
	return before, after, nil
}

// pushPayload is a GitHub push webhook's body, with the fields GitHub documents for it
// that Gantry reads.
func (h *hookProject) pushPayload(ref, before, after string) ([]byte, error) {
	return json.Marshal(map[string]any{
		"ref": ref, "before": before, "after": after, "created": before == zeroSHA, "deleted": false,
		"forced": false, "compare": "",
		"head_commit": map[string]any{"id": after, "message": "push", "modified": []string{"change.txt"}},
		"commits": []any{map[string]any{"id": after, "message": "push", "added": []string{},
			"removed": []string{}, "modified": []string{"change.txt"}}},
		"repository": map[string]any{"full_name": "bench/" + h.name, "name": h.name, "clone_url": "file://" + h.bare,
			"default_branch": "main"},
		"pusher": map[string]any{"name": "bench", "email": "bench@gantry.invalid"},
		"sender": map[string]any{"login": "bench"},
	})
}

// deliver POSTs a signed GitHub push webhook of before..after with the delivery id given,
// and returns the runs it started; anything but a 202 is an error. Each delivery reports
// a push to a branch named after it: the same commit pushed to main again within
// api.HookResendWindow would be answered as a resend of the first, with no new run.
func (h *hookProject) deliver(ctx context.Context, before, after, delivery string) ([]string, error) {
	body, err := h.pushPayload("refs/heads/bench-"+delivery, before, after)
	if err != nil {
		return nil, err
	}
	mac := hmac.New(sha256.New, []byte(h.secret))
	mac.Write(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.cl.base+"/api/v1/hooks/github/"+h.name, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/bench")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", delivery)
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := h.cl.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("deliver webhook %s: %w", delivery, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return nil, fmt.Errorf("deliver webhook %s: read the answer: %w", delivery, err)
	}
	var ans struct {
		Runs   []string `json:"runs"`
		Reason string   `json:"reason"`
	}
	if resp.StatusCode != http.StatusAccepted || json.Unmarshal(raw, &ans) != nil || len(ans.Runs) == 0 {
		return nil, fmt.Errorf("deliver webhook %s of %s: HTTP %d, want 202 with a run: %s", delivery, after, resp.StatusCode, bytes.TrimSpace(raw))
	}
	return ans.Runs, nil
}

// claimTimes are when the simulated workers got each run's first job.
type claimTimes struct {
	mu sync.Mutex
	at map[string]chan time.Time
}

func newClaimTimes() *claimTimes { return &claimTimes{at: map[string]chan time.Time{}} }

func (c *claimTimes) ch(run string) chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := c.at[run]
	if ch == nil {
		ch = make(chan time.Time, 1)
		c.at[run] = ch
	}
	return ch
}

// record keeps the first claim of run; a claim may come before the webhook's answer.
func (c *claimTimes) record(run string, at time.Time) {
	select {
	case c.ch(run) <- at:
	default:
	}
}

// wait returns when run's first job was claimed.
func (c *claimTimes) wait(ctx context.Context, co *coordinator, run string, within time.Duration) (time.Time, error) {
	select {
	case at := <-c.ch(run):
		return at, nil
	case <-co.exited:
		return time.Time{}, co.failure("exited")
	case <-time.After(within):
		return time.Time{}, fmt.Errorf("no worker claimed a job of run %s within %s", run, within)
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	}
}

// hooksLatencyScenario pushes commits one at a time, each followed by its webhook, and
// measures from the webhook's POST to the run's job in a worker's hands.
func hooksLatencyScenario() Scenario {
	const name = "hooks-latency"
	return Scenario{
		Name: name,
		About: "200 pushes to a git repository, one at a time, each followed by its signed GitHub webhook: " +
			"POST -> the run's job claimed by a simulated worker, with the coordinator's mirror warm",
		Stores: []string{SQLite, Postgres},
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			return withCoordinator(ctx, o, name, store, func(c *coordinator, r *Result) error {
				n := o.scaled(200)
				r.Params["pushes"] = n
				r.countJobs(n+1, "the runs' jobs, one a webhook, the first push's included")
				h, err := newHookRepo(ctx, c.dir)
				if err != nil {
					return err
				}
				if err := h.connect(ctx, c, "app", "file://"+h.bare, 2); err != nil {
					return err
				}
				claims := newClaimTimes()
				stats := &simStats{onClaim: claims.record}
				stop := startPool(ctx, c.base, "sim", 2, 1, nil, 0, nil, stats)
				defer stop()
				var toRunning, answers []time.Duration
				// Push 0 makes the coordinator's mirror (a clone); the others find it warm
				// and fetch only their commit, as the pushes of a live repository do.
				for i := range n + 1 {
					// The bench's git pushes are the repository's, not the workers' work.
					var before, after string
					err := r.setup(func() (err error) {
						before, after, err = h.push(ctx)
						return err
					})
					if err != nil {
						return err
					}
					sent := time.Now()
					runs, err := h.deliver(ctx, before, after, fmt.Sprintf("latency-%d", i))
					if err != nil {
						return err
					}
					answered := time.Since(sent)
					at, err := claims.wait(ctx, c, runs[0], time.Minute)
					if err != nil {
						return err
					}
					if i > 0 {
						toRunning, answers = append(toRunning, at.Sub(sent)), append(answers, answered)
					}
				}
				r.addLatency("webhook to running", toRunning, 200*time.Millisecond)
				r.addLatency("webhook answer", answers, 0)
				r.Notes = append(r.Notes, "webhook to running: from sending the POST of a signed GitHub push webhook to "+
					"the claim answer holding the run's job in a simulated worker's hands (it long-polls, idle): the "+
					"signature, the incremental fetch of the pushed commit into the coordinator's warm mirror from a "+
					"file:// repository, reading .gantry.yml at that commit, the run's creation and dispatch; "+
					"webhook answer: the POST's round trip (202). The first push, which clones the mirror, is not counted")
				return stats.err()
			})
		},
	}
}

// hooksThroughputScenario sends webhooks of commits the coordinator's mirror holds from
// several senders at once, each a delivery of its own, and counts those accepted.
func hooksThroughputScenario() Scenario {
	const name = "hooks-throughput"
	return Scenario{
		Name:   name,
		About:  "2,000 signed GitHub push webhooks of commits already in the coordinator's mirror, from 8 concurrent senders, each a distinct delivery",
		Stores: []string{SQLite, Postgres},
		Run: func(ctx context.Context, o *Options, store string) (*Result, error) {
			return withCoordinator(ctx, o, name, store, func(c *coordinator, r *Result) error {
				const senders, commits = 8, 8
				n := o.scaled(2000)
				r.Params["webhooks"], r.Params["senders"], r.Params["commits"] = n, senders, commits
				r.countJobs(n+1, "the jobs the webhooks created, the warming one's included")
				r.cpu.workers = noWorkers
				h, err := newHookRepo(ctx, c.dir)
				if err != nil {
					return err
				}
				if err := h.connect(ctx, c, "app", "file://"+h.bare, senders+2); err != nil {
					return err
				}
				type push struct{ before, after string }
				pushes := make([]push, commits)
				for i := range pushes {
					if pushes[i].before, pushes[i].after, err = h.push(ctx); err != nil {
						return err
					}
				}
				// One webhook fetches every commit pushed into the mirror.
				last := pushes[commits-1]
				if _, err := h.deliver(ctx, last.before, last.after, "warm"); err != nil {
					return err
				}
				created0, err := c.client().metricValue(ctx, "gantry_jobs_created_total", "")
				if err != nil {
					return err
				}
				m, err := meter(c.pid)
				if err != nil {
					return err
				}
				var (
					next, accepted atomic.Int64
					latency        samples
					wg             sync.WaitGroup
					errs           = make(chan error, senders)
				)
				began := time.Now()
				for range senders {
					wg.Go(func() {
						for i := next.Add(1) - 1; i < int64(n); i = next.Add(1) - 1 {
							p := pushes[i%commits]
							sent := time.Now()
							if _, err := h.deliver(ctx, p.before, p.after, fmt.Sprintf("throughput-%d", i)); err != nil {
								errs <- err
								return
							}
							latency.add(time.Since(sent))
							accepted.Add(1)
						}
					})
				}
				wg.Wait()
				elapsed := time.Since(began)
				close(errs)
				if err := <-errs; err != nil {
					return err
				}
				cores, rss, err := m.end()
				if err != nil {
					return err
				}
				created, err := c.client().metricValue(ctx, "gantry_jobs_created_total", "")
				if err != nil {
					return err
				}
				jobs := created - created0
				if int64(jobs) != accepted.Load() {
					return fmt.Errorf("%d webhooks accepted created %v jobs, want one each", accepted.Load(), jobs)
				}
				r.add("webhooks/s", float64(accepted.Load())/elapsed.Seconds(), "per s", nil)
				r.add("jobs created", jobs, "", nil)
				r.addLatency("webhook answer", latency.take(), 0)
				r.add("coordinator CPU", cores*100, "% of a core", nil)
				r.add("coordinator RSS", float64(rss)/mib, "MiB", nil)
				r.Notes = append(r.Notes, "webhooks/s: 202 answers per second, each webhook a delivery of its own "+
					"(so a run of its own) of one of 8 commits the mirror holds: the signature, reading .gantry.yml at "+
					"the commit and creating the run and its job; no worker takes the jobs, so this is intake alone; "+
					"jobs created: from the coordinator's gantry_jobs_created_total; coordinator CPU is the server "+
					"process's own, without the git processes it runs to read the pipeline file")
				return nil
			})
		},
	}
}
