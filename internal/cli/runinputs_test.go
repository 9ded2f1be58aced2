package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunInputsReachConditions: `gantry run --input` gives the run's trigger its inputs,
// as a dispatch does, so if: reads them typed and ${{ inputs.X }} is put in.
func TestRunInputsReachConditions(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "p.yml")
	const src = `
on:
  dispatch:
    inputs:
      deploy: { type: boolean }
      target: { type: string, default: eu }
jobs:
  deploy:
    if: inputs.deploy == true && startsWith(ref, 'refs/heads/')
    steps: [ { name: "to ${{ inputs.target }}", run: "echo seen: ${{ inputs.target }} ${{ branch }}" } ]
`
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, want string
		args       []string
	}{
		{"runs", "seen: us main", []string{"--input", "deploy=true", "--input", "target=us"}},
		{"default target", "seen: eu main", []string{"--input", "deploy=TRUE"}},
		{"skipped", "jobs: 1 skipped", []string{"--input", "deploy=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"run", "--workers", "1", "--no-checkout", "--event", "dispatch", "--ref", "refs/heads/main"}, tt.args...)
			got := runCLI(t, invocation{args: append(args, file)})
			if got.code != exitOK || !strings.Contains(got.stdout, tt.want) || (tt.name == "skipped") == strings.Contains(got.stdout, "seen:") {
				t.Errorf("exit %d, stdout:\n%s\nwant %q; stderr:\n%s", got.code, got.stdout, tt.want, got.stderr)
			}
		})
	}
}
