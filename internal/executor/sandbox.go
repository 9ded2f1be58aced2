package executor

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
)

// ErrNoSandbox is returned when bubblewrap is not installed.
var ErrNoSandbox = errors.New("the sandbox executor needs bubblewrap (bwrap): install the bubblewrap package")

// Sandbox runs steps like Shell, inside bubblewrap: new pid, ipc, uts and network
// namespaces, the host's root read-only, and only the workspace and a private /tmp
// writable. A step that sets Network keeps the host's network.
type Sandbox struct{}

var _ Executor = Sandbox{}

// Run runs the step in a sandbox. The sandbox's processes stay in the step's process
// group, so cancelling kills them all, and bubblewrap dies with its parent.
func (Sandbox) Run(ctx context.Context, s Step) (Result, error) {
	inner, err := shellArgs(s.Shell, s.Script)
	if err != nil {
		return Result{}, err
	}
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		return Result{}, ErrNoSandbox
	}
	if s.Dir == "" {
		return Result{}, fmt.Errorf("sandbox: a workspace directory is required")
	}
	args := []string{bwrap,
		"--unshare-pid", "--unshare-ipc", "--unshare-uts",
		"--die-with-parent",
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
		"--bind", s.Dir, s.Dir,
		"--chdir", s.Dir,
	}
	if !s.Network {
		args = append(args, "--unshare-net")
	}
	args = append(args, "--")
	return run(ctx, s, append(args, inner...))
}
