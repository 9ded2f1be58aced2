package docker

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"

	"github.com/moby/moby/api/types/image"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/executor"
)

// A job whose steps run on the worker's host (the shell executor's) may have services,
// as GitHub's runner starts them for a job without a container: each a container on a
// network of the job's own (where they reach each other by name), its ports published
// on the worker's loopback, where the steps reach them. They carry the labels of every
// object the executor makes, so a worker that dies leaves them to the same sweeps.
// Unlike a job's container they hold no lease of the worker's (their process 1 is the
// image's), so a worker killed with SIGKILL leaves them running until a sweep.

// loopback is the only address service ports are published on: a service is the job's
// steps' to reach, not the network's.
var loopback = netip.MustParseAddr("127.0.0.1")

var _ executor.ServiceStarter = (*Docker)(nil)

// hostServices is the services of one job whose steps run on the worker's host.
type hostServices struct {
	s       *session
	running []executor.RunningService

	mu    sync.Mutex
	ended bool
}

// BeginServices starts the services of job j, whose steps run on the worker's host
// (j.Image is ""), on a network of the job's own, publishes their ports on 127.0.0.1
// ("HOST:CONTAINER" at HOST, a bare port at a free one), and waits for their health
// checks. On an error whatever it created is removed again.
func (d *Docker) BeginServices(ctx context.Context, j executor.Job) (executor.Services, error) {
	if j.WorkerID == "" {
		j.WorkerID = d.cfg.WorkerID
	}
	switch {
	case j.Image != "":
		return nil, fmt.Errorf("docker: job %s runs in image %s: Begin starts its services beside its container", j.ID, j.Image)
	case len(j.Services) == 0:
		return nil, fmt.Errorf("docker: job %s has no services", j.ID)
	case j.ID == "" || j.WorkerID == "":
		return nil, errors.New("docker: a job needs an ID and a WorkerID to label its objects")
	}
	if err := checkServices(j); err != nil {
		return nil, err
	}
	// A port that cannot be published fails the job before anything is created.
	for _, svc := range j.Services {
		for _, p := range svc.Ports {
			if _, _, err := publishedPort(p); err != nil {
				return nil, fmt.Errorf("service %s: port %q: %w", svc.Name, p, err)
			}
		}
	}
	s := &session{d: d, job: j, owner: endedKey(j.ID, j.Attempt)}
	h := &hostServices{s: s}
	if err := h.begin(ctx); err != nil {
		s.ended = true
		if endErr := s.remove(context.WithoutCancel(ctx)); endErr != nil {
			err = errors.Join(err, fmt.Errorf("clean up after the failed start: %w", endErr))
		}
		return nil, err
	}
	return h, nil
}

func (h *hostServices) begin(ctx context.Context) error {
	s, d, j := h.s, h.s.d, h.s.job
	imgs := map[string]image.InspectResponse{}
	if err := d.ensureImages(ctx, imgs, serviceImages(j.Services), j.Pull, j.RegistryAuth); err != nil {
		return err
	}
	base := objectName("gantry", j.ID, strconv.Itoa(j.Attempt), randomHex(3))
	if err := s.createNetwork(ctx, base); err != nil {
		return err
	}
	for _, svc := range j.Services {
		if err := s.startService(ctx, base, svc, imgs[svc.Image], true); err != nil {
			return err
		}
	}
	for i, id := range s.services {
		svc := j.Services[i]
		r, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
		if err != nil {
			return fmt.Errorf("service %s: inspect: %w", svc.Name, err)
		}
		rs := executor.RunningService{Name: svc.Name, ID: id, Network: s.networkID, Host: loopback.String(), Ports: map[string]string{}}
		var bound network.PortMap
		if ns := r.Container.NetworkSettings; ns != nil {
			bound = ns.Ports
		}
		for _, p := range svc.Ports {
			_, port, _ := publishedPort(p)
			hostPort := ""
			for _, b := range bound[port] {
				if b.HostIP == loopback {
					hostPort = b.HostPort
				}
			}
			if hostPort == "" {
				return fmt.Errorf("service %s: the engine did not publish its port %s on %s", svc.Name, port, loopback)
			}
			rs.Ports[port.Port()] = hostPort
		}
		h.running = append(h.running, rs)
	}
	return nil
}

// Running is the job's services as its steps reach them: at 127.0.0.1, each container
// port at the port published for it.
func (h *hostServices) Running() []executor.RunningService { return h.running }

// End removes the services and their network at once (a service gets no grace, as
// beside a job's container), before the job is reported: a port published at a fixed
// HOST stays taken until then, and the worker's next job may want it. A removal that
// fails is left to the periodic sweep.
func (h *hostServices) End(ctx context.Context) error {
	h.mu.Lock()
	if h.ended {
		h.mu.Unlock()
		return nil
	}
	h.ended = true
	h.mu.Unlock()
	s, d := h.s, h.s.d
	if err := s.remove(context.WithoutCancel(ctx)); err != nil {
		d.endMu.Lock()
		d.ending[s.owner] = true
		d.endMu.Unlock()
		return err
	}
	return nil
}

// publishedPort reads a service's port as [HOST:]CONTAINER[/PROTO]: the host port
// ("" for a free one) and the container's.
func publishedPort(p string) (string, network.Port, error) {
	hostPort, c, found := strings.Cut(p, ":")
	if !found {
		hostPort, c = "", p
	} else if n, err := strconv.Atoi(hostPort); err != nil || n < 1 || n > 65535 {
		return "", network.Port{}, fmt.Errorf("host port %q: want a number from 1 to 65535", hostPort)
	}
	port, err := network.ParsePort(c)
	if err != nil {
		return "", network.Port{}, err
	}
	if port.Num() == 0 {
		return "", network.Port{}, errors.New("port 0: want a number from 1 to 65535")
	}
	return hostPort, port, nil
}
