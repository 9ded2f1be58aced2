// Package actionstest makes git repositories of actions for tests: bare repositories in
// a directory laid out as an actions source (owner/repo.git), served as they are
// (file://) or over HTTP on loopback by git http-backend.
package actionstest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Repo writes files (path to content; a path ending in .sh or in dist/ is executable
// only when it ends in .sh) as one commit on main of the bare repository owner/repo.git
// in dir, tags it with each of tags, and returns the commit. Called again for the same
// repository, it adds a commit on top and moves the tags.
func Repo(t testing.TB, dir, owner, repo string, files map[string]string, tags ...string) string {
	t.Helper()
	bare := filepath.Join(dir, owner, repo+".git")
	if _, err := os.Stat(bare); err != nil {
		git(t, "", "init", "--quiet", "--bare", "--initial-branch=main", bare)
	}
	work := t.TempDir()
	git(t, "", "clone", "--quiet", bare, work)
	for p, content := range files {
		full := filepath.Join(work, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if strings.HasSuffix(p, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(full, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
	}
	git(t, work, "add", "-A")
	git(t, work, "-c", "user.name=test", "-c", "user.email=test@example.com", "commit", "--quiet", "--allow-empty", "-m", "action")
	for _, tag := range tags {
		git(t, work, "tag", "--force", tag)
	}
	git(t, work, "push", "--quiet", "--force", "origin", "HEAD:refs/heads/main")
	if len(tags) > 0 {
		git(t, work, "push", "--quiet", "--force", "--tags", "origin")
	}
	return strings.TrimSpace(git(t, work, "rev-parse", "HEAD"))
}

// Serve serves the bare repositories of dir over HTTP with git http-backend until the
// test ends, and returns the base URL: BASE/owner/repo.git is a repository.
func Serve(t testing.TB, dir string) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	backend := filepath.Join(strings.TrimSpace(string(out)), "git-http-backend")
	h := &cgi.Handler{
		Path: backend,
		Env:  []string{"GIT_PROJECT_ROOT=" + dir, "GIT_HTTP_EXPORT_ALL=1"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodPost {
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// Greet is a JavaScript action with no dependencies: it says hello to its input who,
// writes the message as its output, saves state its post reads, and fails with exit
// code 3 when its input fail is true, and says its input sign-off (INPUT_SIGN-OFF, a
// name sh cannot hold) when given. Its default repo input reads github.repository.
var Greet = map[string]string{
	"action.yml": `name: greet
description: says hello
inputs:
  who:
    description: whom to greet
    required: true
  greeting:
    default: Hello
  repo:
    default: ${{ github.repository }}
  fail:
    default: 'false'
  sign-off:
    default: ''
outputs:
  message:
    description: what was said
runs:
  using: node20
  main: dist/main.js
  post: dist/post.js
`,
	"dist/main.js": `const fs = require('fs');
const input = (n) => (process.env['INPUT_' + n.toUpperCase()] || '').trim();
const msg = input('greeting') + ', ' + input('who') + ' from ' + input('repo');
console.log(msg);
console.log('action ' + process.env.GITHUB_ACTION_REPOSITORY + '@' + process.env.GITHUB_ACTION_REF + ' in ' + process.env.GITHUB_ACTION_PATH);
fs.appendFileSync(process.env.GITHUB_OUTPUT, 'message=' + msg + '\n');
fs.appendFileSync(process.env.GITHUB_STATE, 'greeted=' + input('who') + '\n');
if (!fs.existsSync(process.env.GITHUB_ACTION_PATH + '/action.yml')) { console.log('no action.yml at GITHUB_ACTION_PATH'); process.exit(4); }
if (input('fail') === 'true') { console.log('failing as asked'); process.exit(3); }
if (input('sign-off')) { console.log('signed off: ' + input('sign-off')); }
`,
	"dist/post.js": "console.log('post of greet: greeted ' + process.env.STATE_greeted);\n",
}

// Shout is a composite action (in the directory shout of its repository) that uses
// Greet, makes its message loud in a bash step and gives it as its output loud.
var Shout = map[string]string{
	"shout/action.yml": `name: shout
inputs:
  text:
    required: true
outputs:
  loud:
    value: ${{ steps.up.outputs.loud }}
runs:
  using: composite
  steps:
    - id: g
      uses: acme/greet@v1
      with:
        who: ${{ inputs.text }}
    - id: up
      shell: bash
      run: |
        echo "loud=$(echo '${{ steps.g.outputs.message }}' | tr a-z A-Z)" >> "$GITHUB_OUTPUT"
        test -f "${{ github.action_path }}/action.yml"
    - if: ${{ failure() }}
      shell: sh
      run: echo "never, nothing failed"
`,
}

// Prep is a JavaScript action with no dependencies and a pre, a main and a post. Its pre
// (under pre-if: runner.os is Linux and the step's env SKIP_PRE is not true) writes the
// file its input marker names in the workspace, says what its input late reads, saves
// its marker as state from_pre, and fails with exit code 5 when its input fail-pre is
// true; its main and post say the state they read (from_pre, and from_main, which the
// main saves). Its post-if, runner.os is Linux, calls no status function.
var Prep = map[string]string{
	"action.yml": `name: prep
description: prepares at the job's start
inputs:
  marker: {required: true}
  late: {default: ''}
  fail-pre: {default: 'false'}
runs:
  using: node20
  pre: dist/pre.js
  pre-if: runner.os == 'Linux' && env.SKIP_PRE != 'true'
  main: dist/main.js
  post: dist/post.js
  post-if: runner.os == 'Linux'
`,
	"dist/pre.js": `const fs = require('fs');
const input = (n) => (process.env['INPUT_' + n.toUpperCase()] || '').trim();
fs.writeFileSync(input('marker'), 'made by the pre\n');
console.log('pre of prep: ' + input('marker') + ', late=[' + input('late') + ']');
fs.appendFileSync(process.env.GITHUB_STATE, 'from_pre=' + input('marker') + '\n');
if (input('fail-pre') === 'true') { console.log('pre failing as asked'); process.exit(5); }
`,
	"dist/main.js": `const fs = require('fs');
const input = (n) => (process.env['INPUT_' + n.toUpperCase()] || '').trim();
console.log('main of prep: ' + input('marker') + ', late=[' + input('late') + '], from_pre=' + (process.env.STATE_from_pre || '-'));
fs.appendFileSync(process.env.GITHUB_STATE, 'from_main=' + input('marker') + '\n');
`,
	"dist/post.js": `console.log('post of prep: from_pre=' + (process.env.STATE_from_pre || '-') + ', from_main=' + (process.env.STATE_from_main || '-'));
`,
}

// Wrap is a composite action (in the directory wrap of its repository) whose one step
// uses Prep with its own input marker.
var Wrap = map[string]string{
	"wrap/action.yml": `name: wrap
inputs:
  marker: {required: true}
runs:
  using: composite
  steps:
    - uses: acme/prep@v1
      with:
        marker: nested-${{ inputs.marker }}
`,
}
