package source_test

import (
	"testing"

	"github.com/gantry-ci/gantry/internal/source"
)

// TestPlainHTTPAllowed: an http:// remote is allowed by its host's name (any port) or
// its host and port; https and other schemes never count, nor another port.
func TestPlainHTTPAllowed(t *testing.T) {
	t.Parallel()
	hosts := []string{"git.lan", "10.0.0.5:3000"}
	for _, tc := range []struct {
		remote string
		want   bool
	}{
		{"http://git.lan/o/r.git", true},
		{"http://GIT.lan:8080/o/r.git", true},
		{"http://10.0.0.5:3000/o/r.git", true},
		{"http://10.0.0.5:3001/o/r.git", false},
		{"http://10.0.0.5/o/r.git", false},
		{"http://git.lan.evil.example/o/r.git", false},
		{"https://git.lan/o/r.git", false},
		{"ssh://git.lan/o/r.git", false},
		{"git.lan:o/r.git", false},
	} {
		if got := source.PlainHTTPAllowed(tc.remote, hosts); got != tc.want {
			t.Errorf("PlainHTTPAllowed(%q) = %v, want %v", tc.remote, got, tc.want)
		}
	}
	if source.PlainHTTPAllowed("http://git.lan/o/r.git", nil) {
		t.Error("allowed with no hosts")
	}
}
