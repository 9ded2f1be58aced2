package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestProjectRepoCredentialFlags: project create and update name the secrets of a private
// repository's credential, get shows their names, and a deploy key for an https remote
// is refused naming the setting.
func TestProjectRepoCredentialFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, stop := startServer(t, "--db", "sqlite://"+filepath.Join(dir, "gantry.db"), "--mirrors", filepath.Join(dir, "mirrors"))
	defer stop()
	srv := []string{"--server", base}

	create := runCLI(t, invocation{args: append([]string{"project", "create", "priv", "--repo", "https://git.example.com/o/priv.git",
		"--provider", "gitlab", "--default-branch", "main", "--repo-token-secret", "REPO_TOKEN", "--repo-token-user", "bot"}, srv...)})
	if create.code != exitOK || !hasRow(create.stdout, "repo token secret:", "REPO_TOKEN") || !hasRow(create.stdout, "repo token user:", "bot") {
		t.Fatalf("project create: exit %d\n%s%s", create.code, create.stdout, create.stderr)
	}
	bad := runCLI(t, invocation{args: append([]string{"project", "update", "priv", "--repo-ssh-key-secret", "DEPLOY_KEY"}, srv...)})
	if bad.code != exitFailure || !strings.Contains(bad.stderr, "repo_ssh_key_secret") {
		t.Errorf("deploy key for an https remote: exit %d\n%s%s", bad.code, bad.stdout, bad.stderr)
	}
	upd := runCLI(t, invocation{args: append([]string{"project", "update", "priv", "--repo", "git@git.example.com:o/priv.git",
		"--default-branch", "main", "--repo-token-secret", "", "--repo-token-user", "",
		"--repo-ssh-key-secret", "DEPLOY_KEY", "--repo-known-hosts-secret", "KNOWN_HOSTS"}, srv...)})
	if upd.code != exitOK || !hasRow(upd.stdout, "repo ssh key secret:", "DEPLOY_KEY") ||
		!hasRow(upd.stdout, "repo known hosts secret:", "KNOWN_HOSTS") || strings.Contains(upd.stdout, "REPO_TOKEN") {
		t.Errorf("project update: exit %d\n%s%s", upd.code, upd.stdout, upd.stderr)
	}
}

// hasRow says whether out has a line of key and value, however it is padded.
func hasRow(out, key, value string) bool {
	for _, l := range strings.Split(out, "\n") {
		if rest, ok := strings.CutPrefix(l, key); ok && strings.TrimSpace(rest) == value {
			return true
		}
	}
	return false
}

// TestProjectCommitStatusesFlag: --commit-statuses run makes a project report its runs'
// statuses only, get shows it, jobs sets the default back, and another word is refused
// naming the setting.
func TestProjectCommitStatusesFlag(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	base, stop := startServer(t, "--db", "sqlite://"+filepath.Join(dir, "gantry.db"), "--mirrors", filepath.Join(dir, "mirrors"))
	defer stop()
	srv := []string{"--server", base}
	create := runCLI(t, invocation{args: append([]string{"project", "create", "web", "--repo", "https://git.example.com/o/web.git",
		"--provider", "github", "--default-branch", "main", "--commit-statuses", "run"}, srv...)})
	if create.code != exitOK || !hasRow(create.stdout, "commit statuses:", "the run's only") {
		t.Fatalf("project create: exit %d\n%s%s", create.code, create.stdout, create.stderr)
	}
	upd := runCLI(t, invocation{args: append([]string{"project", "update", "web", "--commit-statuses", "jobs"}, srv...)})
	if upd.code != exitOK || strings.Contains(upd.stdout, "commit statuses:") {
		t.Errorf("project update: exit %d\n%s%s", upd.code, upd.stdout, upd.stderr)
	}
	bad := runCLI(t, invocation{args: append([]string{"project", "update", "web", "--commit-statuses", "some"}, srv...)})
	if bad.code != exitFailure || !strings.Contains(bad.stderr, "commit_statuses") {
		t.Errorf("--commit-statuses some: exit %d\n%s%s", bad.code, bad.stdout, bad.stderr)
	}
}
