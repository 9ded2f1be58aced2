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
