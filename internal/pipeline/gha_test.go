package pipeline

import (
	"cmp"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func compileWorkflow(t *testing.T, src string) *Plan {
	t.Helper()
	p, err := Compile([]byte(src), Options{Path: ".github/workflows/ci.yml"})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return p
}

func planJSON(t *testing.T, p *Plan) string {
	t.Helper()
	b, err := json.MarshalIndent(p, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestWorkflowFilesConvertToTheSamePlan checks the promise of gantry convert on every
// workflow in testdata: the Gantry definition it prints is read as Gantry's (not as a
// workflow) and plans exactly as the workflow does.
func TestWorkflowFilesConvertToTheSamePlan(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("testdata/gha/*.yml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no workflows in testdata/gha: %v", err)
	}
	for _, name := range files {
		t.Run(filepath.Base(name), func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			// Read by its content alone, as the server reads a posted body.
			want, err := Compile(src, Options{})
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			out, err := ConvertWorkflow(src, Options{})
			if err != nil {
				t.Fatalf("ConvertWorkflow: %v", err)
			}
			d := &decoder{limits: DefaultLimits}
			if root := d.parseDocument(out); root == nil || isWorkflow(root) {
				t.Fatalf("the converted definition is read as a workflow (or not at all):\n%s", out)
			}
			got, err := Compile(out, Options{Path: "pipeline.yml"})
			if err != nil {
				t.Fatalf("Compile(convert): %v\n%s", err, out)
			}
			if a, b := planJSON(t, want), planJSON(t, got); a != b {
				t.Fatalf("plans differ\nworkflow:\n%s\nconverted:\n%s\ndefinition:\n%s", a, b, out)
			}
		})
	}
}

func TestWorkflowTranslation(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `
name: CI
on: [push, release]
env: {A: one}
jobs:
  build:
    runs-on: [self-hosted, gpu, ubuntu-22.04, X64, Linux]
    timeout-minutes: 1.5
    defaults: {run: {working-directory: src}}
    env: {B: "${{ env.A }}-two"}
    steps:
      - uses: actions/checkout@v4
        with: {fetch-depth: 3, submodules: recursive, lfs: true, path: src}
      - name: Build ${{ github.workflow }} ${{ github.job }}
        run: echo ${{ env.B }} ${{ secrets.npm_token }} ${{ env.FROM_EARLIER }} ${{ github.workspace }}
        shell: sh
        timeout-minutes: 2
        continue-on-error: true
      - run: print("hi")
        shell: python
        working-directory: py
      - uses: actions/upload-artifact@v4
        with:
          name: dist
          path: |
            dist/
            ./bin/app
  after:
    needs: build
    runs-on: ubuntu-latest
    steps:
      - uses: actions/download-artifact@v4
        with: {name: dist}
      - run: ls dist
`)
	if p.On == nil || p.On.Push == nil || p.On.PullRequest != nil {
		t.Fatalf("on: want push only (release needs GitHub), got %+v", p.On)
	}
	b := p.Job("build")
	if b == nil || len(p.Jobs) != 2 {
		t.Fatalf("jobs: %s", planJSON(t, p))
	}
	if !reflect.DeepEqual(b.RunsOn, []string{"gpu", "amd64", "linux"}) {
		t.Errorf("runs_on = %v, want [gpu amd64 linux]: GitHub's runner names are dropped, its system labels are Gantry's", b.RunsOn)
	}
	if b.Timeout.String() != "1m30s" {
		t.Errorf("timeout = %v, want 1m30s", b.Timeout)
	}
	if b.Checkout == nil || b.Checkout.Depth != 3 || !b.Checkout.Submodules || !b.Checkout.LFS || b.Checkout.Path != "src" {
		t.Errorf("checkout = %+v", b.Checkout)
	}
	if b.Env["B"] != "one-two" {
		t.Errorf("env B = %q, want one-two", b.Env["B"])
	}
	if len(b.Steps) != 3 {
		t.Fatalf("steps: want the checkout folded into the job, two run steps and the upload, got %d", len(b.Steps))
	}
	if up := b.Steps[2]; up.Uses != "actions/upload-artifact@v4" || up.With["name"] != "dist" || up.With["path"] != "dist/\n./bin/app\n" {
		t.Errorf("the upload is a step the worker does where it stands: %+v", up)
	}
	s0 := b.Steps[0]
	if s0.Name != "Build CI build" || s0.Shell != "sh" || !s0.ContinueOnError || s0.Timeout.String() != "2m0s" {
		t.Errorf("step 0 = %+v", s0)
	}
	if want := "cd -- 'src'\necho one-two ${NPM_TOKEN} ${FROM_EARLIER} ${GANTRY_WORKSPACE}"; s0.Run != want {
		t.Errorf("step 0 run = %q, want %q", s0.Run, want)
	}
	if s0.Env["NPM_TOKEN"] != WorkerExpr("secrets.NPM_TOKEN") {
		t.Errorf("step 0 env = %v: the secret its run reads must be in its env", s0.Env)
	}
	if got := b.OptionalSecrets(); !slices.Contains(got, "NPM_TOKEN") || len(b.Secrets()) != 0 {
		t.Errorf("the job's secrets: optional %v, required %v; a workflow's secret is optional, as on GitHub", got, b.Secrets())
	}
	if s1 := b.Steps[1]; s1.Shell != "python3" || !strings.HasPrefix(s1.Run, `import os; os.chdir("py")`) {
		t.Errorf("step 1 = %+v", s1)
	}
	if b.Artifacts != nil {
		t.Errorf("artifacts = %+v: a workflow keeps files with its upload steps", b.Artifacts)
	}
	a := p.Job("after")
	if a.Checkout == nil || !a.Checkout.Skip {
		t.Errorf("a job without actions/checkout starts empty, as on GitHub: checkout = %+v", a.Checkout)
	}
	if !a.NoInputs || len(a.Steps) != 2 || a.Steps[0].Uses != "actions/download-artifact@v4" || a.Steps[1].Shell != "bash" {
		t.Errorf("after: NoInputs %v, steps %+v", a.NoInputs, a.Steps)
	}
	if p.Job("build").Timeout == 0 || p.Jobs[1].Timeout.String() != "6h0m0s" {
		t.Errorf("a job without timeout-minutes gets GitHub's six hours, got %v", p.Jobs[1].Timeout)
	}
}

func TestWorkflowConditions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		gha, gantry string
	}{
		{"github.ref == 'refs/heads/main'", `ref == "refs/heads/main"`},
		{"${{ github.event_name == 'workflow_dispatch' }}", `event == "dispatch"`},
		{"always() && needs.a.result == 'failure'", `always() && needs.a.result == "failed"`},
		{"!cancelled() && (needs.a.result != 'cancelled')", `!cancelled() && (needs.a.result != "cancelled")`},
		{"startsWith(github.ref, 'refs/tags/') || contains(github.ref_name, 'rc')", `startsWith(ref, "refs/tags/") || contains((branch + tag), "rc")`},
		{"matrix.experimental", `(matrix.experimental not in ["", "false", "0"])`},
		{"github.event.inputs.deploy == 'true' && inputs.deploy", `inputs.deploy == "true" && (inputs.deploy != nil && inputs.deploy != "" && inputs.deploy != false && inputs.deploy != 0)`},
		{"format('v{0}-{1}', matrix.go, 'x') == 'v1-x'", `("v" + string(matrix.go) + "-" + string("x")) == "v1-x"`},
		{"contains(fromJSON('[\"a\",\"b\"]'), matrix.go)", `contains(fromJSON("[\"a\",\"b\"]"), matrix.go)`},
		// What Gantry's language cannot say is kept for GitHub's evaluator.
		{"toJSON(matrix) != '' && join(fromJSON('[1]'), '-') == '1'", GitHubCondition("toJSON(matrix) != '' && join(fromJSON('[1]'), '-') == '1'")},
		{"github.event.pull_request.draft == false && github.repository_owner == 'acme'", GitHubCondition("github.event.pull_request.draft == false && github.repository_owner == 'acme'")},
		{"matrix['go-version'] >= 1.2 && runner.os == 'Linux' && github.event.pull_request.head.repo.fork", `float(matrix["go-version"]) >= 1.2 && "Linux" == "Linux" && pr.fork`},
	}
	for _, tc := range tests {
		t.Run(tc.gha, func(t *testing.T) {
			src := "on: push\njobs:\n  a: {runs-on: x, steps: [{run: x}]}\n  b:\n    runs-on: x\n    needs: a\n    strategy: {matrix: {go: ['1'], go-version: ['1.3'], experimental: ['true']}}\n    if: " +
				yamlQuote(tc.gha) + "\n    steps: [{run: x}]\n"
			if tc.gantry == "" {
				// toJSON of a whole context has no counterpart; the error must say so.
				errs := compileErrs(t, src)
				if !errors.Is(errs, ErrExpression) {
					t.Fatalf("want an expression error, got %v", errs)
				}
				return
			}
			p, err := Compile([]byte(src), Options{})
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			if got := p.Jobs[1].If.Source; got != tc.gantry {
				t.Fatalf("if: %s\n got %s\nwant %s", tc.gha, got, tc.gantry)
			}
		})
	}
}

func yamlQuote(s string) string {
	return `"` + strings.ReplaceAll(strings.ReplaceAll(s, `\`, `\\`), `"`, `\"`) + `"`
}

// TestWorkflowTruthiness evaluates the coercion written for if: matrix.x against GitHub's
// rules: "", null, false and 0 are false, anything else true (a matrix value is a YAML
// scalar, so false and 0 there are GitHub's false and 0).
func TestWorkflowTruthiness(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, "on: push\njobs:\n  a:\n    runs-on: x\n    strategy: {matrix: {v: ['', 'false', '0', 'x']}}\n    if: matrix.v\n    steps: [{run: x}]\n")
	want := map[string]bool{"": false, "false": false, "0": false, "x": true}
	for _, j := range p.Jobs {
		ok, err := j.ShouldRun(ConditionInput{})
		if err != nil {
			t.Fatalf("%s: %v", j.Key, err)
		}
		if v := j.Matrix[0].Value; ok != want[v] {
			t.Errorf("if: matrix.v with v=%q is %v, want %v", v, ok, want[v])
		}
	}
}

func TestWorkflowErrors(t *testing.T) {
	t.Parallel()
	const head = "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n"
	tests := []struct {
		name      string
		src       string
		kind      ErrorKind
		path      string
		line, col int
		msg       string
	}{
		{"action without a version", head + "    steps:\n      - uses: golangci/golangci-lint-action\n", ErrInvalid, "jobs.a.steps[0].uses", 6, 15, "needs a version after @"},
		{"local action outside the workspace", head + "    steps:\n      - uses: ../x\n", ErrInvalid, "jobs.a.steps[0].uses", 6, 15, "a local action is a directory of the workspace"},
		{"working-directory on an action step", head + "    steps:\n      - uses: o/r@v1\n        working-directory: x\n", ErrInvalid, "jobs.a.steps[0].working-directory", 7, 9, "belongs to a run step"},
		{"reusable workflow with nothing to read it", "on: push\njobs:\n  a:\n    uses: org/repo/.github/workflows/x.yml@v1\n", ErrInvalid, "jobs.a.uses", 4, 11, "there is no repository to read it from"},
		{"unknown job key keeps the workflow's name", head + "    timeout_minutes: 3\n    steps: [{run: x}]\n", ErrUnknownKey, "jobs.a.timeout_minutes", 5, 5, `did you mean "timeout-minutes"`},
		{"service port on another address", head + "    services: {db: {image: postgres, ports: ['10.0.0.1:5432:5432']}}\n    steps: [{run: x}]\n", ErrInvalid, "jobs.a.services.db.ports[0]", 5, 46, "on the worker's 127.0.0.1 only, not on 10.0.0.1"},
		{"service port range", head + "    services: {db: {image: postgres, ports: ['8000-8010:8000-8010']}}\n    steps: [{run: x}]\n", ErrInvalid, "jobs.a.services.db.ports[0]", 5, 46, "ranges are not supported"},
		{"service option", head + "    container: node:20\n    services: {db: {image: postgres, options: --shm-size 1g}}\n    steps: [{run: x}]\n", ErrInvalid, "jobs.a.services.db.options", 6, 47, "service option --shm-size is not supported"},
		{"container volumes", head + "    container: {image: node:20, volumes: [/x:/x]}\n    steps: [{run: x}]\n", ErrInvalid, "jobs.a.container.volumes", 5, 33, "volumes are not supported"},
		{"bad image at the workflow's path", head + "    container: {image: 'Node:20'}\n    steps: [{run: x}]\n", ErrInvalid, "jobs.a.container.image", 5, 24, "image \"Node:20\""},
		{"repository without run-id", head + "    steps:\n      - uses: actions/download-artifact@v4\n        with: {name: x, repository: o/r}\n", ErrInvalid, "jobs.a.steps[0].with.repository", 7, 25, "repository is read with run-id"},
		{"empty run-id", head + "    steps:\n      - uses: actions/download-artifact@v4\n        with: {name: x, run-id: ''}\n", ErrInvalid, "jobs.a.steps[0].with.run-id", 7, 33, "run-id is empty"},
		{"run's own artifact not kept by a need", head + "    steps:\n      - uses: actions/download-artifact@v4\n        with: {name: x}\n", ErrUnknownReference, "jobs.a.steps[0].with.name", 7, 22, "add the job that uploads it to needs"},
		{"step output of a later step", head + "    steps:\n      - run: echo ${{ steps.x.outputs.y }}\n      - {id: x, run: make}\n", ErrUnknownReference, "jobs.a.steps[0].run", 6, 19, `no step before this one has id "x"`},
		{"step output where the run decides", head + "    concurrency: ${{ needs.b.outputs.y }}\n    steps: [{run: x}]\n", ErrExpression, "jobs.a.concurrency", 5, 22, "needs is not known when a run is created"},
		{"cache path outside", head + "    steps:\n      - uses: actions/cache@v4\n        with: {path: ../x, key: k}\n", ErrInvalid, "jobs.a.steps[0].with.path[0]", 7, 22, "cache path"},
		{"expression error at its column", head + "    steps:\n      - run: echo ${{ github.sha && }}\n", ErrExpression, "jobs.a.steps[0].run", 6, 34, "Unexpected end of expression"},
		{"unknown context", head + "    steps:\n      - run: echo ${{ github.retention_days }}\n", ErrExpression, "jobs.a.steps[0].run", 6, 23, "github.retention_days has no counterpart"},
		{"strategy in a step's text", head + "    steps:\n      - run: echo ${{ strategy.job-index || 'y' }}\n", ErrExpression, "jobs.a.steps[0].run", 6, 23, "strategy is not a context a step's text may read"},
		{"if with an unknown function", head + "    if: endswith(github.ref, 'x') && nope()\n    steps: [{run: x}]\n", ErrExpression, "jobs.a.if", 5, 38, "Unrecognized function: 'nope'"},
		{"if reading secrets", head + "    if: secrets.X != ''\n    steps: [{run: x}]\n", ErrExpression, "jobs.a.if", 5, 9, "cannot read secrets"},
		{"matrix error at the workflow's path", head + "    strategy:\n      matrix: {go: [1, 1]}\n    steps: [{run: x}]\n", ErrInvalid, "jobs.a.strategy.matrix.go[1]", 6, 24, "listed twice"},
		{"need of no job", head + "    needs: [biuld]\n    steps: [{run: x}]\n  build: {runs-on: x, steps: [{run: x}]}\n", ErrUnknownNeed, "jobs.a.needs[0]", 5, 13, `did you mean "build"`},
		{"download of an artifact no need keeps", head + "    steps:\n      - uses: actions/upload-artifact@v4\n        with: {name: bin, path: x}\n  b:\n    runs-on: x\n    needs: a\n    steps:\n      - uses: actions/download-artifact@v4\n        with: {name: bim}\n", ErrUnknownReference, "jobs.b.steps[0].with.name", 13, 22, `did you mean "bin"`},
		{"checkout of another server", head + "    steps:\n      - uses: actions/checkout@v4\n        with: {repository: o/r, github-server-url: x}\n", ErrInvalid, "jobs.a.steps[0].with.github-server-url", 7, 33, `input "github-server-url" is not supported`},
		{"unknown shell", head + "    steps:\n      - run: x\n        shell: fish\n", ErrInvalid, "jobs.a.steps[0].shell", 7, 16, `shell "fish" is not supported`},
		{"working-directory of a file shell", head + "    steps:\n      - run: x\n        shell: pwsh\n        working-directory: src\n", ErrInvalid, "jobs.a.steps[0].working-directory", 8, 28, `working-directory with shell "pwsh" is not supported`},
		{"shell expression reading more than matrix", head + "    steps:\n      - run: x\n        shell: ${{ inputs.sh }}\n", ErrExpression, "jobs.a.steps[0].shell", 7, 16, "may read matrix and literals only, not inputs"},
		{"shell expression coming to no shell", head + "    strategy: {matrix: {s: [fish]}}\n    steps:\n      - run: x\n        shell: ${{ matrix.s }}\n", ErrInvalid, "jobs.a.steps[0].shell", 8, 16, `for a (s=fish): shell "fish" is not supported`},
		{"timeout from an expression that comes to null", head + "    timeout-minutes: ${{ matrix.t }}\n    steps: [{run: x}]\n", ErrInvalid, "jobs.a.timeout-minutes", 5, 22, "comes to null, not a number of minutes"},
		{"timeout from an expression reading more than matrix", head + "    timeout-minutes: ${{ inputs.t || 5 }}\n    steps: [{run: x}]\n", ErrExpression, "jobs.a.timeout-minutes", 5, 22, "may read matrix and literals only, not inputs"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := compileErrs(t, tc.src)
			for _, e := range errs {
				if e.Path == tc.path && errors.Is(e, tc.kind) && strings.Contains(e.Message, tc.msg) {
					if e.Line != tc.line || e.Column != tc.col {
						t.Fatalf("%s at %d:%d, want %d:%d", e.Message, e.Line, e.Column, tc.line, tc.col)
					}
					return
				}
			}
			t.Fatalf("want %s at %s containing %q, got:\n%v", tc.kind, tc.path, tc.msg, errs)
		})
	}
}

func TestWorkflowDetection(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, path, src string
		workflow        bool
	}{
		{"uses", "", "jobs: {a: {steps: [{uses: actions/checkout@v4}]}}", true},
		{"on and runs-on everywhere", "", "on: push\njobs: {a: {runs-on: x, steps: [{run: x}]}}", true},
		{"runs-on slip in a Gantry file", "", "jobs: {a: {runs-on: x, steps: [{run: x}]}}", false},
		{"runs-on in one job of two", "", "on: push\njobs: {a: {runs-on: x, steps: [{run: x}]}, b: {steps: [{run: x}]}}", false},
		{"path under .github/workflows", "repo/.github/workflows/x.yml", "jobs: {a: {steps: [{run: x}]}}", true},
		{"Gantry", "", "jobs: {a: {runs_on: [x], steps: [{run: x}]}}", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := &decoder{limits: DefaultLimits}
			root := d.parseDocument([]byte(tc.src))
			if got := isWorkflowPath(tc.path) || isWorkflow(root); got != tc.workflow {
				t.Fatalf("workflow = %v, want %v", got, tc.workflow)
			}
		})
	}
	if _, err := ConvertWorkflow([]byte("jobs: {a: {steps: [{run: x}]}}"), Options{}); !errors.Is(err, ErrNotWorkflow) {
		t.Fatalf("ConvertWorkflow of a Gantry definition: %v, want ErrNotWorkflow", err)
	}
}

func TestWorkflowSetupStep(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `
on: push
jobs:
  a:
    runs-on: x
    strategy: {matrix: {go: ['1.26']}}
    steps:
      - uses: actions/setup-go@v5
        with: {go-version: "${{ matrix.go }}", cache: true}
      - uses: actions/setup-node@v4
        with: {node-version-file: .nvmrc, package-manager-cache: false, registry-url: "https://npm.example"}
      - uses: actions/setup-python@v5
        with:
          python-version: |
            3.11
            3.12
          pip-version: "24.0"
          allow-prereleases: true
      - run: go version
`)
	st := p.Jobs[0].Steps
	// The worker does these steps itself (agent: setupStep), with the inputs it reads;
	// those that only matter to a download or GitHub's cache are left out.
	want := []struct {
		name, uses string
		with       map[string]string
	}{
		{"Set up Go 1.26", "actions/setup-go@v5", map[string]string{"go-version": "1.26"}},
		{"Set up Node.js", "actions/setup-node@v4", map[string]string{"node-version-file": ".nvmrc", "package-manager-cache": "false"}},
		{"Set up Python 3.11", "actions/setup-python@v5", map[string]string{"python-version": "3.11\n3.12\n", "pip-version": "24.0", "allow-prereleases": "true"}},
	}
	if len(st) != 4 {
		t.Fatalf("steps: %+v", st)
	}
	for i, w := range want {
		if st[i].Name != w.name || st[i].Uses != w.uses || !maps.Equal(st[i].With, w.with) || st[i].Run != "" {
			t.Errorf("step %d: %+v; want %+v", i, st[i], w)
		}
	}
	for _, src := range []string{
		"{uses: actions/setup-python@v5, with: {python-version: '3.12', pip-install: pytest}}",
		"{uses: actions/setup-node@v4, with: {node-version: 20, cache-prefix: x}}",
	} {
		_, err := Compile([]byte("on: push\njobs: {a: {runs-on: x, steps: ["+src+"]}}"), Options{})
		if err == nil || !strings.Contains(err.Error(), "is not supported by Gantry") {
			t.Errorf("%s: %v; want the input refused", src, err)
		}
	}
}

// TestWorkflowRunsOnSystem: a job written for Windows or macOS asks for a worker of that
// system, so it waits for one instead of running on Linux and reporting success.
func TestWorkflowRunsOnSystem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		runsOn string
		want   []string
	}{
		{"ubuntu-latest", nil},
		{"ubuntu-24.04", nil},
		{"windows-latest", []string{"windows"}},
		{"windows-2022", []string{"windows"}},
		{"windows", []string{"windows"}},
		{"macos-14", []string{"macos"}},
		{"macos-latest-xlarge", []string{"macos"}},
		{"[self-hosted, Windows, X64]", []string{"windows", "amd64"}},
		{"[self-hosted, macOS, ARM64, gpu]", []string{"macos", "arm64", "gpu"}},
		{"{group: big, labels: [windows-2019]}", []string{"windows"}},
		{"[self-hosted, linux]", []string{"linux"}},
	}
	for _, tc := range tests {
		t.Run(tc.runsOn, func(t *testing.T) {
			t.Parallel()
			p := compileWorkflow(t, "on: push\njobs:\n  a:\n    runs-on: "+tc.runsOn+"\n    steps: [{run: x}]\n")
			if got := p.Job("a").RunsOn; !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("runs-on: %s asks for %v, want %v", tc.runsOn, got, tc.want)
			}
		})
	}
}

// TestWorkflowRunsOnMatrix: runs-on: ${{ matrix.os }} over GitHub's images asks, in each
// instance, for the system its image names.
func TestWorkflowRunsOnMatrix(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `
on: push
jobs:
  test:
    runs-on: ${{ matrix.os }}
    strategy:
      matrix:
        os: [ubuntu-latest, windows-latest, macos-14]
        include:
          - {os: windows-latest, big: 'yes'}
    steps:
      - run: echo ${{ matrix.os }}
  gpu:
    runs-on: [self-hosted, "${{ matrix.os }}", gpu]
    strategy: {matrix: {os: [Linux, Windows]}}
    steps: [{run: x}]
`)
	want := map[string][]string{
		"test (os=ubuntu-latest)":           nil,
		"test (os=windows-latest, big=yes)": {"windows"},
		"test (os=macos-14)":                {"macos"},
		"gpu (os=Linux)":                    {"linux", "gpu"},
		"gpu (os=Windows)":                  {"windows", "gpu"},
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
		if m, _ := lookupMatrix(j.Matrix, "os"); j.Name == "test" && j.Steps[0].Run != "echo "+m {
			t.Errorf("%s: the step still reads matrix.os as written (%q)", j.Key, j.Steps[0].Run)
		}
	}
}

// TestWorkflowRunsOnExpressionErrors: a runs-on expression Gantry cannot decide when it
// plans is an error at the runs-on, where it used to be dropped and the job run anywhere.
func TestWorkflowRunsOnExpressionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, runsOn, path string }{
		{"run value", "${{ github.ref_name }}", "jobs.a.runs-on"},
		{"input", "${{ inputs.runner }}", "jobs.a.runs-on"},
		{"in a list", "[self-hosted, '${{ github.ref }}']", "jobs.a.runs-on[1]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := "on: {workflow_dispatch: {inputs: {runner: {type: string}}}}\njobs:\n  a:\n    runs-on: " + tc.runsOn + "\n    steps: [{run: x}]\n"
			errs := compileErrs(t, src)
			for _, e := range errs {
				if e.Path == tc.path {
					return
				}
			}
			t.Fatalf("want an error at %s, got:\n%v", tc.path, errs)
		})
	}
}

// TestConvertWorkflowRunsOnMatrix: gantry convert writes the labels a runs-on expression
// comes to when every instance comes to the same ones, and refuses, at the runs-on, a
// matrix whose instances ask for different systems, which one runs_on cannot say.
func TestConvertWorkflowRunsOnMatrix(t *testing.T) {
	t.Parallel()
	const head = "on: push\njobs:\n  a:\n    runs-on: ${{ matrix.os }}\n    steps: [{run: x}]\n    strategy:\n      matrix:\n"
	for _, tc := range []struct {
		name, matrix string
		want         []string
	}{
		{"all ubuntu", "        os: [ubuntu-latest, ubuntu-24.04]\n", nil},
		{"all windows", "        os: [windows-latest, windows-2022]\n", []string{"windows"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			src := []byte(head + tc.matrix)
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
			for _, j := range got.Jobs {
				if !reflect.DeepEqual(j.RunsOn, tc.want) {
					t.Fatalf("%s asks for %v, want %v", j.Key, j.RunsOn, tc.want)
				}
			}
		})
	}
	_, err := ConvertWorkflow([]byte(head+"        os: [ubuntu-latest, windows-latest]\n"), Options{})
	var errs Errors
	if !errors.As(err, &errs) || len(errs) != 1 || errs[0].Path != "jobs.a.runs-on" || errs[0].Line != 4 ||
		!errors.Is(errs[0], ErrInvalid) || !strings.Contains(errs[0].Message, "different instances") {
		t.Fatalf("convert of a matrix over ubuntu and windows: %v, want one error at jobs.a.runs-on (line 4)", err)
	}
}

// TestWorkflowShellTemplate: a custom shell that is bash, sh or python with options runs
// as Gantry's shell, with a first line that sets the options it differs in. bash {0} is
// how a step goes on past a failing command to read its exit status.
func TestWorkflowShellTemplate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		shell      string
		want, run  string // Gantry's shell and the script; want "" for refused
		defaultDir bool   // set as defaults.run with a working-directory
		dir        string // that directory, src when ""
	}{
		{shell: "bash {0}", want: "bash", run: "set +e +o pipefail\nfalse; echo $?"},
		{shell: "bash -e {0}", want: "bash", run: "set +o pipefail\nfalse; echo $?"},
		{shell: "bash --noprofile --norc -eo pipefail {0}", want: "bash", run: "false; echo $?"},
		{shell: "bash -eux -o pipefail {0}", want: "bash", run: "set -u -x\nfalse; echo $?"},
		{shell: "sh {0}", want: "sh", run: "set +e\nfalse; echo $?"},
		{shell: "sh -ex {0}", want: "sh", run: "set -x\nfalse; echo $?"},
		{shell: "python {0}", want: "python3", run: "false; echo $?"},
		{shell: "bash {0}", want: "bash", run: "cd -- 'src'\nset +e +o pipefail\nfalse; echo $?", defaultDir: true},
		{shell: "bash", want: "bash", run: "cd -- \"${GANTRY_WORKSPACE}/src\"\nfalse; echo $?", defaultDir: true, dir: "${{ github.workspace }}/src"},
		// Any other command with {0} runs the script from a file (executor.ShellArgs),
		// as do pwsh, powershell and cmd.
		{shell: "bash -l {0}", want: "bash -l {0}", run: "false; echo $?"},
		{shell: "bash -o errexit {0}", want: "bash -o errexit {0}", run: "false; echo $?"},
		{shell: "sh -o pipefail {0}", want: "sh -o pipefail {0}", run: "false; echo $?"},
		{shell: "python -u {0}", want: "python -u {0}", run: "false; echo $?"},
		{shell: "msys2 {0}", want: "msys2 {0}", run: "false; echo $?"},
		{shell: "cpa.sh {0}", want: "cpa.sh {0}", run: "false; echo $?"},
		{shell: "perl {0}", want: "perl {0}", run: "false; echo $?"},
		{shell: `D:\cygwin\bin\bash.exe '{0}'`, want: `D:\cygwin\bin\bash.exe '{0}'`, run: "false; echo $?"},
		{shell: "pwsh", want: "pwsh", run: "false; echo $?"},
		{shell: "powershell", want: "powershell", run: "false; echo $?"},
		{shell: "cmd", want: "cmd", run: "false; echo $?"},
		{shell: "bash -e"},
		{shell: "fish"},
		{shell: "'{0}' x"},
		{shell: "perl '{0}"},
	}
	for _, tc := range tests {
		t.Run(tc.shell, func(t *testing.T) {
			t.Parallel()
			src := "on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: false; echo $?\n        shell: " + strconv.Quote(tc.shell) + "\n"
			if tc.defaultDir {
				src = "on: push\ndefaults:\n  run:\n    shell: " + tc.shell + "\n    working-directory: " + cmp.Or(tc.dir, "src") + "\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: false; echo $?\n"
			}
			if tc.want == "" {
				errs := compileErrs(t, src)
				for _, e := range errs {
					if e.Path == "jobs.a.steps[0].shell" && errors.Is(e, ErrInvalid) && strings.Contains(e.Message, "shell") {
						return
					}
				}
				t.Fatalf("want shell %q refused at jobs.a.steps[0].shell, got %v", tc.shell, errs)
			}
			p := compileWorkflow(t, src)
			st := p.Jobs[0].Steps[0]
			if st.Shell != tc.want || st.Run != tc.run {
				t.Fatalf("shell %q: got %s %q, want %s %q", tc.shell, st.Shell, st.Run, tc.want, tc.run)
			}
		})
	}
}

// TestWorkflowEveryJobRefused: a workflow whose every job is refused (here, calls of
// reusable workflows, compiled with nothing to read them from) is told why once per job,
// and not again for having no jobs.
func TestWorkflowEveryJobRefused(t *testing.T) {
	t.Parallel()
	errs := compileErrs(t, `
on: push
jobs:
  fuzz:
    uses: org/fuzzer/.github/workflows/ci.yml@main
  lint:
    uses: ./.github/workflows/lint.yml
`)
	if len(errs) != 2 {
		t.Fatalf("want one error for each job, got %d:\n%v", len(errs), errs)
	}
	for i, job := range []string{"fuzz", "lint"} {
		if e := errs[i]; e.Path != "jobs."+job+".uses" || !strings.Contains(e.Message, "reusable workflow") {
			t.Fatalf("error %d: %v at %s, want the call refused at jobs.%s.uses", i, e, e.Path, job)
		}
	}
}

// TestWorkflowShellExpression: a shell given by an expression is decided for each
// instance of the matrix, as curl's distcheck writes it; gantry convert writes it when
// every instance comes to the same shell, and refuses a step that cannot be one.
func TestWorkflowShellExpression(t *testing.T) {
	t.Parallel()
	src := `
on: push
jobs:
  cm:
    runs-on: ${{ matrix.image }}
    defaults:
      run:
        shell: ${{ contains(matrix.image, 'windows') && 'msys2 {0}' || 'bash {0}' }}
    strategy:
      matrix:
        image: [ubuntu-latest, windows-2022]
    steps:
      - run: make
      - run: print(1)
        shell: python
`
	p := compileWorkflow(t, src)
	got := map[string][2]string{}
	for _, j := range p.Jobs {
		got[j.Matrix[0].Value] = [2]string{j.Steps[0].Shell, j.Steps[0].Run}
		if j.Steps[1].Shell != "python3" {
			t.Errorf("%s: the step's own shell: %q", j.Key, j.Steps[1].Shell)
		}
	}
	want := map[string][2]string{"ubuntu-latest": {"bash", "set +e +o pipefail\nmake"}, "windows-2022": {"msys2 {0}", "make"}}
	if !maps.Equal(got, want) {
		t.Fatalf("shells per instance: %q, want %q", got, want)
	}
	_, err := ConvertWorkflow([]byte(src), Options{})
	if err == nil || !strings.Contains(err.Error(), `different shells ("bash", "msys2 {0}")`) {
		t.Fatalf("ConvertWorkflow of a step with a shell per instance: %v", err)
	}
	same := strings.Replace(src, "[ubuntu-latest, windows-2022]", "[windows-2022, windows-2025]", 1)
	out, err := ConvertWorkflow([]byte(same), Options{})
	if err != nil || !strings.Contains(string(out), "shell: msys2 {0}") {
		t.Fatalf("ConvertWorkflow: %v\n%s", err, out)
	}
	a, _ := Compile([]byte(same), Options{})
	b, err := Compile(out, Options{Path: "pipeline.yml"})
	if err != nil || planJSON(t, a) != planJSON(t, b) {
		t.Fatalf("the converted definition plans otherwise: %v\n%s", err, out)
	}
}

// TestWorkflowServicePorts: a service's ports as docker run -p takes them. A job on the
// runner keeps HOST:CONTAINER (published at HOST on the worker's 127.0.0.1) and a bare
// port (published at a free one); the loopback or every address before them is
// 127.0.0.1 all the same. A job in a container reaches the service's own port by name:
// only CONTAINER is kept, whatever address the port was to be published on.
func TestWorkflowServicePorts(t *testing.T) {
	t.Parallel()
	ports := []string{"'5432:5432'", "'6379'", "'127.0.0.1:9000:9000/tcp'", "'0.0.0.0:9001:9001'", "':9002:9002'"}
	for _, tt := range []struct {
		name, container string
		extra           []string
		want            []string
	}{
		{"on the runner", "", nil, []string{"5432:5432", "6379", "9000:9000/tcp", "9001:9001", "9002:9002"}},
		{"in a container", "    container: node:20\n", []string{"'10.0.0.1:9003:9003'"}, []string{"5432", "6379", "9000/tcp", "9001", "9002", "9003"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := compileWorkflow(t, "on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n"+tt.container+
				"    services:\n      db:\n        image: postgres\n        ports: ["+strings.Join(append(ports, tt.extra...), ", ")+"]\n    steps: [{run: x}]\n")
			j := p.Job("a")
			if len(j.Services) != 1 || !slices.Equal(j.Services[0].Ports, tt.want) || !slices.Contains(j.RunsOn, DockerLabel) {
				t.Errorf("services %+v, runs_on %v; want ports %v and the docker label", j.Services, j.RunsOn, tt.want)
			}
		})
	}
}

// TestWorkflowRunTrigger: on: workflow_run is kept with its filters (an event Gantry
// sends itself when a run of the project is requested, starts or ends), and a
// download-artifact step with run-id reads another run's artifacts, so a name it asks
// for need not be one a needed job keeps.
func TestWorkflowRunTrigger(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `
name: Deploy
on:
  release:
  workflow_run:
    workflows: [Build Docs]
    branches-ignore: [wip/**]
jobs:
  deploy:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/download-artifact@v4
        with: {name: site, run-id: "${{ github.event.workflow_run.id }}", github-token: x}
`)
	want := &WorkflowRunTrigger{Workflows: []string{"Build Docs"}, Types: WorkflowRunTypes, BranchesIgnore: []string{"wip/**"}}
	if p.On == nil || !reflect.DeepEqual(p.On.WorkflowRun, want) || p.On.Push != nil || p.On.Dispatch != nil {
		t.Fatalf("on: = %s, want workflow_run %+v alone (release needs GitHub)", planJSON(t, p), want)
	}
	st := p.Job("deploy").Steps[0]
	if st.With["run-id"] == "" || st.With["name"] != "site" {
		t.Errorf("the download step keeps run-id for the worker: with = %v", st.With)
	}
}
