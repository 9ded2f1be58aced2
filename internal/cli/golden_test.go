package cli

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/golden from the current output instead of comparing")

// examplesDir holds the example pipelines shipped with the repository.
var examplesDir = filepath.Join("..", "..", "examples")

// TestGoldenPlans runs `gantry plan` in every format over every example pipeline with the
// real compiler and compares the output with testdata/golden/<example>.<txt|json|dot>.
// After a deliberate change, regenerate with `go test ./internal/cli -run TestGoldenPlans
// -update` and review the diff like code.
func TestGoldenPlans(t *testing.T) {
	t.Parallel()
	examples, err := os.ReadDir(examplesDir)
	if err != nil {
		t.Fatal(err)
	}
	formats := []struct{ flag, ext string }{{"text", "txt"}, {"json", "json"}, {"dot", "dot"}}
	seen := 0
	for _, e := range examples {
		if e.IsDir() || !(strings.HasSuffix(e.Name(), ".yml") || strings.HasSuffix(e.Name(), ".json")) {
			continue
		}
		seen++
		for _, f := range formats {
			name := e.Name() + "." + f.ext
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				got := runCLI(t, invocation{args: []string{"plan", "--format", f.flag, filepath.Join(examplesDir, e.Name())}})
				if got.code != exitOK {
					t.Fatalf("exit code = %d, want 0; stdout:\n%s\nstderr:\n%s", got.code, got.stdout, got.stderr)
				}
				checkGolden(t, filepath.Join("testdata", "golden", name), got.stdout)
			})
		}
	}
	if seen == 0 {
		t.Fatalf("no example pipelines in %s", examplesDir)
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden file: %v (create it with -update and review it)", err)
	}
	if got != string(want) {
		t.Errorf("output differs from %s (rerun with -update after checking the change is intended)\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
