package docker

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/gantry-ci/gantry/internal/executor"
	"golang.org/x/sys/unix"
)

// mountNosuid makes dir a bind mount of itself with nosuid and nodev, keeping the flags
// of the mount it is on (ro, noexec, the atime ones). mounted is false when dir's mount
// had both flags already, and nothing was mounted. It needs CAP_SYS_ADMIN; the engine
// sees the mount only when it shares this process's mount namespace.
func mountNosuid(dir string) (mounted bool, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	const want = unix.ST_NOSUID | unix.ST_NODEV
	if st.Flags&want == want {
		return false, nil
	}
	if os.Geteuid() != 0 {
		return false, errors.New("the worker does not run as root")
	}
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return false, fmt.Errorf("bind %s on itself: %w", dir, err)
	}
	// The statfs flags of a mount are the MS_ flags of the same names.
	keep := uintptr(st.Flags & (unix.ST_RDONLY | unix.ST_NOEXEC | unix.ST_NOATIME | unix.ST_NODIRATIME | unix.ST_RELATIME))
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_NOSUID|unix.MS_NODEV|keep, ""); err != nil {
		_ = unix.Unmount(dir, unix.MNT_DETACH)
		return false, fmt.Errorf("remount %s nosuid,nodev: %w", dir, err)
	}
	return true, nil
}

// unmount takes dir's mount down, even while something has a file open there.
func unmount(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}

// fileCapability is the extended attribute that holds a file's capabilities.
const fileCapability = "security.capability"

// dropFileCapabilities removes p's file capabilities, if it has any; dropped says so.
func dropFileCapabilities(p string) (dropped bool, err error) {
	if _, err := unix.Lgetxattr(p, fileCapability, nil); err != nil {
		if errors.Is(err, unix.ENODATA) || errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return false, fmt.Errorf("read the capabilities of %s: %w", p, err)
	}
	if err := unix.Lremovexattr(p, fileCapability); err != nil && !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOENT) {
		return false, fmt.Errorf("remove the capabilities of %s: %w", p, err)
	}
	return true, nil
}

// sweepWorkspaceDirs takes down the workspace directories' mounts of dead processes (a
// worker killed with SIGKILL), on this machine, in this mount namespace, wherever their
// work dirs are: what is left in them is disarmed first, and a directory left empty is
// removed. own is this Docker value's, spared. It returns how many it took down.
func sweepWorkspaceDirs(own string, log *slog.Logger) int {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	seen := map[string]bool{}
	var dead []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := executor.UnescapeMountinfo(fields[4])
		if mp == own || seen[mp] || !strings.HasPrefix(filepath.Base(mp), workspaceDirPrefix) {
			continue
		}
		seen[mp] = true
		b, err := os.ReadFile(filepath.Join(mp, processFile))
		if err != nil || !processGone(strings.TrimSpace(string(b))) {
			continue
		}
		dead = append(dead, mp)
	}
	for _, mp := range dead {
		if _, err := disarm(mp); err != nil {
			log.Warn("docker: disarm a dead worker's container workspaces", "dir", mp, "err", err)
		}
		// Stacked mounts, two workers' on one directory, go one by one.
		for range 8 {
			if unix.Unmount(mp, unix.MNT_DETACH) != nil {
				break
			}
		}
		if err := removeWorkspaceDir(mp, false); err != nil {
			log.Warn("docker: remove a dead worker's container workspaces directory", "dir", mp, "err", err)
		}
		log.Info("docker: took down a dead worker's container workspaces mount", "dir", mp)
	}
	return len(dead)
}
