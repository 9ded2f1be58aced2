package pipeline

import (
	"strings"
	"testing"
)

// TestJobNameAtClaim: a job's name: that reads what its needs left is kept for the claim
// and shown as written until then; ClaimedName evaluates it with the needs' outputs and
// results and each instance's matrix, as GitHub does when the job starts. The job reads
// its needs, so the coordinator gives them.
func TestJobNameAtClaim(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		src  string
		opts Options
	}{
		{"workflow", `on: push
jobs:
  prepare:
    runs-on: x
    steps: [{run: x}]
  publish:
    needs: prepare
    name: Publish ${{ needs.prepare.outputs.version }}
    runs-on: x
    steps: [{run: x}]
  build:
    needs: prepare
    name: Build ${{ matrix.os }} ${{ needs.prepare.outputs.version || 'dev' }} ${{ needs.prepare.result }}
    runs-on: x
    strategy: {matrix: {os: [linux, bsd]}}
    steps: [{run: x}]
  same:
    needs: prepare
    name: ${{ needs.prepare.outputs.version }}
    runs-on: x
    strategy: {matrix: {os: [linux, bsd]}}
    steps: [{run: x}]
`, Options{Path: ".github/workflows/ci.yml"}},
		{"gantry", `
jobs:
  prepare:
    steps: [{run: x}]
  publish:
    needs: [prepare]
    name: "Publish ${{ needs.prepare.outputs.version }}"
    steps: [{run: x}]
  build:
    needs: [prepare]
    matrix: {os: [linux, bsd]}
    name: "Build ${{ matrix.os }} ${{ needs.prepare.outputs.version }} success"
    steps: [{run: x}]
  same:
    needs: [prepare]
    matrix: {os: [linux, bsd]}
    name: "${{ needs.prepare.outputs.version }}"
    steps: [{run: x}]
`, Options{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := Compile([]byte(tc.src), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if j := p.Job("prepare"); j.NameTemplate != "" || j.ReadsNeeds {
				t.Errorf("prepare: name template %q, reads needs %v", j.NameTemplate, j.ReadsNeeds)
			}
			pub := p.Job("publish")
			if pub.DisplayName != "Publish ${{ needs.prepare.outputs.version }}" || pub.NameTemplate == "" || !pub.ReadsNeeds {
				t.Fatalf("publish: shown as %q, template %q, reads needs %v", pub.DisplayName, pub.NameTemplate, pub.ReadsNeeds)
			}
			results := map[string]string{"prepare": ResultSuccess}
			outputs := map[string]map[string]string{"prepare": {"version": "1.2.3"}}
			for key, want := range map[string]string{
				"publish":          "Publish 1.2.3",
				"build (os=linux)": "Build linux 1.2.3 success",
				"build (os=bsd)":   "Build bsd 1.2.3 success",
				// Told apart by their values in the plan, and so once evaluated.
				"same (os=linux)": "1.2.3 (os=linux)",
				"same (os=bsd)":   "1.2.3 (os=bsd)",
			} {
				j := p.Job(key)
				if j == nil {
					t.Fatalf("no job %s", key)
				}
				got, err := j.ClaimedName(results, outputs)
				if err != nil || got != want {
					t.Errorf("%s: ClaimedName = %q, %v; want %q", key, got, err, want)
				}
			}
			if got := p.Job("build (os=bsd)").DisplayName; !strings.HasPrefix(got, "Build bsd ") {
				t.Errorf("build (os=bsd) is shown as %q before its claim, want its matrix value put in", got)
			}
			// A need that set nothing gives "": the key stands for a name that came out
			// empty.
			if got, _ := pub.ClaimedName(results, nil); got != "Publish" {
				t.Errorf("with no outputs: %q", got)
			}
		})
	}
}

// TestClaimedNameEdges: an expression that fails to evaluate is an error naming the
// job; control characters become spaces, a long name is cut on a character, and an
// empty one is the key.
func TestClaimedNameEdges(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `on: push
jobs:
  a: {runs-on: x, steps: [{run: x}]}
  b:
    needs: a
    name: ${{ fromJSON(needs.a.outputs.v).name }}
    runs-on: x
    steps: [{run: x}]
`)
	b := p.Job("b")
	if _, err := b.ClaimedName(nil, map[string]map[string]string{"a": {"v": "{not json"}}); err == nil || !strings.Contains(err.Error(), "job b: name") {
		t.Errorf("bad JSON: %v", err)
	}
	for _, tc := range []struct{ v, want string }{
		{`{"name": "line\nbreak\ttab"}`, "line break tab"},
		{`{"name": ""}`, "b"},
		{`{"name": "` + strings.Repeat("é", MaxJobNameBytes) + `"}`, strings.Repeat("é", MaxJobNameBytes/2)},
	} {
		got, err := b.ClaimedName(nil, map[string]map[string]string{"a": {"v": tc.v}})
		if err != nil || got != tc.want {
			t.Errorf("%.40s: %.40q, %v; want %.40q", tc.v, got, err, tc.want)
		}
	}
	if got, err := p.Job("a").ClaimedName(nil, nil); got != "" || err != nil {
		t.Errorf("a name known from the plan: %q, %v", got, err)
	}
}

// TestJobNameAtClaimErrors: what a name evaluated at the claim may not read is an error
// at the reference.
func TestJobNameAtClaimErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, src, path, msg string
		workflow             bool
	}{
		{"workflow: a job it does not need", `on: push
jobs:
  a: {runs-on: x, steps: [{run: x}]}
  b:
    name: v${{ needs.a.outputs.v }}
    runs-on: x
    steps: [{run: x}]
`, "jobs.b.name", `the name reads needs.a, but job b does not need a`, true},
		{"workflow: another context", `on: push
jobs:
  a: {runs-on: x, steps: [{run: x}]}
  b:
    needs: a
    name: ${{ format('{0}-{1}', needs.a.outputs.v, github.ref_name) }}
    runs-on: x
    steps: [{run: x}]
`, "jobs.b.name", "may read needs, matrix and literals, not github", true},
		{"gantry: a step's output", `
jobs:
  a:
    name: "${{ steps.s.outputs.v }}"
    steps: [{id: s, run: x}]
`, "jobs.a.name", "a job's name is decided when the job is claimed, before its steps run", false},
		{"gantry: a job it does not need", `
jobs:
  a: {steps: [{run: x}]}
  b:
    name: "${{ needs.a.outputs.v }}"
    steps: [{run: x}]
`, "jobs.b.name", `this job does not need "a"`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := Options{}
			if tc.workflow {
				opts.Path = ".github/workflows/ci.yml"
			}
			_, err := Compile([]byte(tc.src), opts)
			if err == nil || !strings.Contains(err.Error(), tc.msg) || !strings.Contains(err.Error(), tc.path) {
				t.Errorf("error %v, want %q at %s", err, tc.msg, tc.path)
			}
		})
	}
}

// TestEnvironmentURLAtJobEnd: an environment's url that reads the job's steps (or its
// needs, or an expression for the worker) is kept as a template for the worker to
// evaluate when the steps are done; needs are put in at the claim and the run's own
// values when the run is created. A url that cannot become an http or https URL is an
// error, as is a step no step of the job has.
func TestEnvironmentURLAtJobEnd(t *testing.T) {
	t.Parallel()
	p := compileWorkflow(t, `on: push
jobs:
  a: {runs-on: x, steps: [{run: x}]}
  pages:
    needs: a
    runs-on: x
    environment:
      name: github-pages
      url: ${{ steps.deployment.outputs.page_url }}
    steps: [{id: deployment, run: x}]
  docs:
    needs: a
    runs-on: x
    environment: {name: docs, url: "https://${{ github.ref_name }}.example.org/${{ needs.a.outputs.path }}/${{ steps.s.outputs.page || 'index' }}"}
    steps: [{id: s, run: x}]
`)
	pages := p.Job("pages").Environment
	if pages.URL != "" || pages.URLTemplate != "${{ steps.deployment.outputs.page_url }}" {
		t.Fatalf("pages environment %+v", pages)
	}
	docs := p.Job("docs")
	if !docs.ReadsNeeds || docs.Environment.URL != "" {
		t.Fatalf("docs: reads needs %v, environment %+v", docs.ReadsNeeds, docs.Environment)
	}
	withRun, err := docs.WithRunValues(ConditionInput{Ref: "refs/heads/main", Branch: "main"})
	if err != nil {
		t.Fatal(err)
	}
	claimed, err := withRun.WithNeeds(map[string]map[string]string{"a": {"path": "v1"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := claimed.Environment.URLTemplate; !strings.HasPrefix(got, "https://main.example.org/v1/${{ gha:") {
		t.Errorf("docs url once the run was created and the job claimed: %q", got)
	}
	if docs.Environment.URLTemplate == claimed.Environment.URLTemplate {
		t.Errorf("WithNeeds changed the plan's job")
	}

	gantry := mustCompile(t, `
jobs:
  deploy:
    environment: {name: prod, url: "https://x.example/${{ steps.d.outputs.path }}"}
    steps: [{id: d, run: x}]
`)
	if e := gantry.Job("deploy").Environment; e.URLTemplate != "https://x.example/${{ steps.d.outputs.path }}" || e.URL != "" {
		t.Errorf("gantry: environment %+v", e)
	}
	for _, tc := range []struct{ src, msg string }{
		{`
jobs:
  deploy:
    environment: {name: prod, url: "ftp://${{ steps.d.outputs.host }}"}
    steps: [{id: d, run: x}]
`, "absolute http or https URL"},
		{`
jobs:
  deploy:
    environment: {name: prod, url: "${{ steps.nope.outputs.url }}"}
    steps: [{id: d, run: x}]
`, `no step before this one has id "nope"`},
	} {
		if errs := compileErrs(t, tc.src); !strings.Contains(errs.Error(), tc.msg) {
			t.Errorf("errors %v, want %q", errs, tc.msg)
		}
	}
}

// TestCheckEnvironmentURL: what a job's end may give its environment.
func TestCheckEnvironmentURL(t *testing.T) {
	t.Parallel()
	for _, good := range []string{"", "https://example.org/site/", "http://localhost:8080/x?y=1"} {
		if err := CheckEnvironmentURL(good); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
	for _, bad := range []string{"javascript:alert(1)", "example.org", "https://", "https://x/\n", "https://x/" + strings.Repeat("a", MaxEnvironmentURLBytes)} {
		if err := CheckEnvironmentURL(bad); err == nil {
			t.Errorf("%.40q accepted", bad)
		}
	}
}
