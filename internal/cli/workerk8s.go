package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	k8s "k8s.io/client-go/kubernetes"

	"github.com/gantry-ci/gantry/internal/executor/kubernetes"
)

// workerKubeConfig is what `gantry worker --executor kubernetes` adds to the worker's
// config: where and how job pods are made.
type workerKubeConfig struct {
	Namespace  string
	Kubeconfig string
	// NodeSelectors are [LABEL@]KEY=VALUE: without LABEL for every pod, with it for
	// the pods of jobs whose runs_on has LABEL.
	NodeSelectors []string
	// Tolerations are [LABEL@]KEY[=VALUE][:EFFECT], LABEL as for NodeSelectors.
	Tolerations      []string
	PodImage         string
	ServiceAccount   string
	ImagePullSecrets []string
	// WorkspaceAddr is where the worker serves workspaces to the init containers;
	// WorkspaceURL is how the pods reach it.
	WorkspaceAddr string
	WorkspaceURL  string
	// OwnerPod and OwnerPodUID name the worker's own pod, so that job pods are removed
	// with it.
	OwnerPod      string
	OwnerPodUID   string
	CheckInterval time.Duration
	CheckStep     time.Duration
	SchedulingSLO time.Duration
	StartTimeout  time.Duration
}

func (c *workerKubeConfig) flags(f *pflag.FlagSet) {
	f.StringVar(&c.Namespace, "namespace", "", "kubernetes executor: namespace of the job pods (default: the worker's own in a cluster, else \"default\")")
	f.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubernetes executor: kubeconfig file (default: in-cluster, else $KUBECONFIG or ~/.kube/config)")
	f.StringArrayVar(&c.NodeSelectors, "node-selector", nil, "kubernetes executor: [LABEL@]KEY=VALUE node selector of the job pods (with LABEL: of jobs whose runs_on has it); repeatable")
	f.StringArrayVar(&c.Tolerations, "toleration", nil, "kubernetes executor: [LABEL@]KEY[=VALUE][:EFFECT] toleration of the job pods (with LABEL: of jobs whose runs_on has it); repeatable")
	f.StringVar(&c.PodImage, "pod-image", "", "kubernetes executor: image holding this gantry binary as /gantry, for the job pods' init container")
	f.StringVar(&c.ServiceAccount, "pod-service-account", "", "kubernetes executor: service account of the job pods (its token is not mounted)")
	f.StringArrayVar(&c.ImagePullSecrets, "image-pull-secret", nil, "kubernetes executor: secret the job pods pull images with; repeatable")
	f.StringVar(&c.WorkspaceAddr, "pod-workspace-addr", "", "kubernetes executor: serve job workspaces to the pods on this address (:8081); empty: jobs start with an empty workspace")
	f.StringVar(&c.WorkspaceURL, "pod-workspace-url", "", "kubernetes executor: URL the pods reach --pod-workspace-addr at (http://10.0.0.5:8081)")
	f.StringVar(&c.OwnerPod, "owner-pod", "", "kubernetes executor: the worker's own pod (name), which owns the job pods; set from the downward API")
	f.StringVar(&c.OwnerPodUID, "owner-pod-uid", "", "kubernetes executor: the UID of --owner-pod")
	f.DurationVar(&c.CheckInterval, "pod-check-interval", 30*time.Second, "kubernetes executor: wait before the second check of a starting pod")
	f.DurationVar(&c.CheckStep, "pod-check-step", 10*time.Second, "kubernetes executor: how much longer each later wait is")
	f.DurationVar(&c.SchedulingSLO, "pod-scheduling-slo", 3*time.Minute, "kubernetes executor: a job pod not placed on a node by then fails the job with the reason")
	f.DurationVar(&c.StartTimeout, "pod-start-timeout", 10*time.Minute, "kubernetes executor: a job pod not running by then (images, init) fails the job")
}

// placement turns the --node-selector and --toleration flags into the executor's
// placement by runs_on label ("" for every pod).
func (c *workerKubeConfig) placement() (map[string]kubernetes.Placement, error) {
	out := map[string]kubernetes.Placement{}
	for _, s := range c.NodeSelectors {
		label, rest := splitLabel(s)
		k, v, ok := strings.Cut(rest, "=")
		if !ok || k == "" {
			return nil, usagef("--node-selector %q: want [LABEL@]KEY=VALUE", s)
		}
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return nil, usagef("--node-selector %q: key: %s", s, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return nil, usagef("--node-selector %q: value: %s", s, strings.Join(errs, "; "))
		}
		p := out[label]
		if p.NodeSelector == nil {
			p.NodeSelector = map[string]string{}
		}
		p.NodeSelector[k] = v
		out[label] = p
	}
	for _, s := range c.Tolerations {
		label, rest := splitLabel(s)
		t, err := parseToleration(rest)
		if err != nil {
			return nil, usagef("--toleration %q: %v", s, err)
		}
		p := out[label]
		p.Tolerations = append(p.Tolerations, t)
		out[label] = p
	}
	return out, nil
}

func splitLabel(s string) (label, rest string) {
	if l, r, ok := strings.Cut(s, "@"); ok {
		return l, r
	}
	return "", s
}

// parseToleration reads KEY[=VALUE][:EFFECT], as kubectl taint writes taints: with a
// value the operator is Equal, without one Exists; no effect tolerates every effect.
func parseToleration(s string) (corev1.Toleration, error) {
	var t corev1.Toleration
	kv, effect, hasEffect := strings.Cut(s, ":")
	if hasEffect {
		switch e := corev1.TaintEffect(effect); e {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
			t.Effect = e
		default:
			return t, fmt.Errorf("effect %q: want NoSchedule, PreferNoSchedule or NoExecute", effect)
		}
	}
	k, v, hasValue := strings.Cut(kv, "=")
	if k == "" {
		return t, errors.New("want [LABEL@]KEY[=VALUE][:EFFECT]")
	}
	if errs := validation.IsQualifiedName(k); len(errs) > 0 {
		return t, fmt.Errorf("key: %s", strings.Join(errs, "; "))
	}
	t.Key = k
	if hasValue {
		t.Operator, t.Value = corev1.TolerationOpEqual, v
	} else {
		t.Operator = corev1.TolerationOpExists
	}
	return t, nil
}

// kubeExecutor is what the worker needs of the kubernetes executor: the executor, and
// the workspace server to listen with (nil when not asked for).
type kubeExecutor struct {
	exec       *kubernetes.Executor
	workspaces *kubernetes.WorkspaceServer
	addr       string
}

// newKubeExecutor connects to the cluster and makes the executor; the worker's name is
// the pods' owner, by which a restarted worker finds its predecessor's pods.
func (c *workerKubeConfig) newKubeExecutor(name string, log *slog.Logger) (*kubeExecutor, error) {
	if c.PodImage == "" {
		return nil, usagef("--executor kubernetes needs --pod-image: an image holding this gantry binary as /gantry")
	}
	if (c.WorkspaceAddr == "") != (c.WorkspaceURL == "") {
		return nil, usagef("--pod-workspace-addr and --pod-workspace-url go together")
	}
	if c.WorkspaceAddr != "" {
		if _, _, err := net.SplitHostPort(c.WorkspaceAddr); err != nil {
			return nil, usagef("--pod-workspace-addr %q: want host:port", c.WorkspaceAddr)
		}
	}
	if (c.OwnerPod == "") != (c.OwnerPodUID == "") {
		return nil, usagef("--owner-pod and --owner-pod-uid go together")
	}
	placement, err := c.placement()
	if err != nil {
		return nil, err
	}
	rc, err := kubernetes.RESTConfig(c.Kubeconfig)
	if err != nil {
		return nil, err
	}
	client, err := k8s.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	ns := c.Namespace
	if ns == "" {
		ns = "default"
		if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil && len(b) > 0 {
			ns = strings.TrimSpace(string(b))
		}
	}
	cfg := kubernetes.Config{
		Client: client, Execer: kubernetes.RemoteExecer{Client: client, Config: rc}, Namespace: ns,
		InitImage: c.PodImage, Owner: name, Placement: placement, ServiceAccount: c.ServiceAccount,
		ImagePullSecrets: c.ImagePullSecrets, CheckInterval: c.CheckInterval, CheckStep: c.CheckStep,
		SchedulingSLO: c.SchedulingSLO, StartTimeout: c.StartTimeout, Logger: log,
	}
	if c.OwnerPod != "" {
		cfg.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: c.OwnerPod, UID: types.UID(c.OwnerPodUID)}}
	}
	ke := &kubeExecutor{addr: c.WorkspaceAddr}
	if c.WorkspaceURL != "" {
		ke.workspaces = kubernetes.NewWorkspaceServer(c.WorkspaceURL)
		cfg.Workspaces = ke.workspaces
	}
	if ke.exec, err = kubernetes.New(cfg); err != nil {
		return nil, err
	}
	return ke, nil
}

// start removes what the worker's predecessor left (under ctx) and serves workspaces
// until serve ends. serve outlives the worker's first signal: a draining worker's
// running jobs still start pods, whose init containers fetch their workspaces here.
func (ke *kubeExecutor) start(ctx, serve context.Context, log *slog.Logger) error {
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := ke.exec.Sweep(sctx)
	if err != nil {
		return fmt.Errorf("remove the pods an earlier worker left: %w", err)
	}
	log.Info("kubernetes executor ready", "swept_pods", n)
	if ke.workspaces == nil {
		return nil
	}
	ln, err := net.Listen("tcp", ke.addr)
	if err != nil {
		return fmt.Errorf("--pod-workspace-addr: %w", err)
	}
	ke.addr = ln.Addr().String()
	srv := &http.Server{Handler: ke.workspaces, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-serve.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("workspace server", "err", err)
		}
	}()
	return nil
}
