package kubernetes

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/gantry-ci/gantry/internal/executor"
)

// Stage is where a job's pod is on its way to running steps.
type Stage int

// The stages Verify tells apart.
const (
	// Waiting: the pod is not placed yet, or its containers are being created (images
	// pulled). Time may fix it.
	Waiting Stage = iota
	// Initializing: the pod is placed and its init container fills the workspace.
	Initializing
	// Ready: every container runs (and every service with a health check passes it):
	// steps may start.
	Ready
	// Failed: the pod will not start, or not as the job needs it; waiting longer does
	// not help.
	Failed
)

func (s Stage) String() string {
	switch s {
	case Waiting:
		return "waiting"
	case Initializing:
		return "initializing"
	case Ready:
		return "ready"
	case Failed:
		return "failed"
	}
	return fmt.Sprintf("stage(%d)", int(s))
}

// The Reason of each verdict Verify gives.
const (
	ReasonGone                  = "PodGone"
	ReasonDeleting              = "PodDeleting"
	ReasonPodFailed             = "PodFailed"
	ReasonPodSucceeded          = "PodSucceeded"
	ReasonUnschedulable         = "Unschedulable"
	ReasonInsufficientResources = "InsufficientResources"
	ReasonNotScheduled          = "NotScheduled"
	ReasonInitializing          = "Initializing"
	ReasonInitFailed            = "InitFailed"
	ReasonImagePulling          = "ImagePulling"
	ReasonContainersStarting    = "ContainersStarting"
	ReasonServiceNotReady       = "ServiceNotReady"
	ReasonContainerExited       = "ContainerExited"
	ReasonOOMKilled             = "OOMKilled"
	ReasonRunning               = "Running"
	ReasonUnknown               = "Unknown"
	// A container waiting for one of the fail-fast reasons has that reason
	// (ErrImagePull, ImagePullBackOff, CrashLoopBackOff, ...).

	// ReasonCrashLoop is the kubelet's name for a container it restarts with a
	// growing back-off because it keeps exiting: a service (sidecar) that exited
	// again after a restart.
	ReasonCrashLoop = "CrashLoopBackOff"
)

// Verdict is what Verify makes of a pod.
type Verdict struct {
	Stage Stage
	// Reason is a short name for the verdict: one of the Reason constants, or the
	// kubelet's own reason for a container that fails fast.
	Reason string
	// Message says it to the user ("pod pending: 0/3 nodes are available: 3
	// Insufficient cpu.").
	Message string
	// Scheduled is whether the pod has been placed on a node.
	Scheduled bool
	// Err is the kind of failure for a Failed verdict: executor.ErrImage,
	// executor.ErrEnvironment or executor.ErrEnvironmentLost.
	Err error
}

// same reports whether two verdicts would tell the user the same thing.
func (v Verdict) same(o Verdict) bool {
	return v.Stage == o.Stage && v.Reason == o.Reason && v.Message == o.Message
}

// imageReasons are the waiting reasons of a container whose image cannot be had.
var imageReasons = map[string]bool{
	"ErrImagePull":        true,
	"ImagePullBackOff":    true,
	"InvalidImageName":    true,
	"ErrImageNeverPull":   true,
	"ImageInspectError":   true,
	"RegistryUnavailable": true,
}

// brokenReasons are the waiting reasons of a container that was made but cannot run as
// configured, or keeps crashing.
var brokenReasons = map[string]bool{
	"CreateContainerConfigError": true,
	"CreateContainerError":       true,
	"RunContainerError":          true,
	"CrashLoopBackOff":           true,
	"PreStartHookError":          true,
	"PostStartHookError":         true,
}

// Verify decides, from the pod alone, where a job's pod stands. It is pure: it reads
// the pod's phase, conditions and container statuses and nothing else. A nil pod is
// one that no longer exists.
//
// The tree, in order: gone or being deleted; a Failed or Succeeded phase; any init
// container or container that fails fast (an image that cannot be pulled, a
// configuration error, a crash loop, out of memory, an exit); then by phase: Pending
// (not scheduled: why; scheduled: initializing or creating containers), Running (every
// container running and every service healthy, or what is still starting), and
// anything else as unknown.
func Verify(pod *corev1.Pod) Verdict {
	if pod == nil {
		return Verdict{Stage: Failed, Reason: ReasonGone, Message: "pod is gone: it was deleted or evicted", Err: executor.ErrEnvironmentLost}
	}
	scheduled := pod.Spec.NodeName != "" || podCondition(pod, corev1.PodScheduled) == corev1.ConditionTrue
	fail := func(reason, msg string, err error) Verdict {
		return Verdict{Stage: Failed, Reason: reason, Message: msg, Scheduled: scheduled, Err: err}
	}
	if pod.DeletionTimestamp != nil {
		return fail(ReasonDeleting, "pod is being deleted", executor.ErrEnvironmentLost)
	}
	if v, ok := containerFailure(pod, scheduled); ok {
		return v
	}
	switch pod.Status.Phase {
	case corev1.PodFailed:
		msg := "pod failed"
		if pod.Status.Reason != "" {
			msg += ": " + pod.Status.Reason
		}
		if pod.Status.Message != "" {
			msg += ": " + pod.Status.Message
		}
		return fail(ReasonPodFailed, msg, executor.ErrEnvironmentLost)
	case corev1.PodSucceeded:
		return fail(ReasonPodSucceeded, "pod ended before the job did: its containers exited", executor.ErrEnvironment)
	case corev1.PodPending:
		return pending(pod, scheduled)
	case corev1.PodRunning:
		return running(pod)
	}
	msg := "pod status unknown"
	if pod.Status.Message != "" {
		msg += ": " + pod.Status.Message
	} else if pod.Status.Phase == corev1.PodUnknown {
		msg += ": its node does not report (unreachable?)"
	}
	return Verdict{Stage: Waiting, Reason: ReasonUnknown, Message: msg, Scheduled: scheduled}
}

// containerFailure finds an init container or container that fails fast.
func containerFailure(pod *corev1.Pod, scheduled bool) (Verdict, bool) {
	fail := func(reason, msg string, err error) (Verdict, bool) {
		return Verdict{Stage: Failed, Reason: reason, Message: msg, Scheduled: scheduled, Err: err}, true
	}
	check := func(st corev1.ContainerStatus, init bool) (Verdict, bool) {
		what := containerWhat(pod, st.Name, init)
		// A sidecar (a service) is restarted by the kubelet whatever the pod's restart
		// policy: one that exited once is not a failure yet, one that keeps exiting
		// is. (The kubelet reports a sidecar in its restart back-off as terminated,
		// with its restart count, not as waiting in CrashLoopBackOff as it does a
		// container: seen on 1.34.)
		restarts := init && sidecar(pod, st.Name)
		if w := st.State.Waiting; w != nil {
			switch {
			case imageReasons[w.Reason]:
				return fail(w.Reason, fmt.Sprintf("image pull failed: %s (%s): %s", imageOf(st, pod, init), w.Reason, orDash(w.Message)), executor.ErrImage)
			case brokenReasons[w.Reason]:
				if w.Reason == "CrashLoopBackOff" {
					if t := st.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" {
						return fail(ReasonOOMKilled, fmt.Sprintf("%s ran out of memory (OOMKilled) and keeps restarting", what), executor.ErrEnvironment)
					}
				}
				last := ""
				if t := st.LastTerminationState.Terminated; t != nil {
					last = fmt.Sprintf("; it last exited with code %d%s", t.ExitCode, detail(t.Reason, t.Message))
				}
				return fail(w.Reason, fmt.Sprintf("%s cannot run (%s): %s%s", what, w.Reason, orDash(w.Message), last), executor.ErrEnvironment)
			}
		}
		if t := st.State.Terminated; t != nil {
			if t.Reason == "OOMKilled" {
				return fail(ReasonOOMKilled, fmt.Sprintf("%s ran out of memory (OOMKilled)", what), executor.ErrEnvironment)
			}
			if restarts && st.RestartCount > 0 {
				return fail(ReasonCrashLoop, fmt.Sprintf("%s keeps exiting (%s): it exited with code %d%s after %d restart(s)",
					what, ReasonCrashLoop, t.ExitCode, detail(t.Reason, t.Message), st.RestartCount), executor.ErrEnvironment)
			}
			if restarts || init && t.ExitCode == 0 {
				return Verdict{}, false
			}
			if init {
				return fail(ReasonInitFailed, fmt.Sprintf("%s failed with exit code %d%s", what, t.ExitCode, detail(t.Reason, t.Message)), executor.ErrEnvironment)
			}
			return fail(ReasonContainerExited, fmt.Sprintf("%s exited with code %d%s", what, t.ExitCode, detail(t.Reason, t.Message)), executor.ErrEnvironment)
		}
		if t := st.LastTerminationState.Terminated; t != nil && t.Reason == "OOMKilled" {
			return fail(ReasonOOMKilled, fmt.Sprintf("%s ran out of memory (OOMKilled) and was restarted", what), executor.ErrEnvironment)
		}
		return Verdict{}, false
	}
	for _, st := range pod.Status.InitContainerStatuses {
		if v, ok := check(st, true); ok {
			return v, ok
		}
	}
	for _, st := range pod.Status.ContainerStatuses {
		if v, ok := check(st, false); ok {
			return v, ok
		}
	}
	return Verdict{}, false
}

func pending(pod *corev1.Pod, scheduled bool) Verdict {
	if !scheduled {
		for _, c := range pod.Status.Conditions {
			if c.Type != corev1.PodScheduled || c.Status != corev1.ConditionFalse {
				continue
			}
			reason := ReasonUnschedulable
			if strings.Contains(c.Message, "Insufficient ") {
				reason = ReasonInsufficientResources
			}
			msg := "pod pending: " + c.Message
			if c.Message == "" {
				msg = "pod pending: unschedulable (" + orDash(c.Reason) + ")"
			}
			return Verdict{Stage: Waiting, Reason: reason, Message: msg}
		}
		return Verdict{Stage: Waiting, Reason: ReasonNotScheduled, Message: "pod pending: waiting for the scheduler to place it"}
	}
	on := ""
	if pod.Spec.NodeName != "" {
		on = " on node " + pod.Spec.NodeName
	}
	initDone := podCondition(pod, corev1.PodInitialized) == corev1.ConditionTrue
	if !initDone && len(pod.Spec.InitContainers) > 0 {
		for _, st := range pod.Status.InitContainerStatuses {
			if sidecar(pod, st.Name) {
				// Started after the init containers that run to completion, and
				// waited for in the last message below.
				continue
			}
			if st.State.Running != nil {
				return Verdict{Stage: Initializing, Reason: ReasonInitializing, Scheduled: true,
					Message: fmt.Sprintf("pod initializing%s: %s is running", on, containerWhat(pod, st.Name, true))}
			}
			if st.State.Terminated == nil {
				return Verdict{Stage: Waiting, Reason: ReasonImagePulling, Scheduled: true,
					Message: fmt.Sprintf("pod scheduled%s: pulling image %s for %s", on, imageOf(st, pod, true), containerWhat(pod, st.Name, true))}
			}
		}
		if len(pod.Status.InitContainerStatuses) == 0 {
			return Verdict{Stage: Waiting, Reason: ReasonImagePulling, Scheduled: true,
				Message: fmt.Sprintf("pod scheduled%s: pulling images", on)}
		}
	}
	return Verdict{Stage: Waiting, Reason: ReasonImagePulling, Scheduled: true,
		Message: fmt.Sprintf("pod scheduled%s: pulling images and creating containers%s", on, waitingList(pod))}
}

func running(pod *corev1.Pod) Verdict {
	statuses := map[string]corev1.ContainerStatus{}
	for _, st := range pod.Status.ContainerStatuses {
		statuses[st.Name] = st
	}
	containers := slices.Clone(pod.Spec.Containers)
	for _, c := range pod.Spec.InitContainers {
		if isSidecar(c) {
			containers = append(containers, c)
		}
	}
	for _, st := range pod.Status.InitContainerStatuses {
		if sidecar(pod, st.Name) {
			statuses[st.Name] = st
		}
	}
	var starting, unhealthy []string
	for _, c := range containers {
		st, ok := statuses[c.Name]
		switch {
		case !ok || st.State.Running == nil:
			starting = append(starting, c.Name)
		case c.ReadinessProbe != nil && !st.Ready:
			unhealthy = append(unhealthy, c.Name)
		}
	}
	switch {
	case len(starting) > 0:
		return Verdict{Stage: Waiting, Reason: ReasonContainersStarting, Scheduled: true,
			Message: "pod running, containers still starting: " + strings.Join(starting, ", ")}
	case len(unhealthy) > 0:
		return Verdict{Stage: Waiting, Reason: ReasonServiceNotReady, Scheduled: true,
			Message: "pod running, waiting for the health check of " + strings.Join(unhealthy, ", ")}
	}
	return Verdict{Stage: Ready, Reason: ReasonRunning, Scheduled: true, Message: "pod running on node " + orDash(pod.Spec.NodeName)}
}

// waitingList names the containers that wait and why, for the user: " (job:
// ContainerCreating, svc-db: ContainerCreating)".
func waitingList(pod *corev1.Pod) string {
	var parts []string
	statuses := slices.Clone(pod.Status.ContainerStatuses)
	for _, st := range pod.Status.InitContainerStatuses {
		if sidecar(pod, st.Name) {
			statuses = append(statuses, st)
		}
	}
	for _, st := range statuses {
		if w := st.State.Waiting; w != nil && w.Reason != "" {
			parts = append(parts, st.Name+": "+w.Reason)
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return " (" + strings.Join(parts, ", ") + ")"
}

func podCondition(pod *corev1.Pod, t corev1.PodConditionType) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// sidecar reports whether the init container name of pod is a sidecar (restartPolicy
// Always: it runs beside the containers, as services do), not one that runs to
// completion before them.
func sidecar(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return isSidecar(c)
		}
	}
	return false
}

func isSidecar(c corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// containerWhat names a container as the user knows it: the job's container, a
// service (a sidecar), or the workspace init container.
func containerWhat(pod *corev1.Pod, name string, init bool) string {
	switch {
	case init && name == initContainer:
		return "the workspace init container"
	case strings.HasPrefix(name, servicePrefix) && (!init || sidecar(pod, name)):
		return "service " + strings.TrimPrefix(name, servicePrefix)
	case init:
		return "init container " + name
	case name == jobContainer:
		return "the job container"
	}
	return "container " + name
}

// imageOf is the image a container status is about: the spec's (what the user wrote)
// rather than the status's (which the runtime may have resolved, or left empty).
func imageOf(st corev1.ContainerStatus, pod *corev1.Pod, init bool) string {
	cs := pod.Spec.Containers
	if init {
		cs = pod.Spec.InitContainers
	}
	for _, c := range cs {
		if c.Name == st.Name {
			return c.Image
		}
	}
	if st.Image != "" {
		return st.Image
	}
	return st.Name
}

func detail(reason, msg string) string {
	s := ""
	if reason != "" {
		s += " (" + reason + ")"
	}
	if msg != "" {
		s += ": " + msg
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
