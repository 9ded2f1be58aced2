package cli

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestProjectCommands: project create, list, get, update and delete against a real
// server, a push webhook that makes a run of an invalid file, and runs get showing why.
func TestProjectCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	mirrors := filepath.Join(dir, "mirrors-here")
	base, stop := startServer(t, "--db", "sqlite://"+filepath.Join(dir, "gantry.db"), "--mirrors", mirrors)
	defer stop()
	srv := []string{"--server", base}

	// A bare repository with an invalid pipeline file on main, pushed with git.
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@gantry.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@gantry.invalid"}
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	bare, work := filepath.Join(dir, "app.git"), filepath.Join(home, "work")
	git("", "init", "--quiet", "--bare", "-b", "main", bare)
	git("", "init", "--quiet", "-b", "main", work)
	if err := os.WriteFile(filepath.Join(work, ".gantry.yml"), []byte("jobs:\n  a:\n    needs: [nope]\n    steps:\n      - run: make\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	git(work, "add", "-A")
	git(work, "commit", "--quiet", "-m", "x")
	sha := git(work, "rev-parse", "HEAD")
	git(work, "push", "--quiet", bare, "HEAD:refs/heads/main")

	secretFile := filepath.Join(dir, "hook.secret")
	if err := os.WriteFile(secretFile, []byte("a-long-webhook-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	create := runCLI(t, invocation{args: append([]string{"project", "create", "app", "--repo", "file://" + bare,
		"--provider", "github", "--webhook-secret-file", secretFile}, srv...)})
	if create.code != exitOK || !strings.HasPrefix(create.stdout, "project app created\n") ||
		!strings.Contains(create.stdout, "webhook url:     "+base+"/api/v1/hooks/github/app\n") ||
		!strings.Contains(create.stdout, "default branch:  main\n") ||
		!strings.Contains(create.stdout, "webhook secret:  the one in "+secretFile+" (not shown)\n") ||
		strings.Contains(create.stdout+create.stderr, "a-long-webhook-secret") {
		t.Fatalf("project create: exit %d\n%s%s", create.code, create.stdout, create.stderr)
	}
	// Nor in JSON, nor when an update sets it from a file; a generated one is shown once.
	other := runCLI(t, invocation{args: append([]string{"project", "create", "other", "--repo", "file://" + bare, "--default-branch", "main",
		"--webhook-secret-file", secretFile, "--json"}, srv...)})
	if other.code != exitOK || strings.Contains(other.stdout+other.stderr, "a-long-webhook-secret") || !strings.Contains(other.stdout, `"webhook_secret_set":true`) {
		t.Errorf("project create --json --webhook-secret-file: exit %d\n%s%s", other.code, other.stdout, other.stderr)
	}
	if got := runCLI(t, invocation{args: append([]string{"project", "update", "other", "--webhook-secret-file", secretFile}, srv...)}); got.code != exitOK ||
		strings.Contains(got.stdout+got.stderr, "a-long-webhook-secret") || !strings.Contains(got.stdout, "(not shown)") {
		t.Errorf("project update --webhook-secret-file: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	if got := runCLI(t, invocation{args: append([]string{"project", "update", "other", "--rotate-webhook-secret"}, srv...)}); got.code != exitOK ||
		!strings.Contains(got.stdout, "(shown once: give it to the forge now)") {
		t.Errorf("project update --rotate-webhook-secret: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	if got := runCLI(t, invocation{args: append([]string{"project", "delete", "other"}, srv...)}); got.code != exitOK {
		t.Fatalf("project delete other: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	if entries, err := os.ReadDir(mirrors); err != nil || len(entries) == 0 {
		t.Errorf("--mirrors %s holds %v, %v; want the repository's mirror", mirrors, entries, err)
	}
	if fi, err := os.Stat(mirrors); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("--mirrors %s: %v, %v; want a directory only its owner reads (the projects' source)", mirrors, fi.Mode(), err)
	}
	if got := runCLI(t, invocation{args: append([]string{"project", "create", "x"}, srv...)}); got.code != exitUsage {
		t.Errorf("project create without --repo: exit %d, want usage", got.code)
	}
	if got := runCLI(t, invocation{args: append([]string{"project", "create", "../App", "--repo", "file://" + bare, "--default-branch", "main"}, srv...)}); got.code != exitFailure ||
		!strings.Contains(got.stderr, "lower-case letters a-z, digits") {
		t.Errorf("project create ../App: exit %d, want 1 saying the rule:\n%s", got.code, got.stderr)
	}

	list := runCLI(t, invocation{args: append([]string{"project", "list"}, srv...)})
	rows := strings.Split(strings.TrimSuffix(list.stdout, "\n"), "\n")
	if list.code != exitOK || len(rows) != 2 || strings.Join(strings.Fields(rows[0]), " ") != "NAME PROVIDER REPOSITORY BRANCH PIPELINE" ||
		strings.Join(strings.Fields(rows[1]), " ") != "app github file://"+bare+" main .gantry.yml" {
		t.Errorf("project list: exit %d\n%q", list.code, list.stdout)
	}
	get := runCLI(t, invocation{args: append([]string{"project", "get", "app", "--json"}, srv...)})
	var p projectView
	if err := json.Unmarshal([]byte(get.stdout), &p); err != nil || p.Name != "app" || !p.WebhookSecretSet || strings.Contains(get.stdout, "a-long-webhook-secret") {
		t.Errorf("project get --json: %v\n%s", err, get.stdout)
	}
	upd := runCLI(t, invocation{args: append([]string{"project", "update", "app", "--pipeline", "ci/gantry.yml"}, srv...)})
	if upd.code != exitOK || !strings.Contains(upd.stdout, "pipeline:        ci/gantry.yml\n") || strings.Contains(upd.stdout, "webhook secret") {
		t.Errorf("project update: exit %d\n%s%s", upd.code, upd.stdout, upd.stderr)
	}
	if got := runCLI(t, invocation{args: append([]string{"project", "update", "app"}, srv...)}); got.code != exitUsage {
		t.Errorf("project update with no flag: exit %d, want usage", got.code)
	}
	bad := runCLI(t, invocation{args: append([]string{"project", "update", "app", "--provider", "svn"}, srv...)})
	if bad.code != exitFailure || !strings.Contains(bad.stderr, "provider") {
		t.Errorf("project update --provider svn: exit %d\n%s", bad.code, bad.stderr)
	}
	runCLI(t, invocation{args: append([]string{"project", "update", "app", "--pipeline", ".gantry.yml"}, srv...)})

	// The quota: set changes only the flags given, refuses values out of range before
	// asking the server, and get shows what is set.
	set := runCLI(t, invocation{args: append([]string{"project", "set", "app", "--max-concurrent-jobs", "3", "--weight", "2"}, srv...)})
	if set.code != exitOK || !strings.HasPrefix(set.stdout, "project app updated\n") ||
		!strings.Contains(set.stdout, "max concurrent jobs:  3\n") || !strings.Contains(set.stdout, "fair-share weight:    2\n") {
		t.Errorf("project set: exit %d\n%s%s", set.code, set.stdout, set.stderr)
	}
	runCLI(t, invocation{args: append([]string{"project", "set", "app", "--weight", "5"}, srv...)})
	get = runCLI(t, invocation{args: append([]string{"project", "get", "app", "--json"}, srv...)})
	if err := json.Unmarshal([]byte(get.stdout), &p); err != nil || p.MaxConcurrentJobs != 3 || p.FairWeight != 5 {
		t.Errorf("project get after set --weight 5: %v\n%s", err, get.stdout)
	}
	for _, args := range [][]string{{}, {"--weight", "0"}, {"--weight", "101"}, {"--max-concurrent-jobs", "-1"}} {
		if got := runCLI(t, invocation{args: append(append([]string{"project", "set", "app"}, args...), srv...)}); got.code != exitUsage {
			t.Errorf("project set %v: exit %d, want usage\n%s", args, got.code, got.stderr)
		}
	}

	// A signed push of the invalid file makes a failed run; runs get says why.
	body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": strings.Repeat("0", 40), "after": sha,
		"repository": map[string]any{"full_name": "o/app"}, "sender": map[string]any{"login": "mona"}, "commits": []any{}})
	mac := hmac.New(sha256.New, []byte("a-long-webhook-secret"))
	mac.Write(body)
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/hooks/github/app", strings.NewReader(string(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-GitHub-Delivery", "1")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	var hook struct{ Runs []string }
	if res.StatusCode != http.StatusAccepted || json.Unmarshal(raw, &hook) != nil || len(hook.Runs) != 1 {
		t.Fatalf("hook: %d %s", res.StatusCode, raw)
	}
	tree := runCLI(t, invocation{args: append([]string{"runs", "get", hook.Runs[0]}, srv...)})
	if tree.code != exitOK || !strings.Contains(tree.stdout, "failed · 0/0 jobs done") ||
		!strings.Contains(tree.stdout, "the pipeline file is invalid:\n  jobs.a.needs[0] (line 3, column 13): ") {
		t.Errorf("runs get of an invalid file's run: exit %d\n%s%s", tree.code, tree.stdout, tree.stderr)
	}

	del := runCLI(t, invocation{args: append([]string{"project", "delete", "app"}, srv...)})
	if del.code != exitFailure || !strings.Contains(del.stderr, "1 runs belong to it") {
		t.Errorf("project delete with a run: exit %d\n%s", del.code, del.stderr)
	}
}

// TestPushRunsAtThatCommit: a signed push webhook makes a run whose job, on a real worker,
// sees the repository at the pushed commit, not at the branch's tip.
func TestPushRunsAtThatCommit(t *testing.T) {
	t.Parallel()
	base := startCluster(t)
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@gantry.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@gantry.invalid"}
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return strings.TrimSpace(string(out))
	}
	bare, work := filepath.Join(t.TempDir(), "app.git"), filepath.Join(home, "work")
	git("", "init", "--quiet", "--bare", "-b", "main", bare)
	git("", "init", "--quiet", "-b", "main", work)
	commit := func(marker string) string {
		t.Helper()
		files := map[string]string{
			".gantry.yml": "name: at-sha\njobs:\n  check:\n    steps:\n      - run: test \"$(cat marker.txt)\" = one && test -n \"$GANTRY_SHA\"\n",
			"marker.txt":  marker + "\n",
		}
		for name, content := range files {
			if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		git(work, "add", "-A")
		git(work, "commit", "--quiet", "-m", marker)
		git(work, "push", "--quiet", bare, "HEAD:refs/heads/main")
		return git(work, "rev-parse", "HEAD")
	}
	first, second := commit("one"), commit("two")

	created := runCLI(t, invocation{args: []string{"project", "create", "app", "--repo", "file://" + bare, "--provider", "github", "--json", "--server", base}})
	var p projectView
	if err := json.Unmarshal([]byte(created.stdout), &p); err != nil || p.WebhookSecret == "" {
		t.Fatalf("project create --json: exit %d, %v\n%s%s", created.code, err, created.stdout, created.stderr)
	}
	push := func(delivery, before, after string) string {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"ref": "refs/heads/main", "before": before, "after": after,
			"repository": map[string]any{"full_name": "o/app"}, "sender": map[string]any{"login": "mona"}, "commits": []any{}})
		mac := hmac.New(sha256.New, []byte(p.WebhookSecret))
		mac.Write(body)
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/hooks/github/app", strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("X-GitHub-Delivery", delivery)
		req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		raw, _ := io.ReadAll(res.Body)
		var hook struct{ Runs []string }
		if res.StatusCode != http.StatusAccepted || json.Unmarshal(raw, &hook) != nil || len(hook.Runs) != 1 {
			t.Fatalf("hook: %d %s", res.StatusCode, raw)
		}
		return hook.Runs[0]
	}
	// The older push, delivered after the branch moved on, sees its own marker.
	old := waitRun(t, base, push("1", strings.Repeat("0", 40), first), func(r runDetails) bool { return runTerminal(r.Status) })
	if old.Status != "success" || old.Trigger.SHA != first {
		t.Errorf("run of the first commit = %s at %s, want success at %s", old.Status, old.Trigger.SHA, first)
	}
	// The newer one sees "two", so the same check fails there: the checkout is not vacuous.
	newer := waitRun(t, base, push("2", first, second), func(r runDetails) bool { return runTerminal(r.Status) })
	if newer.Status != "failed" {
		t.Errorf("run of the second commit = %s, want failed (its marker is two)", newer.Status)
	}
}
