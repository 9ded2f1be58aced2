package pipeline

import "testing"

func TestMatchArtifactPath(t *testing.T) {
	for _, tc := range []struct {
		pattern, name string
		want          bool
	}{
		{"bin/app", "bin/app", true},
		{"bin/app", "bin/app2", false},
		{"bin/*", "bin/app", true},
		{"bin/*", "bin/sub/app", false},
		{"*.xml", "report.xml", true},
		{"*.xml", "dir/report.xml", false},
		{"**/*.xml", "report.xml", true},
		{"**/*.xml", "a/b/c/report.xml", true},
		{"reports/**/*.xml", "reports/x.xml", true},
		{"reports/**/*.xml", "reports/a/b/x.xml", true},
		{"reports/**/*.xml", "other/a/x.xml", false},
		{"reports/**", "reports/a/b", true},
		{"reports/**", "reports", true},
		{"**/**/x", "a/x", true},
		{"out/app?", "out/app1", true},
		{"out/[ab]", "out/c", false},
		{"out/[", "out/[", false},
		{"", "x", false},
	} {
		if got := MatchArtifactPath(tc.pattern, tc.name); got != tc.want {
			t.Errorf("MatchArtifactPath(%q, %q) = %v, want %v", tc.pattern, tc.name, got, tc.want)
		}
	}
}

func TestCheckArtifactName(t *testing.T) {
	for _, ok := range []string{"app", "out/app", "a/b/c.tar.gz", ".hidden", "dir/.env"} {
		if msg := CheckArtifactName(ok); msg != "" {
			t.Errorf("CheckArtifactName(%q) = %q, want it accepted", ok, msg)
		}
	}
	long := make([]byte, MaxArtifactName+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, bad := range []string{"", "/etc/passwd", "../x", "a/../../x", "a/../b", "./a", "a//b", "a/", ".", "..", `a\b`, "a\x00b", string(long)} {
		if msg := CheckArtifactName(bad); msg == "" {
			t.Errorf("CheckArtifactName(%q) accepted it", bad)
		}
	}
}

// TestNoInputs checks that a job is told it has nothing to fetch exactly when none of
// the jobs it needs keeps artifacts.
func TestNoInputs(t *testing.T) {
	t.Parallel()
	const src = `
name: inputs
jobs:
  build: {steps: [{run: make}], artifacts: {paths: [bin/app]}}
  lint: {steps: [{run: make lint}]}
  test:
    matrix: {shard: [1, 2]}
    steps: [{run: make test}]
  package: {needs: [build, lint], steps: [{run: make dist}]}
  report: {needs: [lint, test], steps: [{run: make report}]}
`
	p, err := Compile([]byte(src), Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"build": false, "lint": false, "test (shard=1)": false, "test (shard=2)": false,
		"package": false, "report": true}
	for _, j := range p.Jobs {
		if j.NoInputs != want[j.Key] {
			t.Errorf("%s: NoInputs %v, want %v", j.Key, j.NoInputs, want[j.Key])
		}
	}
}
