package kubernetes

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestPodExec runs steps as gantry pod-exec does in the job container: the request on
// stdin, the image's environment under the step's, the
// directory, output and exit code.
func TestPodExec(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	req := ExecRequest{Script: `echo "$FOO in $(pwd)"; echo oops >&2; test -n "$PATH"; exit 4`, Dir: dir,
		Env: []string{"FOO=bar", "PATH=/nonexistent"}}
	// stdin stays open while the step runs: its end would kill the step.
	ctl := newControl(req)
	var out, errb bytes.Buffer
	code := PodExec(ctl, &out, &errb)
	ctl.close()
	if code != 4 {
		t.Errorf("exit code %d, want 4 (stderr %q)", code, errb.String())
	}
	if want := "bar in " + dir + "\n"; out.String() != want {
		t.Errorf("stdout %q, want %q", out.String(), want)
	}
	if errb.String() != "oops\n" {
		t.Errorf("stderr %q", errb.String())
	}
	bad := newControl(ExecRequest{Shell: "zsh", Script: "true"})
	bad.close()
	if code := PodExec(bad, io.Discard, io.Discard); code != 125 {
		t.Errorf("unknown shell: exit %d, want 125", code)
	}
	if code := PodExec(strings.NewReader("not json\n"), io.Discard, io.Discard); code != 125 {
		t.Errorf("bad request: exit %d, want 125", code)
	}
}

// TestPodExecFramed: framed output carries both streams in order and ends with the end
// frame, which Unframe requires: frames cut before it (a stream the kubelet's death cut,
// which the exec reports as a success) are errNoEnd.
func TestPodExecFramed(t *testing.T) {
	t.Parallel()
	ctl := newControl(ExecRequest{Script: "echo one; echo two >&2; exit 3", Dir: t.TempDir(), Output: OutputFramed})
	var framed bytes.Buffer
	code := PodExec(ctl, &framed, io.Discard)
	ctl.close()
	if code != 3 {
		t.Fatalf("exit code %d, want 3", code)
	}
	var out, errb bytes.Buffer
	if err := Unframe(bytes.NewReader(framed.Bytes()), &out, &errb); err != nil {
		t.Fatalf("Unframe: %v", err)
	}
	if out.String() != "one\n" || errb.String() != "two\n" {
		t.Errorf("stdout %q, stderr %q", out.String(), errb.String())
	}
	cut := framed.Bytes()[:framed.Len()-(frameHeader+4)]
	if err := Unframe(bytes.NewReader(cut), io.Discard, io.Discard); !errors.Is(err, errNoEnd) {
		t.Errorf("Unframe of frames without the end frame: %v, want errNoEnd", err)
	}
	if err := Unframe(bytes.NewReader(nil), io.Discard, io.Discard); !errors.Is(err, errNoEnd) {
		t.Errorf("Unframe of nothing: %v, want errNoEnd", err)
	}
}

// TestPodExecSignals: term reaches the step's process group; kill ends a step that
// ignores term; the end of stdin kills too.
func TestPodExecSignals(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name   string
		script string
		words  []string
		want   int
	}{
		{"term", "echo up; sleep 60", []string{"term"}, 128 + 15},
		{"kill after ignored term", "trap '' TERM; echo up; sleep 60 & wait", []string{"term", "kill"}, 128 + 9},
		{"end of stdin", "echo up; sleep 60", nil, 128 + 9},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctl := newControl(ExecRequest{Script: tt.script})
			pr, pw := io.Pipe()
			done := make(chan int, 1)
			go func() { done <- PodExec(ctl, pw, io.Discard); pw.Close() }()
			// Wait until the step runs (and has set its trap) before signalling it.
			line := make([]byte, 3)
			if _, err := io.ReadFull(pr, line); err != nil || string(line) != "up\n" {
				t.Fatalf("read %q, %v", line, err)
			}
			go func() { _, _ = io.Copy(io.Discard, pr) }()
			for _, w := range tt.words {
				ctl.send(w)
			}
			if tt.words == nil {
				ctl.close()
			}
			defer ctl.close()
			select {
			case code := <-done:
				if code != tt.want {
					t.Errorf("exit %d, want %d", code, tt.want)
				}
			case <-time.After(20 * time.Second):
				t.Fatal("pod-exec did not end")
			}
		})
	}
}

// TestPodInit: the init container copies the binary, fetches the workspace the worker
// offers, and opens it to every user; once released the workspace is gone.
func TestPodInit(t *testing.T) {
	t.Parallel()
	src := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(src, "sub"), 0o755))
	must(t, os.WriteFile(filepath.Join(src, "sub", "main.go"), []byte("package main\n"), 0o600))
	must(t, os.WriteFile(filepath.Join(src, "run.sh"), []byte("#!/bin/sh\n"), 0o700))
	must(t, os.Symlink("sub/main.go", filepath.Join(src, "link")))
	ws := NewWorkspaceServer("")
	srv := httptest.NewServer(ws)
	t.Cleanup(srv.Close)
	ws.base = srv.URL
	url, release := ws.Offer(src)

	self := filepath.Join(t.TempDir(), "gantry-binary")
	must(t, os.WriteFile(self, []byte("binary"), 0o755))
	tools, dst := t.TempDir(), t.TempDir()
	if err := PodInit(context.Background(), InitConfig{Tools: tools, Workspace: dst, Fetch: url, Self: self}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(tools, "gantry")); err != nil || string(b) != "binary" {
		t.Errorf("tools copy %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "sub", "main.go")); err != nil || string(b) != "package main\n" {
		t.Errorf("workspace file %q, %v", b, err)
	}
	if l, err := os.Readlink(filepath.Join(dst, "link")); err != nil || l != "sub/main.go" {
		t.Errorf("symlink %q, %v", l, err)
	}
	for name, want := range map[string]os.FileMode{"sub/main.go": 0o666, "run.sh": 0o777, "sub": 0o777} {
		fi, err := os.Stat(filepath.Join(dst, name))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s mode %v, %v; want %v", name, fi.Mode().Perm(), err, want)
		}
	}
	release()
	err := PodInit(context.Background(), InitConfig{Tools: tools, Workspace: t.TempDir(), Fetch: url, Self: self})
	if err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("fetch after release: %v", err)
	}
	resp, err := http.Post(srv.URL+"/workspace/x", "text/plain", nil)
	if err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("POST: %s", resp.Status)
		}
	}
}

// TestUntarRefusesEscape: an entry that would land outside the workspace fails.
func TestUntarRefusesEscape(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"../evil", "/abs/../../evil", "a/../../evil"} {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		must(t, tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: 1, Typeflag: tar.TypeReg}))
		_, _ = tw.Write([]byte("x"))
		must(t, tw.Close())
		parent := t.TempDir()
		dst := filepath.Join(parent, "ws")
		must(t, os.Mkdir(dst, 0o755))
		if err := Untar(&buf, dst); err == nil {
			t.Errorf("Untar of %q succeeded", name)
		}
		if _, err := os.Stat(filepath.Join(parent, "evil")); err == nil {
			t.Errorf("%q was written outside the workspace", name)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestMergeEnv: the step's variables win over the image's; a step's PATH (the
// directories of $GANTRY_PATH first) keeps the image's directories it lacks after its
// own.
func TestMergeEnv(t *testing.T) {
	t.Parallel()
	image := []string{"PATH=/go/bin:/usr/local/go/bin:/usr/bin:/bin", "HOME=/root", "GOLANG_VERSION=1.26"}
	step := []string{"PATH=/workspace/tools:/usr/local/bin:/usr/bin:/bin", "HOME=/home/ci", "FOO=bar"}
	got := mergeEnv(image, step)
	want := []string{"PATH=/workspace/tools:/usr/local/bin:/usr/bin:/bin:/go/bin:/usr/local/go/bin", "HOME=/home/ci",
		"GOLANG_VERSION=1.26", "FOO=bar"}
	if !slices.Equal(got, want) {
		t.Errorf("mergeEnv = %q, want %q", got, want)
	}
	if got := mergeEnv(image, nil); !slices.Equal(got, image) {
		t.Errorf("mergeEnv without step variables = %q, want the image's", got)
	}
}
