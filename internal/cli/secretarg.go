package cli

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// maxSecret bounds what is read as a token: Gantry's are 47 bytes.
const maxSecret = 4096

// readTokenFile reads a token from a file (its first line, trimmed), so that the secret
// is in neither the command line nor the environment of the process, where any process
// of the same user can read it from /proc.
func readTokenFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	token, err := readSecret(f)
	if err != nil {
		return "", fmt.Errorf("--token-file %s: %w", path, err)
	}
	return token, nil
}

// readTokenFD reads the token handed over on an inherited file descriptor and closes it.
func readTokenFD(fd int) (string, error) {
	if fd < 3 {
		return "", usagef("--token-fd %d: want an inherited descriptor from 3 up", fd)
	}
	f := os.NewFile(uintptr(fd), "token-fd-"+strconv.Itoa(fd))
	if f == nil {
		return "", usagef("--token-fd %d: not an open descriptor", fd)
	}
	defer f.Close()
	token, err := readSecret(f)
	if err != nil {
		return "", fmt.Errorf("--token-fd %d: %w", fd, err)
	}
	return token, nil
}

func readSecret(r io.Reader) (string, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxSecret+1))
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	if len(b) > maxSecret {
		return "", fmt.Errorf("read token: longer than %d bytes; is this the right file?", maxSecret)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	if line = strings.TrimSpace(line); line == "" {
		return "", fmt.Errorf("read token: it is empty")
	}
	return line, nil
}

// withoutToken returns args with every --token flag and its value removed.
func withoutToken(args []string) []string {
	out := make([]string, 0, len(args))
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "--token":
			i++ // and its value
		case strings.HasPrefix(a, "--token="):
		default:
			out = append(out, a)
		}
	}
	return out
}

// hasTokenArg reports whether args carry a --token flag.
func hasTokenArg(args []string) bool {
	for _, a := range args {
		if a == "--token" || strings.HasPrefix(a, "--token=") {
			return true
		}
	}
	return false
}

// withoutEnv returns env without the variables named.
func withoutEnv(env []string, names ...string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		keep := true
		for _, n := range names {
			if name == n {
				keep = false
			}
		}
		if keep {
			out = append(out, kv)
		}
	}
	return out
}
