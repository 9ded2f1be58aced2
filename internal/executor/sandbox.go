package executor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// ErrNoSandbox is returned when bubblewrap is not installed.
var ErrNoSandbox = errors.New("the sandbox executor needs bubblewrap (bwrap): install the bubblewrap package")

// Sandbox runs steps like Shell, inside bubblewrap: new pid, ipc, uts and network
// namespaces, no capabilities, the host's system directories (/usr, /bin, /sbin, /lib*,
// /etc, /opt, /nix, /sys) read-only and nothing else of the host's tree, so /root,
// /home, /run, /var, /srv and /mnt are not there. Only the workspace and a private /tmp
// are writable. A step that sets Network keeps the host's network. Steps never run as
// root: a worker that runs as root runs them as User, or as DefaultSandboxUser.
type Sandbox struct {
	// Containment and User are as for Shell.
	Containment *Containment
	User        *User
}

// Contained is as for Shell.
func (s Sandbox) Contained() bool { return s.Containment.EndsAll() }

// DefaultSandboxUser is the account a root worker's sandbox steps run as when it names
// none (User, --step-user). Root, even without capabilities, owns the files only root
// may read (0600 and 0700, owner root) and reads them through the read-only binds:
// /etc/gantry/secrets.key, /etc/docker/key.json. An unprivileged uid does not.
const DefaultSandboxUser = "nobody"

// nobodyUID is nobody's uid and gid where the system has no such account.
const nobodyUID = 65534

var defaultSandboxUser = sync.OnceValue(func() *User {
	if u, err := LookupUser(DefaultSandboxUser); err == nil && u.UID != 0 {
		return u
	}
	return &User{Name: DefaultSandboxUser, UID: nobodyUID, GID: nobodyUID}
})

// ErrSandboxRoot is Run's error for a sandbox told to run its steps as root.
var ErrSandboxRoot = errors.New("the sandbox does not run steps as root (uid 0): name an unprivileged --step-user")

// StepUser is who the sandbox runs steps as: User; DefaultSandboxUser when the worker
// runs as root and User is nil; nil when the worker is an unprivileged user already and
// the steps run as it.
func (sb Sandbox) StepUser() *User {
	if sb.User != nil {
		return sb.User
	}
	if os.Geteuid() != 0 {
		return nil
	}
	return defaultSandboxUser()
}

var _ Executor = Sandbox{}

// sandboxDirs are the host directories a step sees, read-only: what builds need to find
// the shell, compilers, libraries and configuration. An allowlist rather than the
// host's root with holes in it, so a directory we did not think of (a mounted volume,
// a service's data) stays out.
var sandboxDirs = []string{"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/nix", "/sys"}

// sandboxMasked are secrets inside sandboxDirs. Steps run as the worker's user, often
// root, so file modes do not keep these from them.
var sandboxMasked = []string{"/etc/shadow", "/etc/gshadow", "/etc/ssl/private"}

// sandboxHome is the step's HOME when the worker's HOME is not inside the workspace,
// and with it not visible or not writable in the sandbox.
const sandboxHome = "/tmp/home"

// Run runs the step in a sandbox. The sandbox's processes stay in the step's process
// group, so cancelling kills them all, and bubblewrap dies with its parent.
func (sb Sandbox) Run(ctx context.Context, s Step) (Result, error) {
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
	ws, err := filepath.Abs(s.Dir)
	if err != nil {
		return Result{}, fmt.Errorf("sandbox: resolve workspace %s: %w", s.Dir, err)
	}
	if ws == "/" {
		return Result{}, fmt.Errorf("sandbox: the workspace cannot be the root directory")
	}
	user := sb.StepUser()
	if user != nil && user.UID == 0 {
		return Result{}, ErrSandboxRoot
	}
	if user != nil {
		// bubblewrap, as the user, binds the workspace and the step files by their
		// paths: say so here rather than as a bubblewrap error in the step's log.
		for _, dir := range append([]string{ws}, s.Binds...) {
			if err := user.CanReach(dir); err != nil {
				return Result{}, fmt.Errorf("sandbox: %w", err)
			}
		}
	}
	env, newHome := sandboxEnv(s.Env, ws)
	s.Env = env
	args := append([]string{bwrap}, sandboxArgs(ws, s.Network, newHome)...)
	for _, dir := range s.Binds {
		// After the root is made read-only: a bind made later stays writable.
		args = append(args, "--bind", dir, dir)
	}
	args = append(args, "--")
	return run(ctx, s, append(args, inner...), runOptions{cont: sb.Containment, user: user, sandboxed: true})
}

// sandboxArgs are bubblewrap's options for a step with workspace ws. Mounts apply in
// order, so the workspace comes after /tmp's tmpfs and stays visible when it lives
// under /tmp, and the root is made read-only last.
func sandboxArgs(ws string, network, newHome bool) []string {
	args := []string{
		"--unshare-pid", "--unshare-ipc", "--unshare-uts",
		"--die-with-parent",
		// Root in the sandbox must not be root on the host: without this a step could
		// unmount or remount what hides the host from it.
		"--cap-drop", "ALL",
	}
	if !network {
		args = append(args, "--unshare-net")
	}
	for _, dir := range sandboxDirs {
		fi, err := os.Lstat(dir)
		if err != nil {
			continue
		}
		if fi.Mode()&os.ModeSymlink != 0 {
			// Merged /usr: /bin -> usr/bin. Keep the link if it stays inside what we
			// bind; otherwise bind what it points to.
			real, err := filepath.EvalSymlinks(dir)
			if err != nil {
				continue // dangling
			}
			if target, err := os.Readlink(dir); err == nil && inSandboxDirs(real) {
				args = append(args, "--symlink", target, dir)
				continue
			}
		}
		args = append(args, "--ro-bind", dir, dir)
	}
	for _, p := range sandboxMasked {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.IsDir():
			args = append(args, "--tmpfs", p)
		default:
			args = append(args, "--ro-bind", "/dev/null", p)
		}
	}
	// /etc/resolv.conf is often a link into /run, which the sandbox does not have.
	if real, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && !inSandboxDirs(real) {
		args = append(args, "--ro-bind", real, real)
	}
	args = append(args,
		"--dev", "/dev",
		"--proc", "/proc",
		"--tmpfs", "/tmp",
		"--symlink", "../tmp", "/var/tmp",
	)
	if newHome {
		args = append(args, "--dir", sandboxHome)
	}
	return append(args,
		"--bind", ws, ws,
		"--chdir", ws,
		"--remount-ro", "/",
	)
}

// sandboxEnv is env with HOME, and TMPDIR, pointed at writable places in the sandbox when
// they are outside the workspace. newHome says whether HOME was changed.
func sandboxEnv(env []string, ws string) (out []string, newHome bool) {
	out = make([]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME" && !within(v, ws):
			kv, newHome = "HOME="+sandboxHome, true
		case k == "TMPDIR" && !within(v, ws):
			kv = "TMPDIR=/tmp"
		}
		out = append(out, kv)
	}
	return out, newHome
}

func inSandboxDirs(p string) bool {
	for _, dir := range sandboxDirs {
		if within(p, dir) {
			return true
		}
	}
	return false
}

// within reports whether path p is dir or inside it.
func within(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && filepath.IsAbs(p) && rel != ".." && !strings.HasPrefix(rel, "../")
}
