// Package sourcetest builds git repositories with the git binary: of a given size for the
// benchmarks of the source layer and for `gantry bench`, and small ones tests push to.
package sourcetest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// Env is the environment git runs in for the repositories built here and by tests: no
// system or user configuration (a developer's hooks or signing settings would change what
// is measured), no prompts, and a fixed identity, with home as HOME.
func Env(home string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + home,
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_AUTHOR_NAME=Gantry Bench", "GIT_AUTHOR_EMAIL=bench@gantry.invalid",
		"GIT_COMMITTER_NAME=Gantry Bench", "GIT_COMMITTER_EMAIL=bench@gantry.invalid",
	}
}

// BigRepo makes a bare repository at bare (which must not exist yet) whose branch main
// has commits commits, each adding filesPerCommit files of about 200 bytes (spread over
// two levels of directories, 50 x 20, as a source tree is) and changing README; extra
// files (path -> content) are added by the last commit. It writes them with git
// fast-import, far quicker than committing one by one, and returns main's head commit.
// 1,000 commits of 10 files each make the 10,000-file, 1,000-commit repository the
// checkout benchmarks are measured on.
func BigRepo(ctx context.Context, bare string, commits, filesPerCommit int, extra map[string]string) (string, error) {
	if commits < 1 || filesPerCommit < 0 {
		return "", fmt.Errorf("build repository %s: %d commits of %d files: need at least one commit", bare, commits, filesPerCommit)
	}
	if _, err := os.Stat(bare); err == nil {
		return "", fmt.Errorf("build repository %s: it exists already", bare)
	}
	env := Env(bare)
	if out, err := git(ctx, env, "init", "--quiet", "--bare", "-b", "main", bare); err != nil {
		return "", fmt.Errorf("build repository %s: %w%s", bare, err, out)
	}
	imp := exec.CommandContext(ctx, "git", "-C", bare, "fast-import", "--quiet")
	imp.Env = env
	var stderr bytes.Buffer
	imp.Stderr = &stderr
	in, err := imp.StdinPipe()
	if err != nil {
		return "", fmt.Errorf("build repository %s: %w", bare, err)
	}
	if err := imp.Start(); err != nil {
		return "", fmt.Errorf("build repository %s: start git fast-import: %w", bare, err)
	}
	w := bufio.NewWriterSize(in, 1<<20)
	werr := writeHistory(w, commits, filesPerCommit, extra)
	if werr == nil {
		werr = w.Flush()
	}
	_ = in.Close()
	if err := imp.Wait(); err != nil || werr != nil {
		return "", fmt.Errorf("build repository %s: git fast-import: %v %v: %s", bare, err, werr, strings.TrimSpace(stderr.String()))
	}
	out, err := git(ctx, env, "-C", bare, "rev-parse", "refs/heads/main")
	if err != nil {
		return "", fmt.Errorf("build repository %s: %w%s", bare, err, out)
	}
	return strings.TrimSpace(out), nil
}

// writeHistory writes the fast-import stream of BigRepo's history.
func writeHistory(w *bufio.Writer, commits, filesPerCommit int, extra map[string]string) error {
	paths := make([]string, 0, len(extra))
	for p := range extra {
		paths = append(paths, p)
	}
	slices.Sort(paths) // the same input makes the same commits
	n := 0
	for c := range commits {
		msg := "commit " + strconv.Itoa(c) + "\n"
		// Fixed times, so that the same sizes make the same commit ids.
		fmt.Fprintf(w, "commit refs/heads/main\ncommitter Bench <bench@gantry.invalid> %d +0000\ndata %d\n%s", 1700000000+c, len(msg), msg)
		for range filesPerCommit {
			content := fmt.Sprintf("file %d\n%0200d\n", n, n)
			fmt.Fprintf(w, "M 100644 inline d%02d/s%02d/f%05d.txt\ndata %d\n%s\n", n%50, (n/50)%20, n, len(content), content)
			n++
		}
		content := "changed in " + strconv.Itoa(c) + "\n"
		fmt.Fprintf(w, "M 100644 inline README\ndata %d\n%s\n", len(content), content)
		if c == commits-1 {
			for _, p := range paths {
				fmt.Fprintf(w, "M 100644 inline %s\ndata %d\n%s\n", p, len(extra[p]), extra[p])
			}
		}
	}
	return nil
}

// git runs git with env and returns its output; on failure the output follows a newline,
// for the error message.
func git(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "\n" + string(out), fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
	}
	return string(out), nil
}
