package kubernetes

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/lazyre"
)

// Names inside a job's pod.
const (
	jobContainer  = "job"
	initContainer = "gantry-init"
	servicePrefix = "svc-"
	workspaceVol  = "workspace"
	toolsVol      = "gantry-tools"
	// ToolsPath is where the init container leaves a copy of the gantry binary, so that
	// the job's container can run it (to stay alive, and to run steps under
	// `gantry pod-exec`) whatever its image holds.
	ToolsPath = "/.gantry"
	// ToolsBinary is that copy.
	ToolsBinary = ToolsPath + "/gantry"
)

// The labels every pod carries. A label value holds at most 63 characters of
// [A-Za-z0-9._-]; the full values are kept in annotations of the same names.
const (
	LabelWorker  = "gantry.worker"
	LabelJob     = "gantry.job"
	LabelAttempt = "gantry.attempt"
	// LabelOwner is the worker's name, the same across its restarts, by which a
	// restarted worker finds what its predecessor left (see Sweep).
	LabelOwner = "gantry.owner"
	// LabelManaged marks every pod Gantry makes.
	LabelManaged = "app.kubernetes.io/managed-by"
	managedBy    = "gantry"
	// AnnotationPullSecret names, on a pod, the image pull secret made for its job (from
	// the job's registry credentials), which goes with the pod.
	AnnotationPullSecret = "gantry.pull-secret"
)

// Placement is where the pods of jobs that ask for a runs_on label may go.
type Placement struct {
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
}

// podSpec builds the pod for a job. The job's container runs `gantry pod-hold` from the
// tools volume, so it stays alive with any image; the init container (the worker's
// own image) copies the gantry binary there and fills the workspace.
func (e *Executor) podSpec(j executor.Job, name, fetch string) (*corev1.Pod, error) {
	if j.Image == "" {
		return nil, errors.New("the kubernetes executor runs jobs in an image, and the job has no image")
	}
	pull, err := pullPolicy(j.Pull)
	if err != nil {
		return nil, err
	}
	labels := map[string]string{
		LabelManaged: managedBy,
		LabelWorker:  labelValue(j.WorkerID),
		LabelJob:     labelValue(j.ID),
		LabelAttempt: strconv.Itoa(j.Attempt),
		LabelOwner:   labelValue(e.cfg.Owner),
	}
	annotations := map[string]string{
		LabelWorker: j.WorkerID,
		LabelJob:    j.ID,
		LabelOwner:  e.cfg.Owner,
	}
	mounts := []corev1.VolumeMount{
		{Name: workspaceVol, MountPath: executor.WorkspacePath},
		{Name: toolsVol, MountPath: ToolsPath, ReadOnly: true},
	}
	res := corev1.ResourceRequirements{}
	if j.MilliCPU > 0 || j.Memory > 0 {
		res.Requests = corev1.ResourceList{}
		res.Limits = corev1.ResourceList{}
		if j.MilliCPU > 0 {
			q := *resource.NewMilliQuantity(j.MilliCPU, resource.DecimalSI)
			res.Requests[corev1.ResourceCPU], res.Limits[corev1.ResourceCPU] = q, q
		}
		if j.Memory > 0 {
			q := *resource.NewQuantity(j.Memory, resource.BinarySI)
			res.Requests[corev1.ResourceMemory], res.Limits[corev1.ResourceMemory] = q, q
		}
	}
	main := corev1.Container{
		Name:            jobContainer,
		Image:           j.Image,
		ImagePullPolicy: pull,
		Command:         []string{ToolsBinary, "pod-hold"},
		WorkingDir:      executor.WorkspacePath,
		VolumeMounts:    mounts,
		Resources:       res,
		SecurityContext: securityContext(j),
	}
	initArgs := []string{"pod-init", "--tools", ToolsPath, "--workspace", executor.WorkspacePath}
	if fetch != "" {
		initArgs = append(initArgs, "--fetch", fetch)
	}
	initC := corev1.Container{
		Name:            initContainer,
		Image:           e.cfg.InitImage,
		ImagePullPolicy: corev1.PullIfNotPresent,
		Command:         []string{"/gantry"},
		Args:            initArgs,
		VolumeMounts: []corev1.VolumeMount{
			{Name: workspaceVol, MountPath: executor.WorkspacePath},
			{Name: toolsVol, MountPath: ToolsPath},
		},
		// A pod's request is the larger of its init containers' and the sum of its
		// containers': what the init container asks for is held for the job's whole
		// life, so it asks for little. (100m let a 2-core node hold only 19 jobs that
		// ask for nothing themselves; 50 measured in BENCHMARKS.md.)
		Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
	}
	// Services are native sidecars: init containers that run for the pod's life
	// (restartPolicy Always, Kubernetes 1.29+), after gantry-init and before the job's
	// container. The kubelet restarts one that exits, so a service that keeps crashing
	// shows as CrashLoopBackOff, which Verify fails on, where a regular container of a
	// pod that restarts nothing would just have ended.
	inits := []corev1.Container{initC}
	var aliases []string
	for _, s := range j.Services {
		cname := servicePrefix + s.Name
		if errs := validation.IsDNS1123Label(cname); len(errs) > 0 {
			return nil, fmt.Errorf("service %q: %q is not a container name: %s", s.Name, cname, strings.Join(errs, "; "))
		}
		c := corev1.Container{
			Name:            cname,
			Image:           s.Image,
			ImagePullPolicy: pull,
			Env:             envVars(s.Env),
			RestartPolicy:   new(corev1.ContainerRestartPolicyAlways),
		}
		if len(s.Command) > 0 {
			c.Args = s.Command
		}
		for _, p := range s.Ports {
			port, err := containerPort(p)
			if hostPort, c, ok := strings.Cut(p, ":"); ok && j.HostServices {
				// A job written for the worker's host reaches the service on
				// localhost, which in a pod is the service's own: at its container
				// port, which nothing maps to another.
				if port, err = containerPort(c); err == nil && hostPort != strconv.Itoa(int(port.ContainerPort)) {
					err = fmt.Errorf("port %q: in a pod a service listens on localhost at its own port, which cannot be published at another; write %s (and reach it at localhost:%s)",
						p, c, strconv.Itoa(int(port.ContainerPort)))
				}
			}
			if err != nil {
				return nil, fmt.Errorf("service %q: %w", s.Name, err)
			}
			c.Ports = append(c.Ports, port)
		}
		if h := s.Healthcheck; h != nil && len(h.Command) > 0 {
			c.ReadinessProbe = &corev1.Probe{
				ProbeHandler:     corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: h.Command}},
				PeriodSeconds:    seconds(h.Interval, 2),
				TimeoutSeconds:   seconds(h.Timeout, 1),
				FailureThreshold: int32(max(h.Retries, 3)),
			}
		}
		inits = append(inits, c)
		aliases = append(aliases, s.Name)
	}
	placement := e.placement(j.Labels)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       e.cfg.Namespace,
			Labels:          labels,
			Annotations:     annotations,
			OwnerReferences: e.cfg.OwnerReferences,
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			InitContainers:                inits,
			Containers:                    []corev1.Container{main},
			NodeSelector:                  placement.NodeSelector,
			Tolerations:                   placement.Tolerations,
			ServiceAccountName:            e.cfg.ServiceAccount,
			AutomountServiceAccountToken:  new(bool),
			EnableServiceLinks:            new(bool),
			TerminationGracePeriodSeconds: new(int64(max(j.Grace.Seconds(), 1))),
			Volumes: []corev1.Volume{
				{Name: workspaceVol, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: toolsVol, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
	if len(aliases) > 0 {
		// Containers of a pod share its network: a service listens on localhost, and
		// its name is made to mean localhost, as the job's steps expect to reach it.
		pod.Spec.HostAliases = []corev1.HostAlias{{IP: "127.0.0.1", Hostnames: aliases}}
	}
	for _, secret := range e.cfg.ImagePullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: secret})
	}
	if len(j.RegistryAuth) > 0 {
		secret := name + "-pull"
		pod.Annotations[AnnotationPullSecret] = secret
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: secret})
	}
	return pod, nil
}

// dockerHubKey is where a docker config keeps Docker Hub's credentials: the kubelet
// takes them for every image without a registry host (golang:1.26) and for docker.io.
const dockerHubKey = "https://index.docker.io/v1/"

// pullSecret is the image pull secret of a pod whose job has registry credentials
// (kubernetes.io/dockerconfigjson, one entry a registry), labelled, annotated and owned
// as the pod is; nil when the job has none.
func pullSecret(pod *corev1.Pod, auth map[string]executor.RegistryCredential) (*corev1.Secret, error) {
	if len(auth) == 0 {
		return nil, nil
	}
	type entry struct {
		Username string `json:"username"`
		Password string `json:"password"`
		Auth     string `json:"auth"`
	}
	auths := map[string]entry{}
	for host, c := range auth {
		if host == "docker.io" || host == "index.docker.io" || host == "registry-1.docker.io" {
			host = dockerHubKey
		}
		auths[host] = entry{Username: c.Username, Password: c.Password,
			Auth: base64.StdEncoding.EncodeToString([]byte(c.Username + ":" + c.Password))}
	}
	cfg, err := json.Marshal(map[string]any{"auths": auths})
	if err != nil {
		return nil, fmt.Errorf("encode the registry credentials: %w", err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:            pod.Annotations[AnnotationPullSecret],
			Namespace:       pod.Namespace,
			Labels:          maps.Clone(pod.Labels),
			Annotations:     map[string]string{LabelWorker: pod.Annotations[LabelWorker], LabelJob: pod.Annotations[LabelJob], LabelOwner: pod.Annotations[LabelOwner]},
			OwnerReferences: pod.OwnerReferences,
		},
		Type: corev1.SecretTypeDockerConfigJson,
		Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg},
	}, nil
}

// placement merges the worker's placement for every pod ("" in Config.Placement) with
// that of each of the job's runs_on labels.
func (e *Executor) placement(labels []string) Placement {
	var out Placement
	keys := append([]string{""}, labels...)
	for _, k := range keys {
		p, ok := e.cfg.Placement[k]
		if !ok {
			continue
		}
		for sk, sv := range p.NodeSelector {
			if out.NodeSelector == nil {
				out.NodeSelector = map[string]string{}
			}
			out.NodeSelector[sk] = sv
		}
		for _, t := range p.Tolerations {
			if !slices.ContainsFunc(out.Tolerations, func(o corev1.Toleration) bool { return o.MatchToleration(&t) }) {
				out.Tolerations = append(out.Tolerations, t)
			}
		}
	}
	return out
}

func securityContext(j executor.Job) *corev1.SecurityContext {
	sc := &corev1.SecurityContext{}
	if j.Privileged {
		sc.Privileged = new(true)
	} else {
		sc.AllowPrivilegeEscalation = new(false)
	}
	if j.User != "" {
		if uid, err := strconv.ParseInt(strings.SplitN(j.User, ":", 2)[0], 10, 64); err == nil {
			sc.RunAsUser = &uid
		}
	}
	return sc
}

func pullPolicy(p string) (corev1.PullPolicy, error) {
	switch p {
	case "", "if-not-present":
		return corev1.PullIfNotPresent, nil
	case "always":
		return corev1.PullAlways, nil
	case "never":
		return corev1.PullNever, nil
	}
	return "", fmt.Errorf("pull policy %q: want always, if-not-present or never", p)
}

func envVars(env []string) []corev1.EnvVar {
	var out []corev1.EnvVar
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, corev1.EnvVar{Name: k, Value: v})
	}
	return out
}

func containerPort(p string) (corev1.ContainerPort, error) {
	num, proto, _ := strings.Cut(p, "/")
	n, err := strconv.ParseInt(num, 10, 32)
	if err != nil || n < 1 || n > 65535 {
		return corev1.ContainerPort{}, fmt.Errorf("port %q: want a number from 1 to 65535, optionally /tcp or /udp", p)
	}
	cp := corev1.ContainerPort{ContainerPort: int32(n), Protocol: corev1.ProtocolTCP}
	switch strings.ToLower(proto) {
	case "", "tcp":
	case "udp":
		cp.Protocol = corev1.ProtocolUDP
	default:
		return corev1.ContainerPort{}, fmt.Errorf("port %q: protocol %q: want tcp or udp", p, proto)
	}
	return cp, nil
}

func seconds(d interface{ Seconds() float64 }, def int32) int32 {
	s := int32(d.Seconds())
	if s < 1 {
		return def
	}
	return s
}

var labelUnsafe = lazyre.New(`[^A-Za-z0-9._-]`)

// labelValue makes s a valid label value: unsafe characters become '-', at most 63
// characters, alphanumeric at both ends.
func labelValue(s string) string {
	s = labelUnsafe.Regexp().ReplaceAllString(s, "-")
	if len(s) > validation.LabelValueMaxLength {
		s = s[:validation.LabelValueMaxLength]
	}
	return strings.TrimFunc(s, func(r rune) bool { return r == '-' || r == '_' || r == '.' })
}

// podName is a fresh name for a job's pod: gantry-<job>-<attempt>-<random>, a DNS
// label. The random part keeps a retried job's pod from colliding with one that is
// still being deleted.
func podName(j executor.Job) string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	suffix := fmt.Sprintf("-%d-%s", j.Attempt, hex.EncodeToString(b[:]))
	id := strings.ToLower(labelUnsafe.Regexp().ReplaceAllString(j.ID, "-"))
	id = strings.NewReplacer("_", "-", ".", "-").Replace(id)
	if limit := validation.DNS1123LabelMaxLength - len("gantry-") - len(suffix); len(id) > limit {
		id = id[len(id)-limit:]
	}
	id = strings.Trim(id, "-")
	if id == "" {
		id = "job"
	}
	return "gantry-" + id + suffix
}
