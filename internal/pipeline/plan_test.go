package pipeline

import (
	"reflect"
	"testing"
	"time"
)

func mustCompile(t *testing.T, src string) *Plan {
	t.Helper()
	p, err := Compile([]byte(src), Options{})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

func keys(jobs []*Job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.Key
	}
	return out
}

// TestFiveMistakes is the acceptance case: one file, five different mistakes, each reported
// at its own line.
func TestFiveMistakes(t *testing.T) {
	t.Parallel()
	src := `name: five
jobs:
  build:
    steps:
      - run: make
        tiemout: 5m
  test:
    needs: [biuld]
    steps: [{run: make test}]
  deploy:
    needs: [test]
    if: branch = "main"
    priority: urgent
    steps:
      - run: echo ${{ matrix.region }}
`
	errs := compileErrs(t, src)
	want := []struct {
		line int
		kind ErrorKind
		path string
	}{
		{6, ErrUnknownKey, "jobs.build.steps[0].tiemout"},
		{8, ErrUnknownNeed, "jobs.test.needs[0]"},
		{12, ErrExpression, "jobs.deploy.if"},
		{13, ErrInvalid, "jobs.deploy.priority"},
		{15, ErrUnknownReference, "jobs.deploy.steps[0].run"},
	}
	if len(errs) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(errs), len(want), errs)
	}
	for i, w := range want {
		e := errs[i]
		if e.Line != w.line || e.Kind != w.kind || e.Path != w.path {
			t.Errorf("error %d = %d %s %s (%s), want %d %s %s", i, e.Line, e.Kind, e.Path, e.Message, w.line, w.kind, w.path)
		}
	}
}

func TestMatrixExpansion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		matrix string
		want   []string
	}{
		{"product, first axis slowest", "{go: [\"1.25\", \"1.26\"], shard: [1, 2]}",
			[]string{"t (go=1.25, shard=1)", "t (go=1.25, shard=2)", "t (go=1.26, shard=1)", "t (go=1.26, shard=2)"}},
		{"values keep their text", "{v: [1.10, 010, true]}", []string{"t (v=1.10)", "t (v=010)", "t (v=true)"}},
		{"exclude", "{go: [a, b], shard: [1, 2], exclude: [{go: a, shard: 2}]}",
			[]string{"t (go=a, shard=1)", "t (go=b, shard=1)", "t (go=b, shard=2)"}},
		{"exclude by one axis", "{go: [a, b], shard: [1, 2], exclude: [{go: a}]}",
			[]string{"t (go=b, shard=1)", "t (go=b, shard=2)"}},
		{"include adds a combination", "{go: [a], shard: [1], include: [{go: c, shard: 9}]}",
			[]string{"t (go=a, shard=1)", "t (go=c, shard=9)"}},
		{"include extends matching combinations", "{go: [a, b], shard: [1, 2], include: [{go: a, race: true}]}",
			[]string{"t (go=a, shard=1, race=true)", "t (go=a, shard=2, race=true)", "t (go=b, shard=1)", "t (go=b, shard=2)"}},
		{"include without axis keys extends all", "{go: [a, b], include: [{os: linux}]}",
			[]string{"t (go=a, os=linux)", "t (go=b, os=linux)"}},
		{"later include overrides added value", "{go: [a], include: [{go: a, x: 1}, {go: a, x: 2}]}",
			[]string{"t (go=a, x=2)"}},
		{"include puts axis keys first", "{go: [a], os: [l], include: [{extra: 1, os: m, go: b}]}",
			[]string{"t (go=a, os=l)", "t (go=b, os=m, extra=1)"}},
		{"only include", "{include: [{go: a}, {go: b}]}", []string{"t (go=a)", "t (go=b)"}},
		{"identical includes become one job", "{include: [{go: a}, {go: a}]}", []string{"t (go=a)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustCompile(t, "jobs:\n  t:\n    matrix: "+tt.matrix+"\n    steps: [{run: x}]")
			if got := keys(p.Jobs); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("jobs = %q\nwant   %q", got, tt.want)
			}
		})
	}
}

func TestSubstitution(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
env: {APP: demo, MODE: fast}
defaults:
  env: {TARGET: "${{ env.APP }}-bin"}
  runs_on: [linux]
jobs:
  test:
    matrix: {go: ["1.26"], os: [arm64]}
    runs_on: [linux, "${{ matrix.os }}"]
    env: {GOVERSION: "go${{ matrix.go }}", MODE: "${{ env.MODE }}-race"}
    concurrency: "test-${{ matrix.go }}"
    artifacts: {name: "cov-${{ matrix.go }}", paths: ["out/${{ matrix.os }}/*.out"]}
    steps:
      - name: "test on ${{ matrix.os }}"
        run: go test -tags ${{ env.MODE }} ${{env.TARGET}}
        env: {STEP: "${{ env.GOVERSION }}"}
`)
	j := p.Jobs[0]
	wantEnv := map[string]string{"APP": "demo", "MODE": "fast-race", "TARGET": "demo-bin", "GOVERSION": "go1.26"}
	if !reflect.DeepEqual(j.Env, wantEnv) {
		t.Errorf("env = %v, want %v", j.Env, wantEnv)
	}
	if want := []string{"linux", "arm64"}; !reflect.DeepEqual(j.RunsOn, want) {
		t.Errorf("runs_on = %v, want %v", j.RunsOn, want)
	}
	if j.Concurrency == nil || j.Concurrency.Group != "test-1.26" {
		t.Errorf("concurrency = %+v", j.Concurrency)
	}
	if j.Artifacts == nil || j.Artifacts.Name != "cov-1.26" || j.Artifacts.Paths[0] != "out/arm64/*.out" {
		t.Errorf("artifacts = %+v", j.Artifacts)
	}
	s := j.Steps[0]
	if s.Name != "test on arm64" || s.Run != "go test -tags fast-race demo-bin" || s.Env["STEP"] != "go1.26" {
		t.Errorf("step 0 = %+v", s)
	}
	// A step's env is its own: the next step cannot read it.
	errs := compileErrs(t, "jobs:\n  a:\n    steps:\n      - {run: x, env: {S: 1}}\n      - run: echo ${{ env.S }}")
	if errs[0].Kind != ErrUnknownReference || errs[0].Path != "jobs.a.steps[1].run" {
		t.Errorf("step env leaked: %v", errs)
	}
}

func TestDefaultsLayering(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
defaults:
  timeout: 10m
  cancel_grace: 30s
  priority: high
  shell: bash
  resources: {cpu: 2, memory: 1Gi}
  retry: {max_attempts: 3, backoff: 5s, max_backoff: 1m, on: [lost, timeout]}
jobs:
  plain:
    steps: [{run: x}]
  own:
    timeout: 2m
    priority: low
    resources: {cpu: 500m}
    retry: {max_attempts: 2, on: failure}
    runs_on: gpu
    steps: [{run: x, shell: python3, timeout: 30s, once: true, continue_on_error: true}]
`)
	plain, own := p.Job("plain"), p.Job("own")
	if plain.Timeout != Duration(10*time.Minute) || plain.CancelGrace != Duration(30*time.Second) || plain.Priority != PriorityHigh {
		t.Errorf("plain = %+v", plain)
	}
	if plain.Steps[0].Shell != "bash" || plain.Resources != (Resources{MilliCPU: 2000, MemoryBytes: 1 << 30}) {
		t.Errorf("plain step/resources = %+v %+v", plain.Steps[0], plain.Resources)
	}
	wantRetry := RetryPolicy{MaxAttempts: 3, Backoff: Duration(5 * time.Second), MaxBackoff: Duration(time.Minute), On: []FailureKind{FailureLost, FailureTimeout}}
	if !reflect.DeepEqual(plain.Retry, wantRetry) {
		t.Errorf("plain retry = %+v, want %+v", plain.Retry, wantRetry)
	}
	if own.Timeout != Duration(2*time.Minute) || own.Priority != PriorityLow || own.Resources != (Resources{MilliCPU: 500, MemoryBytes: 1 << 30}) {
		t.Errorf("own = %+v", own)
	}
	wantRetry = RetryPolicy{MaxAttempts: 2, Backoff: Duration(5 * time.Second), MaxBackoff: Duration(time.Minute), On: []FailureKind{FailureExit}}
	if !reflect.DeepEqual(own.Retry, wantRetry) {
		t.Errorf("own retry = %+v, want %+v", own.Retry, wantRetry)
	}
	st := own.Steps[0]
	if st.Shell != "python3" || st.Timeout != Duration(30*time.Second) || !st.Once || !st.ContinueOnError || st.Name != "x" {
		t.Errorf("own step = %+v", st)
	}
	if !reflect.DeepEqual(own.RunsOn, []string{"gpu"}) {
		t.Errorf("own runs_on = %v", own.RunsOn)
	}

	bare := mustCompile(t, "jobs: {a: {steps: [{run: x}]}}").Jobs[0]
	if bare.Timeout != Duration(DefaultTimeout) || bare.CancelGrace != 0 || bare.Priority != PriorityNormal || bare.Steps[0].Shell != DefaultShell || !reflect.DeepEqual(bare.Retry, DefaultRetry) {
		t.Errorf("built-in defaults not applied: %+v", bare)
	}
}

func TestDAG(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		src   string
		waves [][]string
		needs map[string][]string
	}{
		{"diamond", `
jobs:
  lint: {steps: [{run: x}]}
  unit: {steps: [{run: x}]}
  build: {needs: [lint, unit], steps: [{run: x}]}
  package: {needs: [build], steps: [{run: x}]}`,
			[][]string{{"lint", "unit"}, {"build"}, {"package"}},
			map[string][]string{"build": {"lint", "unit"}, "package": {"build"}}},
		{"wave is the longest path", `
jobs:
  z: {needs: [a, c], steps: [{run: x}]}
  a: {steps: [{run: x}]}
  b: {needs: [a], steps: [{run: x}]}
  c: {needs: [b], steps: [{run: x}]}`,
			[][]string{{"a"}, {"b"}, {"c"}, {"z"}},
			map[string][]string{"z": {"a", "c"}}},
		{"needs on a matrix job fans in", `
jobs:
  test: {matrix: {n: [1, 2]}, steps: [{run: x}]}
  report: {needs: test, steps: [{run: x}]}`,
			[][]string{{"test (n=1)", "test (n=2)"}, {"report"}},
			map[string][]string{"report": {"test (n=1)", "test (n=2)"}}},
		{"stages become needs on the previous non-empty stage", `
stages: [build, test, empty, deploy]
jobs:
  deploy: {stage: deploy, steps: [{run: x}]}
  b1: {stage: build, steps: [{run: x}]}
  b2: {stage: build, steps: [{run: x}]}
  t1: {stage: test, steps: [{run: x}]}
  early: {stage: deploy, needs: [b1], steps: [{run: x}]}
  solo: {stage: test, needs: [], steps: [{run: x}]}`,
			[][]string{{"b1", "b2", "solo"}, {"t1", "early"}, {"deploy"}},
			map[string][]string{"t1": {"b1", "b2"}, "deploy": {"t1", "solo"}, "early": {"b1"}, "solo": nil}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustCompile(t, tt.src)
			if !reflect.DeepEqual(p.Waves, tt.waves) {
				t.Errorf("waves = %q, want %q", p.Waves, tt.waves)
			}
			for key, want := range tt.needs {
				if got := p.Job(key).Needs; !reflect.DeepEqual(got, want) {
					t.Errorf("%s needs %q, want %q", key, got, want)
				}
			}
			// Jobs are in topological order: every need comes earlier.
			seen := map[string]bool{}
			for _, j := range p.Jobs {
				for _, n := range j.Needs {
					if !seen[n] {
						t.Errorf("%s comes before its need %s", j.Key, n)
					}
				}
				seen[j.Key] = true
			}
		})
	}
}

func TestCycleNamedOnce(t *testing.T) {
	t.Parallel()
	errs := compileErrs(t, `
jobs:
  a: {needs: [b], steps: [{run: x}]}
  b: {needs: [c], steps: [{run: x}]}
  c: {needs: [a], steps: [{run: x}]}
  d: {needs: [e], steps: [{run: x}]}
  e: {needs: [d], steps: [{run: x}]}
`)
	var msgs []string
	for _, e := range errs {
		if e.Kind != ErrCycle {
			t.Errorf("unexpected error %v", e)
		}
		msgs = append(msgs, e.Message)
	}
	want := []string{"needs form a cycle: a -> b -> c -> a", "needs form a cycle: d -> e -> d"}
	if !reflect.DeepEqual(msgs, want) {
		t.Errorf("messages = %q, want %q", msgs, want)
	}
	if errs[0].Line != 3 || errs[0].Path != "jobs.a.needs[0]" {
		t.Errorf("first cycle reported at %d %s", errs[0].Line, errs[0].Path)
	}
}

func TestYAMLFeatures(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `
x-common: &common
  timeout: 5m
  steps: [{run: make}]
.retry: &retry {max_attempts: 2}
jobs:
  .template: {steps: [{run: ignored}]}
  a:
    <<: *common
    timeout: 1m
  b:
    <<: [*common]
    retry: *retry
`)
	if got := keys(p.Jobs); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Fatalf("jobs = %q; hidden templates must not become jobs", got)
	}
	a, b := p.Job("a"), p.Job("b")
	if a.Timeout != Duration(time.Minute) || b.Timeout != Duration(5*time.Minute) || b.Retry.MaxAttempts != 2 {
		t.Errorf("merge keys: a.timeout=%v b.timeout=%v b.retry=%+v", a.Timeout, b.Timeout, b.Retry)
	}
	if a.Steps[0].Run != "make" || b.Steps[0].Run != "make" {
		t.Errorf("merged steps: %+v %+v", a.Steps, b.Steps)
	}
}

func TestJSONAndYAMLAgree(t *testing.T) {
	t.Parallel()
	fromJSON := mustCompile(t, `{"name": "n", "env": {"A": "1"}, "jobs": {"a": {"steps": [{"run": "echo a"}]}, "b": {"needs": ["a"], "matrix": {"x": [1, 2]}, "steps": [{"run": "echo ${{ matrix.x }}"}]}}}`)
	fromYAML := mustCompile(t, "name: n\nenv: {A: \"1\"}\njobs:\n  a:\n    steps: [{run: echo a}]\n  b:\n    needs: [a]\n    matrix: {x: [1, 2]}\n    steps: [{run: \"echo ${{ matrix.x }}\"}]\n")
	if !reflect.DeepEqual(fromJSON, fromYAML) {
		t.Errorf("plans differ:\njson %+v\nyaml %+v", fromJSON, fromYAML)
	}
}
