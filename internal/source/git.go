package source

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Credentials authenticate git against a remote. The zero value means none.
//
// Secrets never appear on a command line (where ps would show them) nor in a repository's
// config on disk: the token travels in git's environment and the ssh key in a private file
// that Close removes.
type Credentials struct {
	// Token is an access token for an http(s) remote, sent as HTTP basic auth with Username.
	// It is scoped to the remote's scheme, host and port, so submodules and LFS on the same
	// host get it and other hosts never do.
	Token string
	// Username goes with Token; "x-access-token" when empty, which GitHub, GitLab and Gitea
	// all accept for an access token.
	Username string
	// SSHKey is a private key (OpenSSH or PEM) for an ssh remote; ssh uses it and nothing
	// else (IdentitiesOnly, no agent).
	SSHKey []byte
	// AllowPlainHTTP lets Token go to an http:// remote, in clear to anyone on the path.
	// Without it such a remote is refused with ErrPlainHTTP before git runs: the operator
	// allows it per host (gantry server --allow-plain-http).
	AllowPlainHTTP bool
	// KnownHosts is known_hosts content for an ssh remote. When set, hosts must match it.
	KnownHosts []byte
	// StrictHostKeyChecking is ssh's option: "yes", "accept-new" or "no". The default is
	// "yes" with KnownHosts and "accept-new" without, which trusts a host on first use and
	// remembers its key in the cache directory, so a changed key is refused later.
	StrictHostKeyChecking string
}

// defaultTokenUser is what the forges accept as the user name that goes with a token.
const defaultTokenUser = "x-access-token"

// runner runs the git binary with a clean environment: no system or user config, no
// terminal prompts, the C locale (so messages are stable), and credentials only as
// environment variables or private files.
type runner struct {
	git     string
	env     []string
	secrets []string // redacted from every error text
}

// passEnv are the variables a git process may inherit: where to find programs and temp
// space, and how to reach the network (proxies, CA bundles). Nothing else leaks in.
var passEnv = []string{
	"PATH", "TMPDIR",
	"http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "ALL_PROXY", "all_proxy",
	"SSL_CERT_FILE", "SSL_CERT_DIR",
}

// newRunner builds the environment for a remote. private is a directory only this process
// uses (HOME, the ssh key); stateDir keeps state worth keeping across processes (the
// known_hosts of trust on first use).
func newRunner(git, sshCommand, remote, private, stateDir string, creds Credentials) (*runner, error) {
	if git == "" {
		git = "git"
	}
	r := &runner{git: git}
	for _, k := range passEnv {
		if v, ok := os.LookupEnv(k); ok {
			r.env = append(r.env, k+"="+v)
		}
	}
	r.env = append(r.env,
		"HOME="+private,
		"LC_ALL=C",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		// No askpass program at all: a missing credential fails at once instead of waiting.
		"GIT_ASKPASS=",
		"SSH_ASKPASS=",
		// git-lfs reads this to skip downloads during checkout; Checkout pulls explicitly.
		"GIT_LFS_SKIP_SMUDGE=1",
	)

	var cfg [][2]string
	if creds.Token != "" {
		user := creds.Username
		if user == "" {
			user = defaultTokenUser
		}
		scope, err := tokenScope(remote, creds.AllowPlainHTTP)
		if err != nil {
			return nil, err
		}
		basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + creds.Token))
		// http.<url>.extraHeader applies only to requests whose URL starts with the scope,
		// and git-lfs honours it too. It is passed through GIT_CONFIG_* variables, never argv.
		cfg = append(cfg, [2]string{"http." + scope + ".extraHeader", "Authorization: Basic " + basic})
		r.secrets = append(r.secrets, creds.Token, basic, user+":"+creds.Token)
	}
	if len(cfg) > 0 {
		r.env = append(r.env, "GIT_CONFIG_COUNT="+strconv.Itoa(len(cfg)))
		for i, kv := range cfg {
			r.env = append(r.env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, kv[0]), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, kv[1]))
		}
	}

	ssh, err := sshCommandLine(sshCommand, private, stateDir, creds)
	if err != nil {
		return nil, err
	}
	r.env = append(r.env, "GIT_SSH_COMMAND="+ssh, "GIT_SSH_VARIANT=ssh")
	return r, nil
}

// PlainHTTPAllowed reports whether remote is an http:// URL whose host hosts names, by
// name alone (any port) or as host:port: where an admin lets a token go in clear.
func PlainHTTPAllowed(remote string, hosts []string) bool {
	u, err := url.Parse(remote)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return false
	}
	for _, h := range hosts {
		if strings.EqualFold(h, u.Host) || strings.EqualFold(h, u.Hostname()) {
			return true
		}
	}
	return false
}

// tokenScope is the scheme://host[:port]/ prefix a token is sent to: an https remote's,
// or an http one's when allowPlain.
func tokenScope(remote string, allowPlain bool) (string, error) {
	u, err := url.Parse(remote)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("a token needs an http or https remote URL, not %q", redactURL(remote))
	}
	if u.Scheme == "http" && !allowPlain {
		return "", fmt.Errorf("%w: %s would carry it in clear; use an https:// URL, or have the admin allow plain HTTP for host %s (gantry server --allow-plain-http %s)",
			ErrPlainHTTP, redactURL(remote), u.Hostname(), u.Hostname())
	}
	return u.Scheme + "://" + u.Host + "/", nil
}

// sshCommandLine is the GIT_SSH_COMMAND for the credentials. git hands it to a shell, so
// every path in it is quoted.
func sshCommandLine(program, private, stateDir string, creds Credentials) (string, error) {
	if program == "" {
		program = "ssh"
	}
	strict := creds.StrictHostKeyChecking
	known := filepath.Join(stateDir, "known_hosts")
	if len(creds.KnownHosts) > 0 {
		known = filepath.Join(private, "known_hosts")
		if err := os.WriteFile(known, creds.KnownHosts, 0o600); err != nil {
			return "", fmt.Errorf("write known_hosts: %w", err)
		}
		if strict == "" {
			strict = "yes"
		}
	}
	switch strict {
	case "":
		strict = "accept-new"
	case "yes", "accept-new", "no":
	default:
		return "", fmt.Errorf("StrictHostKeyChecking is %q; want yes, accept-new or no", strict)
	}
	parts := []string{shellQuote(program),
		"-o", "BatchMode=yes",
		"-o", "StrictHostKeyChecking=" + strict,
		"-o", "UserKnownHostsFile=" + shellQuote(known),
		"-o", "GlobalKnownHostsFile=/dev/null",
		"-F", "/dev/null",
	}
	if len(creds.SSHKey) > 0 {
		key := filepath.Join(private, "id_key")
		data := creds.SSHKey
		if !bytes.HasSuffix(data, []byte("\n")) {
			// ssh refuses a key file whose last line has no newline.
			data = append(append([]byte(nil), data...), '\n')
		}
		if err := os.WriteFile(key, data, 0o600); err != nil {
			return "", fmt.Errorf("write ssh key: %w", err)
		}
		parts = append(parts, "-i", shellQuote(key), "-o", "IdentitiesOnly=yes", "-o", "IdentityAgent=none")
	}
	return strings.Join(parts, " "), nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// redactURL drops any password from a URL so it can go in an error.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}

// gitError is a failed git command: what ran (without secrets), its exit code and the end
// of what it said on stderr.
type gitError struct {
	args   []string
	code   int
	stderr string
	err    error
}

func (e *gitError) Error() string {
	msg := "git " + strings.Join(e.args, " ")
	if e.code >= 0 {
		msg += ": exit status " + strconv.Itoa(e.code)
	} else if e.err != nil {
		msg += ": " + e.err.Error()
	}
	if e.stderr != "" {
		msg += ": " + e.stderr
	}
	return msg
}

func (e *gitError) Unwrap() error { return e.err }

// exitCode is the git process's exit status, or -1 when it did not run to an exit.
func exitCode(err error) int {
	var ge *gitError
	if errors.As(err, &ge) {
		return ge.code
	}
	return -1
}

type runOpts struct {
	dir    string
	stdin  []byte
	stdout *bytes.Buffer // when nil, output is collected and returned
	limit  int64         // stop collecting stdout beyond this many bytes (0: no limit)
}

// run runs git with args and returns its stdout.
func (r *runner) run(ctx context.Context, dir string, args ...string) ([]byte, error) {
	return r.runWith(ctx, runOpts{dir: dir}, args...)
}

func (r *runner) runWith(ctx context.Context, o runOpts, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, r.git, args...)
	cmd.Dir = o.dir
	cmd.Env = r.env
	if o.stdin != nil {
		cmd.Stdin = bytes.NewReader(o.stdin)
	}
	out := o.stdout
	if out == nil {
		out = new(bytes.Buffer)
	}
	// Past the limit the writer fails, so git dies of a broken pipe instead of streaming
	// a huge blob nobody will read.
	w := &capWriter{buf: out, limit: o.limit, stop: true}
	cmd.Stdout = w
	var stderr capWriter
	stderr.buf = new(bytes.Buffer)
	stderr.limit = 64 << 10
	cmd.Stderr = &stderr
	setProcessGroup(cmd)
	// A killed git can leave a helper (git-remote-https, ssh) holding the pipes; do not wait
	// for it forever.
	cmd.WaitDelay = 5 * time.Second
	err := cmd.Run()
	if err == nil {
		return out.Bytes(), nil
	}
	ge := &gitError{args: r.redactArgs(args), code: -1, stderr: r.redact(tail(stderr.buf.String())), err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		ge.code = ee.ExitCode()
		ge.err = nil
	}
	if ctx.Err() != nil {
		ge.err = ctx.Err()
		ge.code = -1
	}
	return out.Bytes(), ge
}

func (r *runner) redact(s string) string {
	for _, sec := range r.secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[REDACTED]")
		}
	}
	return s
}

func (r *runner) redactArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = r.redact(redactURL(a))
	}
	return out
}

// tail keeps the last few lines of git's stderr: the reason is at the end, the progress
// chatter before it is noise.
func tail(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	if len(lines) > 6 {
		lines = lines[len(lines)-6:]
	}
	return strings.Join(lines, "; ")
}

// capWriter collects up to limit bytes, so a huge output cannot exhaust memory; overflow
// says whether anything was dropped, and with stop the write past the limit fails.
type capWriter struct {
	buf      *bytes.Buffer
	limit    int64
	stop     bool
	overflow bool
}

var errOutputLimit = errors.New("output limit reached")

func (w *capWriter) Write(p []byte) (int, error) {
	if w.limit > 0 {
		room := w.limit - int64(w.buf.Len())
		if room < int64(len(p)) {
			w.overflow = true
			if room > 0 {
				w.buf.Write(p[:room])
			}
			if w.stop {
				return 0, errOutputLimit
			}
			return len(p), nil
		}
	}
	return w.buf.Write(p)
}
