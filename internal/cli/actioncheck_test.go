package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/actions/actionstest"
)

// actionWorkflow is a workflow whose one job's first step (line 6, its uses: value at
// column 15) uses uses with the inputs with, one per line.
func actionWorkflow(uses string, with ...string) string {
	doc := "on: push\n" +
		"jobs:\n" +
		"  build:\n" +
		"    runs-on: ubuntu-latest\n" +
		"    steps:\n" +
		"      - uses: " + uses + "\n"
	if len(with) > 0 {
		doc += "        with:\n"
		for _, w := range with {
			doc += "          " + w + "\n"
		}
	}
	return doc + "      - run: echo done\n"
}

func TestValidateActions(t *testing.T) {
	t.Parallel()
	source := t.TempDir()
	actionstest.Repo(t, source, "acme", "greet", actionstest.Greet, "v1")
	actionstest.Repo(t, source, "acme", "tools", actionstest.Shout, "v2")
	paths := writeFiles(t, map[string]string{
		"valid.yml":       actionWorkflow("acme/greet@v1", "who: world"),
		"composite.yml":   actionWorkflow("acme/tools/shout@v2", "text: hi"),
		"missing.yml":     actionWorkflow("acme/greet@v1", "greeting: Hi"),
		"unknown.yml":     actionWorkflow("acme/greet@v1", "who: world", "whom: nobody"),
		"unresolved.yml":  actionWorkflow("acme/nope@v1", "who: world"),
		"bad-ref.yml":     actionWorkflow("acme/greet@v9", "who: world"),
		"local-only.yml":  actionWorkflow("./.github/actions/mine", "anything: goes"),
		"no-actions.yml":  "jobs:\n  build:\n    steps:\n      - run: make\n",
		"pipeline.yml":    "jobs:\n  build:\n    steps:\n      - uses: acme/greet@v1\n        with: {greeting: Hi}\n",
		"greet-twice.yml": actionWorkflow("acme/greet@v1", "who: world") + "      - uses: acme/greet@v1\n",
	})
	step := "job build, step Run acme/greet@v1: acme/greet@v1: "
	tests := []struct {
		name       string
		file       string
		flags      []string
		env        map[string]string
		wantCode   int
		wantStdout []string // lines, in order, that stdout must hold
	}{
		{
			name:       "valid",
			file:       "valid.yml",
			wantCode:   exitOK,
			wantStdout: []string{"valid.yml: ok (1 job)"},
		},
		{
			name:       "composite action in a directory of its repository",
			file:       "composite.yml",
			wantCode:   exitOK,
			wantStdout: []string{"composite.yml: ok (1 job)"},
		},
		{
			name:     "missing required input is an error at the step's uses:",
			file:     "missing.yml",
			wantCode: exitFailure,
			wantStdout: []string{
				"missing.yml:6:15: " + step + `input "who" is required`,
				"      - uses: acme/greet@v1",
				"              ^",
				"1 error in 1 file",
			},
		},
		{
			name:     "unknown input is a warning that does not fail",
			file:     "unknown.yml",
			wantCode: exitOK,
			wantStdout: []string{
				"unknown.yml: ok (1 job)",
				"unknown.yml:6:15: warning: " + step + `unexpected input "whom"; valid inputs are 'who', 'greeting', 'repo', 'fail', 'sign-off'`,
			},
		},
		{
			name:     "unresolvable action names the action and the source tried",
			file:     "unresolved.yml",
			wantCode: exitFailure,
			wantStdout: []string{
				"unresolved.yml:6:15: job build, step Run acme/nope@v1: action acme/nope@v1 could not be resolved from file://" + filepath.ToSlash(filepath.Join(source, "acme", "nope")) + ": ",
				"1 error in 1 file",
			},
		},
		{
			name:     "a ref the repository does not have",
			file:     "bad-ref.yml",
			wantCode: exitFailure,
			wantStdout: []string{
				"bad-ref.yml:6:15: job build, step Run acme/greet@v9: action acme/greet@v9 could not be resolved from file://" + filepath.ToSlash(filepath.Join(source, "acme", "greet.git")) + `: the repository has no branch, tag or commit "v9"`,
			},
		},
		{
			name:       "a local action is not resolved",
			file:       "local-only.yml",
			wantCode:   exitOK,
			wantStdout: []string{"local-only.yml: ok (1 job)"},
		},
		{
			name:       "a definition without actions",
			file:       "no-actions.yml",
			wantCode:   exitOK,
			wantStdout: []string{"no-actions.yml: ok (1 job)"},
		},
		{
			name:     "a pipeline in Gantry's own language",
			file:     "pipeline.yml",
			wantCode: exitFailure,
			wantStdout: []string{
				"pipeline.yml:4:15: job build, step ",
				`acme/greet@v1: input "who" is required`,
			},
		},
		{
			name:     "the second use of an action in a job is found at its own line",
			file:     "greet-twice.yml",
			wantCode: exitFailure,
			wantStdout: []string{
				"greet-twice.yml:10:15: " + step + `input "who" is required`,
				"      - uses: acme/greet@v1",
			},
		},
		{
			name:       "--resolve-actions with the source from the environment",
			file:       "missing.yml",
			flags:      []string{"--resolve-actions"},
			env:        map[string]string{"GANTRY_ACTIONS_SOURCE": source},
			wantCode:   exitFailure,
			wantStdout: []string{"missing.yml:6:15: " + step + `input "who" is required`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := []string{"validate", "--mirrors", t.TempDir()}
			if tt.env == nil {
				args = append(args, "--actions-source", source)
			}
			args = append(append(args, tt.flags...), paths[tt.file])
			got := runCLI(t, invocation{args: args, env: tt.env})
			if got.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d", got.code, tt.wantCode)
			}
			out := strings.ReplaceAll(got.stdout, filepath.Dir(paths[tt.file])+string(filepath.Separator), "")
			rest := out
			for _, want := range tt.wantStdout {
				i := strings.Index(rest, want)
				if i < 0 {
					t.Errorf("stdout lacks (in order) %q:\n%s", want, out)
					break
				}
				rest = rest[i+len(want):]
			}
			if got.stderr != "" {
				t.Errorf("stderr = %q, want nothing", got.stderr)
			}
		})
	}
}

// TestValidateActionsHTTP resolves actions from a URL source, as from GitHub.
func TestValidateActionsHTTP(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	actionstest.Repo(t, dir, "acme", "greet", actionstest.Greet, "v1")
	base := actionstest.Serve(t, dir)
	paths := writeFiles(t, map[string]string{
		"valid.yml":   actionWorkflow("acme/greet@v1", "who: world"),
		"missing.yml": actionWorkflow("acme/nope@v1", "who: world"),
	})
	got := runCLI(t, invocation{args: []string{"validate", "--mirrors", t.TempDir(), "--actions-source", base + "/{owner}/{repo}.git", paths["valid.yml"], paths["missing.yml"]}})
	if got.code != exitFailure {
		t.Errorf("exit code = %d, want %d", got.code, exitFailure)
	}
	if want := paths["valid.yml"] + ": ok (1 job)\n"; !strings.HasPrefix(got.stdout, want) {
		t.Errorf("stdout =\n%s\nwant it to start with %q", got.stdout, want)
	}
	if want := "action acme/nope@v1 could not be resolved from " + base + "/acme/nope.git: "; !strings.Contains(got.stdout, want) {
		t.Errorf("stdout =\n%s\nwant it to hold %q", got.stdout, want)
	}
}

func TestValidateActionsJSON(t *testing.T) {
	t.Parallel()
	source := t.TempDir()
	actionstest.Repo(t, source, "acme", "greet", actionstest.Greet, "v1")
	paths := writeFiles(t, map[string]string{
		"missing.yml": actionWorkflow("acme/greet@v1", "whom: nobody"),
	})
	got := runCLI(t, invocation{args: []string{"validate", "--json", "--mirrors", t.TempDir(), "--actions-source", source, paths["missing.yml"]}})
	if got.code != exitFailure {
		t.Errorf("exit code = %d, want %d; stderr:\n%s", got.code, exitFailure, got.stderr)
	}
	var report validateReport
	if err := json.Unmarshal([]byte(got.stdout), &report); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, got.stdout)
	}
	want := validateFile{
		File: paths["missing.yml"], Valid: false, Jobs: 1,
		Errors: []validateError{{Code: "action", Line: 6, Column: 15,
			Message: `job build, step Run acme/greet@v1: acme/greet@v1: input "who" is required`}},
		Warnings: []string{`job build, step Run acme/greet@v1: acme/greet@v1: unexpected input "whom"; valid inputs are 'who', 'greeting', 'repo', 'fail', 'sign-off'`},
	}
	if len(report.Files) != 1 {
		t.Fatalf("report = %+v, want one file", report)
	}
	f := report.Files[0]
	if f.File != want.File || f.Valid != want.Valid || f.Jobs != want.Jobs ||
		len(f.Errors) != 1 || f.Errors[0] != want.Errors[0] ||
		len(f.Warnings) != 1 || f.Warnings[0] != want.Warnings[0] {
		t.Errorf("file = %+v\nwant %+v", f, want)
	}
}

// TestValidateActionsOffline: without --resolve-actions or --actions-source, validate
// resolves nothing: an action that exists nowhere, with an input missing, passes, and
// --mirrors alone fetches nothing into it.
func TestValidateActionsOffline(t *testing.T) {
	t.Parallel()
	paths := writeFiles(t, map[string]string{
		"ci.yml": actionWorkflow("acme/nope@v1", "whom: nobody"),
	})
	mirrors := filepath.Join(t.TempDir(), "mirrors")
	for _, args := range [][]string{
		{"validate", paths["ci.yml"]},
		{"validate", "--json", paths["ci.yml"]},
		{"validate", "--mirrors", mirrors, paths["ci.yml"]},
		{"validate", "--resolve-actions=false", paths["ci.yml"]},
	} {
		got := runCLI(t, invocation{args: args})
		if got.code != exitOK || got.stderr != "" || strings.Contains(got.stdout, "warning") {
			t.Errorf("%q: exit %d\nstdout:\n%s\nstderr:\n%s\nwant exit 0 and no warning", args, got.code, got.stdout, got.stderr)
		}
	}
	if _, err := os.Stat(mirrors); !os.IsNotExist(err) {
		t.Errorf("stat %s: %v, want it never made", mirrors, err)
	}
}

func TestValidateActionsUsage(t *testing.T) {
	t.Parallel()
	paths := writeFiles(t, map[string]string{"ci.yml": actionWorkflow("acme/greet@v1", "who: world")})
	got := runCLI(t, invocation{args: []string{"validate", "--actions-source", "relative/dir", paths["ci.yml"]}})
	if got.code != exitUsage {
		t.Errorf("exit code = %d, want %d", got.code, exitUsage)
	}
	if !strings.HasPrefix(got.stderr, "gantry: --actions-source: ") || got.stdout != "" {
		t.Errorf("stdout = %q, stderr = %q, want only a usage error naming --actions-source", got.stdout, got.stderr)
	}
}
