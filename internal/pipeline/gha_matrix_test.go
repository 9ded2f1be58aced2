package pipeline

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// TestWorkflowMatrixObjects: an axis whose values are mappings is the cartesian product
// GitHub makes, each instance reading the keys of its value (matrix.build.cc) in run, env,
// name and if:, and named by them rather than by the index the axis holds.
func TestWorkflowMatrixObjects(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `
on: push
jobs:
  test:
    runs-on: ubuntu-latest
    env:
      CC: ${{ matrix.build.cc }}
    strategy:
      matrix:
        os: [linux, mac]
        build:
          - {name: gnu, cc: gcc, tls: {lib: openssl}}
          - {name: llvm, cc: clang, extra: null}
    steps:
      - name: build ${{ matrix.build.name }}
        run: make CC=${{ matrix.build.cc }} TLS=${{ matrix['build'].tls.lib }} OS=${{ matrix.os }}
      - run: echo clang
        if: matrix.build.cc == 'clang'
  named:
    name: ${{ matrix.build.name }}
    runs-on: ubuntu-latest
    strategy:
      matrix:
        build: [{name: same, cc: gcc}, {name: same, cc: clang}]
    steps: [{run: make}]
`)
	type want struct {
		display, run, stepName, cc string
		clang                      bool
	}
	wants := map[string]want{
		"test (os=linux, build=1, build__name=gnu, build__cc=gcc, build__tls__lib=openssl)": {
			"test (os=linux, build.name=gnu, build.cc=gcc, build.tls.lib=openssl)", "make CC=gcc TLS=openssl OS=linux", "build gnu", "gcc", false},
		"test (os=linux, build=2, build__name=llvm, build__cc=clang)": {
			"test (os=linux, build.name=llvm, build.cc=clang)", "make CC=clang TLS= OS=linux", "build llvm", "clang", true},
		"test (os=mac, build=1, build__name=gnu, build__cc=gcc, build__tls__lib=openssl)": {
			"test (os=mac, build.name=gnu, build.cc=gcc, build.tls.lib=openssl)", "make CC=gcc TLS=openssl OS=mac", "build gnu", "gcc", false},
		"test (os=mac, build=2, build__name=llvm, build__cc=clang)": {
			"test (os=mac, build.name=llvm, build.cc=clang)", "make CC=clang TLS= OS=mac", "build llvm", "clang", true},
		"named (build=1, build__name=same, build__cc=gcc)":   {display: "same (build.name=same, build.cc=gcc)"},
		"named (build=2, build__name=same, build__cc=clang)": {display: "same (build.name=same, build.cc=clang)"},
	}
	if len(p.Jobs) != len(wants) {
		t.Fatalf("want %d jobs, got %s", len(wants), planJSON(t, p))
	}
	for _, j := range p.Jobs {
		w, ok := wants[j.Key]
		if !ok {
			t.Fatalf("unexpected job %q", j.Key)
		}
		if j.DisplayName != w.display {
			t.Errorf("%s is shown as %q, want %q", j.Key, j.DisplayName, w.display)
		}
		if j.Name != "test" {
			continue
		}
		if j.Steps[0].Run != w.run || j.Steps[0].Name != w.stepName || j.Env["CC"] != w.cc {
			t.Errorf("%s: run %q, name %q, CC %q; want %q, %q, %q", j.Key, j.Steps[0].Run, j.Steps[0].Name, j.Env["CC"], w.run, w.stepName, w.cc)
		}
		ok, err := j.Steps[1].If.EvalStep(ConditionInput{}, j)
		if err != nil || ok != w.clang {
			t.Errorf("%s: if: matrix.build.cc == 'clang' is %v (%v), want %v", j.Key, ok, err, w.clang)
		}
	}
}

// TestWorkflowMatrixObjectsIncludeExclude: exclude may name a mapping, which excludes the
// values it matches (all of its keys alike); include may name one, adding to the
// combinations with an equal value, or making one of its own with a new value; a mapping
// include gives any other key is flattened too.
func TestWorkflowMatrixObjectsIncludeExclude(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `
on: push
jobs:
  test:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        os: [linux, mac]
        build:
          - {name: gnu, cc: gcc}
          - {name: llvm, cc: clang}
          - {name: icc, cc: icc}
        exclude:
          - {os: mac, build: {cc: gcc}}
          - build: {name: icc}
        include:
          - {build: {name: llvm, cc: clang}, lto: 'on'}
          - {os: bsd, build: {name: tcc, cc: tcc}}
          - {os: linux, tools: {make: gmake}}
    steps: [{run: 'echo ${{ matrix.build.cc }} ${{ matrix.lto }} ${{ matrix.tools.make }}'}]
`)
	var got []string
	for _, j := range p.Jobs {
		got = append(got, j.DisplayName+": "+j.Steps[0].Run)
	}
	want := []string{
		"test (os=linux, build.name=gnu, build.cc=gcc, tools.make=gmake): echo gcc  gmake",
		"test (os=linux, build.name=llvm, build.cc=clang, lto=on, tools.make=gmake): echo clang on gmake",
		"test (os=mac, build.name=llvm, build.cc=clang, lto=on): echo clang on ",
		"test (os=bsd, build.name=tcc, build.cc=tcc): echo tcc  ",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("instances:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestWorkflowMatrixObjectErrors: what cannot be flattened is refused where it is written.
func TestWorkflowMatrixObjectErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, matrix, steps, path, msg string
	}{
		{"mixed axis", "build: [{name: a}, plain]", "[{run: x}]", "jobs.a.strategy.matrix.build[1]", "mixes mappings with other values"},
		{"list inside", "build: [{name: a, flags: [x, y]}]", "[{run: x}]", "jobs.a.strategy.matrix.build[0].flags", "a list inside a matrix value"},
		{"key with __", "build__x: [a]", "[{run: x}]", "jobs.a.strategy.matrix.build__x", "may not hold __"},
		{"exclude matching nothing", "build: [{name: a}]\n        exclude: [{build: {name: b}}]", "[{run: x}]", "jobs.a.strategy.matrix.exclude[0].build", "none of its values matches"},
		{"whole object in a job's name", "build: [{name: a}]\n    name: ${{ matrix.build }}", "[{run: x}]", "jobs.a.name", "matrix.build is a mapping"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    strategy:\n      matrix:\n        " + tc.matrix + "\n    steps: " + tc.steps + "\n"
			errs := compileErrs(t, src)
			for _, e := range errs {
				if e.Path == tc.path && strings.Contains(e.Message, tc.msg) {
					return
				}
			}
			t.Fatalf("want an error at %s saying %q, got:\n%v", tc.path, tc.msg, errs)
		})
	}
}

// TestMatrixContext: the worker's matrix context holds a mapping value as the object it
// was written as.
func TestMatrixContext(t *testing.T) {
	t.Parallel()
	got := MatrixContext([]MatrixValue{{"os", "linux"}, {"build", "1"}, {"build__cc", "gcc"}, {"build__tls__lib", "openssl"}, {"tools__make", "gmake"}})
	want := map[string]any{"os": "linux", "build": map[string]any{"cc": "gcc", "tls": map[string]any{"lib": "openssl"}},
		"tools": map[string]any{"make": "gmake"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("MatrixContext = %v, want %v", got, want)
	}
}

// TestWorkflowRunsOnEvaluated: a runs-on expression with operators over matrix values and
// literals is evaluated for each instance when the plan is made, and then asks for the
// system its runner name says.
func TestWorkflowRunsOnEvaluated(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `
on: push
jobs:
  fallback:
    runs-on: ${{ matrix.os || 'ubuntu-latest' }}
    strategy:
      matrix:
        py: ['3.12']
        include:
          - {py: '3.13', os: windows-latest}
          - {py: '3.11', os: macos-14}
    steps: [{run: x}]
  choose:
    runs-on: ${{ matrix.platform == 'Linux' && 'ubuntu-26.04' || 'windows-2022' }}
    strategy: {matrix: {platform: [Linux, Windows]}}
    steps: [{run: x}]
  object:
    runs-on: [self-hosted, "${{ matrix.build.image || format('{0}-15', 'macos') }}", gpu]
    strategy:
      matrix:
        build: [{name: a}, {name: b, image: windows-2025}]
    steps: [{run: x}]
  list:
    runs-on: ${{ fromJSON('["self-hosted", "linux", "big"]') }}
    strategy: {matrix: {n: [1]}}
    steps: [{run: x}]
`)
	want := map[string][]string{
		"fallback (py=3.12)":                                         nil,
		"fallback (py=3.13, os=windows-latest)":                      {"windows"},
		"fallback (py=3.11, os=macos-14)":                            {"macos"},
		"choose (platform=Linux)":                                    nil,
		"choose (platform=Windows)":                                  {"windows"},
		"object (build=1, build__name=a)":                            {"macos", "gpu"},
		"object (build=2, build__name=b, build__image=windows-2025)": {"windows", "gpu"},
		"list (n=1)": {"linux", "big"},
	}
	if len(p.Jobs) != len(want) {
		t.Fatalf("want %d jobs, got %s", len(want), planJSON(t, p))
	}
	for _, j := range p.Jobs {
		w, ok := want[j.Key]
		if !ok {
			t.Fatalf("unexpected job %q", j.Key)
		}
		if !reflect.DeepEqual(j.RunsOn, w) {
			t.Errorf("%s asks for %v, want %v", j.Key, j.RunsOn, w)
		}
	}
}

// TestWorkflowRunsOnEvaluatedErrors: an evaluated runs-on reads matrix and literals only,
// and must come to labels; anything else is an error at the runs-on.
func TestWorkflowRunsOnEvaluatedErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, runsOn, path, msg string }{
		{"run value", "${{ github.ref == 'main' && 'big' || 'small' }}", "jobs.a.runs-on", "may read matrix and literals only, not github.ref"},
		{"input", "${{ inputs.runner || 'ubuntu-latest' }}", "jobs.a.runs-on", "not inputs.runner"},
		{"hashFiles", "${{ hashFiles('x') || 'a' }}", "jobs.a.runs-on", "hashFiles() has no meaning in runs-on"},
		{"no label", "${{ matrix.none && 'x' }}", "jobs.a.runs-on", "comes to no label"},
		{"bad label", "${{ matrix.os == 'a' || 'two words' }}", "jobs.a.runs-on", `comes to the label "two words"`},
		{"a number", "${{ matrix.os || 3 }}", "jobs.a.runs-on", "not a label"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := "on: {workflow_dispatch: {inputs: {runner: {type: string}}}}\njobs:\n  a:\n    runs-on: " + tc.runsOn +
				"\n    strategy: {matrix: {os: ['']}}\n    steps: [{run: x}]\n"
			errs := compileErrs(t, src)
			for _, e := range errs {
				if e.Path == tc.path && strings.Contains(e.Message, tc.msg) {
					return
				}
			}
			t.Fatalf("want an error at %s saying %q, got:\n%v", tc.path, tc.msg, errs)
		})
	}
}

// TestConvertWorkflowRunsOnEvaluated: gantry convert writes the labels an evaluated
// runs-on comes to when every instance comes to the same, and refuses it at the runs-on
// when they differ, as for ${{ matrix.os }}.
func TestConvertWorkflowRunsOnEvaluated(t *testing.T) {
	t.Parallel()
	src := []byte("on: push\njobs:\n  a:\n    runs-on: ${{ matrix.os || 'windows-2022' }}\n    strategy: {matrix: {n: [1, 2]}}\n    steps: [{run: x}]\n")
	want := compileWorkflow(t, string(src))
	out, err := ConvertWorkflow(src, Options{})
	if err != nil {
		t.Fatalf("ConvertWorkflow: %v", err)
	}
	got, err := Compile(out, Options{Path: "pipeline.yml"})
	if err != nil {
		t.Fatalf("Compile(convert): %v\n%s", err, out)
	}
	if a, b := planJSON(t, want), planJSON(t, got); a != b {
		t.Fatalf("plans differ\nworkflow:\n%s\nconverted:\n%s\ndefinition:\n%s", a, b, out)
	}
	if j := got.Jobs[0]; !reflect.DeepEqual(j.RunsOn, []string{"windows"}) {
		t.Fatalf("%s asks for %v, want [windows]", j.Key, j.RunsOn)
	}
	_, err = ConvertWorkflow([]byte("on: push\njobs:\n  a:\n    runs-on: ${{ matrix.os || 'windows-2022' }}\n    strategy: {matrix: {os: ['', macos-14]}}\n    steps: [{run: x}]\n"), Options{})
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Path != "jobs.a.runs-on" || !strings.Contains(errs[0].Message, "different instances") {
		t.Fatalf("convert of instances asking for windows and macos: %v, want one error at jobs.a.runs-on", err)
	}
}

// A matrix key no instance has reads as "", as GitHub reads it (null): a workflow tests
// matrix.x against the empty string for keys only some include: entries set, or none.
func TestWorkflowMatrixMissingKey(t *testing.T) {
	t.Parallel()
	p, err := Compile([]byte(`on: push
jobs:
  a:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        include:
          - {name: one}
          - {name: two, arch: arm64}
    steps:
      - if: matrix.grpcenv != ''
        run: echo "[${{ matrix.grpcenv }}]"
      - if: matrix.arch != ''
        run: echo "${{ matrix.arch }}"
  plain:
    runs-on: ubuntu-latest
    steps:
      - run: echo "[${{ matrix.anything }}]"
`), Options{})
	if err != nil {
		t.Fatal(err)
	}
	one := p.Job("a (name=one)")
	if one == nil || len(one.Steps) != 2 || one.Steps[0].Run != "echo \"[]\"" {
		t.Fatalf("jobs %v, steps %+v", p.Waves, one)
	}
	for _, c := range []struct {
		job  string
		step int
		want bool
	}{{"a (name=one)", 0, false}, {"a (name=one)", 1, false}, {"a (name=two, arch=arm64)", 1, true}} {
		job := p.Job(c.job)
		ok, err := job.Steps[c.step].If.EvalStep(ConditionInput{}, job)
		if err != nil || ok != c.want {
			t.Errorf("%s step %d: if = %v, %v; want %v", c.job, c.step, ok, err, c.want)
		}
	}
	if run := p.Job("plain").Steps[0].Run; run != "echo \"[]\"" {
		t.Errorf("matrix.anything in a job without a matrix: %q", run)
	}
}
