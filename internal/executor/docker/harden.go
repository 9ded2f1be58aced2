package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"

	"github.com/moby/moby/api/types/container"
)

// A job's container runs someone else's code as root, often, on the worker's host kernel,
// with the job's workspace, a directory of the worker's disk, bound in it. What it must
// not do is leave there a file that gives a process of the host more privileges than its
// user's: a set-user-ID root binary that a step of a --step-user worker, or any other user
// of the machine, runs as root. Four things keep it from that:
//
//   - No new privileges, and few capabilities. The container runs with no-new-privileges
//     (a set-user-ID binary or a file capability raises nothing, whatever the mount) and
//     with every capability dropped but JobCapabilities: no device files (MKNOD), no file
//     capabilities (SETFCAP), no raw sockets (NET_RAW).
//   - A private, nosuid,nodev directory. Container jobs' workspaces are made in a
//     directory of the executor's (WorkspaceDir), mode 0700, that only the worker's user
//     enters: a container can open up its own workspace (chmod /workspace), not the
//     directory above it, which it does not see. Where the worker may (root, in the
//     engine's mount namespace), the directory is a mount of its own with nosuid and
//     nodev, which the engine's bind mounts of the workspaces under it keep: the
//     containers see /workspace nosuid,nodev too. (Docker 20.10 has no bind mount option
//     for that, and a local volume's "o=bind,nosuid" is lost: the kernel ignores flags on
//     a bind mount but for a remount, which the engine makes only for "ro".)
//   - Nothing leaves armed. Once a job's container is gone, its workspace loses every
//     set-user-ID and set-group-ID bit, file capability and device file (disarm), before
//     anything else may use it: a workspace kept after a failure included. Artifacts and
//     caches never carried them: they keep permission bits only, and regular files,
//     directories and symbolic links.
//   - A privileged container (container: {options: {privileged: true}}) is the operator's
//     opt-in (Config.AllowPrivileged): it gets every capability, as before, and its
//     workspace is disarmed all the same.

// JobCapabilities are the capabilities a job's container keeps; every other is dropped.
// They are what builds need as root in their own container: package managers (dpkg, apk,
// rpm) and tar extracting as root give files to other users (CHOWN), write and chmod
// files they do not own (DAC_OVERRIDE, FOWNER), and drop to an unprivileged user for
// downloads and scripts (SETUID, SETGID, as gosu, su-exec and apt's _apt do); a step runs
// test servers on low ports (NET_BIND_SERVICE). KILL lets the executor, as root, stop
// the steps of a job whose container.user is another user. Left out of the engine's
// default set: FSETID (a set-group-ID bit survives a chmod by a non-member), MKNOD
// (device files), NET_RAW (raw sockets: spoofing on the bridge; the engine lets ping use
// ICMP sockets without it), SETFCAP (file capabilities), SETPCAP, SYS_CHROOT and
// AUDIT_WRITE.
var JobCapabilities = []string{
	"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FOWNER", "CAP_KILL", "CAP_NET_BIND_SERVICE", "CAP_SETGID", "CAP_SETUID",
}

// harden sets what keeps a job's container from gaining privileges: no-new-privileges,
// and JobCapabilities only. A privileged container is the operator's choice, left as
// the engine makes it.
func harden(host *container.HostConfig, privileged bool) {
	if privileged {
		return
	}
	host.SecurityOpt = append(host.SecurityOpt, "no-new-privileges:true")
	host.CapDrop = []string{"ALL"}
	host.CapAdd = append([]string{}, JobCapabilities...)
}

// disarm takes from the tree at dir everything that would give a process of the host
// more privileges than its user's when it runs or opens a file there: set-user-ID and
// set-group-ID bits (cleared), file capabilities (removed) and device files (deleted).
// Symbolic links are not followed. It is called once the job's container is gone, so
// nothing it ran changes the tree meanwhile; files removed under it meanwhile (the
// worker removing the workspace) are no error. It returns how many files it changed.
func disarm(dir string) (int, error) {
	n := 0
	var errs []error
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			errs = append(errs, err)
			if d != nil && d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		t := d.Type()
		switch {
		case t&fs.ModeSymlink != 0:
			return nil
		case t&fs.ModeDevice != 0:
			if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			} else {
				n++
			}
			return nil
		case !t.IsRegular() && !t.IsDir():
			return nil // pipes and sockets grant nothing
		}
		info, err := d.Info()
		if err != nil {
			if !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			return nil
		}
		changed := false
		if m := info.Mode(); m&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
			if err := os.Chmod(p, m.Perm()|m&fs.ModeSticky); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
			changed = true
		}
		if t.IsRegular() {
			dropped, err := dropFileCapabilities(p)
			if err != nil {
				errs = append(errs, err)
			}
			changed = changed || dropped
		}
		if changed {
			n++
		}
		return nil
	})
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("disarm %s: %w", dir, errors.Join(errs...))
	}
	return n, nil
}

// workspaceDirPrefix starts the name of the directory a Docker value makes for its jobs'
// workspaces (WorkspaceDir).
const workspaceDirPrefix = "gantry-containers-"

// processFile, in a workspace directory, names the process that made it (LabelProcess's
// form), so that another process can tell that it is dead and take its mount down.
const processFile = ".gantry-process"

// makeWorkspaceDir makes the directory for the jobs' workspaces in parent ("" is the
// temp dir): mode 0700, and a nosuid,nodev mount of its own where this process may make
// one. nosuid says whether the directory is on such a mount, mounted whether this
// process made it.
func makeWorkspaceDir(parent string, log *slog.Logger) (dir string, nosuid, mounted bool, err error) {
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err = os.MkdirTemp(parent, workspaceDirPrefix)
	if err != nil {
		return "", false, false, fmt.Errorf("make the directory of the container jobs' workspaces: %w", err)
	}
	if p := thisProcess(); p != "" {
		if err := os.WriteFile(filepath.Join(dir, processFile), []byte(p+"\n"), 0o600); err != nil {
			_ = os.Remove(dir)
			return "", false, false, fmt.Errorf("make the directory of the container jobs' workspaces: %w", err)
		}
	}
	mounted, err = mountNosuid(dir)
	if err != nil {
		log.Info("docker: container jobs' workspaces are not on a nosuid,nodev mount; they are in a directory only this worker's user enters, "+
			"their containers run with no-new-privileges, and set-user-ID bits are cleared when a job ends", "dir", dir, "reason", err)
		return dir, false, false, nil
	}
	return dir, true, mounted, nil
}

// removeWorkspaceDir takes dir's mount down and removes it when nothing is left in it
// but its process file (a failed job's workspace may be kept there).
func removeWorkspaceDir(dir string, mounted bool) error {
	var err error
	if mounted {
		err = unmount(dir)
	}
	_ = os.Remove(filepath.Join(dir, processFile))
	// A directory that is not empty holds a kept workspace: it stays, disarmed, mode 0700.
	if rerr := os.Remove(dir); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && !errors.Is(rerr, syscall.ENOTEMPTY) {
		err = errors.Join(err, rerr)
	}
	return err
}
