package cli

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/gantry-ci/gantry/internal/executor/kubernetes"
)

func TestWorkerKubePlacement(t *testing.T) {
	t.Parallel()
	c := workerKubeConfig{
		NodeSelectors: []string{"kubernetes.io/os=linux", "gpu@accelerator=nvidia"},
		Tolerations:   []string{"ci:NoSchedule", "gpu@nvidia.com/gpu=present:NoExecute", "spot"},
	}
	p, err := c.placement()
	if err != nil {
		t.Fatal(err)
	}
	if p[""].NodeSelector["kubernetes.io/os"] != "linux" || p["gpu"].NodeSelector["accelerator"] != "nvidia" || len(p[""].NodeSelector) != 1 {
		t.Errorf("node selectors %+v", p)
	}
	want := []corev1.Toleration{
		{Key: "ci", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "spot", Operator: corev1.TolerationOpExists},
	}
	if got := p[""].Tolerations; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("tolerations %+v, want %+v", got, want)
	}
	gpu := corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "present", Effect: corev1.TaintEffectNoExecute}
	if got := p["gpu"].Tolerations; len(got) != 1 || got[0] != gpu {
		t.Errorf("gpu tolerations %+v", got)
	}
	for _, bad := range []workerKubeConfig{
		{NodeSelectors: []string{"novalue"}},
		{NodeSelectors: []string{"=x"}},
		{NodeSelectors: []string{"k=bad value"}},
		{Tolerations: []string{"k:Sometimes"}},
		{Tolerations: []string{":NoSchedule"}},
		{Tolerations: []string{"bad key!"}},
	} {
		_, err := bad.placement()
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("placement(%+v) = %v, want a usage error", bad, err)
		}
	}
}

func TestWorkerKubeConfigChecks(t *testing.T) {
	t.Parallel()
	for _, c := range []workerKubeConfig{
		{},
		{PodImage: "gantry:dev", WorkspaceAddr: ":8081"},
		{PodImage: "gantry:dev", WorkspaceAddr: "nope", WorkspaceURL: "http://x"},
		{PodImage: "gantry:dev", OwnerPod: "w-0"},
		{PodImage: "gantry:dev", NodeSelectors: []string{"x"}},
	} {
		_, err := c.newKubeExecutor("w", slog.New(slog.DiscardHandler))
		var ue *usageError
		if !errors.As(err, &ue) {
			t.Errorf("newKubeExecutor(%+v) = %v, want a usage error", c, err)
		}
	}
	// A kubeconfig that is not there is an error naming it.
	c := workerKubeConfig{PodImage: "gantry:dev", Kubeconfig: "/nonexistent/kubeconfig"}
	if _, err := c.newKubeExecutor("w", slog.New(slog.DiscardHandler)); err == nil {
		t.Error("a missing kubeconfig was accepted")
	}
}

// TestWorkerKubeUsage: gantry worker --executor kubernetes without what it needs is a
// usage error naming the flag, before any cluster is contacted.
func TestWorkerKubeUsage(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--executor", "kubernetes"}, "--pod-image"},
		{[]string{"worker", "--executor", "kubernetes", "--pod-image", "g:1", "--toleration", "k:Never"}, "--toleration"},
		{[]string{"worker", "--executor", "kubernetes", "--step-user", "root"}, "--step-user"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Run(t.Context(), tt.args, strings.NewReader(""), &stdout, &stderr); code != exitUsage || !strings.Contains(stderr.String(), tt.want) {
			t.Errorf("%q: exit %d, stderr %q; want %d naming %s", tt.args, code, stderr.String(), exitUsage, tt.want)
		}
	}
}

// TestWorkerKubeWorkspacesOutliveDrain: the first signal (the command's context) drains
// the worker, but its running jobs' pods still fetch their workspaces: the workspace
// server stops only with serve.
func TestWorkerKubeWorkspacesOutliveDrain(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset()
	ws := kubernetes.NewWorkspaceServer("http://127.0.0.1:1")
	ex, err := kubernetes.New(kubernetes.Config{Client: client, Execer: kubernetes.RemoteExecer{Client: client}, Namespace: "ns",
		InitImage: "gantry", Owner: "w", Workspaces: ws})
	if err != nil {
		t.Fatal(err)
	}
	ke := &kubeExecutor{exec: ex, workspaces: ws, addr: "127.0.0.1:0"}
	ctx, drain := context.WithCancel(context.Background())
	serve, stop := context.WithCancel(context.Background())
	defer stop()
	if err := ke.start(ctx, serve, slog.New(slog.DiscardHandler)); err != nil {
		t.Fatal(err)
	}
	get := func() error {
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get("http://" + ke.addr + "/no-such-workspace")
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	drain()
	if err := get(); err != nil {
		t.Fatalf("the workspace server stopped with the drain: %v", err)
	}
	stop()
	deadline := time.Now().Add(10 * time.Second)
	for get() == nil {
		if time.Now().After(deadline) {
			t.Fatal("the workspace server still answers 10s after serve ended")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
