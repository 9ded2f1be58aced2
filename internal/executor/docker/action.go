package docker

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/build"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor"
)

// buildTimeout bounds one build of an action's image, which runs on after the job that
// asked for it gave up, so that the next job finds the image.
const buildTimeout = 30 * time.Minute

// LabelAction is the label of the images built for GitHub docker actions: the action's
// uses.
const LabelAction = "gantry.action"

// ActionContainer is one run of a GitHub docker action's container (runs.using: docker,
// or a docker:// step): a container of its own beside the job's, as GitHub runs it.
type ActionContainer struct {
	// WorkerID, JobID and Attempt name the job the container runs for: it carries their
	// labels (a sweep finds it if its worker dies), and it joins the network of that
	// job's session, when the job has one, as GitHub runs it on the job's network.
	WorkerID, JobID string
	Attempt         int
	// Image is the image to run: pulled when the engine lacks it, or, with Build, built.
	Image string
	// Build, when set, is how Image is built when the engine lacks it.
	Build *ActionBuild
	// Entrypoint replaces the image's when set; Args are its arguments (nil: the
	// image's CMD).
	Entrypoint []string
	Args       []string
	Env        []string
	WorkingDir string
	// Mounts bind directories (or files) of the engine's host in the container. Those
	// not ReadOnly are disarmed once the container is gone (harden.go).
	Mounts []ActionMount
	// Stdout and Stderr take the container's output as it comes; nil discards it.
	Stdout, Stderr io.Writer
	// Grace is how long a cancelled container has between SIGTERM and SIGKILL;
	// executor.DefaultGrace when zero. A context ended with executor.ErrKillNow kills
	// it at once.
	Grace time.Duration
}

// ActionBuild is an action's Dockerfile and its build context, a directory of the
// worker's disk.
type ActionBuild struct {
	Context    string
	Dockerfile string // relative to Context
	// Uses labels the image (LabelAction).
	Uses string
	// Output takes the builder's output; nil discards it.
	Output io.Writer
}

// ActionMount binds Source, a path of the engine's host, at Target in the container.
type ActionMount struct {
	Source, Target string
	ReadOnly       bool
}

// RunAction runs an action's container to its end and removes it: creates it (building
// or pulling its image first when the engine lacks it), streams its output, and returns
// its exit code. A cancel stops it: SIGTERM, the grace, SIGKILL. The container runs
// hardened as a job's does (no new privileges, JobCapabilities), and what it leaves in
// its writable mounts is disarmed once it is gone.
func (d *Docker) RunAction(ctx context.Context, c ActionContainer) (executor.Result, error) {
	switch {
	case c.Image == "":
		return executor.Result{}, errors.New("docker: an action's container needs an image")
	case c.JobID == "":
		return executor.Result{}, errors.New("docker: an action's container needs its job's id to label it")
	}
	if c.Build != nil {
		if err := d.buildAction(ctx, c.Image, *c.Build); err != nil {
			return executor.Result{}, err
		}
	} else if _, err := d.ensureImage(ctx, c.Image, PullIfNotPresent, nil); err != nil {
		return executor.Result{}, err
	}
	job := executor.Job{ID: c.JobID, Attempt: c.Attempt, WorkerID: cmp.Or(c.WorkerID, d.cfg.WorkerID)}
	netMode, err := d.jobNetwork(ctx, job)
	if err != nil {
		return executor.Result{}, err
	}
	var mounts []mount.Mount
	for _, m := range c.Mounts {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}
	cfg := &container.Config{
		Image:        c.Image,
		Cmd:          c.Args,
		Env:          c.Env,
		WorkingDir:   c.WorkingDir,
		Labels:       d.labels(job, "action"),
		AttachStdout: true,
		AttachStderr: true,
	}
	if len(c.Entrypoint) > 0 {
		cfg.Entrypoint = c.Entrypoint
	}
	host := &container.HostConfig{Mounts: mounts, NetworkMode: netMode}
	harden(host, false)

	// The engine calls must outlive a cancel: the container still has to be stopped,
	// its exit code read, and it removed.
	actx := context.WithoutCancel(ctx)
	cli := d.cli
	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       objectName("gantry", job.ID, strconv.Itoa(job.Attempt), "action", randomHex(3)),
		Config:     cfg,
		HostConfig: host,
	})
	if err != nil {
		return executor.Result{}, fmt.Errorf("create the action's container of %s: %w", c.Image, err)
	}
	id := created.ID
	defer func() {
		rctx, cancel := context.WithTimeout(actx, apiTimeout)
		defer cancel()
		if _, err := cli.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			d.log.Warn("docker: remove an action's container; the sweep will", "container", id, "err", err)
		}
		for _, m := range c.Mounts {
			if m.ReadOnly {
				continue
			}
			if n, err := disarm(m.Source); err != nil {
				d.log.Warn("docker: disarm what an action's container left", "dir", m.Source, "err", err)
			} else if n > 0 {
				d.log.Info("docker: cleared set-user-ID and set-group-ID bits, file capabilities and device files an action's container left",
					"dir", m.Source, "files", n)
			}
		}
	}()

	att, err := cli.ContainerAttach(ctx, id, client.ContainerAttachOptions{Stream: true, Stdout: true, Stderr: true})
	if err != nil {
		return executor.Result{}, fmt.Errorf("attach to the action's container: %w", err)
	}
	defer att.Close()
	streamed := demux(att.Reader, c.Stdout, c.Stderr)
	// Waiting for the next exit is asked before the start, so that no exit is missed.
	wait := cli.ContainerWait(actx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := cli.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return executor.Result{}, fmt.Errorf("start the action's container of %s: %w", c.Image, err)
	}

	grace := cmp.Or(c.Grace, executor.DefaultGrace)
	var res executor.Result
	var code int64
	var waitErr error
	select {
	case r := <-wait.Result:
		code, waitErr = r.StatusCode, waitError(r)
	case err := <-wait.Error:
		waitErr = err
	case <-ctx.Done():
		if errors.Is(context.Cause(ctx), executor.ErrKillNow) {
			grace = 0
		}
		res.Cancelled = true
		code, waitErr = d.stopAction(actx, id, wait, grace)
	}
	timer := time.NewTimer(outputDrain)
	select {
	case <-streamed:
	case <-timer.C:
		att.Close() // unblocks the copy
		<-streamed
	}
	timer.Stop()
	if waitErr != nil {
		return res, fmt.Errorf("wait for the action's container: %w", waitErr)
	}
	res.ExitCode = int(code)
	if res.Cancelled && code > 128 && code <= 128+64 {
		res.ExitCode = -1
		res.Signal = syscall.Signal(code - 128).String()
	}
	return res, nil
}

// stopAction stops a running action's container: SIGTERM, the grace, then SIGKILL.
func (d *Docker) stopAction(ctx context.Context, id string, wait client.ContainerWaitResult, grace time.Duration) (int64, error) {
	kill := func(sig string) {
		kctx, cancel := context.WithTimeout(ctx, apiTimeout)
		defer cancel()
		if _, err := d.cli.ContainerKill(kctx, id, client.ContainerKillOptions{Signal: sig}); err != nil && !cerrdefs.IsNotFound(err) &&
			!cerrdefs.IsConflict(err) {
			d.log.Warn("docker: signal an action's container", "container", id, "signal", sig, "err", err)
		}
	}
	if grace > 0 {
		kill("SIGTERM")
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case r := <-wait.Result:
			return r.StatusCode, waitError(r)
		case err := <-wait.Error:
			return 0, err
		case <-timer.C:
		}
	}
	kill("SIGKILL")
	select {
	case r := <-wait.Result:
		return r.StatusCode, waitError(r)
	case err := <-wait.Error:
		return 0, err
	case <-time.After(apiTimeout):
		return 0, errors.New("the action's container did not exit after SIGKILL")
	}
}

func waitError(r container.WaitResponse) error {
	if r.Error != nil && r.Error.Message != "" {
		return errors.New(r.Error.Message)
	}
	return nil
}

// jobNetwork is the network an action's container of job j joins: the job's own, when
// its session made one, else the engine's default bridge, where the job's container is.
func (d *Docker) jobNetwork(ctx context.Context, j executor.Job) (container.NetworkMode, error) {
	f := client.Filters{}.
		Add("label", LabelJob+"="+j.ID).
		Add("label", LabelAttempt+"="+strconv.Itoa(j.Attempt)).
		Add("label", LabelIncarnation+"="+d.incarnation)
	ns, err := d.cli.NetworkList(ctx, client.NetworkListOptions{Filters: f})
	if err != nil {
		return "", fmt.Errorf("find the job's network: %w", err)
	}
	for _, n := range ns.Items {
		return container.NetworkMode(n.Name), nil
	}
	return "bridge", nil
}

// buildAction builds image from b unless the engine has it, once for all the jobs that
// ask at the same time. The build runs on a context of its own: one job giving up does
// not fail the others, and the next job finds the image.
func (d *Docker) buildAction(ctx context.Context, image string, b ActionBuild) error {
	if _, err := d.cli.ImageInspect(ctx, image); err == nil {
		return nil
	} else if !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("inspect image %s: %w", image, err)
	}
	out := b.Output
	if out == nil {
		out = io.Discard
	}
	ch := d.pulls.DoChan("build\x00"+image, func() (any, error) {
		bctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), buildTimeout)
		defer cancel()
		return nil, d.build(bctx, image, b, out)
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return fmt.Errorf("build the action's image from %s: %w", b.Dockerfile, r.Err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("build the action's image from %s: %w", b.Dockerfile, context.Cause(ctx))
	}
}

func (d *Docker) build(ctx context.Context, image string, b ActionBuild, out io.Writer) error {
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(executor.TarDir(pw, b.Context, true)) }()
	defer pr.Close()
	res, err := d.cli.ImageBuild(ctx, pr, client.ImageBuildOptions{
		Tags:        []string{image},
		Dockerfile:  filepath.ToSlash(b.Dockerfile),
		Remove:      true,
		ForceRemove: true,
		Labels:      map[string]string{LabelAction: b.Uses},
		// The classic builder takes the context as it is sent; BuildKit would need a
		// session.
		Version: build.BuilderV1,
	})
	if err != nil {
		return err
	}
	defer res.Body.Close()
	return readBuild(res.Body, out)
}

// readBuild copies the builder's output to out and returns the error it reports.
func readBuild(r io.Reader, out io.Writer) error {
	dec := json.NewDecoder(bufio.NewReader(r))
	for {
		var m struct {
			Stream      string `json:"stream"`
			Status      string `json:"status"`
			Error       string `json:"error"`
			ErrorDetail *struct {
				Message string `json:"message"`
			} `json:"errorDetail"`
		}
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return fmt.Errorf("read the builder's output: %w", err)
		}
		if m.ErrorDetail != nil && m.ErrorDetail.Message != "" {
			return errors.New(m.ErrorDetail.Message)
		}
		if m.Error != "" {
			return errors.New(m.Error)
		}
		if m.Stream != "" {
			_, _ = io.WriteString(out, m.Stream)
		} else if m.Status != "" {
			_, _ = io.WriteString(out, m.Status+"\n")
		}
	}
}

// ActionImageName is the name of the image built from an action's Dockerfile: repo (the
// action's repository, or any name) made one the engine takes, and tag (its content's
// hash), so that the image is built once per engine and content.
func ActionImageName(repo, tag string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(repo) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
	}
	name := strings.TrimSuffix(b.String(), "-")
	return "gantry-action/" + cmp.Or(name, "local") + ":" + tag
}
