package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestRunShowsClaimedName: gantry run of a workflow whose job's name: reads what the job
// it needs left prefixes that job's log lines with the name as it came out, and its
// environment's url is what its step printed.
func TestRunShowsClaimedName(t *testing.T) {
	t.Parallel()
	repo := writeRepo(t, map[string]string{".github/workflows/release.yml": `on: push
jobs:
  prepare:
    runs-on: ubuntu-latest
    outputs:
      version: ${{ steps.v.outputs.version }}
    steps:
      - id: v
        run: echo "version=1.2.3" >> "$GITHUB_OUTPUT"
  publish:
    needs: prepare
    name: Publish ${{ needs.prepare.outputs.version }}
    runs-on: ubuntu-latest
    environment:
      name: pages
      url: ${{ steps.deployment.outputs.page_url }}
    steps:
      - id: deployment
        run: |
          echo "publishing now"
          echo "page_url=https://example.org/v1.2.3/" >> "$GITHUB_OUTPUT"
`})
	got := runCLI(t, invocation{args: []string{"run", "--no-checkout", "--mirrors", t.TempDir(), filepath.Join(repo, ".github/workflows/release.yml")}})
	if got.code != exitOK {
		t.Fatalf("gantry run: exit %d\n%s%s", got.code, got.stdout, got.stderr)
	}
	var line string
	for l := range strings.SplitSeq(got.stdout, "\n") {
		if strings.HasSuffix(l, "publishing now") {
			line = l
		}
	}
	if !strings.HasPrefix(line, "Publish 1.2.3") {
		t.Errorf("publish's log line is %q, want it under its name as evaluated:\n%s", line, got.stdout)
	}
}
