package cli

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
)

// TestRunWorkflowOn: gantry run runs a workflow only when its on: would start it for the
// event and branch simulated, as GitHub would, and says why not otherwise; --force runs
// it anyway. A Gantry pipeline runs whatever its on: says, as before.
func TestRunWorkflowOn(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, src string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const steps = "    steps:\n      - run: echo the job ran\n"
	mainOnly := write("main.yml", "on:\n  push:\n    branches: [main]\n    paths: [src/**]\njobs:\n  a:\n    runs-on: ubuntu-latest\n"+steps)
	byHand := write("byhand.yml", "on:\n  workflow_dispatch:\njobs:\n  a:\n    runs-on: ubuntu-latest\n"+steps)
	prs := write("prs.yml", "on:\n  pull_request:\n    branches: [main]\njobs:\n  a:\n    runs-on: ubuntu-latest\n"+steps)
	gantryFile := write("gantry.yml", "on:\n  push:\n    branches: [main]\njobs:\n  a:\n    steps:\n      - run: echo the job ran\n")
	tests := []struct {
		name   string
		args   []string
		file   string
		code   int
		stderr string // a line of it, when refused
	}{
		{"push to the branch", []string{"--ref", "refs/heads/main"}, mainOnly, exitOK, ""},
		{"push to another branch", []string{"--ref", "refs/heads/feature"}, mainOnly, exitFailure,
			"gantry: push to refs/heads/feature: branch feature is not in branches [main], so GitHub would not run this workflow; --force runs it anyway\n"},
		{"forced", []string{"--ref", "refs/heads/feature", "--force"}, mainOnly, exitOK, ""},
		{"no branch to match", nil, mainOnly, exitFailure,
			"gantry: this workflow runs on pushes to some branches only (on.push.branches), and the run has no branch (HEAD is on none and no --ref names one); give --ref refs/heads/NAME, or --force to run it anyway\n"},
		{"a tag", []string{"--ref", "refs/tags/v1"}, mainOnly, exitFailure,
			"gantry: push to refs/tags/v1: on.push filters branches only, so tag pushes do not run, so GitHub would not run this workflow; --force runs it anyway\n"},
		{"pushed, dispatch only", []string{"--ref", "refs/heads/main"}, byHand, exitFailure,
			"gantry: push to refs/heads/main: on: has no push (it lists dispatch), so GitHub would not run this workflow; --event dispatch runs it as started by hand; --force runs it anyway\n"},
		{"dispatched", []string{"--event", "dispatch"}, byHand, exitOK, ""},
		{"pull request into main", []string{"--event", "pull_request", "--ref", "refs/heads/main"}, prs, exitOK, ""},
		{"pull request into dev", []string{"--event", "pull_request", "--ref", "refs/heads/dev"}, prs, exitFailure,
			"gantry: pull_request opened into dev: base branch dev is not in branches [main], so GitHub would not run this workflow; --force runs it anyway\n"},
		{"a Gantry pipeline runs as before", []string{"--ref", "refs/heads/feature"}, gantryFile, exitOK, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"run", "--workers", "1", "--no-checkout"}, tc.args...)
			got := runCLI(t, invocation{args: append(args, tc.file)})
			if got.code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout:\n%s\nstderr:\n%s", got.code, tc.code, got.stdout, got.stderr)
			}
			if ran := strings.Contains(got.stdout, "the job ran"); ran != (tc.code == exitOK) {
				t.Errorf("the job ran: %v, want %v\nstdout:\n%s", ran, tc.code == exitOK, got.stdout)
			}
			if tc.stderr != "" && got.stderr != tc.stderr {
				t.Errorf("stderr:\n%q\nwant\n%q", got.stderr, tc.stderr)
			}
		})
	}
}

// TestRunSecrets: --secret NAME takes its value from the environment, NAME=VALUE from the
// command line, --secrets-file from a dotenv file, the command line winning; the jobs of
// a workflow and of a Gantry pipeline read them, and their logs never show the values.
func TestRunSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secrets := filepath.Join(dir, "secrets.env")
	if err := os.WriteFile(secrets, []byte("# the team's\nexport FROM_FILE='file value'\nOVERRIDDEN=\"from the file\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	workflow := filepath.Join(dir, "wf.yml")
	if err := os.WriteFile(workflow, []byte(`on: push
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: |
          test "${{ secrets.FROM_ENV }}" = "env value" && echo from env ok: ${{ secrets.FROM_ENV }}
          test "${{ secrets.FROM_FILE }}" = "file value" && echo from file ok
          test "${{ secrets.OVERRIDDEN }}" = "from the command line" && echo overridden ok
`), 0o644); err != nil {
		t.Fatal(err)
	}
	pipelineFile := filepath.Join(dir, "p.yml")
	if err := os.WriteFile(pipelineFile, []byte(`jobs:
  a:
    env: {T: "${{ secrets.FROM_ENV }}"}
    steps:
      - run: test "$T" = "env value" && echo gantry ok $T
`), 0o644); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"FROM_ENV": "env value"}
	for _, tc := range []struct {
		file string
		want []string
	}{
		{workflow, []string{"from env ok: ***", "from file ok", "overridden ok"}},
		{pipelineFile, []string{"gantry ok ***"}},
	} {
		t.Run(filepath.Base(tc.file), func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{env: env, args: []string{"run", "--workers", "1", "--no-checkout",
				"--secret", "FROM_ENV", "--secrets-file", secrets, "-s", "OVERRIDDEN=from the command line", tc.file}})
			if got.code != exitOK {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
			}
			for _, w := range tc.want {
				if !strings.Contains(got.stdout, w) {
					t.Errorf("stdout lacks %q:\n%s", w, got.stdout)
				}
			}
			if strings.Contains(got.stdout, "env value") {
				t.Errorf("a secret's value is in the log:\n%s", got.stdout)
			}
		})
	}
}

// TestRunSecretErrors: a secret gantry run cannot have is refused before anything starts,
// naming it and what to do.
func TestRunSecretErrors(t *testing.T) {
	t.Parallel()
	file := writePipeline(t, "p.yml", "jobs:\n  a: {steps: [{run: 'echo never'}]}\n")
	badFile := writePipeline(t, "bad.env", "A=1\nB='unclosed\n")
	tests := []struct {
		name string
		args []string
		msg  string
	}{
		{"not in the environment, no terminal", []string{"--secret", "MISSING"},
			"--secret MISSING: the environment has no MISSING and there is no terminal to ask for it on; export MISSING, or give --secrets-file FILE"},
		{"a lower case name", []string{"--secret", "token=x"}, `--secret "token=x": secret name "token": use upper case letters`},
		{"empty", []string{"--secret", "EMPTY="}, "--secret EMPTY: the value of EMPTY is empty"},
		{"a bad file", []string{"--secrets-file", badFile}, "--secrets-file " + badFile + ": line 2: B: the value's ' is not closed on its line"},
		{"a var without a value", []string{"--var", "REGION"}, `--var "REGION": want NAME=VALUE`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: append(append([]string{"run", "--no-checkout"}, tc.args...), file)})
			if got.code != exitUsage || !strings.Contains(got.stderr, tc.msg) || strings.Contains(got.stdout, "never") {
				t.Errorf("exit %d, stderr:\n%s\nwant exit %d and %q", got.code, got.stderr, exitUsage, tc.msg)
			}
		})
	}
}

// TestParseDotenv: the secrets file is read as docker's --env-file and act's secret file
// are, with quotes.
func TestParseDotenv(t *testing.T) {
	t.Parallel()
	got, err := parseDotenv(strings.NewReader("\ufeff# comment\n\nA=plain value  # a comment\nexport B = spaced \n" +
		"C=\"two\\nlines \\\"quoted\\\" #not a comment\"\nD='single $HOME \\n'\nE=\nF=a=b\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"A": "plain value", "B": "spaced", "C": "two\nlines \"quoted\" #not a comment",
		"D": `single $HOME \n`, "E": "", "F": "a=b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("parseDotenv = %q\nwant %q", got, want)
	}
	for _, bad := range []string{"NOEQUALS\n", "=v\n", "X=\"open\n", "X='a' b\n"} {
		if _, err := parseDotenv(strings.NewReader(bad)); err == nil || !strings.Contains(err.Error(), "line 1") {
			t.Errorf("parseDotenv(%q) = %v, want an error at line 1", bad, err)
		}
	}
}

// TestRunVars: --var is kept with the run's trigger, which reaches its workers, for
// vars.NAME once that is read.
func TestRunVars(t *testing.T) {
	t.Parallel()
	cfg := runConfig{Event: "push", NoCheckout: true, Vars: []string{"REGION=eu-west-1", "EMPTY="}}
	lr, err := localTrigger(t.Context(), cfg, &pipeline.Plan{})
	if err != nil {
		t.Fatal(err)
	}
	if lr.trigger.Vars == nil || !reflect.DeepEqual(*lr.trigger.Vars, store.Variables{"REGION": "eu-west-1", "EMPTY": ""}) {
		t.Errorf("trigger vars = %v", lr.trigger.Vars)
	}
	for _, bad := range []string{"1X=y", "GITHUB_TOKEN=y", "A-B=y"} {
		if _, err := localTrigger(t.Context(), runConfig{Event: "push", NoCheckout: true, Vars: []string{bad}}, &pipeline.Plan{}); err == nil {
			t.Errorf("--var %s accepted", bad)
		}
	}
}
