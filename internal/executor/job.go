package executor

import (
	"context"
	"io"
	"time"
)

// Job is what a job's steps run in, for executors that give each job an environment of
// its own (a container and its services, a pod). Shell and Sandbox need none of it.
type Job struct {
	// ID, Attempt and WorkerID name the job and who runs it; an executor labels every
	// object it creates with them, so that a later incarnation of the worker can find and
	// remove what a dead one left behind.
	ID       string
	Attempt  int
	WorkerID string
	// Workspace is the job's workspace on the worker's disk (checkout, artifacts in and
	// out). An executor makes it visible to the steps at WorkspacePath.
	Workspace string
	// Image is the job's image (NAME[:TAG|@sha256:DIGEST]); "" runs on the worker's host.
	Image string
	// Pull is "always", "if-not-present" (default when "") or "never".
	Pull string
	// User runs the steps as that user of the image ("" is the image's own).
	User       string
	Privileged bool
	// MilliCPU and Memory (bytes) limit the job's container; zero is no limit.
	MilliCPU int64
	Memory   int64
	// Services start before the first step and are reachable from the job's container by
	// their names.
	Services []Service
	// HostServices says that the job was written to run on the worker's host, its steps
	// reaching its Services on localhost at the ports they publish (Service.Ports),
	// and that it runs in Image only because the worker runs every job in an image of
	// its own. An executor whose job containers do not share localhost with their
	// services refuses such a job; one whose do (a pod's) runs it.
	HostServices bool
	// RegistryAuth holds credentials for pulling images, by registry host.
	RegistryAuth map[string]RegistryCredential
	// Grace is the SIGTERM-to-SIGKILL grace for stopping the job's containers.
	Grace time.Duration
	// Labels are the job's runs_on labels; an executor that places jobs on a cluster's
	// nodes maps them to node selectors and tolerations.
	Labels []string
	// Events, when not nil, receives what the user should see in the job's log while
	// Begin prepares the environment ("pod pending: 0/3 nodes are available: 3
	// Insufficient cpu"), one line a call. An executor calls it from Begin's goroutine
	// only, and never after Begin returns.
	Events func(msg string)
}

// Event sends msg to j.Events when it is set.
func (j Job) Event(msg string) {
	if j.Events != nil {
		j.Events(msg)
	}
}

// WorkspacePath is where a containerised job's steps see the workspace.
const WorkspacePath = "/workspace"

// Service is a container a job's steps talk to over the job's network.
type Service struct {
	Name    string   // the host name the job's steps reach it by
	Image   string   // NAME[:TAG|@sha256:DIGEST]
	Env     []string // KEY=VALUE
	Command []string // overrides the image's command when not empty
	// Ports are the service's container ports ("5432", "8080/tcp"). For steps on the
	// worker's host (ServiceStarter, Job.HostServices) each is published there, and may
	// name the host port: "15432:5432"; a bare one gets a free port.
	Ports []string
	// Healthcheck, when set, must pass before the first step starts.
	Healthcheck *Healthcheck
}

// Healthcheck is a command run in a service's container until it exits 0.
type Healthcheck struct {
	Command  []string
	Interval time.Duration
	Timeout  time.Duration
	Retries  int
}

// RunningService is a service as the job's steps reach it: what GitHub's
// job.services.<id> context tells.
type RunningService struct {
	Name string
	// ID and Network are its container's and its network's ids; "" where the executor
	// has none to tell.
	ID, Network string
	// Ports maps each of its container ports, as a number ("5432"), to the port the
	// steps reach it at: a port of the worker's 127.0.0.1 for steps on the worker's
	// host, the same port on the service's name for steps in a container.
	Ports map[string]string
	// Host is where the steps reach it: "127.0.0.1", or its name.
	Host string
}

// ServiceStarter is an executor that can start a job's services for steps that run on
// the worker's host, as GitHub starts them for a job without a container: each
// service's ports published on the worker's loopback, where the steps reach them.
type ServiceStarter interface {
	// BeginServices starts j.Services (j.Image is ""), waits for their health checks,
	// and returns them running. An error is the job's failure before its first step;
	// whatever was started is removed again first.
	BeginServices(ctx context.Context, j Job) (Services, error)
}

// Services is a job's running services (ServiceStarter).
type Services interface {
	ServiceLister
	// End stops and removes them. It is called once, whatever happened to the steps.
	End(ctx context.Context) error
}

// ServiceLister is a Session or Services that tells how its services run.
type ServiceLister interface {
	Running() []RunningService
}

// ContainerLister is a Session that tells the ids of the job's container and network
// (GitHub's job.container).
type ContainerLister interface {
	JobContainer() (id, network string)
}

// RegistryCredential is a user name and password (or token) for an image registry.
type RegistryCredential struct {
	Username string
	Password string
}

// JobExecutor is an Executor that prepares an environment per job. The agent calls Begin
// before a job's first step, runs every step through the Session, and ends it after the
// last one, whatever happened. An executor may implement it and still run steps
// without a Job through Run, on its host.
type JobExecutor interface {
	Executor
	// Begin prepares the job's environment: pulls images, starts the services and the
	// job's container. An error is the job's failure before its first step, with a
	// message the user can act on ("image gantry-test/go:1.26 not found and pull: never").
	Begin(ctx context.Context, j Job) (Session, error)
}

// Session is one job's environment.
type Session interface {
	// Run runs one step in the job's environment. Step.Dir is the workspace or a
	// directory inside it, as a path on the worker; the session maps it to where the
	// step sees it.
	Run(ctx context.Context, s Step) (Result, error)
	// End stops and removes everything Begin created, within the job's grace. It is
	// called once, also after a failed or cancelled job; a context whose cause is
	// ErrKillNow asks for no grace at all.
	End(ctx context.Context) error
}

// Fenced is a Session that fences itself: its environment kills the job's steps on its
// own once the worker stops telling it that the job's lease lasts, so that a worker that
// died or froze (SIGKILL, SIGSTOP, a paused container, a dead host) cannot leave them
// running beside the job's next attempt. A Session that does not implement it runs its
// steps only while the worker does (a shell's), or leaves that to its platform (a pod's).
type Fenced interface {
	// SetDeadline says when the worker itself stops the job's steps if its lease is not
	// renewed first: the lease's end by the worker's monotonic clock, less its margin. The
	// agent calls it after Begin and after every renewal; the environment kills the
	// steps about then unless told a later deadline, and at once when the worker is gone.
	// Until the first call, the environment gives the worker a generous time of its own.
	SetDeadline(t time.Time)
}

// Collector is a Session whose steps change a copy of the workspace rather than the
// worker's own (a pod's, on another machine). The agent calls Collect once after the
// last step of a job that was not cancelled, before it saves caches and uploads
// artifacts, which it reads from Job.Workspace as with any executor. An error means the
// worker's workspace may not hold what the steps made; it is left as it was.
type Collector interface {
	Collect(ctx context.Context) error
}

// HomeCopier is a Session whose steps' home directory is not on the worker's disk (a
// container's). The agent copies the paths of the job's caches under ~ into it after
// Begin, and out of it after the last step.
type HomeCopier interface {
	// CopyToHome extracts the tar stream r into the steps' home directory (HOME as the
	// steps get it), its entries owned by the steps' user.
	CopyToHome(ctx context.Context, r io.Reader) error
	// CopyFromHome returns rel, a slash-separated path in the steps' home directory
	// ("" for the directory itself), as a tar stream whose entries are named under
	// rel's last element (the home directory's own name for ""). An error that
	// wraps fs.ErrNotExist says there is no such path.
	CopyFromHome(ctx context.Context, rel string) (io.ReadCloser, error)
}
