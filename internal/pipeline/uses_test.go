package pipeline

import (
	"slices"
	"strings"
	"testing"
)

func TestParseUses(t *testing.T) {
	ok := []struct {
		in   string
		want Uses
	}{
		{"actions/setup-java@v4", Uses{Kind: UsesRepository, Owner: "actions", Repo: "setup-java", Ref: "v4"}},
		{"github/codeql-action/init@v3", Uses{Kind: UsesRepository, Owner: "github", Repo: "codeql-action", Dir: "init", Ref: "v3"}},
		{"o/r/a/b/../c@0123456789abcdef0123456789abcdef01234567", Uses{Kind: UsesRepository, Owner: "o", Repo: "r", Dir: "a/c", Ref: "0123456789abcdef0123456789abcdef01234567"}},
		{"dtolnay/rust-toolchain@release/1.80", Uses{Kind: UsesRepository, Owner: "dtolnay", Repo: "rust-toolchain", Ref: "release/1.80"}},
		{"./.github/actions/setup", Uses{Kind: UsesLocal, Local: ".github/actions/setup"}},
		{"./", Uses{Kind: UsesLocal}},
		{"docker://alpine:3.20", Uses{Kind: UsesDocker, Image: "alpine:3.20"}},
	}
	for _, c := range ok {
		got, err := ParseUses(c.in)
		if err != nil {
			t.Errorf("ParseUses(%q): %v", c.in, err)
			continue
		}
		if got != c.want {
			t.Errorf("ParseUses(%q) = %+v, want %+v", c.in, got, c.want)
		}
	}
	bad := []struct{ in, msg string }{
		{"", "empty"},
		{"actions/checkout", "needs a version after @"},
		{"actions@v1", "expected owner/repo@ref"},
		{"../x", "directory of the workspace"},
		{"./../x", "inside the workspace"},
		{"/abs", "directory of the workspace"},
		{"o/r/..@v1", "inside its repository"},
		{"o/r@v1 2", "not a git ref"},
		{"o/r@a..b", "not a git ref"},
		{"o/${{ matrix.x }}@v1", "cannot be expressions"},
		{"docker://", "needs an image"},
		{"-o/r@v1", "not an owner"},
	}
	for _, c := range bad {
		_, err := ParseUses(c.in)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseUses(%q) = %v, want an error with %q", c.in, err, c.msg)
		}
	}
}

// An action Gantry does not do itself becomes a step that runs it, with its inputs,
// id, if:, env and settings; Gantry's own language says the same with uses: and with:.
func TestActionSteps(t *testing.T) {
	wf := `on: push
jobs:
  lint:
    runs-on: ubuntu-latest
    strategy: {matrix: {go: ['1.25']}}
    env: {MODE: strict}
    steps:
      - uses: actions/checkout@v4
      - id: lint
        name: Lint ${{ matrix.go }}
        uses: golangci/golangci-lint-action@v6
        if: github.event_name == 'push'
        continue-on-error: true
        timeout-minutes: 5
        env: {GOFLAGS: -mod=mod}
        with:
          version: v1.${{ matrix.go }}
          args: --timeout=5m
          only-new-issues: true
          token: ${{ secrets.LINT_TOKEN }}
      - uses: ./.github/actions/report
      - run: echo ${{ steps.lint.outputs.result }}
`
	p, errs := Compile([]byte(wf), Options{})
	if errs != nil {
		t.Fatalf("Compile: %v", errs)
	}
	steps := p.Jobs[0].Steps
	if len(steps) != 3 {
		t.Fatalf("steps = %+v, want 3", steps)
	}
	st := steps[0]
	if st.Uses != "golangci/golangci-lint-action@v6" || st.ID != "lint" || st.Name != "Lint 1.25" || !st.ContinueOnError || st.If == nil || st.Timeout == 0 {
		t.Errorf("action step = %+v", st)
	}
	want := map[string]string{"version": "v1.1.25", "args": "--timeout=5m", "only-new-issues": "true", "token": WorkerExpr("secrets.LINT_TOKEN")}
	for k, v := range want {
		if st.With[k] != v {
			t.Errorf("with.%s = %q, want %q (with = %v)", k, st.With[k], v, st.With)
		}
	}
	if st.Env["GOFLAGS"] != "-mod=mod" {
		t.Errorf("env = %v", st.Env)
	}
	if steps[1].Uses != "./.github/actions/report" || steps[1].Name != "Run ./.github/actions/report" {
		t.Errorf("local action step = %+v", steps[1])
	}

	own := `jobs:
  a:
    steps:
      - uses: o/r/sub@v2
        id: x
        with: {who: "${{ env.WHO }}", n: 3}
        env: {WHO: me}
      - run: echo ${{ steps.x.outputs.y }}
`
	p, errs = Compile([]byte(own), Options{})
	if errs != nil {
		t.Fatalf("Compile: %v", errs)
	}
	if st := p.Jobs[0].Steps[0]; st.Uses != "o/r/sub@v2" || st.With["who"] != "me" || st.With["n"] != "3" {
		t.Errorf("step = %+v", st)
	}
	for _, c := range []struct{ def, msg string }{
		{"jobs:\n  a:\n    steps:\n      - {uses: o/r@v1, run: x}\n", "either uses or run"},
		{"jobs:\n  a:\n    steps:\n      - {run: x, with: {a: b}}\n", "with: belongs to a step that uses an action"},
		{"jobs:\n  a:\n    steps:\n      - {uses: o/r@v1, shell: bash}\n", "shell: belongs to a run step"},
		{"jobs:\n  a:\n    steps:\n      - {uses: o/r@v1, with: {'-x': b}}\n", "input name"},
		{"jobs:\n  a:\n    steps:\n      - {uses: nope}\n", "needs a version after @"},
	} {
		if _, errs := Compile([]byte(c.def), Options{}); errs == nil || !strings.Contains(errs.Error(), c.msg) {
			t.Errorf("Compile(%q) = %v, want an error with %q", c.def, errs, c.msg)
		}
	}
}

// An upload-artifact step is a step at its place, under its if:.
func TestUploadArtifactIf(t *testing.T) {
	for _, cond := range []string{"failure()", "${{ always() }}", "github.ref == 'x'"} {
		wf := "on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n      - run: make\n      - uses: actions/upload-artifact@v4\n        if: " + cond + "\n        with: {name: r, path: out}\n"
		p, err := Compile([]byte(wf), Options{})
		if err != nil {
			t.Errorf("if: %s: %v", cond, err)
			continue
		}
		if j := p.Jobs[0]; j.Artifacts != nil || len(j.Steps) != 2 || j.Steps[1].Uses != "actions/upload-artifact@v4" || j.Steps[1].If == nil || j.Steps[1].With["path"] != "out" {
			t.Errorf("if: %s: artifacts %+v, steps %+v; want an upload step under the if:", cond, j.Artifacts, j.Steps)
		}
	}
	a := &Artifacts{When: ArtifactsOnFailure}
	if a.KeptAfter("success") || !a.KeptAfter("failed") || a.KeptAfter("cancelled") {
		t.Error("KeptAfter of on_failure")
	}
	if (*Artifacts)(nil).KeptAfter("success") || !(&Artifacts{}).KeptAfter("success") || (&Artifacts{}).KeptAfter("failed") {
		t.Error("KeptAfter of nil or the default")
	}
}

// Actions the worker does itself become steps at their place where they cannot be
// settings of the job, and stay settings where they can.
func TestNativeActionSteps(t *testing.T) {
	head := "on: push\njobs:\n  a:\n    runs-on: x\n    steps:\n"
	for _, c := range []struct {
		name, steps string
		// uses are the actions of the job's steps, in order; caches and artifacts the
		// number of the job's caches and whether it keeps artifacts.
		uses      []string
		caches    int
		artifacts bool
	}{
		{"a plain cache is the job's", "      - uses: actions/cache@v4\n        with: {path: out, key: k}\n      - run: make\n", []string{""}, 1, false},
		{"a cache with an id is a step", "      - id: c\n        uses: actions/cache@v4\n        with: {path: out, key: k}\n      - run: echo ${{ steps.c.outputs.cache-hit }}\n",
			[]string{"actions/cache@v4", ""}, 0, false},
		{"a cache under if: is a step", "      - if: github.ref == 'x'\n        uses: actions/cache@v4\n        with: {path: out, key: k}\n", []string{"actions/cache@v4"}, 0, false},
		{"a cache of a path an expression makes is a step", "      - run: make\n        id: m\n      - uses: actions/cache@v4\n        with: {path: '${{ steps.m.outputs.dir }}', key: k}\n",
			[]string{"", "actions/cache@v4"}, 0, false},
		{"restore and save are steps", "      - uses: actions/cache/restore@v4\n        with: {path: out, key: k, fail-on-cache-miss: true}\n      - uses: actions/cache/save@v4\n        with: {path: out, key: k}\n",
			[]string{"actions/cache/restore@v4", "actions/cache/save@v4"}, 0, false},
		{"uploads are steps", "      - uses: actions/upload-artifact@v4\n        with: {name: a, path: a}\n      - uses: actions/upload-artifact@v4\n        with: {name: b, path: b}\n",
			[]string{"actions/upload-artifact@v4", "actions/upload-artifact@v4"}, 0, false},
		{"a download is a step", "      - if: always()\n        uses: actions/download-artifact@v4\n        with: {pattern: 'cov-*', merge-multiple: true, path: all}\n",
			[]string{"actions/download-artifact@v4"}, 0, false},
		{"an upload with an exclusion is a step", "      - uses: actions/upload-artifact@v4\n        with: {name: a, path: \"a\\n!a/*.log\"}\n", []string{"actions/upload-artifact@v4"}, 0, false},
	} {
		p, err := Compile([]byte(head+c.steps), Options{})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		j := p.Jobs[0]
		var uses []string
		for _, st := range j.Steps {
			uses = append(uses, st.Uses)
		}
		if !slices.Equal(uses, c.uses) || len(j.Caches) != c.caches || (j.Artifacts != nil) != c.artifacts {
			t.Errorf("%s: steps use %q, %d caches, artifacts %+v; want %q, %d, %v", c.name, uses, len(j.Caches), j.Artifacts, c.uses, c.caches, c.artifacts)
		}
	}
	for _, c := range []struct{ steps, msg string }{
		{"      - uses: actions/cache/save@v4\n        with: {path: out}\n", "actions/cache/save needs a key"},
		{"      - uses: actions/cache/restore@v4\n        with: {key: k, path: p, save-always: true}\n", `actions/cache/restore input "save-always" is not supported`},
		{"      - if: failure()\n        uses: actions/upload-artifact@v4\n        with: {path: a, retention: 3}\n", `actions/upload-artifact input "retention" is not supported`},
		{"      - uses: actions/upload-artifact@v4\n        with: {name: a}\n", "actions/upload-artifact needs a path"},
	} {
		if _, err := Compile([]byte(head+c.steps), Options{}); err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("%q: %v, want an error with %q", c.steps, err, c.msg)
		}
	}
	// A step id no step has reads as "", as GitHub reads it.
	p, err := Compile([]byte(head+"      - if: steps.gone.outputs.x == ''\n        run: echo \"[${{ steps.gone.outputs.x }}]\"\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st := p.Jobs[0].Steps[0]; st.Run != `echo "[]"` {
		t.Errorf("steps.gone.outputs.x in a run: %q", st.Run)
	} else if ok, err := st.If.EvalStep(ConditionInput{}, p.Jobs[0]); !ok || err != nil {
		t.Errorf("steps.gone.outputs.x == '': %v, %v", ok, err)
	}
	// A step's result reads as GitHub writes it (failure, not failed): the worker puts
	// it in.
	p, err = Compile([]byte(head+"      - id: x\n        run: make\n      - env: {cache-name: c}\n        run: echo ${{ steps.x.outcome }}\n"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if run := p.Jobs[0].Steps[1].Run; !HasWorkerExprs(run) {
		t.Errorf("steps.x.outcome in a run: %q, want an expression the worker evaluates", run)
	}
}
