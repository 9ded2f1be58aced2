package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor"
)

// Healthcheck defaults, for the fields a service leaves zero.
const (
	DefaultHealthInterval = time.Second
	DefaultHealthTimeout  = 10 * time.Second
	DefaultHealthRetries  = 60
)

// startService starts one service on the job's network, reachable by its name, and
// waits for its healthcheck to pass. publish publishes its ports on the worker's
// 127.0.0.1 (publishedPort), for steps on the worker's host.
func (s *session) startService(ctx context.Context, net string, svc executor.Service, img image.InspectResponse, publish bool) error {
	d, j := s.d, s.job
	name := objectName(net, "svc", svc.Name)
	vm, err := s.imageVolumes(ctx, name, img)
	if err != nil {
		return fmt.Errorf("service %s: %w", svc.Name, err)
	}
	cfg := &container.Config{
		Image:    svc.Image,
		Hostname: svc.Name,
		Env:      append([]string{}, svc.Env...),
		Labels:   d.labels(j, "service"),
	}
	if len(svc.Command) > 0 {
		cfg.Cmd = append([]string{}, svc.Command...)
	}
	host := &container.HostConfig{NetworkMode: container.NetworkMode(net), Mounts: vm}
	if len(svc.Ports) > 0 {
		cfg.ExposedPorts = network.PortSet{}
		for _, p := range svc.Ports {
			hostPort, port, err := publishedPort(p)
			if err == nil && hostPort != "" && !publish {
				err = errors.New("a job in a container reaches its services' ports by their names; HOST:CONTAINER is for a job on the worker's host")
			}
			if err != nil {
				return fmt.Errorf("service %s: port %q: %w", svc.Name, p, err)
			}
			cfg.ExposedPorts[port] = struct{}{}
			if publish {
				if host.PortBindings == nil {
					host.PortBindings = network.PortMap{}
				}
				host.PortBindings[port] = append(host.PortBindings[port], network.PortBinding{HostIP: loopback, HostPort: hostPort})
			}
		}
	}
	c, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:             name,
		Config:           cfg,
		HostConfig:       host,
		NetworkingConfig: networkEndpoint(net, svc.Name),
	})
	if err != nil {
		return fmt.Errorf("create service %s of %s: %w", svc.Name, svc.Image, err)
	}
	s.services = append(s.services, c.ID)
	if _, err := d.cli.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("start service %s of %s: %w", svc.Name, svc.Image, err)
	}
	if svc.Healthcheck == nil || len(svc.Healthcheck.Command) == 0 {
		return nil
	}
	return s.waitHealthy(ctx, c.ID, svc)
}

// waitHealthy runs the service's healthcheck in its container until it exits 0, the
// retries are spent, or the service exits.
func (s *session) waitHealthy(ctx context.Context, id string, svc executor.Service) error {
	hc := svc.Healthcheck
	interval, timeout, retries := hc.Interval, hc.Timeout, hc.Retries
	if interval <= 0 {
		interval = DefaultHealthInterval
	}
	if timeout <= 0 {
		timeout = DefaultHealthTimeout
	}
	if retries <= 0 {
		retries = DefaultHealthRetries
	}
	var last string
	for try := 1; ; try++ {
		if err := s.serviceRunning(ctx, id, svc); err != nil {
			return err
		}
		code, out, err := s.execOnce(ctx, id, "", hc.Command, timeout)
		if err != nil {
			// The service may have exited between the check above and the exec, which
			// the engine then refuses: say that, not the engine's "is not running".
			if exited := s.serviceRunning(ctx, id, svc); exited != nil {
				return exited
			}
			return fmt.Errorf("service %s: run healthcheck %q: %w", svc.Name, strings.Join(hc.Command, " "), err)
		}
		if code == 0 {
			return nil
		}
		if code < 0 {
			last = fmt.Sprintf("timed out after %s", timeout)
		} else {
			last = fmt.Sprintf("exit %d", code)
		}
		if out = strings.TrimSpace(out); out != "" {
			last += ": " + lastLines(out, 5)
		}
		if try >= retries {
			return fmt.Errorf("service %s is not healthy: healthcheck %q failed %d times, last %s",
				svc.Name, strings.Join(hc.Command, " "), try, last)
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("service %s: waiting for its healthcheck: %w", svc.Name, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// serviceRunning fails with the service's exit code and last log lines when its
// container is no longer running.
func (s *session) serviceRunning(ctx context.Context, id string, svc executor.Service) error {
	r, err := s.d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return fmt.Errorf("service %s: inspect: %w", svc.Name, err)
	}
	if r.Container.State != nil && r.Container.State.Running {
		return nil
	}
	code := 0
	if r.Container.State != nil {
		code = r.Container.State.ExitCode
	}
	msg := fmt.Sprintf("service %s (%s) exited with code %d before it was healthy", svc.Name, svc.Image, code)
	if logs := s.tailLogs(ctx, id); logs != "" {
		msg += "; its last output: " + logs
	}
	return fmt.Errorf("%s", msg)
}

func (s *session) tailLogs(ctx context.Context, id string) string {
	rc, err := s.d.cli.ContainerLogs(ctx, id, client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true, Tail: "10"})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var b bytes.Buffer
	_, _ = stdcopy.StdCopy(&b, &b, rc)
	return lastLines(strings.TrimSpace(b.String()), 10)
}

// execOnce runs cmd in container id as user ("" is the container's) and returns its
// exit code and output; -1 when it ran past timeout (the engine cannot kill an exec; it
// is left to end by itself or with its container).
func (s *session) execOnce(ctx context.Context, id, user string, cmd []string, timeout time.Duration) (int, string, error) {
	cli := s.d.cli
	ex, err := cli.ExecCreate(ctx, id, client.ExecCreateOptions{User: user, Cmd: cmd, AttachStdout: true, AttachStderr: true})
	if err != nil {
		return 0, "", err
	}
	att, err := cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return 0, "", err
	}
	defer att.Close()
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = stdcopy.StdCopy(&out, &out, att.Reader)
	}()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-copied:
	case <-t.C:
		att.Close()
		<-copied
		return -1, out.String(), nil
	case <-ctx.Done():
		att.Close()
		<-copied
		return 0, "", context.Cause(ctx)
	}
	// The stream ends when the process does; the engine may record the exit a moment
	// later.
	deadline := time.Now().Add(timeout)
	for {
		r, err := cli.ExecInspect(ctx, ex.ID, client.ExecInspectOptions{})
		if err != nil {
			return 0, "", err
		}
		if !r.Running {
			return r.ExitCode, out.String(), nil
		}
		if time.Now().After(deadline) {
			return -1, out.String(), nil
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
