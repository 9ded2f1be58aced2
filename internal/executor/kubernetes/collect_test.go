package kubernetes

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
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

// TestCollect: Collect runs `gantry pod-tar` in the job's container and makes the
// worker's workspace what the pod's is (files, modes, symlinks; what the steps removed
// is gone); a stream that escapes the workspace, breaks off or comes from a failing
// pod-tar leaves the worker's workspace as it was; a pod gone under it is lost.
func TestCollect(t *testing.T) {
	t.Parallel()
	// podWorkspace is what the steps left in the pod, as real files.
	podWorkspace := func(t *testing.T) string {
		dir := t.TempDir()
		must(t, os.MkdirAll(filepath.Join(dir, "out", "private"), 0o755))
		must(t, os.Chmod(filepath.Join(dir, "out", "private"), 0o750))
		must(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!/bin/sh\n"), 0o755))
		must(t, os.WriteFile(filepath.Join(dir, "out", "private", "report.txt"), []byte("ok\n"), 0o640))
		must(t, os.WriteFile(filepath.Join(dir, "kept"), []byte("new\n"), 0o644))
		must(t, os.Symlink("bin/tool", filepath.Join(dir, "link")))
		return dir
	}
	escaping := func(w io.Writer) {
		tw := tar.NewWriter(w)
		_ = tw.WriteHeader(&tar.Header{Name: "fine", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte("x"))
		_ = tw.WriteHeader(&tar.Header{Name: "../evil", Mode: 0o644, Size: 1, Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte("x"))
		_ = tw.Close()
	}
	for _, tt := range []struct {
		name    string
		pod     func(t *testing.T, b *bundle, c execCall, stdout, stderr io.Writer) (int, error)
		wantErr string // "" copies the pod's workspace
		lost    bool
	}{
		{name: "copies back", pod: func(t *testing.T, _ *bundle, _ execCall, stdout, _ io.Writer) (int, error) {
			if err := PodTar(stdout, podWorkspace(t)); err != nil {
				return 1, nil
			}
			return 0, nil
		}},
		{name: "entry escaping the workspace", wantErr: "evil", pod: func(_ *testing.T, _ *bundle, _ execCall, stdout, _ io.Writer) (int, error) {
			escaping(stdout)
			return 0, nil
		}},
		{name: "truncated stream", wantErr: "unexpected EOF", pod: func(_ *testing.T, _ *bundle, _ execCall, stdout, _ io.Writer) (int, error) {
			var buf bytes.Buffer
			tw := tar.NewWriter(&buf)
			_ = tw.WriteHeader(&tar.Header{Name: "big", Mode: 0o644, Size: 4096, Typeflag: tar.TypeReg})
			_, _ = tw.Write(make([]byte, 100))
			_, _ = stdout.Write(buf.Bytes())
			return 0, nil
		}},
		{name: "pod-tar fails", wantErr: "gantry pod-tar exited 2: pod-tar: tar /workspace: no space", pod: func(_ *testing.T, _ *bundle, _ execCall, stdout, stderr io.Writer) (int, error) {
			_, _ = stdout.Write(make([]byte, 100))
			fmt.Fprintln(stderr, "pod-tar: tar /workspace: no space")
			return 2, nil
		}},
		{name: "pod lost", wantErr: "pod is gone", lost: true, pod: func(_ *testing.T, b *bundle, c execCall, _, _ io.Writer) (int, error) {
			if err := b.cs.Tracker().Delete(corev1.SchemeGroupVersion.WithResource("pods"), "ci", c.Pod); err != nil {
				return -1, err
			}
			return -1, errors.New("stream reset")
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e, b := setup(t, nil)
			parent := t.TempDir()
			ws := filepath.Join(parent, "ws")
			must(t, os.Mkdir(ws, 0o755))
			must(t, os.WriteFile(filepath.Join(ws, "kept"), []byte("old\n"), 0o644))
			must(t, os.WriteFile(filepath.Join(ws, "removed-in-pod"), []byte("x"), 0o644))
			b.exec.fn = func(c execCall, _ *bufio.Reader, stdout, stderr io.Writer) (int, error) {
				return tt.pod(t, b, c, stdout, stderr)
			}
			scriptStatus(b, func(_ time.Duration, pod *corev1.Pod) {
				setStatus(pod, corev1.PodRunning, nil, nil, []corev1.ContainerStatus{runningC(jobContainer, true)})
			})
			j := testJob(b)
			j.Workspace = ws
			r := await(t, begin(e, j))
			if r.err != nil {
				t.Fatal(r.err)
			}
			err := r.s.(executor.Collector).Collect(context.Background())
			calls := b.exec.calls
			if len(calls) != 1 || calls[0].Container != jobContainer ||
				!slices.Equal(calls[0].Cmd, []string{ToolsBinary, "pod-tar", "--workspace", "/workspace"}) {
				t.Errorf("exec calls %+v, want one pod-tar in the job container", calls)
			}
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Collect: %v, want an error with %q", err, tt.wantErr)
				}
				if got := errors.Is(err, executor.ErrEnvironmentLost); got != tt.lost {
					t.Errorf("Collect: %v: lost %v, want %v", err, got, tt.lost)
				}
				if b, err := os.ReadFile(filepath.Join(ws, "kept")); err != nil || string(b) != "old\n" {
					t.Errorf("the worker's workspace changed: kept = %q, %v", b, err)
				}
				if _, err := os.Stat(filepath.Join(ws, "removed-in-pod")); err != nil {
					t.Errorf("the worker's workspace lost a file: %v", err)
				}
				entries, _ := os.ReadDir(parent)
				if len(entries) != 1 {
					t.Errorf("left beside the workspace: %v", entries)
				}
				if _, err := os.Stat(filepath.Join(parent, "evil")); err == nil {
					t.Error("an entry was written outside the workspace")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "kept")); err != nil || string(b) != "new\n" {
				t.Errorf("kept = %q, %v; want the pod's", b, err)
			}
			if _, err := os.Stat(filepath.Join(ws, "removed-in-pod")); !os.IsNotExist(err) {
				t.Errorf("a file the steps removed is still in the workspace: %v", err)
			}
			if l, err := os.Readlink(filepath.Join(ws, "link")); err != nil || l != "bin/tool" {
				t.Errorf("link = %q, %v", l, err)
			}
			if b, err := os.ReadFile(filepath.Join(ws, "out", "private", "report.txt")); err != nil || string(b) != "ok\n" {
				t.Errorf("report = %q, %v", b, err)
			}
			for name, want := range map[string]os.FileMode{"bin/tool": 0o755, "out/private/report.txt": 0o640, "out/private": 0o750, "kept": 0o644} {
				fi, err := os.Stat(filepath.Join(ws, name))
				if err != nil || fi.Mode().Perm() != want {
					t.Errorf("%s: mode %v, %v; want %v", name, fi.Mode().Perm(), err, want)
				}
			}
			entries, _ := os.ReadDir(parent)
			if len(entries) != 1 {
				t.Errorf("left beside the workspace: %v", entries)
			}
		})
	}
}
