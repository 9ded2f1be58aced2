package kubernetes_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/executor/executortest"
	"github.com/gantry-ci/gantry/internal/executor/kubernetes"
	"github.com/gantry-ci/gantry/internal/executor/kubernetes/k8stest"
)

// This file and the other cluster_*_test.go files run the executor against the real
// cluster scripts/k8s.sh starts (make test runs them inside `scripts/k8s.sh run`).

// env is one test's executor on the cluster, in a namespace of the test's own.
type env struct {
	c     *k8stest.Cluster
	ns    string
	owner string
	image string // the job image
	init  string // the init image
	e     *kubernetes.Executor
}

// newEnv makes an executor for the test in a namespace of its own; when the test ends
// the namespace must hold none of Gantry's pods or secrets.
func newEnv(t testing.TB, tweak ...func(*kubernetes.Config)) *env {
	t.Helper()
	c := k8stest.Get(t)
	en := &env{c: c, ns: c.Namespace(t), owner: "test-" + token()}
	en.image = c.Image(t, dockertest.Spec{Name: dockertest.Busybox})
	en.init = c.GantryImage(t)
	cfg := kubernetes.Config{
		Client:        c.Client,
		Namespace:     en.ns,
		Execer:        kubernetes.RemoteExecer{Client: c.Client, Config: c.Config},
		InitImage:     en.init,
		Owner:         en.owner,
		CheckInterval: time.Second,
		CheckStep:     time.Second,
	}
	for _, f := range tweak {
		f(&cfg)
	}
	e, err := kubernetes.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	en.e = e
	t.Cleanup(func() { c.NoLeftovers(t, en.ns, 90*time.Second) })
	return en
}

// token is a fresh random name part.
func token() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (en *env) job(t testing.TB, name string) executor.Job {
	return executor.Job{ID: "job-" + token() + name, Attempt: 1, WorkerID: en.owner,
		Workspace: t.TempDir(), Image: en.image, Grace: 2 * time.Second}
}

// podSteps runs the steps of each workspace in a pod of its own, begun at its first
// step and ended with the test: the conformance suite, which runs steps rather than
// jobs, meets real pods this way.
type podSteps struct {
	t  *testing.T
	en *env

	mu       sync.Mutex
	sessions map[string]executor.Session
}

func (p *podSteps) session(ctx context.Context, ws string) (executor.Session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s, ok := p.sessions[ws]; ok {
		return s, nil
	}
	j := p.en.job(p.t, fmt.Sprint(len(p.sessions)))
	j.Workspace = ws
	s, err := p.en.e.Begin(ctx, j)
	if err != nil {
		return nil, err
	}
	p.sessions[ws] = s
	return s, nil
}

func (p *podSteps) Run(ctx context.Context, st executor.Step) (executor.Result, error) {
	s, err := p.session(context.WithoutCancel(ctx), st.Dir)
	if err != nil {
		return executor.Result{}, err
	}
	return s.Run(ctx, st)
}

// ReadWorkspaceFile reads a file of the pod's workspace (executortest.WorkspaceReader).
func (p *podSteps) ReadWorkspaceFile(ctx context.Context, ws, name string) ([]byte, error) {
	s, err := p.session(ctx, ws)
	if err != nil {
		return nil, err
	}
	var out, errb bytes.Buffer
	res, err := s.Run(ctx, executor.Step{Script: "cat ./" + name, Dir: ws, Stdout: &out, Stderr: &errb})
	if err != nil {
		return nil, err
	}
	if res.ExitCode != 0 {
		return nil, fmt.Errorf("cat %s: exit %d: %s", name, res.ExitCode, strings.TrimSpace(errb.String()))
	}
	return out.Bytes(), nil
}

func (p *podSteps) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for ws, s := range p.sessions {
		if err := s.End(context.Background()); err != nil {
			p.t.Errorf("End the pod of %s: %v", ws, err)
		}
	}
}

// TestClusterConformance runs the executor conformance suite in real pods.
func TestClusterConformance(t *testing.T) {
	t.Parallel()
	executortest.Run(t, func(t *testing.T) executor.Executor {
		en := newEnv(t)
		p := &podSteps{t: t, en: en, sessions: map[string]executor.Session{}}
		t.Cleanup(p.end)
		return p
	})
}

// TestClusterPullSecretAndSweep: a job with registry credentials gets an image pull
// secret of its own, which goes with its pod when the job ends; a worker that died
// without ending its job (its pod and secret left running) is swept by the next worker
// of its name: both the pod and the secret go, and another owner's pod is left alone.
func TestClusterPullSecretAndSweep(t *testing.T) {
	t.Parallel()
	en := newEnv(t)
	ctx := t.Context()
	creds := map[string]executor.RegistryCredential{"registry.example:5000": {Username: "ci", Password: "s3cret"}}

	j := en.job(t, "ended")
	j.RegistryAuth = creds
	s, err := en.e.Begin(ctx, j)
	if err != nil {
		t.Fatal(err)
	}
	left, err := en.c.Leftovers(ctx, en.ns)
	if err != nil || len(left) != 2 {
		t.Fatalf("while the job runs: %v %v, want its pod and its pull secret", left, err)
	}
	if err := s.End(ctx); err != nil {
		t.Fatal(err)
	}
	en.c.NoLeftovers(t, en.ns, 90*time.Second)

	// A worker that dies leaves its job's pod and secret; so does another worker.
	orphan := en.job(t, "orphan")
	orphan.RegistryAuth = creds
	if _, err := en.e.Begin(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	other := newEnvIn(t, en, "other-"+token())
	otherS, err := other.e.Begin(ctx, other.job(t, "other"))
	if err != nil {
		t.Fatal(err)
	}
	next, err := kubernetes.New(kubernetes.Config{Client: en.c.Client, Namespace: en.ns,
		Execer: kubernetes.RemoteExecer{Client: en.c.Client, Config: en.c.Config}, InitImage: en.init, Owner: en.owner})
	if err != nil {
		t.Fatal(err)
	}
	n, err := next.Sweep(ctx)
	if err != nil || n != 1 {
		t.Fatalf("Sweep: %d pods, %v; want the one its predecessor left", n, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		left, err := en.c.Leftovers(ctx, en.ns)
		if err == nil && len(left) == 1 && strings.HasPrefix(left[0], "pod gantry-job-") && strings.Contains(left[0], "other") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the sweep: %v %v; want only the other worker's pod", left, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := otherS.End(ctx); err != nil {
		t.Fatal(err)
	}
}

// newEnvIn is an executor of another owner in en's namespace.
func newEnvIn(t *testing.T, en *env, owner string) *env {
	t.Helper()
	e, err := kubernetes.New(kubernetes.Config{Client: en.c.Client, Namespace: en.ns,
		Execer: kubernetes.RemoteExecer{Client: en.c.Client, Config: en.c.Config}, InitImage: en.init, Owner: owner,
		CheckInterval: time.Second, CheckStep: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return &env{c: en.c, ns: en.ns, owner: owner, image: en.image, init: en.init, e: e}
}
