package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// demoPlan is a small valid plan: build, then test needing build.
func demoPlan() *pipeline.Plan {
	return &pipeline.Plan{
		Name: "demo",
		Jobs: []*pipeline.Job{
			{Key: "build", Name: "build", Steps: []pipeline.Step{{Name: "make", Run: "make", Shell: "bash"}}},
			{Key: "test", Name: "test", Wave: 1, Needs: []string{"build"}, Steps: []pipeline.Step{{Name: "test", Run: "make test", Shell: "bash"}}},
		},
		Waves: [][]string{{"build"}, {"test"}},
	}
}

// fakeCompile stands in for pipeline.Compile in tests of output and exit codes: a source
// found in fail is rejected with its errors, anything else compiles to demoPlan.
func fakeCompile(fail map[string]pipeline.Errors) func([]byte, pipeline.Options) (*pipeline.Plan, error) {
	return func(src []byte, _ pipeline.Options) (*pipeline.Plan, error) {
		if errs, ok := fail[string(src)]; ok {
			return nil, errs
		}
		return demoPlan(), nil
	}
}

// writeFiles creates files in a new temporary directory and returns their paths by name.
func writeFiles(t *testing.T, files map[string]string) map[string]string {
	t.Helper()
	dir := t.TempDir()
	paths := make(map[string]string, len(files))
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		paths[name] = p
	}
	return paths
}

const (
	// badDoc has a misspelt key on line 4, column 5, and a need that names no job on
	// line 8, column 13.
	badDoc = "name: demo\n" +
		"jobs:\n" +
		"  build:\n" +
		"    stepz: []\n" +
		"    steps:\n" +
		"      - run: make\n" +
		"  deploy:\n" +
		"    needs: [nope]\n" +
		"    steps: [{run: ./deploy.sh}]\n"
	// worseDoc has a type error at line 2, column 7, and a limit error with no position.
	worseDoc = "name: x\njobs: 42\n"
)

var (
	badErrs = pipeline.Errors{
		{Kind: pipeline.ErrUnknownKey, Path: "jobs.build.stepz", Line: 4, Column: 5, Message: `unknown key "stepz" in job; did you mean "steps"?`},
		{Kind: pipeline.ErrUnknownNeed, Path: "jobs.deploy.needs[0]", Line: 8, Column: 13, Message: `needs "nope", which is not a job`},
	}
	worseErrs = pipeline.Errors{
		{Kind: pipeline.ErrType, Path: "jobs", Line: 2, Column: 7, Message: "expected a mapping of jobs, found a number"},
		{Kind: pipeline.ErrLimit, Message: "too expensive"},
	}
)

func TestValidateOutput(t *testing.T) {
	t.Parallel()
	paths := writeFiles(t, map[string]string{"good.yml": "name: demo\n", "bad.yml": badDoc, "worse.yml": worseDoc})
	good, bad, worse := paths["good.yml"], paths["bad.yml"], paths["worse.yml"]
	compile := fakeCompile(map[string]pipeline.Errors{badDoc: badErrs, worseDoc: worseErrs})

	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
	}{
		{
			name:       "one valid file",
			args:       []string{"validate", good},
			wantCode:   exitOK,
			wantStdout: good + ": ok (2 jobs)\n",
		},
		{
			name:       "standard input",
			args:       []string{"validate", "-"},
			stdin:      "name: demo\n",
			wantCode:   exitOK,
			wantStdout: "<stdin>: ok (2 jobs)\n",
		},
		{
			name:     "invalid file lists every error with source and caret",
			args:     []string{"validate", bad},
			wantCode: exitFailure,
			wantStdout: bad + `:4:5: jobs.build.stepz: unknown key "stepz" in job; did you mean "steps"?` + "\n" +
				"    stepz: []\n" +
				"    ^\n" +
				bad + `:8:13: jobs.deploy.needs[0]: needs "nope", which is not a job` + "\n" +
				"    needs: [nope]\n" +
				"            ^\n" +
				"2 errors in 1 file\n",
		},
		{
			name:     "valid and invalid files in order, one summary",
			args:     []string{"validate", worse, good, bad},
			wantCode: exitFailure,
			wantStdout: worse + ":2:7: jobs: expected a mapping of jobs, found a number\n" +
				"jobs: 42\n" +
				"      ^\n" +
				worse + ": too expensive\n" +
				good + ": ok (2 jobs)\n" +
				bad + `:4:5: jobs.build.stepz: unknown key "stepz" in job; did you mean "steps"?` + "\n" +
				"    stepz: []\n" +
				"    ^\n" +
				bad + `:8:13: jobs.deploy.needs[0]: needs "nope", which is not a job` + "\n" +
				"    needs: [nope]\n" +
				"            ^\n" +
				"4 errors in 2 files\n",
		},
		{
			name:     "flags may follow files",
			args:     []string{"validate", worse, "--json=false"},
			wantCode: exitFailure,
			wantStdout: worse + ":2:7: jobs: expected a mapping of jobs, found a number\n" +
				"jobs: 42\n" +
				"      ^\n" +
				worse + ": too expensive\n" +
				"2 errors in 1 file\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: tt.args, stdin: tt.stdin, compile: compile})
			if got.code != tt.wantCode {
				t.Errorf("exit code = %d, want %d", got.code, tt.wantCode)
			}
			if got.stdout != tt.wantStdout {
				t.Errorf("stdout =\n%s\nwant\n%s", got.stdout, tt.wantStdout)
			}
			if got.stderr != "" {
				t.Errorf("stderr = %q, want nothing", got.stderr)
			}
		})
	}
}

func TestValidateJSON(t *testing.T) {
	t.Parallel()
	paths := writeFiles(t, map[string]string{"good.yml": "name: demo\n", "bad.yml": badDoc})
	good, bad := paths["good.yml"], paths["bad.yml"]
	got := runCLI(t, invocation{
		args:    []string{"validate", "--json", good, bad},
		compile: fakeCompile(map[string]pipeline.Errors{badDoc: badErrs}),
	})
	if got.code != exitFailure {
		t.Errorf("exit code = %d, want %d", got.code, exitFailure)
	}
	want := `{
  "files": [
    {
      "file": ` + jsonString(t, good) + `,
      "valid": true,
      "jobs": 2,
      "errors": []
    },
    {
      "file": ` + jsonString(t, bad) + `,
      "valid": false,
      "jobs": 0,
      "errors": [
        {
          "code": "unknown_key",
          "path": "jobs.build.stepz",
          "line": 4,
          "column": 5,
          "message": "unknown key \"stepz\" in job; did you mean \"steps\"?"
        },
        {
          "code": "unknown_need",
          "path": "jobs.deploy.needs[0]",
          "line": 8,
          "column": 13,
          "message": "needs \"nope\", which is not a job"
        }
      ]
    }
  ]
}
`
	if got.stdout != want {
		t.Errorf("stdout =\n%s\nwant\n%s", got.stdout, want)
	}
	if got.stderr != "" {
		t.Errorf("stderr = %q, want nothing", got.stderr)
	}
}

func jsonString(t *testing.T, s string) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUnreadableFiles checks that a file that cannot be read stops the command with exit 2
// before anything is compiled, for validate and plan alike.
func TestUnreadableFiles(t *testing.T) {
	t.Parallel()
	paths := writeFiles(t, map[string]string{"good.yml": "name: demo\n"})
	good := paths["good.yml"]
	dir := filepath.Dir(good)
	missing := filepath.Join(dir, "missing.yml")
	tests := []struct {
		name       string
		args       []string
		wantStderr string
	}{
		{
			name:       "missing file",
			args:       []string{"validate", missing},
			wantStderr: "gantry: read " + missing + ": no such file or directory\n",
		},
		{
			name:       "missing file among good ones, in JSON mode",
			args:       []string{"validate", "--json", good, missing, good},
			wantStderr: "gantry: read " + missing + ": no such file or directory\n",
		},
		{
			name:       "every unreadable file is named",
			args:       []string{"validate", missing, dir},
			wantStderr: "gantry: read " + missing + ": no such file or directory\n" + "gantry: read " + dir + ": is a directory\n",
		},
		{
			name:       "plan of a missing file",
			args:       []string{"plan", "--format", "json", missing},
			wantStderr: "gantry: read " + missing + ": no such file or directory\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: tt.args, compile: fakeCompile(nil)})
			if got.code != exitUsage {
				t.Errorf("exit code = %d, want %d", got.code, exitUsage)
			}
			if got.stderr != tt.wantStderr {
				t.Errorf("stderr =\n%s\nwant\n%s", got.stderr, tt.wantStderr)
			}
			if got.stdout != "" {
				t.Errorf("stdout = %q, want nothing: a partial report could pass for a whole one", got.stdout)
			}
		})
	}
}

// The tests below run the real compiler: they pin what validate reports for real mistakes
// and for the shipped examples.

func TestValidateRealCompilerUnknownKey(t *testing.T) {
	t.Parallel()
	doc := "name: demo\n" +
		"jobs:\n" +
		"  build:\n" +
		"    stepz: []\n" +
		"    steps:\n" +
		"      - run: make\n"
	path := writeFiles(t, map[string]string{"p.yml": doc})["p.yml"]
	got := runCLI(t, invocation{args: []string{"validate", path}})
	if got.code != exitFailure {
		t.Fatalf("exit code = %d, want %d; stdout:\n%s\nstderr:\n%s", got.code, exitFailure, got.stdout, got.stderr)
	}
	lines := strings.Split(got.stdout, "\n")
	if len(lines) != 5 {
		t.Fatalf("want 4 lines of output, got:\n%s", got.stdout)
	}
	if prefix := path + ":4:5: jobs.build.stepz: "; !strings.HasPrefix(lines[0], prefix) {
		t.Errorf("first line = %q, want prefix %q", lines[0], prefix)
	}
	if !strings.Contains(lines[0], `unknown key "stepz"`) {
		t.Errorf("first line = %q, want it to say unknown key \"stepz\"", lines[0])
	}
	if lines[1] != "    stepz: []" || lines[2] != "    ^" {
		t.Errorf("source and caret =\n%s\n%s\nwant\n    stepz: []\n    ^", lines[1], lines[2])
	}
	if lines[3] != "1 error in 1 file" {
		t.Errorf("summary = %q, want %q", lines[3], "1 error in 1 file")
	}
}

func TestValidateRealCompilerJSON(t *testing.T) {
	t.Parallel()
	paths := writeFiles(t, map[string]string{
		"cycle.yml": "jobs:\n" +
			"  a: { needs: [b], steps: [{run: x}] }\n" +
			"  b: { needs: [a], steps: [{run: x}] }\n",
		"unknown-need.yml": "jobs:\n" +
			"  build: { steps: [{run: make}] }\n" +
			"  deploy:\n" +
			"    needs: [biuld]\n" +
			"    steps: [{run: ./deploy.sh}]\n",
		"unknown-key.json": "{\n  \"jobs\": {\n    \"a\": { \"stepz\": [], \"steps\": [{\"run\": \"x\"}] }\n  }\n}\n",
	})
	type wantErr struct {
		code         string
		path         string
		line, column int // 0: any
	}
	tests := []struct {
		file string
		want wantErr
	}{
		{"cycle.yml", wantErr{code: "cycle"}},
		{"unknown-need.yml", wantErr{code: "unknown_need", path: "jobs.deploy.needs[0]", line: 4, column: 13}},
		{"unknown-key.json", wantErr{code: "unknown_key", path: "jobs.a.stepz", line: 3, column: 12}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: []string{"validate", "--json", paths[tt.file]}})
			if got.code != exitFailure {
				t.Fatalf("exit code = %d, want %d; stdout:\n%s\nstderr:\n%s", got.code, exitFailure, got.stdout, got.stderr)
			}
			var report validateReport
			if err := json.Unmarshal([]byte(got.stdout), &report); err != nil {
				t.Fatalf("stdout is not JSON: %v\n%s", err, got.stdout)
			}
			if len(report.Files) != 1 || report.Files[0].Valid || report.Files[0].File != paths[tt.file] {
				t.Fatalf("report = %+v, want one invalid file", report)
			}
			for _, e := range report.Files[0].Errors {
				if e.Code == tt.want.code &&
					(tt.want.path == "" || e.Path == tt.want.path) &&
					(tt.want.line == 0 || e.Line == tt.want.line) &&
					(tt.want.column == 0 || e.Column == tt.want.column) {
					return
				}
			}
			t.Errorf("no error matching %+v in %+v", tt.want, report.Files[0].Errors)
		})
	}
}

func TestValidateExamples(t *testing.T) {
	t.Parallel()
	tests := []struct {
		file string
		jobs int
	}{
		{"conditions.yml", 5},
		{"diamond.yml", 4},
		{"hello.json", 2},
		{"hello.yml", 1},
		{"matrix.yml", 7}, // 2 x 3, one excluded, one included
		{"release.yml", 4},
		{"stages.yml", 5},
		{"templates.yml", 3}, // templates (.base, x-go) are not jobs
	}
	args := []string{"validate"}
	var want strings.Builder
	for _, tt := range tests {
		path := filepath.Join("..", "..", "examples", tt.file)
		args = append(args, path)
		want.WriteString(path + ": ok (" + countOf(tt.jobs, "job", "jobs") + ")\n")
	}
	got := runCLI(t, invocation{args: args})
	if got.code != exitOK {
		t.Errorf("exit code = %d, want 0; stderr:\n%s", got.code, got.stderr)
	}
	if got.stdout != want.String() {
		t.Errorf("stdout =\n%s\nwant\n%s", got.stdout, want.String())
	}
}

// endless is an input that never ends, like /dev/zero.
type endless struct{}

var endlessChunk = bytes.Repeat([]byte("#"), 1<<16)

func (endless) Read(p []byte) (int, error) {
	return copy(p, endlessChunk), nil
}

// TestEndlessInputIsRefused checks gantry stops reading a huge input instead of filling
// memory, and says why.
func TestEndlessInputIsRefused(t *testing.T) {
	t.Parallel()
	var stdout, stderr strings.Builder
	a := &app{stdin: endless{}, stdout: &stdout, stderr: &stderr,
		lookupEnv: func(string) (string, bool) { return "", false }, compile: fakeCompile(nil),
		// Small so the test is quick; the real bound is the same code with 64 MiB.
		maxRead: 1000}
	code := a.run(t.Context(), []string{"validate", "-"})
	if code != exitUsage {
		t.Errorf("exit code = %d, want %d", code, exitUsage)
	}
	want := "gantry: read <stdin>: larger than 1000 bytes; a pipeline definition may be at most 1 MiB\n"
	if stderr.String() != want {
		t.Errorf("stderr = %q, want %q", stderr.String(), want)
	}
}
