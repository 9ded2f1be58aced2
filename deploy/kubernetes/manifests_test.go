// Package manifests holds the Kubernetes manifests of a Gantry deployment; its test
// parses each into the Kubernetes API types and checks the references between them.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// kustomization is the part of kustomize's Kustomization these manifests use; a key
// outside it fails the strict parse.
type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
	} `json:"images"`
}

// KEDA's types are not in k8s.io/api: these are the fields of keda.sh/v1alpha1 the
// manifests use, spelled as KEDA's CRDs spell them.
type scaledObject struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		ScaleTargetRef struct {
			APIVersion string `json:"apiVersion,omitempty"`
			Kind       string `json:"kind,omitempty"`
			Name       string `json:"name"`
		} `json:"scaleTargetRef"`
		MinReplicaCount *int32 `json:"minReplicaCount"`
		MaxReplicaCount *int32 `json:"maxReplicaCount"`
		PollingInterval *int32 `json:"pollingInterval"`
		CooldownPeriod  *int32 `json:"cooldownPeriod"`
		Triggers        []struct {
			Type              string            `json:"type"`
			Metadata          map[string]string `json:"metadata"`
			AuthenticationRef *struct {
				Name string `json:"name"`
				Kind string `json:"kind,omitempty"`
			} `json:"authenticationRef"`
		} `json:"triggers"`
	} `json:"spec"`
}

type triggerAuthentication struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		SecretTargetRef []struct {
			Parameter string `json:"parameter"`
			Name      string `json:"name"`
			Key       string `json:"key"`
		} `json:"secretTargetRef"`
	} `json:"spec"`
}

// objects is every object of the deployment, by kind.
type objects struct {
	namespaces      []corev1.Namespace
	deployments     []appsv1.Deployment
	services        []corev1.Service
	serviceAccounts []corev1.ServiceAccount
	roles           []rbacv1.Role
	roleBindings    []rbacv1.RoleBinding
	scaledObjects   []scaledObject
	triggerAuths    []triggerAuthentication
}

// decode parses one document strictly into the type of its kind.
func (o *objects) decode(doc []byte) error {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return err
	}
	strict := func(v any) error { return yaml.UnmarshalStrict(doc, v) }
	key := tm.APIVersion + " " + tm.Kind
	var err error
	switch key {
	case "v1 Namespace":
		var v corev1.Namespace
		err = strict(&v)
		o.namespaces = append(o.namespaces, v)
	case "apps/v1 Deployment":
		var v appsv1.Deployment
		err = strict(&v)
		o.deployments = append(o.deployments, v)
	case "v1 Service":
		var v corev1.Service
		err = strict(&v)
		o.services = append(o.services, v)
	case "v1 ServiceAccount":
		var v corev1.ServiceAccount
		err = strict(&v)
		o.serviceAccounts = append(o.serviceAccounts, v)
	case "rbac.authorization.k8s.io/v1 Role":
		var v rbacv1.Role
		err = strict(&v)
		o.roles = append(o.roles, v)
	case "rbac.authorization.k8s.io/v1 RoleBinding":
		var v rbacv1.RoleBinding
		err = strict(&v)
		o.roleBindings = append(o.roleBindings, v)
	case "keda.sh/v1alpha1 ScaledObject":
		var v scaledObject
		err = strict(&v)
		o.scaledObjects = append(o.scaledObjects, v)
	case "keda.sh/v1alpha1 TriggerAuthentication":
		var v triggerAuthentication
		err = strict(&v)
		o.triggerAuths = append(o.triggerAuths, v)
	default:
		return fmt.Errorf("unexpected object %q", key)
	}
	return err
}

// load reads the kustomization and every resource it lists.
func load(t *testing.T) (kustomization, *objects, map[string]string) {
	t.Helper()
	var k kustomization
	b, err := os.ReadFile("kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	o := &objects{}
	names := map[string]string{} // "Kind/name" -> file
	for _, res := range k.Resources {
		b, err := os.ReadFile(res)
		if err != nil {
			t.Fatalf("kustomization resource %s: %v", res, err)
		}
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
		for i := 0; ; i++ {
			doc, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", res, err)
			}
			if len(bytes.TrimSpace(stripComments(doc))) == 0 {
				continue
			}
			if err := o.decode(doc); err != nil {
				t.Errorf("%s document %d: %v", res, i, err)
				continue
			}
			var meta struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name      string `json:"name"`
					Namespace string `json:"namespace"`
				} `json:"metadata"`
			}
			_ = yaml.Unmarshal(doc, &meta)
			if errs := validation.IsDNS1123Subdomain(meta.Metadata.Name); len(errs) > 0 {
				t.Errorf("%s: %s %q: %s", res, meta.Kind, meta.Metadata.Name, strings.Join(errs, "; "))
			}
			if meta.Metadata.Namespace != "" {
				t.Errorf("%s: %s %s sets a namespace; the kustomization's applies", res, meta.Kind, meta.Metadata.Name)
			}
			id := meta.Kind + "/" + meta.Metadata.Name
			if prev, ok := names[id]; ok {
				t.Errorf("%s defined in %s and %s", id, prev, res)
			}
			names[id] = res
		}
	}
	return k, o, names
}

func stripComments(doc []byte) []byte {
	var out [][]byte
	for _, l := range bytes.Split(doc, []byte("\n")) {
		if !bytes.HasPrefix(bytes.TrimSpace(l), []byte("#")) {
			out = append(out, l)
		}
	}
	return bytes.Join(out, []byte("\n"))
}

// TestKustomization: every manifest is a resource of the kustomization and every
// resource exists; the images named in the manifests are set by it.
func TestKustomization(t *testing.T) {
	t.Parallel()
	k, o, _ := load(t)
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("kustomization is %s %s", k.APIVersion, k.Kind)
	}
	files, err := filepath.Glob("*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f != "kustomization.yaml" && !slices.Contains(k.Resources, f) {
			t.Errorf("%s is not a resource of kustomization.yaml", f)
		}
	}
	if len(o.namespaces) != 1 || o.namespaces[0].Name != k.Namespace {
		t.Errorf("namespaces %v, want the kustomization's %q", o.namespaces, k.Namespace)
	}
	images := map[string]bool{}
	for _, im := range k.Images {
		images[im.Name] = im.NewName != ""
	}
	for _, d := range o.deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			if !images[c.Image] {
				t.Errorf("deployment %s container %s: image %q is not set by the kustomization", d.Name, c.Name, c.Image)
			}
			// The image need only hold /gantry; its entrypoint may be anything.
			if !slices.Equal(c.Command, []string{"/gantry"}) {
				t.Errorf("deployment %s container %s: command %q, want /gantry", d.Name, c.Name, c.Command)
			}
		}
	}
}

// TestReferences: what each object names exists, and selectors select.
func TestReferences(t *testing.T) {
	t.Parallel()
	_, o, names := load(t)
	has := func(kind, name string) bool { _, ok := names[kind+"/"+name]; return ok }
	deployments := map[string]appsv1.Deployment{}
	for _, d := range o.deployments {
		deployments[d.Name] = d
		sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
		if err != nil || sel.Empty() || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("deployment %s: selector %v does not select its pods' labels %v (%v)", d.Name, d.Spec.Selector, d.Spec.Template.Labels, err)
		}
		if sa := d.Spec.Template.Spec.ServiceAccountName; sa != "" && !has("ServiceAccount", sa) {
			t.Errorf("deployment %s: service account %s is not defined", d.Name, sa)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, a := range c.Args {
				if sa, ok := strings.CutPrefix(a, "--pod-service-account="); ok && !has("ServiceAccount", sa) {
					t.Errorf("deployment %s: --pod-service-account %s is not defined", d.Name, sa)
				}
			}
			vols := map[string]bool{}
			for _, v := range d.Spec.Template.Spec.Volumes {
				vols[v.Name] = true
			}
			for _, m := range c.VolumeMounts {
				if !vols[m.Name] {
					t.Errorf("deployment %s container %s mounts undefined volume %s", d.Name, c.Name, m.Name)
				}
			}
		}
	}
	for _, s := range o.services {
		sel := labels.SelectorFromSet(s.Spec.Selector)
		matched := false
		for _, d := range o.deployments {
			if len(s.Spec.Selector) > 0 && sel.Matches(labels.Set(d.Spec.Template.Labels)) {
				matched = true
				for _, p := range s.Spec.Ports {
					if p.TargetPort.StrVal != "" && !hasPort(d, p.TargetPort.StrVal) {
						t.Errorf("service %s port %s: target port %q is not a port of deployment %s", s.Name, p.Name, p.TargetPort.StrVal, d.Name)
					}
				}
			}
		}
		if !matched {
			t.Errorf("service %s: selector %v matches no deployment's pods", s.Name, s.Spec.Selector)
		}
	}
	for _, rb := range o.roleBindings {
		if rb.RoleRef.Kind != "Role" || rb.RoleRef.APIGroup != rbacv1.GroupName || !has("Role", rb.RoleRef.Name) {
			t.Errorf("role binding %s: role %+v is not defined", rb.Name, rb.RoleRef)
		}
		for _, s := range rb.Subjects {
			if s.Kind != rbacv1.ServiceAccountKind || !has("ServiceAccount", s.Name) {
				t.Errorf("role binding %s: subject %+v is not a defined service account", rb.Name, s)
			}
		}
	}
	auths := map[string]bool{}
	for _, a := range o.triggerAuths {
		auths[a.Name] = true
	}
	for _, so := range o.scaledObjects {
		d, ok := deployments[so.Spec.ScaleTargetRef.Name]
		if !ok {
			t.Errorf("scaled object %s: target %s is not a deployment", so.Name, so.Spec.ScaleTargetRef.Name)
		}
		if so.Spec.MinReplicaCount == nil || so.Spec.MaxReplicaCount == nil || *so.Spec.MinReplicaCount > *so.Spec.MaxReplicaCount {
			t.Errorf("scaled object %s: replica bounds %v..%v", so.Name, so.Spec.MinReplicaCount, so.Spec.MaxReplicaCount)
		}
		if len(so.Spec.Triggers) == 0 {
			t.Errorf("scaled object %s has no trigger", so.Name)
		}
		for _, tr := range so.Spec.Triggers {
			if tr.Type != "metrics-api" || tr.Metadata["valueLocation"] != "desired_workers" || tr.Metadata["authMode"] != "bearer" {
				t.Errorf("scaled object %s: trigger %+v", so.Name, tr)
			}
			if tr.AuthenticationRef == nil || !auths[tr.AuthenticationRef.Name] {
				t.Errorf("scaled object %s: authentication %+v is not defined", so.Name, tr.AuthenticationRef)
			}
			u, err := url.Parse(tr.Metadata["url"])
			if err != nil || u.Path != "/api/v1/stats/scaling" {
				t.Errorf("scaled object %s: url %q is not the scaling endpoint", so.Name, tr.Metadata["url"])
				continue
			}
			host := strings.Split(u.Hostname(), ".")[0]
			if !has("Service", host) {
				t.Errorf("scaled object %s: url host %s is not a service", so.Name, u.Hostname())
			}
			// The label set scaled on is the one the target's workers serve.
			want := u.Query().Get("labels")
			if ok && !workerServes(d, want) {
				t.Errorf("scaled object %s scales on labels %q, which deployment %s's workers do not serve", so.Name, want, d.Name)
			}
		}
	}
}

func hasPort(d appsv1.Deployment, name string) bool {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == name {
				return true
			}
		}
	}
	return false
}

// workerServes reports whether the deployment runs workers whose --labels cover the
// comma-separated set.
func workerServes(d appsv1.Deployment, set string) bool {
	for _, c := range d.Spec.Template.Spec.Containers {
		for _, a := range c.Args {
			if l, ok := strings.CutPrefix(a, "--labels="); ok {
				have := strings.Split(l, ",")
				for _, w := range strings.Split(set, ",") {
					if !slices.Contains(have, w) {
						return false
					}
				}
				return true
			}
		}
	}
	return false
}

// TestWorkerRBAC: the worker's role grants what the kubernetes executor uses and no
// more (pods in its own namespace only: a Role, not a ClusterRole).
func TestWorkerRBAC(t *testing.T) {
	t.Parallel()
	_, o, _ := load(t)
	want := map[string][]string{
		"pods":      {"create", "delete", "get", "list", "watch"},
		"pods/exec": {"create"},
		// Image pull secrets, by name only: list or get would read every secret.
		"secrets": {"create", "delete"},
	}
	var role *rbacv1.Role
	for i := range o.roles {
		if o.roles[i].Name == "gantry-worker" {
			role = &o.roles[i]
		}
	}
	if role == nil {
		t.Fatal("no role gantry-worker")
	}
	got := map[string][]string{}
	for _, r := range role.Rules {
		if !slices.Equal(r.APIGroups, []string{""}) || len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v reaches beyond the core pods", r)
		}
		for _, res := range r.Resources {
			got[res] = append(got[res], r.Verbs...)
		}
	}
	for res := range got {
		slices.Sort(got[res])
	}
	if len(got) != len(want) {
		t.Errorf("resources %v, want %v", got, want)
	}
	for res, verbs := range want {
		if !slices.Equal(got[res], verbs) {
			t.Errorf("%s: verbs %v, want %v", res, got[res], verbs)
		}
	}
	var worker *appsv1.Deployment
	for i := range o.deployments {
		if o.deployments[i].Name == "gantry-worker" {
			worker = &o.deployments[i]
		}
	}
	if worker == nil || worker.Spec.Template.Spec.ServiceAccountName != "gantry-worker" {
		t.Fatalf("the worker deployment does not run as gantry-worker: %+v", worker)
	}
	bound := false
	for _, rb := range o.roleBindings {
		if rb.RoleRef.Name == role.Name && slices.ContainsFunc(rb.Subjects, func(s rbacv1.Subject) bool { return s.Name == "gantry-worker" }) {
			bound = true
		}
	}
	if !bound {
		t.Error("the role gantry-worker is not bound to the service account gantry-worker")
	}
	for _, sa := range o.serviceAccounts {
		if sa.Name == "gantry-job" && (sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken) {
			t.Error("the job pods' service account mounts its token")
		}
	}
}

// TestStrictParse: a key the API types do not have fails, so the tests above would
// catch a misspelt field.
func TestStrictParse(t *testing.T) {
	t.Parallel()
	o := &objects{}
	bad := []string{
		"apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\nspec: {replica: 2}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selectr: {a: b}}\n",
		"apiVersion: keda.sh/v1alpha1\nkind: ScaledObject\nmetadata: {name: x}\nspec: {scaleTarget: {name: y}}\n",
		"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
	}
	for _, doc := range bad {
		if err := o.decode([]byte(doc)); err == nil {
			t.Errorf("decoded %q", doc)
		}
	}
	if err := o.decode([]byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec: {selector: {a: b}}\n")); err != nil {
		t.Errorf("a good service: %v", err)
	}
}
