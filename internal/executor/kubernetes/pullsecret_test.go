package kubernetes

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/gantry-ci/gantry/internal/executor"
)

func secretNames(t *testing.T, b *bundle) []string {
	t.Helper()
	list, err := b.cs.CoreV1().Secrets("ci").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range list.Items {
		names = append(names, s.Name)
	}
	slices.Sort(names)
	return names
}

func credentialsJob(b *bundle) executor.Job {
	j := testJob(b)
	j.Image = "registry.example.com/team/builder:1"
	j.RegistryAuth = map[string]executor.RegistryCredential{
		"registry.example.com": {Username: "ci", Password: "s3cret"},
		"docker.io":            {Username: "hubuser", Password: "hubtoken"},
	}
	return j
}

// TestPullSecret: a job with registry credentials gets a kubernetes.io/dockerconfigjson
// secret holding them (Docker Hub's under the key the kubelet looks up), labelled and
// owned as its pod, which pulls with it beside the worker's own pull secrets; End
// deletes it with the pod. A job without credentials gets none.
func TestPullSecret(t *testing.T) {
	t.Parallel()
	owner := metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: "gantry-worker-0", UID: types.UID("uid-1")}
	e, b := setup(t, func(c *Config) {
		c.ImagePullSecrets = []string{"org-mirror"}
		c.OwnerReferences = []metav1.OwnerReference{owner}
	})
	scriptStatus(b, func(_ time.Duration, pod *corev1.Pod) {
		setStatus(pod, corev1.PodRunning, nil, nil, []corev1.ContainerStatus{runningC(jobContainer, true)})
	})
	r := await(t, begin(e, credentialsJob(b)))
	if r.err != nil {
		t.Fatal(r.err)
	}
	pods, err := b.cs.CoreV1().Pods("ci").List(context.Background(), metav1.ListOptions{})
	if err != nil || len(pods.Items) != 1 {
		t.Fatalf("pods %v, %v", pods, err)
	}
	pod := pods.Items[0]
	name := pod.Annotations[AnnotationPullSecret]
	if name != pod.Name+"-pull" {
		t.Errorf("pod annotation %s = %q, want %q", AnnotationPullSecret, name, pod.Name+"-pull")
	}
	want := []corev1.LocalObjectReference{{Name: "org-mirror"}, {Name: name}}
	if !slices.Equal(pod.Spec.ImagePullSecrets, want) {
		t.Errorf("pod's image pull secrets %v, want %v", pod.Spec.ImagePullSecrets, want)
	}
	secret, err := b.cs.CoreV1().Secrets("ci").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if secret.Type != corev1.SecretTypeDockerConfigJson {
		t.Errorf("secret type %q", secret.Type)
	}
	if !maps.Equal(secret.Labels, pod.Labels) {
		t.Errorf("secret labels %v, want the pod's %v", secret.Labels, pod.Labels)
	}
	if secret.Annotations[LabelJob] != "01JOB" || secret.Annotations[LabelOwner] != "worker-a" {
		t.Errorf("secret annotations %v", secret.Annotations)
	}
	if len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0] != owner {
		t.Errorf("secret owners %v, want %v", secret.OwnerReferences, owner)
	}
	var cfg struct {
		Auths map[string]struct{ Username, Password, Auth string }
	}
	if err := json.Unmarshal(secret.Data[corev1.DockerConfigJsonKey], &cfg); err != nil {
		t.Fatalf("%s: %v", corev1.DockerConfigJsonKey, err)
	}
	for key, up := range map[string][2]string{"registry.example.com": {"ci", "s3cret"}, "https://index.docker.io/v1/": {"hubuser", "hubtoken"}} {
		a, ok := cfg.Auths[key]
		if !ok || a.Username != up[0] || a.Password != up[1] || a.Auth != base64.StdEncoding.EncodeToString([]byte(up[0]+":"+up[1])) {
			t.Errorf("auths[%s] = %+v, %v; want %s", key, a, ok, up)
		}
	}
	if len(cfg.Auths) != 2 {
		t.Errorf("auths %v, want two registries", cfg.Auths)
	}
	if err := r.s.End(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := secretNames(t, b); len(s) != 0 {
		t.Errorf("secrets %v after End, want none", s)
	}

	// Without credentials: no secret, no annotation.
	e2, b2 := setup(t, nil)
	scriptStatus(b2, func(_ time.Duration, pod *corev1.Pod) {
		setStatus(pod, corev1.PodRunning, nil, nil, []corev1.ContainerStatus{runningC(jobContainer, true)})
	})
	r = await(t, begin(e2, testJob(b2)))
	if r.err != nil {
		t.Fatal(r.err)
	}
	if s := secretNames(t, b2); len(s) != 0 {
		t.Errorf("secrets %v for a job without credentials", s)
	}
	pods, _ = b2.cs.CoreV1().Pods("ci").List(context.Background(), metav1.ListOptions{})
	if p := pods.Items[0]; len(p.Spec.ImagePullSecrets) != 0 || p.Annotations[AnnotationPullSecret] != "" {
		t.Errorf("pod of a job without credentials: pull secrets %v, annotations %v", p.Spec.ImagePullSecrets, p.Annotations)
	}
}

// TestPullSecretBeginFails: the secret goes when Begin fails, whether the pod did not
// start or could not even be created.
func TestPullSecretBeginFails(t *testing.T) {
	t.Parallel()
	t.Run("pod fails", func(t *testing.T) {
		t.Parallel()
		e, b := setup(t, nil)
		scriptStatus(b, func(_ time.Duration, pod *corev1.Pod) {
			setStatus(pod, corev1.PodPending, []corev1.PodCondition{scheduledCond}, []corev1.ContainerStatus{initDone},
				[]corev1.ContainerStatus{waiting(jobContainer, "ErrImagePull", "unauthorized")})
		})
		r := await(t, begin(e, credentialsJob(b)))
		if !errors.Is(r.err, executor.ErrImage) {
			t.Fatalf("Begin: %v, want an image error", r.err)
		}
		if s := secretNames(t, b); len(s) != 0 {
			t.Errorf("secrets %v after a failed Begin", s)
		}
	})
	t.Run("pod not created", func(t *testing.T) {
		t.Parallel()
		e, b := setup(t, nil)
		b.cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
			return true, nil, apierrors.NewForbidden(corev1.Resource("pods"), "", errors.New("quota exceeded"))
		})
		r := await(t, begin(e, credentialsJob(b)))
		if r.err == nil {
			t.Fatal("Begin succeeded without a pod")
		}
		if s := secretNames(t, b); len(s) != 0 {
			t.Errorf("secrets %v after the pod could not be created", s)
		}
	})
}

// TestSweepPullSecrets: Sweep deletes the pull secrets its predecessor's pods name, and
// not those of another worker's pods or secrets no pod of its names.
func TestSweepPullSecrets(t *testing.T) {
	t.Parallel()
	e, b := setup(t, nil)
	ctx := context.Background()
	mkPod := func(name, owner, secret string) {
		t.Helper()
		ann := map[string]string{LabelOwner: owner}
		if secret != "" {
			ann[AnnotationPullSecret] = secret
		}
		_, err := b.cs.CoreV1().Pods("ci").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ci",
			Labels: map[string]string{LabelManaged: "gantry", LabelOwner: owner}, Annotations: ann}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []string{"gantry-j1-1-aaa-pull", "gantry-j3-1-ccc-pull", "db-password"} {
		if _, err := b.cs.CoreV1().Secrets("ci").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: s, Namespace: "ci"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mkPod("gantry-j1-1-aaa", "worker-a", "gantry-j1-1-aaa-pull")
	mkPod("gantry-j2-1-bbb", "worker-a", "gantry-j2-1-bbb-pull") // its secret already gone
	mkPod("gantry-j3-1-ccc", "worker-b", "gantry-j3-1-ccc-pull")
	n, err := e.Sweep(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("swept %d pods, want 2", n)
	}
	if got, want := secretNames(t, b), []string{"db-password", "gantry-j3-1-ccc-pull"}; !slices.Equal(got, want) {
		t.Errorf("secrets left %v, want %v", got, want)
	}
}
