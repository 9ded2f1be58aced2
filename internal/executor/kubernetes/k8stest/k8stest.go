// Package k8stest gives tests the real Kubernetes cluster scripts/k8s.sh starts (`make
// test` runs the suite inside `scripts/k8s.sh run`): clients, a namespace of the test's
// own that is checked for leftovers and deleted when it ends, and images, built on the
// spot as the docker tests build theirs and imported into the cluster's containerd, so
// that no pod ever pulls. Without a cluster a test fails, naming how to start one; only
// -short skips.
package k8stest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8s "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/testbin"
)

// The variables scripts/k8s.sh sets for the tests it runs (`scripts/k8s.sh env` prints
// them for a cluster that is up).
const (
	EnvKubeconfig = "GANTRY_TEST_KUBECONFIG"
	EnvContainerd = "GANTRY_TEST_K8S_CONTAINERD"
	EnvNode       = "GANTRY_TEST_K8S_NODE"
)

// Busybox is the job image of the tests: dockertest's busybox image, imported into the
// cluster.
const Busybox = dockertest.Busybox

// Cluster is the test cluster.
type Cluster struct {
	Kubeconfig string
	Config     *rest.Config
	Client     k8s.Interface
	// Containerd is the socket of the cluster's containerd, where images are imported.
	Containerd string
	// Node is the name of the cluster's one node.
	Node string
}

var (
	clusterOnce sync.Once
	cluster     *Cluster
	clusterErr  error
	// kubeletHold is this process's hold on KubeletLock: shared from its first Get on,
	// exclusive while a test of it has the kubelet down.
	kubeletHold *os.File
)

// KubeletLock is the lock file of the cluster's kubelet. Every test process holds it
// shared from its first Get; a test that stops the kubelet holds it exclusively
// (KubeletDown), so that no cluster test of another process (the packages of `go test
// ./...` run at once) starts a pod meanwhile.
const KubeletLock = "/tmp/gantry-k8s-kubelet.lock"

// Get returns the cluster, failing the test when there is none.
func Get(t testing.TB) *Cluster {
	t.Helper()
	kc := os.Getenv(EnvKubeconfig)
	if kc == "" {
		if testing.Short() {
			t.Skip("no Kubernetes cluster (-short): `make test` starts one with scripts/k8s.sh")
		}
		t.Fatalf("no Kubernetes cluster: %s is unset. `make test` starts one; by hand: "+
			"scripts/k8s.sh run -- go test ./internal/executor/kubernetes/... "+
			"(or scripts/k8s.sh up, then export what scripts/k8s.sh env prints)", EnvKubeconfig)
	}
	clusterOnce.Do(func() {
		f, err := os.OpenFile(KubeletLock, os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			clusterErr = fmt.Errorf("open %s: %w", KubeletLock, err)
			return
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
			clusterErr = fmt.Errorf("lock %s shared: %w", KubeletLock, err)
			return
		}
		kubeletHold = f
		cfg, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			clusterErr = fmt.Errorf("kubeconfig %s: %w", kc, err)
			return
		}
		// Tests make many pods at once; the client's default 5 QPS would be the test.
		cfg.QPS, cfg.Burst = 200, 400
		cli, err := k8s.NewForConfig(cfg)
		if err != nil {
			clusterErr = err
			return
		}
		cluster = &Cluster{Kubeconfig: kc, Config: cfg, Client: cli,
			Containerd: os.Getenv(EnvContainerd), Node: os.Getenv(EnvNode)}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := cli.Discovery().ServerVersion(); err != nil {
			clusterErr = fmt.Errorf("the cluster at %s does not answer: %w", cfg.Host, err)
			return
		}
		nodes, err := cli.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			clusterErr = fmt.Errorf("list the cluster's nodes: %w", err)
			return
		}
		if cluster.Node == "" && len(nodes.Items) > 0 {
			cluster.Node = nodes.Items[0].Name
		}
	})
	if clusterErr != nil {
		t.Fatal(clusterErr)
	}
	return cluster
}

// KubeletDown holds KubeletLock exclusively until release is called, which takes it
// back shared: a test that stops the kubelet calls it first, and waits meanwhile for the
// other test processes that use the cluster to end. Tests of this process that run at
// once must not need the kubelet either (such a test is not parallel).
func (c *Cluster) KubeletDown(t testing.TB) (release func()) {
	t.Helper()
	if err := syscall.Flock(int(kubeletHold.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatalf("lock %s: %v", KubeletLock, err)
	}
	return func() {
		if err := syscall.Flock(int(kubeletHold.Fd()), syscall.LOCK_SH); err != nil {
			t.Errorf("lock %s shared again: %v", KubeletLock, err)
		}
	}
}

// Namespace makes a namespace for the test (gantry-test-NNNN) and deletes it when the
// test ends, after checking that the test's pods and secrets are gone: whatever a test
// leaves in it fails the test, naming it.
func (c *Cluster) Namespace(t testing.TB) string {
	t.Helper()
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "gantry-test-" + hex.EncodeToString(b[:])
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, Labels: map[string]string{"gantry.test": "1"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	// A namespace's service accounts come from the controller-manager; a pod made
	// before "default" exists is refused.
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := c.Client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("namespace %s has no default service account after 30s: %v", name, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = c.Client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64(0))})
	})
	return name
}

// Leftovers lists the pods (that have not ended) and the secrets of namespace ns that
// carry the label app.kubernetes.io/managed-by=gantry.
func (c *Cluster) Leftovers(ctx context.Context, ns string) ([]string, error) {
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/managed-by=gantry"}
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods.Items {
		out = append(out, fmt.Sprintf("pod %s (%s)", p.Name, p.Status.Phase))
	}
	secrets, err := c.Client.CoreV1().Secrets(ns).List(ctx, sel)
	if err != nil {
		return nil, err
	}
	for _, s := range secrets.Items {
		out = append(out, "secret "+s.Name)
	}
	return out, nil
}

// NoLeftovers fails the test when ns still holds Gantry's pods or secrets once within
// has passed (a pod being deleted with a grace is given that long to go).
func (c *Cluster) NoLeftovers(t testing.TB, ns string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		left, err := c.Leftovers(ctx, ns)
		cancel()
		if err == nil && len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("left behind in namespace %s after %s: %v %v", ns, within, left, err)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

var (
	importMu sync.Mutex
	imported = map[string]string{} // ref -> image id imported by this process
)

// Image builds spec's image with dockertest (in Docker) and imports it into the
// cluster's containerd under the same name, when containerd lacks that very image.
func (c *Cluster) Image(t testing.TB, spec dockertest.Spec) string {
	t.Helper()
	ref := dockertest.Build(t, spec)
	cli := dockertest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	info, err := cli.ImageInspect(ctx, ref)
	if err != nil {
		t.Fatalf("inspect %s: %v", ref, err)
	}
	importMu.Lock()
	defer importMu.Unlock()
	if imported[ref] == info.ID {
		return ref
	}
	if c.Containerd == "" {
		t.Fatalf("no containerd socket to import %s into (%s is unset)", ref, EnvContainerd)
	}
	// The image's id as a label says whether containerd has this very image.
	label := "gantry.test.id"
	out, err := exec.CommandContext(ctx, "ctr", "-a", c.Containerd, "-n", "k8s.io", "images", "ls", "name=="+dockerRef(ref)).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr images ls: %v: %s", err, out)
	}
	if !bytes.Contains(out, []byte(label+"="+info.ID)) {
		save := exec.CommandContext(ctx, "docker", "save", ref)
		imp := exec.CommandContext(ctx, "ctr", "-a", c.Containerd, "-n", "k8s.io", "images", "import", "-")
		pipe, err := save.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		imp.Stdin = pipe
		var saveErr, impOut bytes.Buffer
		save.Stderr = &saveErr
		imp.Stdout, imp.Stderr = &impOut, &impOut
		if err := save.Start(); err != nil {
			t.Fatalf("docker save %s: %v", ref, err)
		}
		if err := imp.Run(); err != nil {
			_ = save.Wait()
			t.Fatalf("ctr images import %s: %v: %s %s", ref, err, impOut.String(), saveErr.String())
		}
		if err := save.Wait(); err != nil {
			t.Fatalf("docker save %s: %v: %s", ref, err, saveErr.String())
		}
		if out, err := exec.CommandContext(ctx, "ctr", "-a", c.Containerd, "-n", "k8s.io", "images", "label", dockerRef(ref), label+"="+info.ID).CombinedOutput(); err != nil {
			t.Fatalf("ctr images label %s: %v: %s", ref, err, out)
		}
	}
	imported[ref] = info.ID
	return ref
}

// dockerRef is the full name containerd keeps an image imported from Docker under
// (docker.io/ is added to a name without a registry host).
func dockerRef(ref string) string {
	first, _, _ := strings.Cut(ref, "/")
	if !strings.Contains(ref, "/") || !strings.ContainsAny(first, ".:") && first != "localhost" {
		if !strings.Contains(ref, "/") {
			ref = "library/" + ref
		}
		return "docker.io/" + ref
	}
	return ref
}

// GantryImage is the image of the pods' init container (and of a worker run in the
// cluster): busybox, and a static gantry binary of this source tree as /gantry and
// /usr/local/bin/gantry.
func (c *Cluster) GantryImage(t testing.TB) string {
	t.Helper()
	bin, err := GantryBinary()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return c.Image(t, dockertest.Spec{Name: "gantry-test/gantry:" + hex.EncodeToString(sum[:6]),
		Files: map[string]string{"gantry": string(b), "usr/local/bin/gantry": string(b)}})
}

// GantryBinary is testbin.Gantry: a static gantry binary of this source tree, built once
// per test process.
var GantryBinary = testbin.Gantry
