package kubernetes

import (
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gantry-ci/gantry/internal/executor"
)

// testPod is a job pod as podSpec makes it (init container, one service with a health
// check as a sidecar, job container), with the status set by the caller.
func testPod(status corev1.PodStatus, nodeName string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "gantry-job-1-abc", Namespace: "ci"},
		Spec: corev1.PodSpec{
			NodeName: nodeName,
			InitContainers: []corev1.Container{
				{Name: initContainer, Image: "gantry:dev"},
				{Name: servicePrefix + "db", Image: "postgres:18", ReadinessProbe: &corev1.Probe{}, RestartPolicy: new(corev1.ContainerRestartPolicyAlways)},
			},
			Containers: []corev1.Container{{Name: jobContainer, Image: "golang:1.26"}},
		},
		Status: status,
	}
}

func waiting(name, reason, msg string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

func runningC(name string, ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: ready, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func terminated(name string, code int32, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: reason}}}
}

func cond(t corev1.PodConditionType, s corev1.ConditionStatus, reason, msg string) corev1.PodCondition {
	return corev1.PodCondition{Type: t, Status: s, Reason: reason, Message: msg}
}

var (
	initDone      = terminated(initContainer, 0, "Completed")
	scheduledCond = cond(corev1.PodScheduled, corev1.ConditionTrue, "", "")
)

// TestVerify walks every branch of the decision tree.
func TestVerify(t *testing.T) {
	t.Parallel()
	deleting := testPod(corev1.PodStatus{Phase: corev1.PodRunning}, "node-1")
	deleting.DeletionTimestamp = &metav1.Time{}
	crashOOM := waiting(jobContainer, "CrashLoopBackOff", "back-off 10s restarting failed container")
	crashOOM.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
	restartedOOM := runningC(servicePrefix+"db", true)
	restartedOOM.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: "OOMKilled"}
	restartedExit := terminated(servicePrefix+"db", 3, "Error")
	restartedExit.RestartCount = 2
	crashLoop := waiting(servicePrefix+"db", "CrashLoopBackOff", "back-off 10s")
	crashLoop.LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}

	tests := []struct {
		name      string
		pod       *corev1.Pod
		stage     Stage
		reason    string
		message   string // a part of the message
		kind      error
		scheduled bool
	}{
		{name: "gone", pod: nil, stage: Failed, reason: ReasonGone, message: "pod is gone", kind: executor.ErrEnvironmentLost},
		{name: "deleting", pod: deleting, stage: Failed, reason: ReasonDeleting, message: "being deleted", kind: executor.ErrEnvironmentLost, scheduled: true},
		{name: "evicted", pod: testPod(corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "The node was low on resource: ephemeral-storage."}, "node-1"),
			stage: Failed, reason: ReasonPodFailed, message: "pod failed: Evicted: The node was low on resource: ephemeral-storage.", kind: executor.ErrEnvironmentLost, scheduled: true},
		{name: "succeeded", pod: testPod(corev1.PodStatus{Phase: corev1.PodSucceeded}, "node-1"),
			stage: Failed, reason: ReasonPodSucceeded, message: "pod ended before the job did", kind: executor.ErrEnvironment, scheduled: true},
		{name: "unschedulable, insufficient resources", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			cond(corev1.PodScheduled, corev1.ConditionFalse, "Unschedulable", "0/3 nodes are available: 3 Insufficient cpu.")}}, ""),
			stage: Waiting, reason: ReasonInsufficientResources, message: "pod pending: 0/3 nodes are available: 3 Insufficient cpu."},
		{name: "unschedulable, taints", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			cond(corev1.PodScheduled, corev1.ConditionFalse, "Unschedulable", "0/2 nodes are available: 2 node(s) had untolerated taint {gpu: true}.")}}, ""),
			stage: Waiting, reason: ReasonUnschedulable, message: "pod pending: 0/2 nodes are available: 2 node(s) had untolerated taint {gpu: true}."},
		{name: "unschedulable without a message", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			cond(corev1.PodScheduled, corev1.ConditionFalse, "SchedulerError", "")}}, ""),
			stage: Waiting, reason: ReasonUnschedulable, message: "unschedulable (SchedulerError)"},
		{name: "not yet scheduled", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending}, ""),
			stage: Waiting, reason: ReasonNotScheduled, message: "waiting for the scheduler"},
		{name: "init image pulling", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduledCond},
			InitContainerStatuses: []corev1.ContainerStatus{waiting(initContainer, "PodInitializing", "")}}, "node-1"),
			stage: Waiting, reason: ReasonImagePulling, message: "pulling image gantry:dev for the workspace init container", scheduled: true},
		{name: "scheduled, no statuses yet", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduledCond}}, "node-1"),
			stage: Waiting, reason: ReasonImagePulling, message: "pod scheduled on node node-1: pulling images", scheduled: true},
		{name: "initializing", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduledCond},
			InitContainerStatuses: []corev1.ContainerStatus{runningC(initContainer, false)}}, "node-1"),
			stage: Initializing, reason: ReasonInitializing, message: "the workspace init container is running", scheduled: true},
		{name: "job image pulling", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending,
			Conditions:            []corev1.PodCondition{scheduledCond, cond(corev1.PodInitialized, corev1.ConditionTrue, "", "")},
			InitContainerStatuses: []corev1.ContainerStatus{initDone, waiting(servicePrefix+"db", "ContainerCreating", "")},
			ContainerStatuses:     []corev1.ContainerStatus{waiting(jobContainer, "PodInitializing", "")}}, "node-1"),
			stage: Waiting, reason: ReasonImagePulling, message: "pulling images and creating containers (job: PodInitializing, svc-db: ContainerCreating)", scheduled: true},
		{name: "ErrImagePull", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduledCond},
			InitContainerStatuses: []corev1.ContainerStatus{initDone},
			ContainerStatuses:     []corev1.ContainerStatus{waiting(jobContainer, "ErrImagePull", "rpc error: golang:1.99: not found")}}, "node-1"),
			stage: Failed, reason: "ErrImagePull", message: "image pull failed: golang:1.26 (ErrImagePull): rpc error: golang:1.99: not found", kind: executor.ErrImage, scheduled: true},
		{name: "ImagePullBackOff of a service", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduledCond},
			InitContainerStatuses: []corev1.ContainerStatus{initDone, waiting(servicePrefix+"db", "ImagePullBackOff", "Back-off pulling image")},
			ContainerStatuses:     []corev1.ContainerStatus{waiting(jobContainer, "PodInitializing", "")}}, "node-1"),
			stage: Failed, reason: "ImagePullBackOff", message: "image pull failed: postgres:18 (ImagePullBackOff)", kind: executor.ErrImage, scheduled: true},
		{name: "InvalidImageName", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduledCond},
			ContainerStatuses: []corev1.ContainerStatus{waiting(jobContainer, "InvalidImageName", "couldn't parse image name")}}, "node-1"),
			stage: Failed, reason: "InvalidImageName", message: "(InvalidImageName): couldn't parse image name", kind: executor.ErrImage, scheduled: true},
		{name: "init image pull fails", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduledCond},
			InitContainerStatuses: []corev1.ContainerStatus{waiting(initContainer, "ErrImagePull", "not found")}}, "node-1"),
			stage: Failed, reason: "ErrImagePull", message: "image pull failed: gantry:dev (ErrImagePull): not found", kind: executor.ErrImage, scheduled: true},
		{name: "CreateContainerConfigError", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduledCond},
			ContainerStatuses: []corev1.ContainerStatus{waiting(jobContainer, "CreateContainerConfigError", `secret "x" not found`)}}, "node-1"),
			stage: Failed, reason: "CreateContainerConfigError", message: `the job container cannot run (CreateContainerConfigError): secret "x" not found`, kind: executor.ErrEnvironment, scheduled: true},
		{name: "CrashLoopBackOff", pod: testPod(corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{initDone, crashLoop},
			ContainerStatuses:     []corev1.ContainerStatus{runningC(jobContainer, true)}}, "node-1"),
			stage: Failed, reason: "CrashLoopBackOff", message: "service db cannot run (CrashLoopBackOff): back-off 10s; it last exited with code 3 (Error)", kind: executor.ErrEnvironment, scheduled: true},
		{name: "CrashLoopBackOff after OOMKilled", pod: testPod(corev1.PodStatus{Phase: corev1.PodRunning,
			ContainerStatuses: []corev1.ContainerStatus{crashOOM}}, "node-1"),
			stage: Failed, reason: ReasonOOMKilled, message: "the job container ran out of memory (OOMKilled) and keeps restarting", kind: executor.ErrEnvironment, scheduled: true},
		{name: "OOMKilled", pod: testPod(corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{initDone, runningC(servicePrefix+"db", true)},
			ContainerStatuses:     []corev1.ContainerStatus{terminated(jobContainer, 137, "OOMKilled")}}, "node-1"),
			stage: Failed, reason: ReasonOOMKilled, message: "the job container ran out of memory (OOMKilled)", kind: executor.ErrEnvironment, scheduled: true},
		{name: "restarted after OOMKilled", pod: testPod(corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{initDone, restartedOOM},
			ContainerStatuses:     []corev1.ContainerStatus{runningC(jobContainer, true)}}, "node-1"),
			stage: Failed, reason: ReasonOOMKilled, message: "service db ran out of memory (OOMKilled) and was restarted", kind: executor.ErrEnvironment, scheduled: true},
		{name: "init OOMKilled", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{terminated(initContainer, 137, "OOMKilled")}}, "node-1"),
			stage: Failed, reason: ReasonOOMKilled, message: "the workspace init container ran out of memory", kind: executor.ErrEnvironment, scheduled: true},
		{name: "init failed", pod: testPod(corev1.PodStatus{Phase: corev1.PodFailed,
			InitContainerStatuses: []corev1.ContainerStatus{terminated(initContainer, 1, "Error")}}, "node-1"),
			stage: Failed, reason: ReasonInitFailed, message: "the workspace init container failed with exit code 1 (Error)", kind: executor.ErrEnvironment, scheduled: true},
		{name: "container exited", pod: testPod(corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{initDone, runningC(servicePrefix+"db", true)},
			ContainerStatuses:     []corev1.ContainerStatus{terminated(jobContainer, 2, "Error")}}, "node-1"),
			stage: Failed, reason: ReasonContainerExited, message: "the job container exited with code 2 (Error)", kind: executor.ErrEnvironment, scheduled: true},
		{name: "service exited, to be restarted", pod: testPod(corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{initDone, terminated(servicePrefix+"db", 2, "Error")},
			ContainerStatuses:     []corev1.ContainerStatus{runningC(jobContainer, true)}}, "node-1"),
			stage: Waiting, reason: ReasonContainersStarting, message: "containers still starting: svc-db", scheduled: true},
		{name: "service keeps exiting", pod: testPod(corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{initDone, restartedExit},
			ContainerStatuses:     []corev1.ContainerStatus{runningC(jobContainer, true)}}, "node-1"),
			stage: Failed, reason: ReasonCrashLoop, message: "service db keeps exiting (CrashLoopBackOff): it exited with code 3 (Error) after 2 restart(s)", kind: executor.ErrEnvironment, scheduled: true},
		{name: "initializing, service waiting for it", pod: testPod(corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{scheduledCond},
			InitContainerStatuses: []corev1.ContainerStatus{runningC(initContainer, false), waiting(servicePrefix+"db", "PodInitializing", "")}}, "node-1"),
			stage: Initializing, reason: ReasonInitializing, message: "the workspace init container is running", scheduled: true},
		{name: "running, service starting", pod: testPod(corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{initDone, waiting(servicePrefix+"db", "ContainerCreating", "")},
			ContainerStatuses:     []corev1.ContainerStatus{runningC(jobContainer, true)}}, "node-1"),
			stage: Waiting, reason: ReasonContainersStarting, message: "containers still starting: svc-db", scheduled: true},
		{name: "running, service not healthy", pod: testPod(corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{initDone, runningC(servicePrefix+"db", false)},
			ContainerStatuses:     []corev1.ContainerStatus{runningC(jobContainer, false)}}, "node-1"),
			stage: Waiting, reason: ReasonServiceNotReady, message: "waiting for the health check of svc-db", scheduled: true},
		{name: "ready", pod: testPod(corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{initDone, runningC(servicePrefix+"db", true)},
			ContainerStatuses:     []corev1.ContainerStatus{runningC(jobContainer, false)}}, "node-1"),
			stage: Ready, reason: ReasonRunning, message: "pod running on node node-1", scheduled: true},
		{name: "unknown phase", pod: testPod(corev1.PodStatus{Phase: corev1.PodUnknown}, "node-1"),
			stage: Waiting, reason: ReasonUnknown, message: "its node does not report", scheduled: true},
		{name: "unknown with a message", pod: testPod(corev1.PodStatus{Phase: corev1.PodUnknown, Message: "node lost"}, "node-1"),
			stage: Waiting, reason: ReasonUnknown, message: "pod status unknown: node lost", scheduled: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v := Verify(tt.pod)
			if v.Stage != tt.stage || v.Reason != tt.reason || v.Scheduled != tt.scheduled {
				t.Errorf("Verify = %s/%s scheduled=%v (%q), want %s/%s scheduled=%v", v.Stage, v.Reason, v.Scheduled, v.Message, tt.stage, tt.reason, tt.scheduled)
			}
			if !strings.Contains(v.Message, tt.message) {
				t.Errorf("message %q does not contain %q", v.Message, tt.message)
			}
			switch {
			case tt.kind == nil && v.Err != nil:
				t.Errorf("a %s verdict has an error kind: %v", v.Stage, v.Err)
			case tt.kind != nil && !errors.Is(v.Err, tt.kind):
				t.Errorf("kind %v, want %v", v.Err, tt.kind)
			}
		})
	}
}

func TestRetryKind(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{&StartError{kind: executor.ErrUnschedulable}, "timeout"},
		{&StartError{kind: executor.ErrEnvironmentLost}, "lost"},
		{&StartError{kind: executor.ErrImage}, "failure"},
		{&StartError{kind: executor.ErrEnvironment}, "failure"},
		{errors.New("other"), "failure"},
	} {
		if got := executor.RetryKind(tt.err); got != tt.want {
			t.Errorf("RetryKind(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
