package cli

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
