package kubernetes

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/gantry-ci/gantry/internal/executor"
)

// podDirExec answers the execs of one pod as its job container would, with the pod's
// /workspace at the directory pod: pod-exec runs the step for real (its paths under
// /workspace mapped to pod), pod-files copies and empties the step files.
func podDirExec(t *testing.T, pod string) func(c execCall, _ *bufio.Reader, stdout, stderr io.Writer) (int, error) {
	local := func(p string) string { return strings.ReplaceAll(p, executor.WorkspacePath, pod) }
	return func(c execCall, _ *bufio.Reader, stdout, stderr io.Writer) (int, error) {
		switch c.Cmd[1] {
		case "pod-exec":
			req := c.Req
			// The scripted execer frames what the step writes, as pod-exec would.
			req.Output = ""
			req.Dir = local(req.Dir)
			req.Env = nil
			for _, kv := range c.Req.Env {
				req.Env = append(req.Env, local(kv))
			}
			ctl := newControl(req)
			defer ctl.close()
			return PodExec(ctl, stdout, stderr), nil
		case "pod-files":
			if len(c.Cmd) != 4 || c.Cmd[2] != "--dir" {
				t.Errorf("pod-files command %q", c.Cmd)
				return 2, nil
			}
			if err := PodFiles(stdout, local(c.Cmd[3])); err != nil {
				_, _ = io.WriteString(stderr, err.Error())
				return 1, nil
			}
			return 0, nil
		}
		t.Errorf("unexpected exec %q", c.Cmd)
		return 127, nil
	}
}

// stepFilesJob is a job whose worker workspace and pod workspace both hold empty step
// files in .gantry-files, as the agent makes them before Begin and the init container
// copies them in.
func stepFilesJob(t *testing.T, b *bundle) (j executor.Job, ws, pod string) {
	ws, pod = t.TempDir(), t.TempDir()
	for _, dir := range []string{ws, pod} {
		must(t, os.Mkdir(filepath.Join(dir, ".gantry-files"), 0o755))
		for _, f := range []string{"output", "env", "path"} {
			must(t, os.WriteFile(filepath.Join(dir, ".gantry-files", f), nil, 0o666))
		}
	}
	j = testJob(b)
	j.Workspace = ws
	return j, ws, pod
}

var stepFileEnv = []string{"GANTRY_OUTPUT=/workspace/.gantry-files/output", "GANTRY_ENV=/workspace/.gantry-files/env",
	"GANTRY_PATH=/workspace/.gantry-files/path"}

// TestStepFiles: after a step, what it wrote to $GANTRY_OUTPUT, $GANTRY_ENV and
// $GANTRY_PATH in the pod is in the worker's files (where the agent reads them) and the
// pod's are empty for the next step: one pod-files exec after each step that was not
// cancelled, a failed one included.
func TestStepFiles(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	scriptStatus(b, func(_ time.Duration, pod *corev1.Pod) {
		setStatus(pod, corev1.PodRunning, nil, nil, []corev1.ContainerStatus{runningC(jobContainer, true)})
	})
	j, ws, pod := stepFilesJob(t, b)
	b.exec.fn = podDirExec(t, pod)
	r := await(t, begin(e, j))
	if r.err != nil {
		t.Fatal(r.err)
	}
	files := filepath.Join(ws, ".gantry-files")
	step := func(script string) executor.Result {
		t.Helper()
		var out bytes.Buffer
		res, err := r.s.Run(context.Background(), executor.Step{Script: script, Dir: ws, Env: stepFileEnv, Binds: []string{files},
			Stdout: &out, Stderr: &out})
		if err != nil {
			t.Fatalf("Run: %v (output %q)", err, out.String())
		}
		return res
	}
	res := step(`echo "version=1.2.3" >> "$GANTRY_OUTPUT"
printf 'notes<<EOF\nline one\nline two\nEOF\n' >> "$GANTRY_OUTPUT"
echo "GREETING=hello" >> "$GANTRY_ENV"
echo "/opt/tool/bin" >> "$GANTRY_PATH"`)
	if res.ExitCode != 0 {
		t.Fatalf("step: %+v", res)
	}
	want := map[string]string{"output": "version=1.2.3\nnotes<<EOF\nline one\nline two\nEOF\n", "env": "GREETING=hello\n", "path": "/opt/tool/bin\n"}
	for name, content := range want {
		if got, err := os.ReadFile(filepath.Join(files, name)); err != nil || string(got) != content {
			t.Errorf("worker's %s = %q, %v; want %q", name, got, err, content)
		}
		if got, err := os.ReadFile(filepath.Join(pod, ".gantry-files", name)); err != nil || len(got) != 0 {
			t.Errorf("pod's %s = %q, %v after the step; want it emptied", name, got, err)
		}
	}
	var cmds []string
	for _, c := range b.exec.calls {
		cmds = append(cmds, strings.Join(c.Cmd[1:], " "))
	}
	if want := []string{"pod-exec", "pod-files --dir /workspace/.gantry-files"}; !slices.Equal(cmds, want) {
		t.Errorf("execs %q, want %q", cmds, want)
	}
	// The agent empties its copy once read; a failing step's files come back too.
	for name := range want {
		must(t, os.Truncate(filepath.Join(files, name), 0))
	}
	if res := step(`echo "partial=yes" >> "$GANTRY_OUTPUT"; exit 3`); res.ExitCode != 3 {
		t.Fatalf("second step: %+v", res)
	}
	if got, _ := os.ReadFile(filepath.Join(files, "output")); string(got) != "partial=yes\n" {
		t.Errorf("worker's output after a failed step = %q", got)
	}
	if got, _ := os.ReadFile(filepath.Join(files, "env")); len(got) != 0 {
		t.Errorf("worker's env after a step that wrote none = %q", got)
	}
}

// TestStepFilesFailures: a step that put a symlink in a file's place, a pod-files that
// fails, a pod gone under the copy, and a cancelled step (no copy at all).
func TestStepFilesFailures(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		script  string
		files   func(t *testing.T, b *bundle, c execCall, stdout, stderr io.Writer) (int, error) // nil: the real one
		cancel  bool
		wantErr string
		lost    bool
	}{
		{name: "symlink in place of a file", script: `rm "$GANTRY_OUTPUT"; ln -s /etc/passwd "$GANTRY_OUTPUT"`,
			wantErr: "output is not a regular file"},
		{name: "pod-files fails", script: "true", wantErr: "gantry pod-files exited 1: no space left",
			files: func(_ *testing.T, _ *bundle, _ execCall, _, stderr io.Writer) (int, error) {
				_, _ = io.WriteString(stderr, "no space left\n")
				return 1, nil
			}},
		{name: "pod lost", script: "true", wantErr: "pod is gone", lost: true,
			files: func(_ *testing.T, b *bundle, c execCall, _, _ io.Writer) (int, error) {
				if err := b.cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "ci", c.Pod); err != nil {
					return -1, err
				}
				return -1, errors.New("stream reset")
			}},
		{name: "hostile stream", script: "true", wantErr: "want a regular file directly in the directory",
			files: func(_ *testing.T, _ *bundle, _ execCall, stdout, _ io.Writer) (int, error) {
				tw := tar.NewWriter(stdout)
				_ = tw.WriteHeader(&tar.Header{Name: "../escaped", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
				_, _ = tw.Write([]byte("x"))
				_ = tw.Close()
				return 0, nil
			}},
		{name: "cancelled", script: "sleep 60", cancel: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, b := setup(t, nil)
			scriptStatus(b, func(_ time.Duration, pod *corev1.Pod) {
				setStatus(pod, corev1.PodRunning, nil, nil, []corev1.ContainerStatus{runningC(jobContainer, true)})
			})
			j, ws, pod := stepFilesJob(t, b)
			real := podDirExec(t, pod)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b.exec.fn = func(c execCall, ctl *bufio.Reader, stdout, stderr io.Writer) (int, error) {
				if c.Cmd[1] == "pod-files" && tt.files != nil {
					return tt.files(t, b, c, stdout, stderr)
				}
				if c.Cmd[1] == "pod-exec" && tt.cancel {
					cancel()
					line, _ := ctl.ReadString('\n')
					if line != "term\n" {
						t.Errorf("control %q, want term", line)
					}
					return 128 + 15, nil
				}
				return real(c, ctl, stdout, stderr)
			}
			r := await(t, begin(e, j))
			if r.err != nil {
				t.Fatal(r.err)
			}
			res, err := r.s.Run(ctx, executor.Step{Script: tt.script, Dir: ws, Env: stepFileEnv,
				Binds: []string{filepath.Join(ws, ".gantry-files")}})
			if tt.wantErr == "" {
				if err != nil || !res.Cancelled {
					t.Fatalf("Run: %+v, %v; want cancelled", res, err)
				}
				for _, c := range b.exec.calls {
					if c.Cmd[1] == "pod-files" {
						t.Error("the step files of a cancelled step were copied")
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "step files could not be copied back") {
				t.Fatalf("Run: %v, want an error with %q", err, tt.wantErr)
			}
			if got := errors.Is(err, executor.ErrEnvironmentLost); got != tt.lost {
				t.Errorf("Run: %v: lost %v, want %v", err, got, tt.lost)
			}
			if got, err := os.ReadFile(filepath.Join(ws, ".gantry-files", "output")); err != nil || len(got) != 0 {
				t.Errorf("worker's output = %q, %v; want it as it was", got, err)
			}
			if _, err := os.Lstat(filepath.Join(ws, "escaped")); err == nil {
				t.Error("a stream entry landed outside the step files' directory")
			}
		})
	}
}

// TestStepFilesOutsideWorkspace: a step whose files are not in the workspace cannot have
// them in the pod, and does not run.
func TestStepFilesOutsideWorkspace(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	b.exec.fn = func(execCall, *bufio.Reader, io.Writer, io.Writer) (int, error) { return 0, nil }
	s := readySession(t, e, b)
	_, err := s.Run(context.Background(), executor.Step{Script: "true", Binds: []string{"/var/gantry/gantry-files-1"}})
	if err == nil || !strings.Contains(err.Error(), "not inside the job's workspace") {
		t.Fatalf("Run: %v, want an error", err)
	}
	if len(b.exec.calls) != 0 {
		t.Errorf("execs %+v, want none", b.exec.calls)
	}
}
