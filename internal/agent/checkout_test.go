package agent

import (
	"bytes"
	"context"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/gantry-ci/gantry/internal/executor"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// testRepo is a bare repository on disk and a work clone that pushes to it, made with the
// git binary.
type testRepo struct {
	t          *testing.T
	bare, work string
	env        []string
}

func newTestRepo(t *testing.T) *testRepo {
	t.Helper()
	home := t.TempDir()
	r := &testRepo{t: t, bare: filepath.Join(t.TempDir(), "app.git"), work: filepath.Join(home, "work"), env: []string{
		"PATH=" + os.Getenv("PATH"), "HOME=" + home, "LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Gantry Test", "GIT_AUTHOR_EMAIL=test@gantry.invalid",
		"GIT_COMMITTER_NAME=Gantry Test", "GIT_COMMITTER_EMAIL=test@gantry.invalid",
	}}
	r.git("", "init", "--quiet", "--bare", "-b", "main", r.bare)
	r.git("", "init", "--quiet", "-b", "main", r.work)
	return r
}

func (r *testRepo) url() string { return "file://" + r.bare }

func (r *testRepo) git(dir string, args ...string) string {
	r.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, r.env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return strings.TrimSpace(out.String())
}

// commit writes files (a value "-> target" makes a symbolic link), commits and pushes to
// main, and returns the commit id.
func (r *testRepo) commit(msg string, files map[string]string) string {
	r.t.Helper()
	for name, content := range files {
		p := filepath.Join(r.work, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			r.t.Fatal(err)
		}
		var err error
		if target, ok := strings.CutPrefix(content, "-> "); ok {
			err = os.Symlink(target, p)
		} else {
			err = os.WriteFile(p, []byte(content), 0o644)
		}
		if err != nil {
			r.t.Fatal(err)
		}
		r.git(r.work, "add", "--", name)
	}
	r.git(r.work, "commit", "--quiet", "-m", msg)
	r.git(r.work, "push", "--quiet", r.bare, "HEAD:refs/heads/main")
	return r.git(r.work, "rev-parse", "HEAD")
}

// submitTriggered creates a run of yaml whose trigger is tr.
func (b *bundle) submitTriggered(t *testing.T, yaml string, tr store.Trigger) uuid.UUID {
	t.Helper()
	p, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, _, _, err := b.st.CreateRun(t.Context(), store.CreateRunParams{Plan: p, Trigger: tr})
	if err != nil {
		t.Fatal(err)
	}
	return run.ID
}

// TestCheckout: a run whose trigger names a repository and a commit gets the files of
// exactly that commit (not the newer branch tip) in every job's workspace before the
// first step, unless a job says checkout: false; steps see the trigger in GANTRY_*;
// artifacts of needs land beside the checkout and win a clash; a commit the repository
// does not have fails the job before its first step, saying so.
func TestCheckout(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.start(t, 4)
	repo := newTestRepo(t)
	old := repo.commit("first", map[string]string{"a.txt": "one", "lib/util.sh": "echo util", "dist": "-> " + t.TempDir()})
	tip := repo.commit("second", map[string]string{"a.txt": "two", "b.txt": "new"})
	tr := store.Trigger{Ref: "refs/heads/main", Branch: "main", SHA: old, Event: "push", Repository: "acme/app", CloneURL: repo.url()}

	t.Run("every job gets the commit", func(t *testing.T) {
		t.Parallel()
		run := b.submitTriggered(t, `
jobs:
  build:
    steps:
      - run: test "$(cat a.txt)" = one && test ! -e b.txt && test "$(cat lib/util.sh)" = "echo util"
      - run: test "$(git rev-parse HEAD)" = "$GANTRY_SHA" && git log --format=%s | grep -qx first && ! git log --format=%s | grep -qx second
      - run: |
          test "$GANTRY_SHA" = `+old+` && test "$GANTRY_REF" = refs/heads/main && test "$GANTRY_BRANCH" = main
          test "$GANTRY_EVENT" = push && test "$GANTRY_REPOSITORY" = acme/app
          test -z "${GANTRY_TAG+set}" && test -z "${GANTRY_PR_NUMBER+set}"
          case "$GANTRY_WORKSPACE" in /*) ;; *) exit 9 ;; esac
          test "$GANTRY_WORKSPACE" = "$PWD"
      - run: echo from-build > a.txt && mkdir -p out && echo built > out/result.txt
    artifacts: [a.txt, out/result.txt]
  after:
    needs: [build]
    steps:
      - run: test "$(cat a.txt)" = from-build && test "$(cat out/result.txt)" = built && test "$(cat lib/util.sh)" = "echo util"
  bare:
    checkout: false
    steps:
      - run: test -z "$(ls -A)" && test "$GANTRY_SHA" = `+old+`
  nested:
    checkout: {path: src/app, depth: 1}
    steps:
      - run: test "$(cat src/app/a.txt)" = one && test "$(git -C src/app rev-list --count HEAD)" = 1
`, tr)
		b.wantSuccess(t, run)
		for _, key := range []string{"build", "after", "nested"} {
			if log := b.jobLog(t, run, key); !strings.Contains(log, "checkout "+repo.url()+" at "+old+" (") || !strings.Contains(log, " ms, mirror ") {
				t.Errorf("%s's log does not tell the checkout:\n%s", key, log)
			}
		}
		if log := b.jobLog(t, run, "after"); !strings.Contains(log, "artifacts: a.txt of job build replaces the checked-out file of that name") {
			t.Errorf("after's log does not say the artifact replaced a checked-out file:\n%s", log)
		}
		if log := b.jobLog(t, run, "bare"); strings.Contains(log, "checkout ") {
			t.Errorf("checkout: false checked out:\n%s", log)
		}
	})

	t.Run("pull request variables", func(t *testing.T) {
		t.Parallel()
		pr := store.Trigger{Ref: "refs/pull/7/head", SHA: tip, Event: "pull_request", PRNumber: 7, CloneURL: repo.url()}
		run := b.submitTriggered(t, `
jobs:
  check:
    steps:
      - run: test "$(cat b.txt)" = new && test "$GANTRY_PR_NUMBER" = 7 && test "$GANTRY_EVENT" = pull_request
      - run: test -z "${GANTRY_BRANCH+set}" && test "$GANTRY_REPOSITORY" = "`+repo.url()+`"
`, pr)
		b.wantSuccess(t, run)
	})

	t.Run("a commit the repository lacks fails before the first step", func(t *testing.T) {
		t.Parallel()
		bad := tr
		bad.SHA = strings.Repeat("0123456789", 4)
		marker := filepath.Join(t.TempDir(), "ran")
		run := b.submitTriggered(t, "jobs:\n  build:\n    steps:\n      - run: touch "+marker+"\n", bad)
		if r := b.waitRun(t, run); r.Status != store.RunFailed {
			t.Fatalf("run %s, want failed", r.Status)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Error("the step ran after a failed checkout")
		}
		jobs, err := b.st.ListJobs(t.Context(), run)
		if err != nil {
			t.Fatal(err)
		}
		if jobs[0].FailureKind != store.FailureKind(pipeline.FailureExit) {
			t.Errorf("failure kind %q, want failure", jobs[0].FailureKind)
		}
		log := b.jobLog(t, run, "build")
		for _, w := range []string{"checkout " + repo.url() + " at " + bad.SHA + " failed", "the repository has no commit " + bad.SHA} {
			if !strings.Contains(log, w) {
				t.Errorf("log does not say %q:\n%s", w, log)
			}
		}
	})

	t.Run("an artifact is not written through a checked-out link", func(t *testing.T) {
		t.Parallel()
		run := b.submitTriggered(t, `
jobs:
  make:
    checkout: false
    steps:
      - run: mkdir dist && echo payload > dist/x
    artifacts: [dist/x]
  use:
    needs: [make]
    steps:
      - run: "true"
`, tr)
		if r := b.waitRun(t, run); r.Status != store.RunFailed {
			t.Fatalf("run %s, want failed", r.Status)
		}
		if log := b.jobLog(t, run, "use"); !strings.Contains(log, "dist in the workspace is a symbolic link; an artifact is not written through it") {
			t.Errorf("use's log does not refuse the link:\n%s", log)
		}
	})
}

// TestCheckoutAsStepUser: with steps run as an unprivileged user, the checkout is that
// user's, and git works in it (reading the objects the workspace borrows from the
// worker's mirror cache).
func TestCheckoutAsStepUser(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Fatal("running steps as another user needs a root worker: run the tests as root")
	}
	u, err := executor.LookupUser("nobody")
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	for _, d := range []string{filepath.Dir(work), work} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	b := setup(t)
	a := New(Config{Server: b.url, Name: "as-nobody", MaxJobs: 1, Executor: executor.Shell{User: u}, WorkDir: work,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	drain, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(drain, drain) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	repo := newTestRepo(t)
	sha := repo.commit("first", map[string]string{"a.txt": "one", "dir/b.txt": "two"})
	run := b.submitTriggered(t, `
jobs:
  who:
    steps:
      - run: test "$(id -u)" = `+strconv.Itoa(int(u.UID))+` && test -O a.txt && test -O dir/b.txt && test -O .git/HEAD
      - run: echo more >> a.txt && git status --porcelain | grep -q ' M a.txt' && git show HEAD:dir/b.txt | grep -qx two
`, store.Trigger{SHA: sha, Event: "push", CloneURL: repo.url()})
	b.wantSuccess(t, run)
	// The workspace got copies of the objects: giving it to the step user gave it none of
	// the mirror's files, which other jobs read.
	err = filepath.WalkDir(filepath.Join(work, "mirrors"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 {
			t.Errorf("%s in the mirror cache belongs to uid %d, want root's", p, st.Uid)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestCheckoutMirrorsDir: the mirror cache is WorkDir/mirrors, or Config.Mirrors when set,
// and a second job of the same commit finds the mirror warm.
func TestCheckoutMirrorsDir(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mirrors := filepath.Join(t.TempDir(), "cache")
	b.startWith(t, Config{Name: "m", MaxJobs: 1, Mirrors: mirrors})
	repo := newTestRepo(t)
	sha := repo.commit("first", map[string]string{"a.txt": "one"})
	run := b.submitTriggered(t, "jobs:\n  one: {steps: [{run: test -f a.txt}]}\n  two: {needs: [one], steps: [{run: test -f a.txt}]}\n",
		store.Trigger{SHA: sha, CloneURL: repo.url()})
	b.wantSuccess(t, run)
	if got, _ := filepath.Glob(filepath.Join(mirrors, "*.git")); len(got) != 1 {
		t.Errorf("mirrors in %s: %v, want one", mirrors, got)
	}
	if log := b.jobLog(t, run, "one"); !strings.Contains(log, "mirror cold)") {
		t.Errorf("the first checkout did not find the mirror cold:\n%s", log)
	}
	if log := b.jobLog(t, run, "two"); !strings.Contains(log, "mirror warm)") {
		t.Errorf("the second checkout did not find the mirror warm:\n%s", log)
	}
}

// TestCheckoutRefusesAForeignCache: a mirror cache other users may write to is refused,
// failing the job before its first step, rather than trusted with the source of its jobs.
func TestCheckoutRefusesAForeignCache(t *testing.T) {
	t.Parallel()
	b := setup(t)
	mirrors := filepath.Join(t.TempDir(), "cache")
	if err := os.Mkdir(mirrors, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(mirrors, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	b.startWith(t, Config{Name: "m", MaxJobs: 1, Mirrors: mirrors})
	repo := newTestRepo(t)
	sha := repo.commit("first", map[string]string{"a.txt": "one"})
	run := b.submitTriggered(t, "jobs:\n  one: {steps: [{run: 'true'}]}\n", store.Trigger{SHA: sha, CloneURL: repo.url()})
	if r := b.waitRun(t, run); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	if log := b.jobLog(t, run, "one"); !strings.Contains(log, "can be written by other users (mode 777)") {
		t.Errorf("log does not refuse the cache:\n%s", log)
	}
}

// TestCheckoutInSandbox: the sandbox shows a step its workspace only, not the mirror
// cache, so the checkout carries its own objects and git works in it there, as the
// sandbox's unprivileged user (a root worker's steps run as nobody).
func TestCheckoutInSandbox(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("the sandbox executor needs bubblewrap (bwrap): make deps installs it")
	}
	b := setup(t)
	// A work dir the step user may pass through, as the worker's own checks want.
	work := t.TempDir()
	for _, dir := range []string{filepath.Dir(work), work} {
		if err := os.Chmod(dir, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	b.startWith(t, Config{Name: "sandboxed", MaxJobs: 1, Executor: executor.Sandbox{}, WorkDir: work})
	repo := newTestRepo(t)
	repo.commit("first", map[string]string{"a.txt": "one"})
	sha := repo.commit("second", map[string]string{"a.txt": "two"})
	run := b.submitTriggered(t, `
jobs:
  boxed:
    steps:
      - run: test "$(cat a.txt)" = two && test "$(git log --format=%s | tr '\n' ' ')" = "second first " && test -z "$(git status --porcelain)"
      - run: test ! -s .git/objects/info/alternates
`, store.Trigger{SHA: sha, CloneURL: repo.url()})
	b.wantSuccess(t, run)
}

// TestWorkspaceIsAbsolute: a worker given a relative work directory still tells its steps
// an absolute GANTRY_WORKSPACE, which stays right after a step changes directory.
func TestWorkspaceIsAbsolute(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	work, err := filepath.Rel(cwd, t.TempDir())
	if err != nil || filepath.IsAbs(work) {
		t.Fatalf("no relative path to the temp dir: %q, %v", work, err)
	}
	a := New(Config{Server: b.url, Name: "relative", MaxJobs: 1, WorkDir: work,
		Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
	drain, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(drain, drain) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("agent: %v", err)
		}
	})
	run := b.submit(t, "jobs:\n  a: {steps: [{run: 'case \"$GANTRY_WORKSPACE\" in /*) ;; *) exit 7 ;; esac; test \"$GANTRY_WORKSPACE\" = \"$(pwd -P)\"'}]}\n")
	b.wantSuccess(t, run)
}
