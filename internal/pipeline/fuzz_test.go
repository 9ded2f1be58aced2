package pipeline

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCompile feeds arbitrary documents to Compile. Besides not panicking or hanging, every
// answer must be well formed: either a plan whose jobs are in a valid topological order, or
// a non-empty list of errors that each say what and where.
func FuzzCompile(f *testing.F) {
	files, _ := filepath.Glob("../../examples/*")
	workflows, _ := filepath.Glob("testdata/gha/*.yml")
	for _, name := range append(files, workflows...) {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"jobs: {a: {steps: [{run: x}]}}",
		"jobs:\n  a: {needs: [b], steps: [{run: x}]}\n  b: {needs: [a], steps: [{run: x}]}",
		"stages: [a, b]\njobs:\n  x: {stage: a, steps: [{run: x}]}\n  y: {stage: b, if: failure(), steps: [{run: x}]}",
		"jobs:\n  t:\n    matrix: {a: [1, 2], include: [{a: 3, b: x}], exclude: [{a: 1}]}\n    steps: [{run: \"${{ matrix.a }} ${{ env.X }}\"}]\n    env: {X: y}",
		"x: &a {timeout: 1m}\njobs: {a: {<<: *a, steps: [{run: x}]}}",
		"jobs: {a: {if: 'needs.b.result == \"x\"', steps: [{run: x}]}}",
		"{\"jobs\": {\"a\": {\"steps\": [{\"run\": \"x\"}]}}}",
		"[[[[",
		"jobs: {a: {steps: [{run: x}], artifacts: [\"../x\"]}}",
		"on: [push, pull_request]\njobs: {a: {steps: [{run: x}]}}",
		"defaults: {checkout: {depth: 1, path: src}}\njobs:\n  a: {checkout: false, steps: [{run: x}]}\n  b: {checkout: {lfs: true, submodules: true, path: ../x}, steps: [{run: x}]}",
		"on: push\njobs:\n  a:\n    runs-on: [ubuntu-latest, x]\n    if: ${{ github.ref == 'refs/heads/main' && !cancelled() && matrix['a-b'] >= 2 }}\n    strategy: {matrix: {a-b: [1, 2], include: [{a-b: 3, c: x}]}}\n    steps:\n      - uses: actions/checkout@v4\n        with: {fetch-depth: 0}\n      - run: echo ${{ format('{0}-{{x}}', matrix.a-b) }} ${{ secrets.T }} ${{ env.Y }}\n        working-directory: d\n      - uses: actions/upload-artifact@v4\n        with: {name: n, path: \"a\\nb\"}\n  b: {runs-on: x, needs: a, steps: [{uses: actions/download-artifact@v4, with: {name: n}}, {uses: actions/setup-go@v5, with: {go-version: '1.x'}}]}",
		"on: push\njobs:\n  a:\n    runs-on: x\n    strategy: {matrix: {d: [a, '..']}}\n    steps:\n      - uses: dorny/test-reporter@v2\n        if: ${{ !cancelled() }}\n        with: {name: n, path: 'a.xml, ${{ matrix.d }}/*.xml', reporter: java-junit, working-directory: w}\n      - uses: mikepenz/action-junit-report@v5\n        with: {report_paths: \"${{ github.workspace }}/x.xml\\n{a,b}.xml\"}\n      - uses: gantry/test-report@v1\n        if: always()\n        with: {junit: \"a\\n../b\", tap: x, fail-on-failure: maybe, x: y}",
		"jobs:\n  a:\n    reports: {tap: [t.tap]}\n    steps:\n      - run: x\n      - {uses: gantry/test-report@v1.0, with: {junit: \"a.xml\\nb/**/*.xml\", go-test-json: t.json, fail-on-empty: true}}\n      - {uses: gantry/test-report@v2}",
		"on:\n  push: {branches: [main, '!x/**'], paths-ignore: ['docs/**']}\n  pull_request: {types: [opened]}\n  schedule: [{cron: '0 3 * * 1-5', timezone: Europe/Berlin, missed: run_once}]\n  dispatch: {inputs: {e: {type: choice, options: [a, b], default: a}, n: {type: number, default: 2}}}\njobs: {a: {steps: [{run: x}]}}",
	} {
		f.Add([]byte(s))
	}
	limits := Limits{MaxJobs: 300, MaxNodes: 200_000}
	f.Fuzz(func(t *testing.T, src []byte) {
		p, err := Compile(src, Options{Limits: limits})
		if err != nil {
			if p != nil {
				t.Fatal("plan returned with errors")
			}
			var errs Errors
			if !errors.As(err, &errs) || len(errs) == 0 {
				t.Fatalf("error is not a non-empty Errors: %#v", err)
			}
			for _, e := range errs {
				if e.Kind == "" || e.Message == "" || e.Line < 0 || e.Column < 0 {
					t.Fatalf("malformed error %#v", e)
				}
			}
			return
		}
		if len(p.Jobs) == 0 || len(p.Jobs) > limits.MaxJobs {
			t.Fatalf("plan has %d jobs", len(p.Jobs))
		}
		seen := map[string]bool{}
		i := 0
		for w, wave := range p.Waves {
			for _, key := range wave {
				j := p.Jobs[i]
				if j.Key != key || j.Wave != w {
					t.Fatalf("job %d is %q in wave %d, waves say %q in %d", i, j.Key, j.Wave, key, w)
				}
				if len(j.Steps) == 0 {
					t.Fatalf("job %q has no steps", j.Key)
				}
				for _, n := range j.Needs {
					if !seen[n] {
						t.Fatalf("job %q needs %q, which is not planned before it", j.Key, n)
					}
				}
				i++
			}
			for _, key := range wave {
				if seen[key] {
					t.Fatalf("job key %q twice", key)
				}
				seen[key] = true
			}
		}
		if i != len(p.Jobs) {
			t.Fatalf("waves hold %d jobs, plan has %d", i, len(p.Jobs))
		}
		b, err := json.Marshal(p)
		if err != nil {
			t.Fatalf("marshal plan: %v", err)
		}
		var back Plan
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("plan does not survive JSON: %v", err)
		}
		if len(back.Jobs) != len(p.Jobs) {
			t.Fatalf("JSON round trip lost jobs")
		}
	})
}

// FuzzConvertWorkflow checks gantry convert's promise on arbitrary workflows: whatever
// ConvertWorkflow accepts, Compile plans, and the definition it prints is read as Gantry's
// own and plans the same.
func FuzzConvertWorkflow(f *testing.F) {
	workflows, _ := filepath.Glob("testdata/gha/*.yml")
	for _, name := range workflows {
		if b, err := os.ReadFile(name); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte("on: push\njobs:\n  a:\n    runs-on: x\n    if: matrix.v && !(github.ref_name == 'x')\n    strategy: {matrix: {v: [a, '']}}\n    steps:\n      - run: echo ${{ format('{0}{{', matrix.v) }} ${{ env.Z }}\n        working-directory: \"d'x\"\n"))
	limits := Limits{MaxJobs: 300, MaxNodes: 200_000}
	f.Fuzz(func(t *testing.T, src []byte) {
		out, err := ConvertWorkflow(src, Options{Limits: limits, Path: ".github/workflows/x.yml"})
		if err != nil {
			return
		}
		want, err := Compile(src, Options{Limits: limits, Path: ".github/workflows/x.yml"})
		if err != nil {
			t.Fatalf("ConvertWorkflow accepted what Compile refuses: %v", err)
		}
		got, err := Compile(out, Options{Limits: limits})
		if err != nil {
			t.Fatalf("the converted definition does not compile: %v\n%s", err, out)
		}
		a, _ := json.Marshal(want)
		b, _ := json.Marshal(got)
		if string(a) != string(b) {
			t.Fatalf("plans differ\n%s\n%s\n%s", a, b, out)
		}
	})
}
