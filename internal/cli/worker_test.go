package cli

import (
	"bytes"
	"errors"
	"runtime"
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

// TestWorkerServers: --server names one coordinator, or several replicas of one
// separated by commas, each an http(s) URL given once; the agent gets them in order.
func TestWorkerServers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		server string
		want   []string // nil: a usage error
	}{
		{"one", "http://ci:8080", []string{"http://ci:8080"}},
		{"several", "http://ci-1:8080,https://ci-2, http://ci-3:8080/", []string{"http://ci-1:8080", "https://ci-2", "http://ci-3:8080/"}},
		{"empty items are left out", "http://ci-1:8080,, ", []string{"http://ci-1:8080"}},
		{"one not a URL", "http://ci-1:8080,ci-2:8080", nil},
		{"the same twice", "http://ci-1:8080,http://ci-1:8080", nil},
		{"none", " , ", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := workerConfig{Server: tc.server, Name: "w", MaxJobs: 1, Executor: "shell"}
			ac, err := c.agentConfig()
			if tc.want == nil {
				var usage *usageError
				if !errors.As(err, &usage) {
					t.Fatalf("--server %q: err %v, want a usage error", tc.server, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("--server %q: %v", tc.server, err)
			}
			if !slices.Equal(ac.Servers, tc.want) || ac.Server != tc.want[0] {
				t.Errorf("--server %q: servers %q (server %q), want %q", tc.server, ac.Servers, ac.Server, tc.want)
			}
		})
	}
}

// TestWorkerServerFromEnv: GANTRY_SERVER is read as --server is, list and all.
func TestWorkerServerFromEnv(t *testing.T) {
	t.Parallel()
	env := map[string]string{"GANTRY_SERVER": "http://ci-1:8080,ci-2:8080"}
	var stdout, stderr bytes.Buffer
	a := &app{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stderr, maxRead: defaultMaxRead,
		lookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }}
	if code := a.run(t.Context(), []string{"worker"}); code != exitUsage || !strings.Contains(stderr.String(), `"ci-2:8080"`) {
		t.Errorf("GANTRY_SERVER with a bad second URL: exit %d, stderr %q; want a usage error naming it", code, stderr.String())
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

// TestWorkerPlatformLabels: a worker carries its system and processor as labels, so that a
// workflow job on windows-latest or macos-14 waits for a worker of that system instead of
// running on any; --platform-labels=false leaves them out (a register token scoped to
// other labels), and a kubernetes worker never adds them, its jobs running on the
// cluster's nodes.
func TestWorkerPlatformLabels(t *testing.T) {
	t.Parallel()
	platform := pipeline.PlatformLabels(runtime.GOOS, runtime.GOARCH)
	for _, tc := range []struct {
		executor string
		on       bool
		want     []string
	}{
		{"shell", true, append([]string{"gpu"}, platform...)},
		{"shell", false, []string{"gpu"}},
		{"kubernetes", true, []string{"gpu", pipeline.PrivilegedLabel}},
	} {
		c := workerConfig{Server: "http://x:1", Name: "w", MaxJobs: 1, Labels: "gpu", Executor: tc.executor, PlatformLabels: tc.on}
		ac, err := c.agentConfig()
		if err != nil {
			t.Fatalf("%s (platform labels %v): %v", tc.executor, tc.on, err)
		}
		if !slices.Equal(ac.Labels, tc.want) {
			t.Errorf("%s (platform labels %v): labels %v, want %v", tc.executor, tc.on, ac.Labels, tc.want)
		}
	}
	if darwin := pipeline.PlatformLabels("darwin", "arm64"); !slices.Equal(darwin, []string{"darwin", "arm64", pipeline.MacOSLabel}) {
		t.Errorf("a Mac's labels: %v, want darwin, arm64 and %s, which runs-on: macos-* asks for", darwin, pipeline.MacOSLabel)
	}
}
