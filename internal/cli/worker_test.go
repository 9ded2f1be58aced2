package cli

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

func TestWorkerUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"worker", "--server", "ci.example:8080"},
		{"worker", "--max-jobs", "0"},
		{"worker", "--cpu", "lots"},
		{"worker", "--memory", "8GB"},
		{"worker", "--name", ""},
		{"worker", "extra"},
		{"worker", "--executor", "kubernetes"},
		{"worker", "--labels", "linux,docker"},
		{"worker", "--docker-host", "unix:///var/run/docker.sock"},
		{"worker", "--docker-network-per-job"},
		{"worker", "--docker-allow-privileged"},
		{"worker", "--executor", "docker", "--labels", "docker-privileged"},
		{"up", "--labels", "docker-privileged"},
		{"up", "--docker", "off", "--docker-allow-privileged"},
		{"worker", "--default-image", "busybox"},
		{"worker", "--executor", "docker", "--default-image", "Busybox"},
		{"up", "--docker", "maybe"},
		{"up", "--labels", "docker"},
		{"run", "--docker", "yes", "../../examples/hello.yml"},
	} {
		var stdout, stderr bytes.Buffer
		if code := Run(t.Context(), args, strings.NewReader(""), &stdout, &stderr); code != exitUsage {
			t.Errorf("%q: exit %d, want %d; stderr %s", args, code, exitUsage, stderr.String())
		}
	}
}

func TestWorkerConfig(t *testing.T) {
	t.Parallel()
	c := workerConfig{Server: "http://x:1", Name: "w", MaxJobs: 2, Labels: "linux, amd64,,", CPU: "1.5", Memory: "1Gi", Executor: "shell", Mirrors: "/var/cache/m"}
	ac, err := c.agentConfig()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ac.Labels, ",") != "linux,amd64" || ac.MilliCPU != 1500 || ac.Memory != 1<<30 || ac.MaxJobs != 2 || ac.Mirrors != "/var/cache/m" {
		t.Errorf("agent config = %+v", ac)
	}
}

// TestWorkerPrivilegedLabel: a docker worker carries the label privileged jobs ask for
// only with --docker-allow-privileged; a kubernetes worker always does, its cluster
// deciding; a shell worker never.
func TestWorkerPrivilegedLabel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		executor string
		allow    bool
		want     bool
	}{
		{"docker", false, false},
		{"docker", true, true},
		{"kubernetes", false, true},
		{"shell", false, false},
	} {
		c := workerConfig{Server: "http://x:1", Name: "w", MaxJobs: 1, Labels: "linux", Executor: tc.executor, DockerAllowPrivileged: tc.allow}
		ac, err := c.agentConfig()
		if err != nil {
			t.Fatalf("%s (allow %v): %v", tc.executor, tc.allow, err)
		}
		if got := slices.Contains(ac.Labels, pipeline.PrivilegedLabel); got != tc.want || !slices.Contains(ac.Labels, "linux") {
			t.Errorf("%s (allow %v): labels %v; want %s among them: %v", tc.executor, tc.allow, ac.Labels, pipeline.PrivilegedLabel, tc.want)
		}
	}
}
