package cli

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/pipeline"
)

// showPipeline prints, from its one job, what the workspace holds and what the steps see
// of the run's trigger.
const showPipeline = `
on:
  push:
  dispatch:
    inputs:
      target: { type: choice, options: [staging, production], default: staging }
jobs:
  show:
    steps:
      - run: |
          echo "seen: a=$(cat a.txt 2>/dev/null || echo absent) new=$(cat new.txt 2>/dev/null || echo absent)"
          echo "seen: sha=${GANTRY_SHA:-none} ref=${GANTRY_REF:-none} branch=${GANTRY_BRANCH:-none} tag=${GANTRY_TAG:-none} event=$GANTRY_EVENT input=${GANTRY_INPUT_TARGET:-none}"
          test "$(git rev-parse HEAD 2>/dev/null || echo none)" = "${GANTRY_SHA:-none}"
`

// gitRepo makes a git repository in a temporary directory with two commits of a.txt
// ("one", then "two") on main, and the pipeline committed in the first; it returns the
// repository's directory and the two commits.
func gitRepo(t *testing.T) (dir, first, second string) {
	t.Helper()
	dir = t.TempDir()
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "HOME="+t.TempDir(),
		"GIT_AUTHOR_NAME=Gantry Test", "GIT_AUTHOR_EMAIL=test@gantry.invalid",
		"GIT_COMMITTER_NAME=Gantry Test", "GIT_COMMITTER_EMAIL=test@gantry.invalid")
	git := func(args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
		}
		return strings.TrimSpace(out.String())
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git("init", "--quiet", "-b", "main")
	write("a.txt", "one")
	write(".gantry.yml", showPipeline)
	git("add", "a.txt", ".gantry.yml")
	git("commit", "--quiet", "-m", "first")
	first = git("rev-parse", "HEAD")
	write("a.txt", "two")
	git("commit", "--quiet", "-am", "second")
	return dir, first, git("rev-parse", "HEAD")
}

// TestRunChecksOutTheRepository: `gantry run` of a file in a git work tree checks that
// repository out into the job's workspace at HEAD, at --sha, or with --dirty at HEAD with
// the uncommitted changes to tracked files (untracked ones left out, the work tree left
// as it was), and steps see the trigger a push would give them.
func TestRunChecksOutTheRepository(t *testing.T) {
	t.Parallel()
	repo, first, second := gitRepo(t)
	file := filepath.Join(repo, ".gantry.yml")
	// The dirty case's changes are made up front, where no other case checks out
	// anything but a commit.
	if err := os.WriteFile(filepath.Join(repo, "a.txt"), []byte("three"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(repo, "new.txt"), []byte("untracked"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string // the lines of the step, joined
	}{
		{"HEAD", nil, "seen: a=two new=absent\nseen: sha=" + second + " ref=refs/heads/main branch=main tag=none event=push input=none"},
		{"an older commit by a short id", []string{"--sha", first[:10]}, "seen: a=one new=absent\nseen: sha=" + first + " ref=refs/heads/main branch=main tag=none event=push input=none"},
		{"a tag's ref", []string{"--ref", "refs/tags/v1", "--sha", first}, "seen: a=one new=absent\nseen: sha=" + first + " ref=refs/tags/v1 branch=none tag=v1 event=tag input=none"},
		{"a dispatch with its default input", []string{"--event", "dispatch"}, "seen: a=two new=absent\nseen: sha=" + second + " ref=refs/heads/main branch=main tag=none event=dispatch input=staging"},
		{"a dispatch with an input", []string{"--event", "dispatch", "--input", "target=production"}, "event=dispatch input=production"},
		{"no checkout", []string{"--no-checkout"}, "seen: a=absent new=absent\nseen: sha=none ref=none branch=none tag=none event=push input=none"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: append(append([]string{"run", "--workers", "1"}, tt.args...), file)})
			if got.code != exitOK {
				t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
			}
			if !strings.Contains(seenLines(got.stdout), tt.want) {
				t.Errorf("the step saw\n%s\nwant\n%s\nstderr:\n%s", seenLines(got.stdout), tt.want, got.stderr)
			}
		})
	}

	t.Run("dirty", func(t *testing.T) {
		t.Parallel()
		got := runCLI(t, invocation{args: []string{"run", "--workers", "1", "--dirty", file}})
		if got.code != exitOK {
			t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
		}
		seen := seenLines(got.stdout)
		if !strings.Contains(seen, "seen: a=three new=absent\nseen: sha=") || strings.Contains(seen, "sha="+second) {
			t.Errorf("the step saw\n%s\nwant a=three, no new.txt, a commit other than HEAD", seen)
		}
		if !strings.Contains(got.stderr, "HEAD with the uncommitted changes to tracked files") {
			t.Errorf("stderr does not say what is checked out:\n%s", got.stderr)
		}
		// The work tree, the index and the stash are as they were.
		cmd := exec.Command("git", "status", "--porcelain")
		cmd.Dir = repo
		out, err := cmd.Output()
		if err != nil || string(out) != " M a.txt\n?? new.txt\n" {
			t.Errorf("git status after --dirty = %q, %v", out, err)
		}
		cmd = exec.Command("git", "stash", "list")
		cmd.Dir = repo
		if out, err := cmd.Output(); err != nil || len(out) != 0 {
			t.Errorf("git stash list after --dirty = %q, %v", out, err)
		}
	})
}

// seenLines are the lines of the output that the show pipeline's step printed, without
// their job prefix.
func seenLines(stdout string) string {
	var out []string
	for _, l := range strings.Split(stdout, "\n") {
		if i := strings.Index(l, "seen: "); i >= 0 {
			out = append(out, l[i:])
		}
	}
	return strings.Join(out, "\n")
}

func TestRunCheckoutFlagsRefused(t *testing.T) {
	t.Parallel()
	repo, _, _ := gitRepo(t)
	file := filepath.Join(repo, ".gantry.yml")
	outside := filepath.Join(t.TempDir(), "p.yml")
	if err := os.WriteFile(outside, []byte(showPipeline), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown event", []string{"--event", "pushed", file}, `--event "pushed": want one of push, tag, pull_request, schedule, dispatch`},
		{"unknown input", []string{"--input", "tagret=prod", file}, "--input: input tagret: this pipeline declares no such input"},
		{"bad choice", []string{"--input", "target=prod", file}, "input target"},
		{"input without a value", []string{"--input", "target", file}, `--input "target": want NAME=VALUE`},
		{"no such commit", []string{"--sha", "no-such-rev", file}, `--sha "no-such-rev": no such commit in ` + repo},
		{"dirty with sha", []string{"--dirty", "--sha", "HEAD", file}, "--dirty runs the working tree's changes on HEAD; it does not go with --sha"},
		{"dirty without checkout", []string{"--dirty", "--no-checkout", file}, "--dirty and --no-checkout: choose one"},
		{"dirty outside a repository", []string{"--dirty", outside}, "--dirty: " + outside + " is not in a git work tree"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: append([]string{"run"}, tt.args...)})
			if got.code != exitUsage || !strings.Contains(got.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d and %q", got.code, got.stderr, exitUsage, tt.want)
			}
		})
	}

	t.Run("a repository without a commit", func(t *testing.T) {
		t.Parallel()
		empty := t.TempDir()
		if out, err := exec.Command("git", "init", "--quiet", empty).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
		file := filepath.Join(empty, "p.yml")
		if err := os.WriteFile(file, []byte(showPipeline), 0o644); err != nil {
			t.Fatal(err)
		}
		got := runCLI(t, invocation{args: []string{"run", file}})
		want := empty + " has no commit to check out yet; commit first, or run with --no-checkout"
		if got.code != exitFailure || !strings.Contains(got.stderr, want) {
			t.Errorf("exit %d, stderr %q; want %d and %q", got.code, got.stderr, exitFailure, want)
		}
		if got := runCLI(t, invocation{args: []string{"run", "--no-checkout", file}}); got.code != exitOK {
			t.Errorf("--no-checkout: exit %d\n%s%s", got.code, got.stdout, got.stderr)
		}
	})
}

// TestRunPullRequestBase: gantry run --event pull_request takes the branch of --ref for
// the request's base (github.base_ref, what on: pull_request: branches filters), and
// gives the run no branch of its own.
func TestRunPullRequestBase(t *testing.T) {
	t.Parallel()
	cfg := runConfig{Event: "pull_request", Ref: "refs/heads/release", NoCheckout: true}
	lr, err := localTrigger(t.Context(), cfg, &pipeline.Plan{})
	if err != nil {
		t.Fatal(err)
	}
	if tr := lr.trigger; tr.BaseRef != "release" || tr.HeadRef != "" || tr.Branch != "" {
		t.Errorf("trigger = %+v; want base release, no head and no branch", tr)
	}
	on := &pipeline.Plan{On: &pipeline.Triggers{PullRequest: &pipeline.PullRequestTrigger{Types: pipeline.DefaultPullRequestTypes, Branches: []string{"main"}}}}
	if err := checkWorkflowOn(on, lr.trigger); err == nil || !strings.Contains(err.Error(), "release") {
		t.Errorf("checkWorkflowOn of a pull request into release, on: pull_request: branches: [main] = %v", err)
	}
}

// TestRunRecordsTheCommit: gantry run in a work tree records the commit's message and
// author on the trigger, as a push's webhook does, so the runs list can show them.
func TestRunRecordsTheCommit(t *testing.T) {
	t.Parallel()
	dir, first, _ := gitRepo(t)
	for _, tc := range []struct{ sha, want string }{{"", "second"}, {first, "first"}} {
		cfg := runConfig{File: filepath.Join(dir, ".gantry.yml"), SHA: tc.sha, Event: "push"}
		lr, err := localTrigger(t.Context(), cfg, &pipeline.Plan{})
		if err != nil {
			t.Fatal(err)
		}
		if tr := lr.trigger; tr.Message != tc.want || tr.AuthorName != "Gantry Test" {
			t.Errorf("--sha %q: commit %q by %q, want %q by Gantry Test", tc.sha, tr.Message, tr.AuthorName, tc.want)
		}
	}
}
