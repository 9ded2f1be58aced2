package pipeline

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
)

const dynWorkflow = `on: push
jobs:
  setup:
    runs-on: ubuntu-latest
    outputs:
      matrix: ${{ steps.m.outputs.matrix }}
    steps:
      - id: m
        run: echo 'matrix=["a","b","c"]' >> "$GITHUB_OUTPUT"
  test:
    needs: setup
    runs-on: ubuntu-latest
    strategy:
      matrix:
        x: ${{ fromJSON(needs.setup.outputs.matrix) }}
    steps:
      - uses: some/action@v1
      - run: echo "x=${{ matrix.x }}"
  after:
    needs: test
    runs-on: ubuntu-latest
    steps:
      - run: echo done
`

// placeholderOf compiles src and returns the plan's placeholder for job name.
func placeholderOf(t *testing.T, src, name string) (*Plan, *Job) {
	t.Helper()
	p := compileWorkflow(t, src)
	j := p.Job(name)
	if j == nil || j.DynamicMatrix == nil {
		t.Fatalf("job %s is not a placeholder: %s", name, planJSON(t, p))
	}
	return p, j
}

func needsOutputs(name string, outs map[string]string) ConditionInput {
	return ConditionInput{
		Ref: "refs/heads/main", Branch: "main", SHA: "abc", Event: "push",
		Needs:       map[string]string{name: ResultSuccess},
		NeedOutputs: map[string]map[string]string{name: outs},
	}
}

// TestDynamicMatrixPlaceholder: the plan holds a job with a computed matrix as one job of
// no steps, with its needs and what it computes the matrix from; a job needing it waits
// for it and asks for its inputs.
func TestDynamicMatrixPlaceholder(t *testing.T) {
	t.Parallel()
	p, j := placeholderOf(t, dynWorkflow, "test")
	if j.Key != "test" || len(j.Steps) != 0 || !slices.Equal(j.Needs, []string{"setup"}) {
		t.Fatalf("placeholder: %s", planJSON(t, p))
	}
	want := []MatrixExpr{{Key: "x", Expr: "fromJSON(needs.setup.outputs.matrix)"}}
	if !slices.Equal(j.DynamicMatrix.Exprs, want) || !slices.Equal(j.DynamicMatrix.Uses, []string{"some/action@v1"}) {
		t.Fatalf("dynamic matrix: %+v", j.DynamicMatrix)
	}
	after := p.Job("after")
	if !slices.Equal(after.Needs, []string{"test"}) || after.NoInputs {
		t.Fatalf("after: %s", planJSON(t, p))
	}
}

// TestExpandMatrix: the instances are those a matrix written out would make, named and
// built alike, with the placeholder's needs and pins.
func TestExpandMatrix(t *testing.T) {
	t.Parallel()
	_, j := placeholderOf(t, dynWorkflow, "test")
	j.DynamicMatrix.Pins = map[string]ActionPin{"some/action@v1": {URL: "https://x/some/action", Commit: "c0ffee"}}
	j.DynamicMatrix.Docker = []string{"some/action@v1"}
	got, err := j.ExpandMatrix([]byte(dynWorkflow), needsOutputs("setup", map[string]string{"matrix": `["a","b","c"]`}))
	if err != nil {
		t.Fatal(err)
	}
	static := compileWorkflow(t, strings.Replace(dynWorkflow, "${{ fromJSON(needs.setup.outputs.matrix) }}", "[a, b, c]", 1))
	var keys []string
	for i, inst := range got {
		keys = append(keys, inst.Key)
		want := static.Job(inst.Key)
		if want == nil {
			t.Fatalf("instance %s is not one the static matrix makes", inst.Key)
		}
		if inst.Steps[1].Run != want.Steps[1].Run || !inst.FailFast || inst.Wave != 1 || !slices.Equal(inst.Needs, []string{"setup"}) {
			t.Errorf("instance %d: %+v, want like %+v", i, inst, want)
		}
		if inst.Steps[0].Actions["some/action@v1"].Commit != "c0ffee" || !slices.Contains(inst.RunsOn, DockerLabel) {
			t.Errorf("instance %s: pins %v, runs_on %v", inst.Key, inst.Steps[0].Actions, inst.RunsOn)
		}
	}
	if want := []string{"test (x=a)", "test (x=b)", "test (x=c)"}; !slices.Equal(keys, want) {
		t.Fatalf("instances %q, want %q", keys, want)
	}
	if got[2].Steps[1].Run != `echo "x=c"` {
		t.Errorf("run %q", got[2].Steps[1].Run)
	}
}

// TestExpandMatrixForms: the whole matrix, an include list computed from a format, and
// exclude, with mapping values and names reading them.
func TestExpandMatrixForms(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, matrix, output string
		want                 []string // keys
		display              []string
	}{
		{
			name:   "whole",
			matrix: `${{ fromJSON(needs.setup.outputs.m) }}`,
			output: `{"os":["linux","mac"],"go":["1.25","1.26"],"exclude":[{"os":"mac","go":"1.25"}],"include":[{"os":"linux","extra":"yes"}]}`,
			want:   []string{"test (os=linux, go=1.25, extra=yes)", "test (os=linux, go=1.26, extra=yes)", "test (os=mac, go=1.26)"},
		},
		{
			name:    "include",
			matrix:  "\n        include: ${{ fromJSON(needs.setup.outputs.m).versions }}",
			output:  `{"versions":[{"label":"old","version":"1.24"},{"label":"new","version":"1.25"}]}`,
			want:    []string{"test (label=old, version=1.24)", "test (label=new, version=1.25)"},
			display: []string{"Linux (old)", "Linux (new)"},
		},
		{
			name:   "format",
			matrix: "\n        n: ${{ fromJSON(format('[{0}, {1}]', needs.setup.outputs.a, needs.setup.outputs.b)) }}\n        os: [linux]",
			output: ``,
			want:   []string{"test (n=1, os=linux)", "test (n=2, os=linux)"},
		},
		{
			name:   "objects",
			matrix: "\n        build: ${{ fromJSON(needs.setup.outputs.m) }}",
			output: `[{"name":"gnu","cc":"gcc"},{"name":"llvm","cc":"clang"}]`,
			want:   []string{"test (build=1, build__name=gnu, build__cc=gcc)", "test (build=2, build__name=llvm, build__cc=clang)"},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			name := ""
			if c.display != nil {
				name = "    name: Linux (${{ matrix.label }})\n"
			}
			src := fmt.Sprintf(`on: push
jobs:
  setup:
    runs-on: ubuntu-latest
    steps: [{run: "true"}]
  test:
%s    needs: [setup]
    runs-on: ubuntu-latest
    strategy:
      matrix: %s
    steps:
      - run: echo ${{ toJSON(matrix) }}
`, name, c.matrix)
			_, j := placeholderOf(t, src, "test")
			outs := map[string]string{"m": c.output, "a": "1", "b": "2"}
			got, err := j.ExpandMatrix([]byte(src), needsOutputs("setup", outs))
			if err != nil {
				t.Fatal(err)
			}
			var keys, display []string
			for _, inst := range got {
				keys = append(keys, inst.Key)
				display = append(display, inst.DisplayName)
			}
			if !slices.Equal(keys, c.want) {
				t.Errorf("instances %q, want %q", keys, c.want)
			}
			if c.display != nil && !slices.Equal(display, c.display) {
				t.Errorf("names %q, want %q", display, c.display)
			}
		})
	}
}

// TestExpandMatrixErrors: what GitHub fails the job for, Gantry fails it for, saying why.
func TestExpandMatrixErrors(t *testing.T) {
	t.Parallel()
	values := make([]int, MaxMatrixInstances+1)
	for i := range values {
		values[i] = i
	}
	big, _ := json.Marshal(values)
	cases := []struct{ output, want string }{
		{`[]`, "Matrix vector 'x' does not contain any values"},
		{`not json`, "fromJSON"},
		{`{"a": 1}`, "matrix x came to the mapping"},
		{`"a"`, "matrix x came to the string"},
		{string(big), "more than the 256 allowed"},
	}
	for _, c := range cases {
		_, j := placeholderOf(t, dynWorkflow, "test")
		_, err := j.ExpandMatrix([]byte(dynWorkflow), needsOutputs("setup", map[string]string{"matrix": c.output}))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("output %.20s: error %v, want one saying %q", c.output, err, c.want)
		}
	}
	// A missing output reads as null, as on GitHub, and fromJSON of "" fails.
	_, j := placeholderOf(t, dynWorkflow, "test")
	if _, err := j.ExpandMatrix([]byte(dynWorkflow), needsOutputs("setup", nil)); err == nil {
		t.Error("a missing output expanded")
	}
	// A mistake only the values show fails the job, at the job's path.
	src := strings.Replace(dynWorkflow, "runs-on: ubuntu-latest\n    strategy", "runs-on: ${{ matrix.x }}\n    strategy", 1)
	_, j = placeholderOf(t, src, "test")
	_, err := j.ExpandMatrix([]byte(src), needsOutputs("setup", map[string]string{"matrix": `["a b"]`}))
	if err == nil || !strings.Contains(err.Error(), "jobs.test") {
		t.Errorf("a bad label: %v", err)
	}
	// The whole matrix with no axes.
	src = strings.Replace(dynWorkflow, "x: ${{ fromJSON(needs.setup.outputs.matrix) }}", "${{ fromJSON(needs.setup.outputs.matrix) }}", 1)
	src = strings.Replace(src, "matrix:\n        ${{", "matrix: ${{", 1)
	_, j = placeholderOf(t, src, "test")
	_, err = j.ExpandMatrix([]byte(src), needsOutputs("setup", map[string]string{"matrix": `{"exclude": []}`}))
	if err == nil || !strings.Contains(err.Error(), "at least one vector") {
		t.Errorf("no axes: %v", err)
	}
}

// TestDynamicMatrixPlanErrors: what can be told when the plan is made is told then.
func TestDynamicMatrixPlanErrors(t *testing.T) {
	t.Parallel()
	cases := []struct{ matrix, needs, want string }{
		{`x: ${{ fromJSON(needs.other.outputs.m) }}`, "[setup]", "does not need other"},
		{`x: ${{ fromJSON(env.M) }}`, "[setup]", "not env"},
		{`x: ${{ fromJSON(github.ref) }}`, "[]", "needs none"},
		{`x: "v${{ needs.setup.outputs.m }}"`, "[setup]", "one ${{ }} and nothing else"},
		{`x: ${{ fromJSON(needs.setup.outputs.m }}`, "[setup]", "x"},
	}
	for _, c := range cases {
		src := fmt.Sprintf(`on: push
jobs:
  setup:
    runs-on: ubuntu-latest
    steps: [{run: "true"}]
  test:
    needs: %s
    runs-on: ubuntu-latest
    strategy:
      matrix:
        %s
    steps:
      - run: echo ${{ matrix.x }}
`, c.needs, c.matrix)
		_, err := Compile([]byte(src), Options{Path: ".github/workflows/ci.yml"})
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "jobs.test.strategy.matrix.x") {
			t.Errorf("%s: error %v, want one saying %q", c.matrix, err, c.want)
		}
	}
	// A mistake in the job's body is found when the plan is made.
	src := strings.Replace(dynWorkflow, "      - uses: some/action@v1\n", "      - uses: some/action@v1\n        run: echo both\n", 1)
	if _, err := Compile([]byte(src), Options{Path: ".github/workflows/ci.yml"}); err == nil || !strings.Contains(err.Error(), "either uses or run, not both") {
		t.Errorf("a mistake in the body: %v", err)
	}
	// gantry convert cannot write it.
	if _, err := ConvertWorkflow([]byte(dynWorkflow), Options{}); err == nil || !strings.Contains(err.Error(), "Gantry's language cannot write it") {
		t.Errorf("convert: %v", err)
	}
}

// TestConstantMatrixExpression: an expression that reads nothing is evaluated when the
// plan is made, and the matrix is static.
func TestConstantMatrixExpression(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `on: push
jobs:
  test:
    runs-on: ubuntu-latest
    strategy:
      matrix:
        x: ${{ fromJSON('["a", "b"]') }}
    steps:
      - run: echo ${{ matrix.x }}
`)
	if len(p.Jobs) != 2 || p.Jobs[0].Key != "test (x=a)" || p.Jobs[0].DynamicMatrix != nil {
		t.Fatalf("plan: %s", planJSON(t, p))
	}
}

// TestExpandMatrixRefusesReferences: a computed matrix value that makes a reference where
// it is put in (its JSON may spell $ as \u0024, which no check of the output sees) is
// refused: the worker would read it, and a kept expression can read the job's secrets.
func TestExpandMatrixRefusesReferences(t *testing.T) {
	t.Parallel()
	_, j := placeholderOf(t, dynWorkflow, "test")
	marker := WorkerExpr("secrets.TOKEN")
	for _, v := range []string{`"\u0024` + marker[1:] + `"`, `"` + marker[1:] + `"`, `"a$"`, `{"k":"\u0024` + marker[1:] + `"}`} {
		outs := map[string]string{"matrix": `[` + v + `]`}
		if err := CheckOutputs(outs); err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		got, err := j.ExpandMatrix([]byte(dynWorkflow), needsOutputs("setup", outs))
		if err == nil || !strings.Contains(err.Error(), "would read as a reference") {
			t.Errorf("matrix [%s]: %v, want refused", v, err)
			for _, inst := range got {
				t.Logf("run %q", inst.Steps[1].Run)
			}
		}
	}
}
