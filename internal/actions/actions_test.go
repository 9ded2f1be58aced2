package actions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/actions/actionstest"
	"github.com/gantry-ci/gantry/internal/pipeline"
)

func TestParseMetadata(t *testing.T) {
	m, err := ParseMetadata([]byte(`name: x
inputs:
  who: {required: true, description: whom}
  greeting: {default: Hello}
  empty: {default: ''}
  old: {deprecationMessage: use who}
  bare:
outputs:
  out: {value: '${{ steps.a.outputs.b }}'}
runs:
  using: Node20
  main: dist/index.js
  post: dist/post.js
branding: {icon: x}
`))
	if err != nil {
		t.Fatal(err)
	}
	if !m.Runs.IsNode() || m.Runs.Main != "dist/index.js" || m.Runs.PostIf != "always()" {
		t.Errorf("runs = %+v, want node with post-if always()", m.Runs)
	}
	if got := strings.Join(m.InputNames, ","); got != "who,greeting,empty,old,bare" {
		t.Errorf("input names %s, in the order written", got)
	}
	if in := m.Inputs["empty"]; !in.HasDefault || in.Default != "" {
		t.Errorf("an empty default is a default: %+v", in)
	}
	if in := m.Inputs["bare"]; in.HasDefault || in.Required {
		t.Errorf("a bare input: %+v", in)
	}
	if m.Outputs["out"].Value != "${{ steps.a.outputs.b }}" {
		t.Errorf("outputs %+v", m.Outputs)
	}
	errs, warnings := m.CheckWith(map[string]string{"WHO": "me", "nope": "x", "old": "y"})
	if len(errs) != 0 || len(warnings) != 2 || !strings.Contains(warnings[0], "deprecated: use who") || !strings.Contains(warnings[1], `unexpected input "nope"`) {
		t.Errorf("CheckWith = %v, %v: input names ignore case, an unknown or deprecated one warns", errs, warnings)
	}
	if errs, _ := m.CheckWith(nil); len(errs) != 1 || !strings.Contains(errs[0], `input "who" is required`) {
		t.Errorf("CheckWith(nil) = %v, want who required", errs)
	}

	c, err := ParseMetadata([]byte("runs:\n  using: composite\n  steps:\n    - run: echo hi\n      shell: bash\n      env: {A: b}\n    - uses: o/r@v1\n      with: {x: 1}\n"))
	if err != nil || !c.Runs.IsComposite() || len(c.Runs.Steps) != 2 || c.Runs.Steps[1].With["x"] != "1" || c.Runs.Steps[0].Env["A"] != "b" {
		t.Fatalf("composite = %+v, %v", c, err)
	}
	d, err := ParseMetadata([]byte("runs:\n  using: docker\n  image: Dockerfile\n  args: ['${{ inputs.x }}']\n  post-entrypoint: /post.sh\n"))
	if err != nil || !d.Runs.IsDocker() || d.Runs.Args[0] != "${{ inputs.x }}" || d.Runs.PostIf != "always()" {
		t.Fatalf("docker = %+v, %v", d, err)
	}
	for _, c := range []struct{ yaml, msg string }{
		{"name: x\n", "no runs:"},
		{"runs: {using: node20}\n", "needs main:"},
		{"runs: {using: python}\n", `"python" is not a way actions run`},
		{"runs: {using: composite, steps: [{run: x}]}\n", "needs a shell"},
		{"runs: {using: composite, steps: [{run: x, uses: o/r@v1, shell: sh}]}\n", "either run or uses"},
		{"runs: {using: docker}\n", "needs image:"},
		{"- a list\n", "mapping at the top"},
		{"inputs: {a: [1]}\nruns: {using: node20, main: x}\n", "expected a mapping"},
	} {
		if _, err := ParseMetadata([]byte(c.yaml)); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseMetadata(%q) = %v, want an error with %q", c.yaml, err, c.msg)
		}
	}
}

func TestParseSource(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "o", "bare.git"), 0o755); err != nil {
		t.Fatal(err)
	}
	for in, want := range map[string]string{
		"":                                "https://github.com/o/r",
		"https://git.example.com/mirrors": "https://git.example.com/mirrors/o/r",
		"https://h/{owner}-{repo}.git":    "https://h/o-r.git",
		"ssh://git@h/{owner}/{repo}":      "ssh://git@h/o/r",
		dir:                               "file://" + filepath.Join(dir, "o", "r"),
	} {
		s, err := ParseSource(in)
		if err != nil {
			t.Errorf("ParseSource(%q): %v", in, err)
			continue
		}
		if got := s.URL("o", "r"); got != want {
			t.Errorf("ParseSource(%q).URL = %q, want %q", in, got, want)
		}
	}
	if s, _ := ParseSource(dir); s.URL("o", "bare") != "file://"+filepath.Join(dir, "o", "bare.git") {
		t.Errorf("a bare repository owner/repo.git: %s", s.URL("o", "bare"))
	}
	for _, in := range []string{"ftp://h/x", "relative/dir", filepath.Join(dir, "missing"), "https://"} {
		if _, err := ParseSource(in); err == nil {
			t.Errorf("ParseSource(%q) accepted", in)
		}
	}
}

// Pin resolves nested actions too, leaves the plan it was given alone, and says what it
// could not resolve.
func TestPin(t *testing.T) {
	dir := t.TempDir()
	greet := actionstest.Repo(t, dir, "acme", "greet", actionstest.Greet, "v1")
	tools := actionstest.Repo(t, dir, "acme", "tools", actionstest.Shout, "v1")
	src, err := ParseSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := &Resolver{Source: src, MirrorsDir: t.TempDir()}
	p, err := pipeline.Compile([]byte("jobs:\n  a:\n    steps:\n      - uses: acme/tools/shout@v1\n      - uses: ./local\n      - uses: actions/checkout@v4\n        with: {ref: x}\n"), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pinned, err := r.Pin(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs[0].Steps[0].Actions != nil {
		t.Error("Pin changed the plan it was given")
	}
	got := pinned.Jobs[0].Steps[0].Actions
	if len(got) != 2 || got["acme/tools/shout@v1"].Commit != tools || got["acme/greet@v1"].Commit != greet {
		t.Errorf("pins = %+v", got)
	}
	if pinned.Jobs[0].Steps[1].Actions != nil || pinned.Jobs[0].Steps[2].Actions != nil {
		t.Error("a local action or a checkout step was pinned")
	}
	errs, _ := r.Check(t.Context(), pinned)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), `input "text" is required`) {
		t.Errorf("Check = %v, want shout's required text", errs)
	}
	bad, _ := pipeline.Compile([]byte("jobs:\n  a:\n    steps:\n      - uses: acme/nope@v1\n"), pipeline.Options{})
	if _, err := r.Pin(t.Context(), bad); err == nil || !strings.Contains(err.Error(), "acme/nope@v1 could not be resolved from file://") {
		t.Errorf("Pin of an unknown action: %v", err)
	}
}

// TestReadWorkflow: a reusable workflow of another repository is read at the commit its
// ref names, through the source and the mirror cache; a ref or file that is not there
// says what was tried.
func TestReadWorkflow(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	called := "on:\n  workflow_call:\n    outputs: {v: {value: '${{ jobs.j.outputs.v }}'}}\njobs:\n  j:\n    runs-on: x\n    outputs: {v: '${{ steps.s.outputs.v }}'}\n    steps: [{id: s, run: echo}]\n"
	commit := actionstest.Repo(t, dir, "acme", "flows", map[string]string{".github/workflows/build.yml": called}, "v1")
	src, err := ParseSource(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := &Resolver{Source: src, MirrorsDir: t.TempDir()}
	data, sha, err := r.ReadWorkflow(t.Context(), "acme", "flows", ".github/workflows/build.yml", "v1")
	if err != nil || sha != commit || string(data) != called {
		t.Fatalf("ReadWorkflow = %q, %s, %v; want the file at %s", data, sha, err, commit)
	}
	if _, _, err := r.ReadWorkflow(t.Context(), "acme", "flows", ".github/workflows/build.yml", "v9"); err == nil ||
		!strings.Contains(err.Error(), "acme/flows@v9 could not be resolved from file://") || !strings.Contains(err.Error(), `no branch, tag or commit "v9"`) {
		t.Errorf("unknown ref: %v", err)
	}
	if _, _, err := r.ReadWorkflow(t.Context(), "acme", "flows", ".github/workflows/nope.yml", "v1"); err == nil || !strings.Contains(err.Error(), "there is no .github/workflows/nope.yml at") {
		t.Errorf("unknown file: %v", err)
	}

	// Through pipeline.Compile: the called job is in the plan, and a workflow of the
	// calling repository needs a way to read it.
	wf := "on: push\njobs:\n  call:\n    uses: acme/flows/.github/workflows/build.yml@v1\n  after:\n    needs: call\n    runs-on: x\n    steps: [{run: 'echo ${{ needs.call.outputs.v }}'}]\n"
	p, err := pipeline.Compile([]byte(wf), pipeline.Options{Path: ".github/workflows/ci.yml", Workflows: r.Workflows(t.Context(), nil)})
	if err != nil || p.Job("call-j") == nil || p.Job("call") == nil {
		t.Fatalf("Compile with a remote call: %v", err)
	}
	_, err = pipeline.Compile([]byte(strings.Replace(wf, "acme/flows/.github/workflows/build.yml@v1", "./.github/workflows/build.yml", 1)),
		pipeline.Options{Path: ".github/workflows/ci.yml", Workflows: r.Workflows(t.Context(), nil)})
	if err == nil || !strings.Contains(err.Error(), "was not read from a repository") {
		t.Errorf("a local call with no repository: %v", err)
	}
}
