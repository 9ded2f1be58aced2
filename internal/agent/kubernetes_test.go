package agent

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/kubernetes"
)

// localPods is a kubernetes.Execer for a fake cluster whose pods are directories on the
// test's disk: the first exec into a pod runs its init container's pod-init for real
// (the workspace fetched from the worker), and pod-exec, pod-files and pod-tar then run
// as in the job's container, with the pod's /workspace at its directory.
type localPods struct {
	t    *testing.T
	cs   *fake.Clientset
	self string // the binary pod-init copies for the job container: any file

	mu   sync.Mutex
	dirs map[string]string
	cmds []string
}

func (l *localPods) dir(ctx context.Context, ns, pod string) (string, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if d, ok := l.dirs[pod]; ok {
		return d, nil
	}
	p, err := l.cs.CoreV1().Pods(ns).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	args := p.Spec.InitContainers[0].Args
	fetch := ""
	if i := slices.Index(args, "--fetch"); i >= 0 {
		fetch = args[i+1]
	}
	d := l.t.TempDir()
	if err := kubernetes.PodInit(ctx, kubernetes.InitConfig{Tools: l.t.TempDir(), Workspace: d, Fetch: fetch, Self: l.self}); err != nil {
		return "", fmt.Errorf("pod-init: %w", err)
	}
	l.dirs[pod] = d
	return d, nil
}

func (l *localPods) Exec(ctx context.Context, ns, pod, container string, cmd []string, stdin io.Reader, stdout, stderr io.Writer) (int, error) {
	dir, err := l.dir(ctx, ns, pod)
	if err != nil {
		return -1, err
	}
	local := func(s string) string { return strings.ReplaceAll(s, executor.WorkspacePath, dir) }
	l.mu.Lock()
	l.cmds = append(l.cmds, cmd[1])
	l.mu.Unlock()
	switch cmd[1] {
	case "pod-exec":
		br := bufio.NewReader(stdin)
		line, err := br.ReadBytes('\n')
		if err != nil {
			return -1, err
		}
		var req kubernetes.ExecRequest
		if err := json.Unmarshal(line, &req); err != nil {
			return -1, err
		}
		req.Dir = local(req.Dir)
		for i, kv := range req.Env {
			req.Env[i] = local(kv)
		}
		b, _ := json.Marshal(req)
		return kubernetes.PodExec(io.MultiReader(strings.NewReader(string(b)+"\n"), br), stdout, stderr), nil
	case "pod-files":
		if err := kubernetes.PodFiles(stdout, local(cmd[3])); err != nil {
			fmt.Fprintln(stderr, err)
			return 1, nil
		}
		return 0, nil
	case "pod-tar":
		if err := kubernetes.PodTar(stdout, local(cmd[3])); err != nil {
			fmt.Fprintln(stderr, err)
			return 1, nil
		}
		return 0, nil
	}
	return -1, fmt.Errorf("unknown command %q", cmd)
}

func (l *localPods) commands() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.cmds...)
}

// kubeExecutor is the kubernetes executor on a fake clientset whose pods run at once,
// their workspaces served to localPods over HTTP as a worker serves them.
func kubeExecutor(t *testing.T) (*kubernetes.Executor, *localPods) {
	cs := fake.NewClientset()
	cs.PrependReactor("get", "pods", func(a k8stesting.Action) (bool, k8sruntime.Object, error) {
		g := a.(k8stesting.GetAction)
		obj, err := cs.Tracker().Get(corev1.SchemeGroupVersion.WithResource("pods"), g.GetNamespace(), g.GetName())
		if err != nil {
			return true, nil, err
		}
		pod := obj.(*corev1.Pod).DeepCopy()
		pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "job", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
		return true, pod, nil
	})
	var wsrv *kubernetes.WorkspaceServer
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { wsrv.ServeHTTP(w, r) }))
	t.Cleanup(srv.Close)
	wsrv = kubernetes.NewWorkspaceServer(srv.URL)
	self := filepath.Join(t.TempDir(), "gantry")
	if err := os.WriteFile(self, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	pods := &localPods{t: t, cs: cs, self: self, dirs: map[string]string{}}
	e, err := kubernetes.New(kubernetes.Config{Client: cs, Execer: pods, Namespace: "ci", InitImage: "gantry:test", Owner: "k8s",
		Workspaces: wsrv, Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	if err != nil {
		t.Fatal(err)
	}
	return e, pods
}

// TestKubernetesStepFiles: in a kubernetes job, what a step writes to $GANTRY_ENV,
// $GANTRY_PATH and $GANTRY_OUTPUT in its pod reaches the later steps, the job's outputs
// and the job that needs it, as with any executor.
func TestKubernetesStepFiles(t *testing.T) {
	t.Parallel()
	b := setup(t)
	e, pods := kubeExecutor(t)
	b.startWith(t, Config{Name: "k8s", MaxJobs: 1, Executor: e})
	run := b.submit(t, `
jobs:
  build:
    image: gantry-test/go:1.26
    steps:
      - id: v
        run: |
          echo "version=1.2.3" >> "$GANTRY_OUTPUT"
          echo "GREETING=hello" >> "$GANTRY_ENV"
          mkdir -p tools && printf '#!/bin/sh\necho tool-ran\n' > tools/mytool && chmod 755 tools/mytool
          echo /workspace/tools >> "$GANTRY_PATH"
      - run: |
          test "$GREETING" = hello
          test "$(mytool)" = tool-ran
          test "${{ steps.v.outputs.version }}" = 1.2.3
          echo "$GREETING" > greeting.txt
    outputs: { version: "${{ steps.v.outputs.version }}" }
    artifacts: { paths: [greeting.txt] }
  use:
    needs: [build]
    image: gantry-test/go:1.26
    steps:
      - run: test "${{ needs.build.outputs.version }}" = 1.2.3
`)
	b.wantSuccess(t, run)
	jobs, err := b.st.ListJobs(t.Context(), run)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		if j.Key != "build" {
			continue
		}
		full, err := b.st.GetJob(t.Context(), j.ID)
		if err != nil {
			t.Fatal(err)
		}
		if full.Outputs["version"] != "1.2.3" {
			t.Errorf("build's outputs %v, want version 1.2.3", full.Outputs)
		}
	}
	if as := b.runArtifacts(t, run); as["build:greeting.txt"].State != "stored" {
		t.Errorf("artifacts %+v, want greeting.txt stored", as)
	}
	want := []string{"pod-exec", "pod-files", "pod-exec", "pod-files", "pod-tar", "pod-exec", "pod-files"}
	if got := pods.commands(); !slices.Equal(got, want) {
		t.Errorf("execs %q, want %q", got, want)
	}
}
