package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestServerOutboundAllow: without --outbound-allow a webhook subscription to a
// loopback address is refused when it is set; with it, it is taken; a malformed list is
// a usage error.
func TestServerOutboundAllow(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		flags []string
		ok    bool
	}{
		{"nothing allowed", nil, false},
		{"loopback allowed", []string{"--outbound-allow", "10.0.0.0/8, 127.0.0.0/8"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			base, stop := startServer(t, append([]string{"--db", "sqlite://" + filepath.Join(t.TempDir(), "gantry.db")}, tc.flags...)...)
			t.Cleanup(func() { stop() })
			cli := func(args ...string) outcome {
				t.Helper()
				return runCLI(t, invocation{args: append(args, "--server", base)})
			}
			if r := cli("project", "create", "web", "--repo", "https://github.com/acme/web.git", "--default-branch", "main"); r.code != exitOK {
				t.Fatalf("project create: exit %d: %s", r.code, r.stderr)
			}
			r := cli("project", "webhook", "add", "web", "--url", "http://127.0.0.1:9/hook")
			if tc.ok != (r.code == exitOK) {
				t.Fatalf("webhook add: exit %d\n%s%s", r.code, r.stdout, r.stderr)
			}
			if !tc.ok && !strings.Contains(r.stderr, "127.0.0.1 is a loopback address; not allowed unless the server's --outbound-allow lists it") {
				t.Errorf("webhook add refused without saying why:\n%s", r.stderr)
			}
		})
	}
	for _, bad := range []string{"http://ghe.internal", "10.0.0.0/33", "a b"} {
		res := runCLI(t, invocation{args: []string{"server", "--outbound-allow", bad}})
		if res.code != exitUsage || !strings.Contains(res.stderr, "--outbound-allow") {
			t.Errorf("--outbound-allow %q: exit %d\n%s", bad, res.code, res.stderr)
		}
	}
}

// TestUpAllowsLoopbackWithoutAuth: gantry up with authentication off (on loopback) lets
// webhooks reach this machine's loopback; with it on, nothing private; gantry server
// allows only what --outbound-allow lists.
func TestUpAllowsLoopbackWithoutAuth(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]string{
		"127.0.0.1:8080": "127.0.0.0/8,::1",
		"localhost:8080": "127.0.0.0/8,::1",
		"0.0.0.0:8080":   "",
		"10.1.2.3:8080":  "",
	} {
		c := upConfig{Addr: addr, Data: t.TempDir()}
		s := c.server()
		if got := s.outboundAllow(); got != want {
			t.Errorf("up --addr %s: allows %q, want %q", addr, got, want)
		}
		s.Auth = "on"
		if got := s.outboundAllow(); got != "" {
			t.Errorf("up --addr %s with authentication on: allows %q, want nothing", addr, got)
		}
	}
	s := serverConfig{Addr: "127.0.0.1:8080", Auth: "off", OutboundAllow: "10.0.0.0/8"}
	if got := s.outboundAllow(); got != "10.0.0.0/8" {
		t.Errorf("server with authentication off: allows %q, want only --outbound-allow", got)
	}
	s.OutboundLoopbackWithoutAuth = true
	if got := s.outboundAllow(); got != "10.0.0.0/8,127.0.0.0/8,::1" {
		t.Errorf("up with --outbound-allow: allows %q", got)
	}
}
