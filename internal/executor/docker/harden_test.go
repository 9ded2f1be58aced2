package docker_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
)

// jobCapEff is CapEff of a job's container's root: docker.JobCapabilities, CHOWN (0),
// DAC_OVERRIDE (1), FOWNER (3), KILL (5), SETGID (6), SETUID (7) and NET_BIND_SERVICE (10).
const jobCapEff = "00000000000004eb"

// TestSetuidWorkspaceChain follows an attack on the worker's host link by link. A container job's
// step, root in its container, copies a binary into its workspace and makes it
// set-user-ID root (and tries a device file), so that a process of the worker's host, a
// step of a --step-user worker running as nobody, runs it as root and reads the root-only
// secrets key. Each link must fail on its own:
//
//  1. In the container, the binary raises nothing: the container has no-new-privileges,
//     only docker.JobCapabilities (no MKNOD: no device file), and sees /workspace
//     nosuid,nodev.
//  2. On the host, while the job runs, nobody cannot reach the binary (the workspaces'
//     directory is the worker's alone), and where it could, the mount is nosuid.
//  3. Once the job has ended, the binary has no set-user-ID bit left: nobody running it
//     is nobody.
//
// A control shows the binary does raise its runner to root where nothing stops it.
func TestSetuidWorkspaceChain(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("the chain needs root, as the worker of --step-user does: run the tests as root")
	}
	nobody, err := executor.LookupUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	cli := dockertest.Client(t)
	img := dockertest.PrivProbeImage(t, "gantry-test/privprobe:1")
	probe := dockertest.PrivProbe(t)
	workerID := "test-" + executortest.Token(t)[4:]
	dockertest.NoLeftovers(t, cli, workerID)

	// A work dir every user may pass through, as a --step-user worker's must be.
	work := t.TempDir()
	for _, dir := range []string{filepath.Dir(work), work} {
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	secret := filepath.Join(work, "secrets.key")
	if err := os.WriteFile(secret, []byte("s3cret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	d, err := docker.New(t.Context(), docker.Config{WorkerID: workerID, WorkDir: work})
	if err != nil {
		t.Fatalf("docker.New: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	if !d.WorkspaceNosuid() {
		t.Fatal("the workspaces' directory is not on a nosuid,nodev mount: the tests run as root, in the engine's mount namespace")
	}
	// asNobody runs the host's file p as a step of a --step-user nobody worker would.
	asNobody := func(t *testing.T, p string) string {
		t.Helper()
		var out executortest.SyncBuffer
		_, err := executor.Shell{User: nobody}.Run(t.Context(), executor.Step{Dir: "/tmp", Env: []string{"PATH=/usr/bin:/bin"},
			Stdout: &out, Stderr: &out, Script: "'" + p + "' read '" + secret + "' 2>&1"})
		if err != nil {
			t.Fatalf("run %s as nobody: %v", p, err)
		}
		return strings.TrimSpace(out.String())
	}

	// The control: set-user-ID root on a mount that allows it, the binary makes nobody
	// root, who reads the key.
	plain := filepath.Join(work, "plain")
	if err := os.Mkdir(plain, 0o755); err != nil {
		t.Fatal(err)
	}
	armed := filepath.Join(plain, "probe")
	copyFile(t, probe, armed, 0o755)
	if err := os.Chmod(armed, 0o755|fs.ModeSetuid); err != nil {
		t.Fatal(err)
	}
	if out := asNobody(t, armed); !strings.Contains(out, "euid=0 ") || !strings.Contains(out, "read: s3cret") {
		t.Fatalf("control: a set-user-ID root binary run by nobody said %q; want euid 0 and the key read", out)
	}

	ws, err := os.MkdirTemp(d.WorkspaceDir(), "gantry-job-")
	if err != nil {
		t.Fatal(err)
	}
	s, err := d.Begin(t.Context(), executor.Job{ID: "job-" + executortest.Token(t)[4:], Attempt: 1, WorkerID: workerID,
		Workspace: ws, Image: img, Pull: docker.PullNever, Grace: 2 * time.Second})
	if err != nil {
		t.Fatalf("Begin: %v", err)
	}
	ended := false
	t.Cleanup(func() {
		if !ended {
			_ = s.End(context.Background())
			docker.WaitRemovals(d)
		}
	})
	var out executortest.SyncBuffer
	res, err := s.Run(t.Context(), executor.Step{Stdout: &out, Stderr: &out, Script: `
cp /bin/privprobe probe && chmod 4755 probe && chmod 755 /workspace
mknod null c 1 3 2>/dev/null && echo mknod: made || echo mknod: refused
grep -E '^(CapEff|NoNewPrivs):' /proc/self/status
echo "mount: $(grep ' /workspace ' /proc/self/mountinfo | cut -d' ' -f6)"
/bin/privprobe as 1000 /workspace/probe id`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("the step: %+v, %v: %s", res, err, out.String())
	}
	got := out.String()
	t.Logf("in the container:\n%s", got)

	// Link 1: in the container.
	for _, want := range []string{"mknod: refused", "CapEff:\t" + jobCapEff, "NoNewPrivs:\t1", "uid=1000 euid=1000 capeff=0000000000000000"} {
		if !strings.Contains(got, want) {
			t.Errorf("link 1, in the container: no %q in the step's output", want)
		}
	}
	if line := lineWith(got, "mount: "); !strings.Contains(line, "nosuid") || !strings.Contains(line, "nodev") {
		t.Errorf("link 1: /workspace is mounted %q, want nosuid and nodev", line)
	}

	// Link 2: on the host, while the job runs. The step made it set-user-ID root there.
	inWS := filepath.Join(ws, "probe")
	if st, err := os.Lstat(inWS); err != nil || st.Mode()&fs.ModeSetuid == 0 {
		t.Fatalf("the step's binary on the host: %v, %v; want it set-user-ID, as the step made it", st, err)
	}
	if out := asNobody(t, inWS); strings.Contains(out, "euid=0 ") || strings.Contains(out, "s3cret") || !strings.Contains(out, "ermission denied") {
		t.Errorf("link 2: nobody running the job's binary while the job runs said %q; want permission denied (the workspaces' directory is the worker's alone)", out)
	}
	// Were the directory open to all, the mount still raises nothing.
	if err := os.Chmod(d.WorkspaceDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	if out := asNobody(t, inWS); strings.Contains(out, "euid=0 ") || !strings.Contains(out, "euid=65534 ") || !strings.Contains(out, "read: denied") {
		t.Errorf("link 2: nobody running the job's binary through an open directory said %q; want euid 65534 (nosuid) and the key denied", out)
	}

	// Link 3: the job has ended.
	if err := s.End(t.Context()); err != nil {
		t.Fatalf("End: %v", err)
	}
	ended = true
	docker.WaitRemovals(d)
	st, err := os.Lstat(inWS)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 {
		t.Errorf("link 3: the job's binary is %v on the host after the job; want its set-user-ID bit cleared", st.Mode())
	}
	// Copied where the mount allows set-user-ID, with its owner and mode as they are (a
	// chown clears the bits: the mode comes after).
	kept := filepath.Join(plain, "kept")
	copyFile(t, inWS, kept, 0o700)
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		if err := os.Lchown(kept, int(sys.Uid), int(sys.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(kept, st.Mode().Perm()|st.Mode()&(fs.ModeSetuid|fs.ModeSetgid)); err != nil {
		t.Fatal(err)
	}
	if out := asNobody(t, kept); strings.Contains(out, "euid=0 ") || strings.Contains(out, "s3cret") {
		t.Errorf("link 3: nobody running what the job left said %q; want nobody's uid and the key denied", out)
	}
}

func copyFile(t *testing.T, from, to string, mode fs.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(to, mode); err != nil {
		t.Fatal(err)
	}
}

func lineWith(s, prefix string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, prefix) {
			return l
		}
	}
	return ""
}

// TestDisarm: what a privileged container could leave in its workspace, and a plain one
// in part, loses what would raise a process of the host: set-user-ID and set-group-ID
// bits on files and directories, file capabilities, device files. Pipes, the sticky bit
// and what a symbolic link points to, outside, stay as they are.
func TestDisarm(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("device files and file capabilities need root: run the tests as root")
	}
	ws, outside := t.TempDir(), t.TempDir()
	p := func(name string) string { return filepath.Join(ws, name) }
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	for name, mode := range map[string]fs.FileMode{
		"suid": 0o755 | fs.ModeSetuid, "sgid": 0o755 | fs.ModeSetgid, "sub/both": 0o750 | fs.ModeSetuid | fs.ModeSetgid, "capped": 0o755, "plain": 0o644,
	} {
		must(os.MkdirAll(filepath.Dir(p(name)), 0o755))
		must(os.WriteFile(p(name), []byte("x"), 0o600))
		must(os.Chmod(p(name), mode))
	}
	must(os.Mkdir(p("sgid-dir"), 0o755))
	must(os.Chmod(p("sgid-dir"), 0o775|fs.ModeSetgid))
	must(os.Mkdir(p("sticky"), 0o755))
	must(os.Chmod(p("sticky"), 0o777|fs.ModeSticky))
	must(syscall.Mknod(p("sub/null"), syscall.S_IFCHR|0o666, 1<<8|3))
	must(syscall.Mknod(p("sda"), syscall.S_IFBLK|0o660, 8<<8))
	must(syscall.Mkfifo(p("fifo"), 0o644))
	// CAP_SETUID, permitted and effective (struct vfs_cap_data, revision 2).
	must(syscall.Setxattr(p("capped"), "security.capability", []byte{1, 0, 0, 2, 1 << 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, 0))
	target := filepath.Join(outside, "suid")
	must(os.WriteFile(target, []byte("x"), 0o600))
	must(os.Chmod(target, 0o755|fs.ModeSetuid))
	must(os.Symlink(target, p("link")))

	n, err := docker.Disarm(ws)
	if err != nil {
		t.Fatalf("Disarm: %v", err)
	}
	if n != 7 {
		t.Errorf("Disarm changed %d files, want 7 (suid, sgid, sub/both, sgid-dir, capped, sub/null, sda)", n)
	}
	for name, want := range map[string]fs.FileMode{
		"suid": 0o755, "sgid": 0o755, "sub/both": 0o750, "capped": 0o755, "plain": 0o644,
		"sgid-dir": fs.ModeDir | 0o775, "sticky": fs.ModeDir | fs.ModeSticky | 0o777, "fifo": fs.ModeNamedPipe | 0o644,
	} {
		st, err := os.Lstat(p(name))
		if err != nil || st.Mode() != want {
			t.Errorf("%s after Disarm: %v, %v; want mode %v", name, st, err, want)
		}
	}
	for _, name := range []string{"sub/null", "sda"} {
		if _, err := os.Lstat(p(name)); !os.IsNotExist(err) {
			t.Errorf("device file %s after Disarm: %v; want it removed", name, err)
		}
	}
	if _, err := syscall.Getxattr(p("capped"), "security.capability", nil); err != syscall.ENODATA {
		t.Errorf("capped's file capabilities after Disarm: %v; want none (ENODATA)", err)
	}
	if st, err := os.Stat(target); err != nil || st.Mode()&fs.ModeSetuid == 0 {
		t.Errorf("the symbolic link's target outside: %v, %v; want it untouched", st, err)
	}
}
