package deploytest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/gantry-ci/gantry/internal/blob/blobtest"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/executor/kubernetes/k8stest"
	"github.com/gantry-ci/gantry/internal/testdb"
)

func TestMain(m *testing.M) { testdb.Main(m) }

// hostIP is where the pods reach the host: the pod bridge's gateway. The test cluster
// has no DNS and no kube-proxy, and the pods have no route off the node.
const hostIP = "10.244.0.1"

// base is the deployment the tests apply, as a user would.
const base = "../../deploy/kubernetes"

// options change the shipped deployment for one test, in its overlay.
type options struct {
	// coordinators replaces the coordinator's replicas (0: as shipped).
	coordinators int
	// rules replaces the worker Role's rules (nil: as shipped).
	rules []rbacv1.PolicyRule
}

// deployment is Gantry deployed from deploy/kubernetes into a namespace of the test's
// own, on a real PostgreSQL and MinIO of the host, set up as docs/kubernetes.md's "From
// an empty cluster to a run" says.
type deployment struct {
	c      *k8stest.Cluster
	ns     string
	image  string // gantry's image (coordinator, worker, the job pods' init container)
	server string // the coordinator, as the host reaches it: http://POD_IP:8080
	admin  string // an admin token
}

// deploy deploys Gantry and returns once a worker runs. Its cleanups delete the
// Deployments and wait for their pods to stop (the worker drains on SIGTERM) before the
// namespace goes.
func deploy(t *testing.T, o options) *deployment {
	t.Helper()
	begin := time.Now()
	c := k8stest.Get(t)
	d := &deployment{c: c, ns: c.Namespace(t), image: c.GantryImage(t)}

	// The stores: a real PostgreSQL database and a MinIO bucket, both on the host's
	// loopback, relayed to the pod bridge's gateway.
	db, err := url.Parse(testdb.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	db.Host = forward(t, db.Host)
	m, err := blobtest.StartMinIO(t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	})
	blobs := "s3://gantry-artifacts?endpoint=" + forward(t, m.Endpoint) + "&region=us-east-1&secure=false"
	t.Cleanup(func() { d.teardown(t) })
	t.Cleanup(func() { d.diagnose(t) })

	// 1. The secrets the manifests read (the namespace is the test's).
	d.kubectl(t, "", "create", "secret", "generic", "gantry-db", "--from-literal=url="+db.String())
	d.kubectl(t, "", "create", "secret", "generic", "gantry-blobs", "--from-literal=url="+blobs,
		"--from-literal=access_key_id="+m.AccessKey, "--from-literal=secret_access_key="+m.SecretKey)

	// 2. Gantry: kubectl apply -k of an overlay on deploy/kubernetes.
	d.kubectl(t, "", "apply", "-k", d.overlay(t, o))
	d.kubectl(t, "", "rollout", "status", "deploy/gantry-coordinator", "--timeout=5m")
	coord := d.coordinatorIP(t)
	d.server = "http://" + net.JoinHostPort(coord, "8080")
	t.Logf("coordinator up at %s after %v", d.server, time.Since(begin).Round(time.Second))

	// Without DNS the worker's --server=http://gantry:8080 resolves through the pod's
	// /etc/hosts, to a coordinator pod (the Service's port is the pod's).
	aliases, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
		"hostAliases": []corev1.HostAlias{{IP: coord, Hostnames: []string{"gantry", "gantry." + d.ns + ".svc"}}}}}}})
	d.kubectl(t, "", "patch", "deploy/gantry-worker", "--type=strategic", "-p", string(aliases))

	// 3. Tokens, made in a coordinator pod, and the workers' secret.
	d.admin = d.token(t, "--role", "admin", "--name", "ops")
	register := d.token(t, "--role", "register", "--name", "k8s-workers", "--labels", "linux,kubernetes,docker,docker-privileged")
	read := d.token(t, "--role", "read", "--name", "keda")
	d.kubectl(t, "", "create", "secret", "generic", "gantry-worker-token", "--from-literal=token="+register)
	d.kubectl(t, "", "create", "secret", "generic", "gantry-read-token", "--from-literal=token="+read)
	d.kubectl(t, "", "rollout", "restart", "deploy/gantry-worker")
	d.kubectl(t, "", "rollout", "status", "deploy/gantry-worker", "--timeout=5m")
	d.waitWorker(t)
	t.Logf("deployed in %s in %v", d.ns, time.Since(begin).Round(time.Second))
	return d
}

// waitWorker waits until a worker pod of the Deployment is online at the coordinator.
func (d *deployment) waitWorker(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	var last string
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, d.server+"/api/v1/workers", nil)
		req.Header.Set("Authorization", "Bearer "+d.admin)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			var list struct {
				Workers []struct {
					Name  string `json:"name"`
					State string `json:"state"`
				} `json:"workers"`
			}
			err = json.NewDecoder(resp.Body).Decode(&list)
			resp.Body.Close()
			last = fmt.Sprintf("%d %+v %v", resp.StatusCode, list.Workers, err)
			for _, w := range list.Workers {
				if strings.HasPrefix(w.Name, "gantry-worker-") && w.State != "offline" {
					return
				}
			}
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no worker of deploy/gantry-worker online at %s within 3m; the workers: %s", d.server, last)
		}
		time.Sleep(time.Second)
	}
}

// overlay writes the test's kustomization over deploy/kubernetes: the test's namespace
// and image, no KEDA (the test cluster has none), and o's changes.
func (d *deployment) overlay(t *testing.T, o options) string {
	t.Helper()
	dir := t.TempDir()
	abs, err := filepath.Abs(base)
	if err != nil {
		t.Fatal(err)
	}
	// kustomize refuses an absolute path to a base.
	rel, err := filepath.Rel(dir, abs)
	if err != nil {
		t.Fatal(err)
	}
	name, tag, _ := strings.Cut(d.image, ":")
	patch := func(v any) map[string]string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return map[string]string{"patch": string(b)}
	}
	obj := func(apiVersion, kind, name string, rest map[string]any) map[string]any {
		v := map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": name}}
		for k, x := range rest {
			v[k] = x
		}
		return v
	}
	deleted := map[string]any{"$patch": "delete"}
	// The shipped requests (a core for the two coordinators) are for production; the
	// test node has two cores, shared by every test's pods.
	requests := map[string]any{"requests": map[string]string{"cpu": "50m"}}
	patches := []map[string]string{
		patch(obj("keda.sh/v1alpha1", "ScaledObject", "gantry-worker", deleted)),
		patch(obj("keda.sh/v1alpha1", "TriggerAuthentication", "gantry", deleted)),
		patch(obj("apps/v1", "Deployment", "gantry-worker", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "worker", "resources": requests, "env": []corev1.EnvVar{
				{Name: "GANTRY_POD_IMAGE", Value: d.image},
			}}}}}}})),
		patch(obj("apps/v1", "Deployment", "gantry-coordinator", map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "coordinator", "resources": requests}}}}}})),
	}
	if o.coordinators > 0 {
		patches = append(patches, patch(obj("apps/v1", "Deployment", "gantry-coordinator", map[string]any{"spec": map[string]any{"replicas": o.coordinators}})))
	}
	if o.rules != nil {
		patches = append(patches, patch(obj("rbac.authorization.k8s.io/v1", "Role", "gantry-worker", map[string]any{"rules": o.rules})))
	}
	k, err := json.Marshal(map[string]any{
		"apiVersion": "kustomize.config.k8s.io/v1beta1",
		"kind":       "Kustomization",
		"namespace":  d.ns,
		"resources":  []string{rel},
		"images":     []map[string]string{{"name": "ghcr.io/gantry-ci/gantry", "newName": name, "newTag": tag}},
		"patches":    patches,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kustomization.yaml"), k, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// coordinatorIP returns the IP of a ready coordinator pod.
func (d *deployment) coordinatorIP(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pods, err := d.c.Client.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=coordinator"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil && p.Status.PodIP != "" {
				return p.Status.PodIP
			}
		}
	}
	t.Fatalf("no ready coordinator pod in %s after its rollout", d.ns)
	return ""
}

// token runs `gantry token create` in a coordinator pod, as docs/kubernetes.md says.
func (d *deployment) token(t *testing.T, args ...string) string {
	t.Helper()
	out := d.kubectl(t, "", append([]string{"exec", "deploy/gantry-coordinator", "--", "/gantry", "token", "create"}, args...)...)
	tok := strings.TrimSpace(out)
	if !strings.HasPrefix(tok, "gtk_") || strings.ContainsAny(tok, " \n") {
		t.Fatalf("gantry token create %v printed %q, not a token", args, out)
	}
	return tok
}

func (d *deployment) kubectl(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, err := d.run(stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// run runs kubectl in the test's namespace and returns its stdout.
func (d *deployment) run(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "kubectl", append([]string{"--kubeconfig", d.c.Kubeconfig, "-n", d.ns}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}

// diagnose logs the state of gantry's pods when the test failed.
func (d *deployment) diagnose(t *testing.T) {
	t.Helper()
	if !t.Failed() {
		return
	}
	for _, args := range [][]string{
		{"get", "all,events", "-o", "wide"},
		{"describe", "pods"},
		{"logs", "-l", "app.kubernetes.io/name=gantry", "--all-containers", "--prefix", "--tail=40"},
	} {
		out, err := d.run("", args...)
		t.Logf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// teardown deletes the Deployments and waits until their pods stopped: a worker told
// to stop finishes (here: has no) jobs and exits, well within its grace.
func (d *deployment) teardown(t *testing.T) {
	t.Helper()
	if _, err := d.run("", "delete", "deployments", "--all", "--wait=true", "--timeout=3m"); err != nil {
		t.Error(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		pods, err := d.c.Client.CoreV1().Pods(d.ns).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=gantry"})
		cancel()
		if err == nil && len(pods.Items) == 0 {
			return
		}
		if time.Now().After(deadline) {
			var names []string
			if pods != nil {
				for _, p := range pods.Items {
					names = append(names, p.Name)
				}
			}
			t.Errorf("gantry's pods %v still there 3m after their Deployments were deleted (%v)", names, err)
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// submit runs `gantry submit --follow` on the host against the coordinator and returns
// what it printed (the jobs' logs) and its error (nil when the run succeeded).
func (d *deployment) submit(t *testing.T, pipeline string) (string, error) {
	t.Helper()
	bin, err := k8stest.GantryBinary()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(file, []byte(pipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "submit", "--follow", file)
	cmd.Env = append(os.Environ(), "GANTRY_SERVER="+d.server, "GANTRY_TOKEN="+d.admin, "HOME="+t.TempDir(), "NO_COLOR=1")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("gantry submit --follow did not end within 6m:\n%s", out.String())
	}
	return out.String(), err
}

// forward listens on the pod bridge's gateway and relays each connection to target, an
// address on the host's loopback (where testdb and blobtest listen); it returns the
// address for the pods. It stops, closing what it relays, when the test ends.
func forward(t *testing.T, target string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(hostIP, "0"))
	if err != nil {
		t.Fatalf("listen on the pod bridge's gateway %s (is the cluster up?): %v", hostIP, err)
	}
	var (
		mu    sync.Mutex
		conns = map[net.Conn]bool{}
		wg    sync.WaitGroup
	)
	track := func(c net.Conn) bool {
		mu.Lock()
		defer mu.Unlock()
		if conns == nil {
			c.Close()
			return false
		}
		conns[c] = true
		return true
	}
	wg.Go(func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				out, err := net.DialTimeout("tcp", target, 10*time.Second)
				if err != nil {
					in.Close()
					return
				}
				if !track(in) || !track(out) {
					in.Close()
					out.Close()
					return
				}
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
				<-done
				in.Close()
				out.Close()
				<-done
			})
		}
	})
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		conns = nil
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String()
}

// jobPods returns the pods the log says were created for each job, by job.
func jobPods(t *testing.T, ns, log string) map[string]string {
	t.Helper()
	re := regexp.MustCompile(`(?m)^(\S+?)\s*[|│]\s*pod ` + regexp.QuoteMeta(ns) + `/(\S+) created for image`)
	pods := map[string]string{}
	for _, m := range re.FindAllStringSubmatch(log, -1) {
		pods[m[1]] = m[2]
	}
	return pods
}

// TestDeploy deploys Gantry from deploy/kubernetes as docs/kubernetes.md says, with two
// coordinators on PostgreSQL and S3 (MinIO), and runs a pipeline of two jobs on its
// worker, each in a pod, the second reading the first's artifact and output.
func TestDeploy(t *testing.T) {
	t.Parallel()
	begin := time.Now()
	d := deploy(t, options{})
	busybox := d.c.Image(t, dockertest.Spec{Name: dockertest.Busybox})
	pipeline := `name: deploy-test
jobs:
  make:
    runs_on: [kubernetes]
    image: ` + busybox + `
    steps:
      - run: |
          echo "made in $(hostname)" > made.txt
          echo "greeting=hello from $(hostname)" >> "$GANTRY_OUTPUT"
    artifacts: { paths: [made.txt] }
  use:
    runs_on: [kubernetes]
    image: ` + busybox + `
    needs: [make]
    steps:
      - run: |
          echo "artifact: $(cat made.txt)"
          echo "output: ${{ needs.make.outputs.greeting }}"
          echo "use ran in $(hostname)"
`
	ran := time.Now()
	log, err := d.submit(t, pipeline)
	if err != nil {
		t.Fatalf("the run did not succeed (%v):\n%s", err, log)
	}
	t.Logf("the run took %v (deploy and run: %v)", time.Since(ran).Round(time.Second), time.Since(begin).Round(time.Second))

	pods := jobPods(t, d.ns, log)
	if len(pods) != 2 || pods["make"] == "" || pods["use"] == "" {
		t.Fatalf("job pods %v, want one for make and one for use in %s:\n%s", pods, d.ns, log)
	}
	// A pod's hostname is its name: each step ran in its job's pod, and the artifact and
	// the output came from make's pod.
	for _, want := range []string{
		"artifact: made in " + pods["make"],
		"output: hello from " + pods["make"],
		"use ran in " + pods["use"],
	} {
		if !strings.Contains(log, want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	// The cluster saw the pods: the kubelet started their containers in the namespace.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for job, pod := range pods {
		ev, err := d.c.Client.CoreV1().Events(d.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod,involvedObject.name=" + pod})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(ev.Items, func(e corev1.Event) bool { return e.Reason == "Started" }) {
			t.Errorf("no Started event of pod %s of job %s: %v", pod, job, ev.Items)
		}
	}
	// A job's pod is deleted when the job ends.
	d.c.NoLeftovers(t, d.ns, time.Minute)
}

// TestDeployRBAC: a worker Role without a verb the executor uses fails the job, the
// log naming the verb and resource the cluster refused.
func TestDeployRBAC(t *testing.T) {
	t.Parallel()
	var shipped []rbacv1.PolicyRule
	for _, r := range workerRole(t).Rules {
		if slices.Equal(r.Resources, []string{"pods/exec"}) {
			continue
		}
		shipped = append(shipped, r)
	}
	d := deploy(t, options{coordinators: 1, rules: shipped})
	busybox := d.c.Image(t, dockertest.Spec{Name: dockertest.Busybox})
	log, err := d.submit(t, `name: rbac-test
jobs:
  step:
    runs_on: [kubernetes]
    image: `+busybox+`
    steps:
      - run: echo should not run
`)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("gantry submit --follow: %v, want exit status 1 (the run failed):\n%s", err, log)
	}
	for _, want := range []string{`cannot create resource "pods/exec"`, "forbidden"} {
		if !strings.Contains(log, want) {
			t.Errorf("the failed job's log lacks %q:\n%s", want, log)
		}
	}
	// The log names the step by its command; its output would be a line of its own.
	if regexp.MustCompile(`(?m)\|\s*should not run$`).MatchString(log) {
		t.Errorf("the step ran:\n%s", log)
	}
	d.c.NoLeftovers(t, d.ns, time.Minute)
}

// workerRole is the worker's Role as kustomize renders deploy/kubernetes.
func workerRole(t *testing.T) rbacv1.Role {
	t.Helper()
	for _, doc := range render(t, base) {
		var r rbacv1.Role
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind == "Role" && r.Name == "gantry-worker" {
			return r
		}
	}
	t.Fatal("deploy/kubernetes renders no Role gantry-worker")
	return rbacv1.Role{}
}

// render runs `kubectl kustomize` on dir and returns its documents.
func render(t *testing.T, dir string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "kubectl", "kustomize", dir)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return strings.Split(string(out), "\n---\n")
}

// TestRender: kubectl kustomize renders deploy/kubernetes whole, KEDA's objects (which
// the cluster tests drop) included, every object in the namespace gantry.
func TestRender(t *testing.T) {
	t.Parallel()
	kinds := map[string]int{}
	for _, doc := range render(t, base) {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &meta); err != nil {
			t.Fatal(err)
		}
		kinds[meta.Kind]++
		if meta.Kind != "Namespace" && meta.Metadata.Namespace != "gantry" {
			t.Errorf("%s %s is in namespace %q, want gantry", meta.Kind, meta.Metadata.Name, meta.Metadata.Namespace)
		}
	}
	want := map[string]int{"Namespace": 1, "Deployment": 2, "Service": 1, "ServiceAccount": 2, "Role": 1, "RoleBinding": 1,
		"ScaledObject": 1, "TriggerAuthentication": 1}
	if fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Errorf("kinds rendered %v, want %v", kinds, want)
	}
}
