package source_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gantry-ci/gantry/internal/source"
)

// fakeSSH writes an ssh stand-in that records its arguments and the key file it was given,
// then runs the remote command locally: git speaks its real protocol through it, so the
// whole ssh transport path runs except the network.
func fakeSSH(t *testing.T) (program, logPath string) {
	t.Helper()
	dir := t.TempDir()
	logPath = filepath.Join(dir, "ssh.log")
	program = filepath.Join(dir, "fake ssh") // a space: the command line must quote it
	script := `#!/bin/sh
log='` + logPath + `'
prev=
key=
for a in "$@"; do
	printf 'arg:%s\n' "$a" >> "$log"
	if [ "$prev" = "-i" ]; then key=$a; fi
	if [ "$prev" = "-o" ]; then case "$a" in UserKnownHostsFile=*) known=${a#UserKnownHostsFile=};; esac; fi
	prev=$a
done
if [ -n "$key" ]; then
	printf 'keymode:%s\n' "$(stat -c %a "$key")" >> "$log"
	printf 'key:%s\n' "$(cat "$key")" >> "$log"
fi
if [ -f "$known" ]; then printf 'known:%s\n' "$(cat "$known")" >> "$log"; fi
for last; do :; done
exec sh -c "$last"
`
	if err := os.WriteFile(program, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return program, logPath
}

func TestSSHDeployKey(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	r := newRemote(t, t.TempDir(), "ssh")
	sha := r.commit("one", map[string]string{"a": "over ssh"})
	r.push("refs/heads/main", false)
	const key = "-----BEGIN OPENSSH PRIVATE KEY-----\nnot-a-real-key\n-----END OPENSSH PRIVATE KEY-----"

	for _, tc := range []struct {
		name, url  string
		creds      source.Credentials
		wantStrict string
		wantKnown  string
	}{
		{"ssh url, trust on first use", "ssh://git@fake.invalid" + r.bare,
			source.Credentials{SSHKey: []byte(key)}, "StrictHostKeyChecking=accept-new", ""},
		{"scp-like url, known hosts", "git@fake.invalid:" + r.bare,
			source.Credentials{SSHKey: []byte(key), KnownHosts: []byte("fake.invalid ssh-ed25519 AAAA")}, "StrictHostKeyChecking=yes", "fake.invalid ssh-ed25519 AAAA"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			program, logPath := fakeSSH(t)
			m, err := source.Open(ctx, source.Config{Dir: t.TempDir(), URL: tc.url, Credentials: tc.creds, SSHCommand: program, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			if got, err := m.ReadFile(ctx, sha, "a"); err != nil || string(got) != "over ssh" {
				t.Fatalf("ReadFile over ssh = %q, %v", got, err)
			}
			logged, err := os.ReadFile(logPath)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(string(logged), "\n")
			for _, want := range []string{"arg:git@fake.invalid", "arg:IdentitiesOnly=yes", "arg:BatchMode=yes", "arg:" + tc.wantStrict, "keymode:600"} {
				if !slices.Contains(lines, want) {
					t.Errorf("ssh was not given %q; it got:\n%s", want, logged)
				}
			}
			if !strings.Contains(string(logged), "key:"+key) {
				t.Errorf("ssh's key file does not hold the deploy key; it got:\n%s", logged)
			}
			if tc.wantKnown != "" && !strings.Contains(string(logged), "known:"+tc.wantKnown) {
				t.Errorf("ssh did not get the known hosts; it got:\n%s", logged)
			}
			var keyPath string
			for i, l := range lines {
				if l == "arg:-i" && i+1 < len(lines) {
					keyPath = strings.TrimPrefix(lines[i+1], "arg:")
				}
			}
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(keyPath); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the key file %q outlived Close (%v)", keyPath, err)
			}
		})
	}

	_, err := source.Open(context.Background(), source.Config{Dir: t.TempDir(), URL: "ssh://git@fake.invalid/x.git",
		Credentials: source.Credentials{StrictHostKeyChecking: "maybe"}})
	if err == nil || !strings.Contains(err.Error(), "StrictHostKeyChecking") {
		t.Fatalf("Open with a bad StrictHostKeyChecking: err = %v", err)
	}
}
