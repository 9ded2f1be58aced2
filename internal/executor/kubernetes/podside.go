package kubernetes

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"golang.org/x/sys/unix"
)

// This file is the part of the executor that runs inside a job's pod, as subcommands of
// the gantry binary: pod-init in the init container, pod-hold as the job container's
// main process, pod-exec for each step.

// ExecRequest is the first line `gantry pod-exec` reads from stdin: the step to run.
// After it, a line "term" sends SIGTERM to the step's process group, "kill" (or the end
// of stdin) SIGKILL.
type ExecRequest struct {
	Shell  string   `json:"shell,omitempty"`
	Script string   `json:"script"`
	Env    []string `json:"env,omitempty"`
	Dir    string   `json:"dir,omitempty"`
	// Output is how the step's stdout and stderr come back: OutputMerged (both as
	// frames of stream 1 on stdout, through one pipe so in the order written, for a
	// worker that writes both to one place), OutputFramed (both on stdout in frames, so
	// that their order survives the exec's separate streams), or "" (stdout and stderr
	// as the exec's own). Both framed modes end with the end frame.
	Output string `json:"output,omitempty"`
}

// The ExecRequest.Output modes.
const (
	OutputMerged = "merged"
	OutputFramed = "framed"
)

// A frame of OutputFramed is a header, the stream (1 stdout, 2 stderr) and the length
// of the data as a big-endian uint32, then the data.
const frameHeader = 5

// frameWriter writes the frames of one or the other stream to w, one whole frame at a
// time.
type frameWriter struct {
	mu sync.Mutex
	w  io.Writer
}

type frameStream struct {
	fw     *frameWriter
	stream byte
}

func (f frameStream) Write(p []byte) (int, error) {
	f.fw.mu.Lock()
	defer f.fw.mu.Unlock()
	var h [frameHeader]byte
	h[0] = f.stream
	binary.BigEndian.PutUint32(h[1:], uint32(len(p)))
	if _, err := f.fw.w.Write(append(h[:], p...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// frameEnd is the stream of the last frame PodExec writes, once the step has ended:
// its 4 bytes are the exit code. An exec stream cut short (its node's kubelet killed)
// can end as if the command had exited 0; without this frame the worker would take
// that for the step's success.
const frameEnd = 3

// end writes the end frame.
func (fw *frameWriter) end(code int) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	var f [frameHeader + 4]byte
	f[0] = frameEnd
	binary.BigEndian.PutUint32(f[1:], 4)
	binary.BigEndian.PutUint32(f[frameHeader:], uint32(int32(code)))
	_, _ = fw.w.Write(f[:])
}

// errNoEnd is Unframe's error for frames that stopped before the end frame.
var errNoEnd = errors.New("the step's output stopped before the step ended: the exec stream was cut")

// Unframe copies the frames read from r to stdout and stderr, until r ends; frames that
// end before PodExec's end frame are errNoEnd.
func Unframe(r io.Reader, stdout, stderr io.Writer) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var h [frameHeader]byte
	ended := false
	for {
		if _, err := io.ReadFull(br, h[:]); err != nil {
			switch {
			case err == io.EOF && ended:
				return nil
			case err == io.EOF:
				return errNoEnd
			}
			return fmt.Errorf("read the step's output: %w", err)
		}
		w := stdout
		switch h[0] {
		case 1:
		case 2:
			w = stderr
		case frameEnd:
			ended = true
			w = io.Discard
		default:
			return fmt.Errorf("read the step's output: a frame of stream %d", h[0])
		}
		if _, err := io.CopyN(w, br, int64(binary.BigEndian.Uint32(h[1:]))); err != nil {
			return fmt.Errorf("read the step's output: %w", err)
		}
	}
}

// args is the step's command line, as every executor makes it (executor.ShellArgs).
func (r ExecRequest) args() ([]string, error) {
	return executor.ShellArgs(r.Shell, r.Script)
}

func (r ExecRequest) check() error {
	_, err := r.args()
	return err
}

// PodExec runs the step ExecRequest on stdin names, with stdout and stderr passed
// through, and returns the exit code for the process: the step's, or 128+signal when a
// signal ended it. Its environment is the container's (the image's) with the step's
// on top.
func PodExec(stdin io.Reader, stdout, stderr io.Writer) int {
	br := bufio.NewReader(stdin)
	line, err := br.ReadBytes('\n')
	if err != nil && len(line) == 0 {
		fmt.Fprintf(stderr, "gantry pod-exec: read the step: %v\n", err)
		return 125
	}
	var req ExecRequest
	if err := json.Unmarshal(line, &req); err != nil {
		fmt.Fprintf(stderr, "gantry pod-exec: decode the step: %v\n", err)
		return 125
	}
	args, err := req.args()
	if err != nil {
		fmt.Fprintf(stderr, "gantry pod-exec: %v\n", err)
		return 125
	}
	// The step is marked, and this process is made the subreaper of what it starts, so
	// that what left its process group (setsid, a double fork) is still found and
	// killed when the step ends: nothing a step started outlives it.
	var markb [12]byte
	_, _ = rand.Read(markb[:])
	mark := hex.EncodeToString(markb[:])
	_ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(mergeEnv(os.Environ(), req.Env), executor.MarkEnv(mark))
	cmd.Dir = req.Dir
	var fw *frameWriter
	switch req.Output {
	case OutputMerged:
		// One writer for both: os/exec gives the step one pipe, so the order of its
		// lines is the order it wrote them.
		fw = &frameWriter{w: stdout}
		cmd.Stdout, cmd.Stderr = frameStream{fw, 1}, frameStream{fw, 1}
	case OutputFramed:
		fw = &frameWriter{w: stdout}
		cmd.Stdout, cmd.Stderr = frameStream{fw, 1}, frameStream{fw, 2}
	default:
		cmd.Stdout, cmd.Stderr = stdout, stderr
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// What the step started and left holds its output pipe open; Wait does not wait
	// for it past this (it is killed just after).
	cmd.WaitDelay = time.Second
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "gantry pod-exec: start %s: %v\n", args[0], err)
		return 127
	}
	code := podWait(cmd, br, mark, stderr)
	if fw != nil {
		fw.end(code)
	}
	return code
}

// podWait waits for the step PodExec started, passing on the worker's term and kill,
// and returns its exit code.
func podWait(cmd *exec.Cmd, br *bufio.Reader, mark string, stderr io.Writer) int {
	pgid := cmd.Process.Pid
	go func() {
		sc := bufio.NewScanner(br)
		for sc.Scan() {
			switch strings.TrimSpace(sc.Text()) {
			case "term":
				_ = unix.Kill(-pgid, unix.SIGTERM)
			case "kill":
				_ = unix.Kill(-pgid, unix.SIGKILL)
				executor.KillMarked(mark)
			}
		}
		// The worker is gone or done with the step: nothing of it may go on.
		_ = unix.Kill(-pgid, unix.SIGKILL)
		executor.KillMarked(mark)
	}()
	err := cmd.Wait()
	// Whatever the step left, in its group or out of it, goes with it; the orphans
	// this process adopted are reaped.
	_ = unix.Kill(-pgid, unix.SIGKILL)
	executor.KillMarked(mark)
	reapChildren()
	// The step's own exit, also when Wait gave up on the output of what it left
	// (exec.ErrWaitDelay).
	if st := cmd.ProcessState; st != nil {
		if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return st.ExitCode()
	}
	fmt.Fprintf(stderr, "gantry pod-exec: %v\n", err)
	return 125
}

// reapChildren waits for the children this process has, without blocking: as the
// subreaper of a step, it adopts the step's orphans, and they must not stay zombies.
func reapChildren() {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}

// mergeEnv puts step on top of base (the image's environment). The worker sends a step
// in an image none of its host's variables, so what the step has is the job's: a PATH
// among them (the directories of $GANTRY_PATH before the usual ones) is kept, with the
// image's own directories it lacks after it, so that tools the image puts on its PATH
// (/usr/local/go/bin) are still found.
func mergeEnv(base, step []string) []string {
	idx := map[string]int{}
	out := append([]string(nil), base...)
	for i, kv := range out {
		k, _, _ := strings.Cut(kv, "=")
		idx[k] = i
	}
	for _, kv := range step {
		k, v, _ := strings.Cut(kv, "=")
		if i, ok := idx[k]; ok && k == "PATH" {
			_, image, _ := strings.Cut(out[i], "=")
			dirs := strings.Split(v, ":")
			for _, d := range strings.Split(image, ":") {
				if d != "" && !slices.Contains(dirs, d) {
					dirs = append(dirs, d)
				}
			}
			kv = "PATH=" + strings.Join(dirs, ":")
		}
		if i, ok := idx[k]; ok {
			out[i] = kv
			continue
		}
		idx[k] = len(out)
		out = append(out, kv)
	}
	return out
}

// PodHold is the job container's main process: it keeps the container alive until
// SIGTERM or SIGINT, and reaps the orphans of steps (it is PID 1 of the container).
func PodHold(ctx context.Context) int {
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	sigchld := make(chan os.Signal, 1)
	signal.Notify(sigchld, syscall.SIGCHLD)
	defer signal.Stop(sigchld)
	for {
		select {
		case <-ctx.Done():
			return 0
		case <-sigchld:
			for {
				var ws unix.WaitStatus
				pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
		}
	}
}

// InitConfig configures PodInit.
type InitConfig struct {
	// Tools is where the gantry binary is copied, for the job container.
	Tools string
	// Workspace is the job's workspace, filled from Fetch.
	Workspace string
	// Fetch, when set, is a URL answering a tar stream of the workspace.
	Fetch string
	// Self is the binary to copy ("" is this process's own).
	Self string
	// Client fetches; nil is a client with a 10-minute timeout.
	Client *http.Client
}

// PodInit prepares a job's pod: it copies the gantry binary into the tools volume and
// fills the workspace from the worker, then opens the workspace to every user, since
// the job's user may not be root.
func PodInit(ctx context.Context, cfg InitConfig) error {
	self := cfg.Self
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return fmt.Errorf("find the gantry binary: %w", err)
		}
	}
	if err := copyFile(self, filepath.Join(cfg.Tools, "gantry"), 0o755); err != nil {
		return fmt.Errorf("copy the gantry binary to %s: %w", cfg.Tools, err)
	}
	if cfg.Fetch != "" {
		client := cfg.Client
		if client == nil {
			client = &http.Client{Timeout: 10 * time.Minute}
		}
		if err := fetchWorkspace(ctx, client, cfg.Fetch, cfg.Workspace); err != nil {
			return err
		}
	}
	return filepath.WalkDir(cfg.Workspace, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.Type()&os.ModeSymlink != 0 {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		mode := info.Mode().Perm() | 0o666
		if d.IsDir() || info.Mode().Perm()&0o100 != 0 {
			mode |= 0o111
		}
		return os.Chmod(p, mode)
	})
}

func fetchWorkspace(ctx context.Context, client *http.Client, url, dir string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("fetch the workspace: %w", err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("fetch the workspace: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("fetch the workspace: %s: %s", resp.Status, strings.TrimSpace(string(b)))
	}
	if err := Untar(resp.Body, dir); err != nil {
		return fmt.Errorf("fetch the workspace: %w", err)
	}
	return nil
}

// PodTar writes the job's workspace to w as a tar stream, for the worker to copy it
// back (session.Collect) once the steps are done; it is `gantry pod-tar`, run in the
// job's container, so the image needs no tar of its own.
func PodTar(w io.Writer, workspace string) error {
	return executor.TarDir(w, workspace, false)
}

// PodFiles writes the regular files directly in dir (a step's $GANTRY_OUTPUT,
// $GANTRY_ENV and $GANTRY_PATH and their like) to w as a tar stream, emptying each once
// it is written, so the next step starts with empty files as it does on the worker; it
// is `gantry pod-files`, run in the job's container after each step (session.Run). An
// entry that is not a regular file (a symlink a step put in a file's place) is an error:
// what the worker reads must be what the step wrote, not what a link points to.
func PodFiles(w io.Writer, dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("step files: %w", err)
	}
	tw := tar.NewWriter(w)
	for _, e := range entries {
		if !e.Type().IsRegular() {
			return fmt.Errorf("step files: %s is not a regular file", filepath.Join(dir, e.Name()))
		}
		if err := podFile(tw, dir, e.Name()); err != nil {
			return fmt.Errorf("step files: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return fmt.Errorf("step files: %w", err)
	}
	return nil
}

// podFile writes one step file to tw and empties it.
func podFile(tw *tar.Writer, dir, name string) error {
	p := filepath.Join(dir, name)
	f, err := os.OpenFile(p, os.O_RDWR|unix.O_NOFOLLOW, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if !info.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: int64(info.Mode().Perm()), Size: info.Size(), ModTime: info.ModTime()}); err != nil {
		return err
	}
	if _, err := io.CopyN(tw, f, info.Size()); err != nil {
		return fmt.Errorf("read %s: %w", p, err)
	}
	if err := f.Truncate(0); err != nil {
		return fmt.Errorf("empty %s for the next step: %w", p, err)
	}
	return nil
}

// TakeFiles writes the files of a PodFiles stream into dir, replacing files of the same
// names; it takes regular files with plain names only, so a stream cannot reach outside
// dir or leave anything but files in it.
func TakeFiles(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if h.Typeflag != tar.TypeReg || h.Name != filepath.Base(h.Name) || h.Name == "." || h.Name == ".." {
			return fmt.Errorf("tar entry %s: want a regular file directly in the directory", h.Name)
		}
		if err := writeRootFile(root, h.Name, 0o666, tr); err != nil {
			return fmt.Errorf("tar entry %s: %w", h.Name, err)
		}
	}
}

// Untar extracts a tar stream into dir, refusing entries that would land outside it.
// Files and directories get the permission bits of their entries (directories once
// every entry is in, so a read-only one can still be filled).
func Untar(r io.Reader, dir string) error {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return err
	}
	defer root.Close()
	tr := tar.NewReader(r)
	dirModes := map[string]os.FileMode{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			for name, mode := range dirModes {
				if err := root.Chmod(name, mode); err != nil {
					return err
				}
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("read tar: %w", err)
		}
		if err := untarEntry(root, tr, h, dirModes); err != nil {
			return fmt.Errorf("tar entry %s: %w", h.Name, err)
		}
	}
}

// writeRootFile writes r into the file name under root, made or emptied first.
func writeRootFile(root *os.Root, name string, mode os.FileMode, r io.Reader) error {
	f, err := root.OpenFile(name, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	_, err = io.Copy(f, r)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// untarEntry writes one entry of the stream under root; directory modes are noted in
// dirModes, to be set at the end.
func untarEntry(root *os.Root, tr *tar.Reader, h *tar.Header, dirModes map[string]os.FileMode) error {
	name := filepath.Clean(h.Name)
	if name == "." {
		return nil
	}
	mode := os.FileMode(h.Mode).Perm()
	switch h.Typeflag {
	case tar.TypeDir:
		if err := root.MkdirAll(name, 0o755); err != nil {
			return err
		}
		dirModes[name] = mode
	case tar.TypeReg:
		if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		if err := writeRootFile(root, name, mode, tr); err != nil {
			return err
		}
		// The umask may have taken bits off at the create.
		return root.Chmod(name, mode)
	case tar.TypeSymlink:
		if err := root.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			return err
		}
		return root.Symlink(h.Linkname, name)
	default:
		return fmt.Errorf("type %c is not a file, directory or symlink", h.Typeflag)
	}
	return nil
}

// ReplaceDir makes dir's content the tar stream's: it extracts the stream beside dir
// (refusing entries that would land outside it) and only when all of it is in swaps it
// for dir's entries, so a broken or hostile stream leaves dir as it was.
func ReplaceDir(r io.Reader, dir string) error {
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+"-in-")
	if err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	defer os.RemoveAll(tmp)
	if err := Untar(r, tmp); err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	old, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	for _, e := range old {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("replace %s: %w", dir, err)
		}
	}
	entries, err := os.ReadDir(tmp)
	if err != nil {
		return fmt.Errorf("replace %s: %w", dir, err)
	}
	for _, e := range entries {
		if err := os.Rename(filepath.Join(tmp, e.Name()), filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("replace %s: %w", dir, err)
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

// control is the stdin of a step's pod-exec: the request line, then whatever send
// adds, and the end once closed. Reads block until there is something.
type control struct {
	mu     sync.Mutex
	cond   *sync.Cond
	buf    []byte
	closed bool
}

func newControl(req ExecRequest) *control {
	b, _ := json.Marshal(req)
	c := &control{buf: append(b, '\n')}
	c.cond = sync.NewCond(&c.mu)
	return c
}

func (c *control) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.buf) == 0 && !c.closed {
		c.cond.Wait()
	}
	if len(c.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.buf)
	c.buf = c.buf[n:]
	return n, nil
}

func (c *control) send(word string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.buf = append(c.buf, word+"\n"...)
		c.cond.Broadcast()
	}
}

func (c *control) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	c.cond.Broadcast()
}

func signalName(n int) string {
	switch syscall.Signal(n) {
	case syscall.SIGTERM:
		return "terminated"
	case syscall.SIGKILL:
		return "killed"
	}
	return unix.SignalName(syscall.Signal(n))
}
