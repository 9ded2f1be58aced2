package cli

import (
	"slices"
	"strings"
	"testing"
)

// TestServerAllowPlainHTTP: --allow-plain-http takes hosts, with a port or not, and
// refuses anything else as a usage error that names the flag.
func TestServerAllowPlainHTTP(t *testing.T) {
	t.Parallel()
	c := serverConfig{AllowPlainHTTP: " git.lan, 10.0.0.5:3000,,[::1]:8080 "}
	got, err := c.plainHTTPHosts()
	if err != nil || !slices.Equal(got, []string{"git.lan", "10.0.0.5:3000", "[::1]:8080"}) {
		t.Errorf("plainHTTPHosts = %q, %v", got, err)
	}
	for _, bad := range []string{"http://git.lan", "git.lan/x", "user@git.lan", ":8080", "a b"} {
		res := runCLI(t, invocation{args: []string{"server", "--allow-plain-http", bad}})
		if res.code != exitUsage || !strings.Contains(res.stderr, "--allow-plain-http") {
			t.Errorf("--allow-plain-http %q: exit %d\n%s", bad, res.code, res.stderr)
		}
	}
}
