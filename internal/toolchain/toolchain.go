package toolchain

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// Tool is what one actions/setup-* action sets up.
type Tool struct {
	Action string // actions/setup-go
	Label  string // Go: what messages call it
	// Command is the program the action puts on PATH.
	Command string
	// VersionInput and FileInput are the action's inputs naming the version and a file
	// to read it from; Output is the output that says the version set up.
	VersionInput, FileInput, Output string
	// version is a shell function body printing the version of the program at "$1".
	version string
	// dirs are where toolchains are usually installed besides PATH, as shell words
	// (globs): each a directory that may hold Command.
	dirs string
	// parse turns what version printed into the version and, for Node.js, the LTS
	// line's codename ("" when the release is not an LTS one).
	parse func(out string) (v *semver.Version, lts string, err error)
}

// Go, Node and Python are the tools of actions/setup-go, setup-node and setup-python.
var (
	Go = Tool{Action: "actions/setup-go", Label: "Go", Command: "go",
		VersionInput: "go-version", FileInput: "go-version-file", Output: "go-version",
		version: `"$1" env GOVERSION`,
		dirs: `/usr/local/go/bin /usr/lib/go/bin /usr/lib/go-*/bin "$HOME"/sdk/go*/bin "$HOME"/go/pkg/mod/golang.org/toolchain@*/bin ` +
			`"${RUNNER_TOOL_CACHE:-/opt/hostedtoolcache}"/go/*/*/bin /opt/hostedtoolcache/go/*/*/bin`,
		parse: parseGoVersion}
	Node = Tool{Action: "actions/setup-node", Label: "Node.js", Command: "node",
		VersionInput: "node-version", FileInput: "node-version-file", Output: "node-version",
		version: `"$1" -p 'process.version + " " + (process.release.lts || "")'`,
		dirs: `/usr/local/bin /usr/bin "$HOME"/.nvm/versions/node/*/bin /usr/local/n/versions/node/*/bin "$HOME"/.volta/bin ` +
			`"${RUNNER_TOOL_CACHE:-/opt/hostedtoolcache}"/node/*/*/bin /opt/hostedtoolcache/node/*/*/bin`,
		parse: parseNodeVersion}
	Python = Tool{Action: "actions/setup-python", Label: "Python", Command: "python3",
		VersionInput: "python-version", FileInput: "python-version-file", Output: "python-version",
		version: `"$1" -c 'import platform; print(platform.python_version())'`,
		dirs: `/usr/local/bin /usr/bin "$HOME"/.pyenv/versions/*/bin ` +
			`"${RUNNER_TOOL_CACHE:-/opt/hostedtoolcache}"/Python/*/*/bin /opt/hostedtoolcache/Python/*/*/bin`,
		parse: parsePythonVersion}
)

// ForAction returns the tool of an action, as in actions/setup-go (any case).
func ForAction(action string) (Tool, bool) {
	for _, t := range []Tool{Go, Node, Python} {
		if strings.EqualFold(t.Action, action) {
			return t, true
		}
	}
	return Tool{}, false
}

// Installed is one toolchain found.
type Installed struct {
	Path    string          // the program, as the steps see it
	Text    string          // its version as it prints it (go1.26.8, v20.11.1, 3.12.3)
	Version *semver.Version // the same, as a semantic version
	LTS     string          // Node.js only: the LTS line's codename, lower case
	// OnPath says it is the one the steps' PATH finds first.
	OnPath bool
}

// String is the version as the action's output says it: 1.26.8, v20.11.1, 3.12.3.
func (i Installed) String() string {
	if strings.HasPrefix(i.Text, "v") {
		return i.Text
	}
	return strings.TrimPrefix(i.Text, "go")
}

// Probe is a POSIX shell script that prints the PATH it ran with and then every
// installed toolchain of the tool it finds, a line each: its path, a tab, what it says
// its version is. Those on PATH come first, in PATH's order, then those in the usual
// install places. Run it where the job's steps run (on the worker, in the job's
// container or pod) and give its output to Parse.
func (t Tool) Probe() string {
	return fmt.Sprintf(`cmd=%s
printf 'PATH\t%%s\n' "$PATH"
version() { %s; }
seen=:
probe() {
  case "$seen" in *":$1:"*) return 0 ;; esac
  seen="$seen$1:"
  [ -f "$1" ] && [ -x "$1" ] || return 0
  v=$(version "$1" 2>/dev/null | head -n 1) || return 0
  [ -n "$v" ] && printf '%%s\t%%s\n' "$1" "$v"
  return 0
}
old_ifs=$IFS
IFS=:
for d in $PATH; do
  IFS=$old_ifs
  [ -n "$d" ] && probe "$d/$cmd"
done
IFS=$old_ifs
for d in %s; do
  probe "$d/$cmd"
done
`, t.Command, t.version, t.dirs)
}

// Parse reads Probe's output. The first toolchain listed is the one PATH finds when it
// lies in a directory of PATH. Lines whose version it cannot read are returned as
// skipped, to log.
func (t Tool) Parse(out string) (found []Installed, skipped []string) {
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	first := true
	var pathDirs []string
	for sc.Scan() {
		p, text, ok := strings.Cut(sc.Text(), "\t")
		if !ok || p == "" {
			continue
		}
		if p == "PATH" {
			pathDirs = strings.Split(text, ":")
			continue
		}
		text = strings.TrimSpace(text)
		v, lts, err := t.parse(text)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s (%s): %v", p, text, err))
			continue
		}
		inst := Installed{Path: p, Text: strings.Fields(text)[0], Version: v, LTS: lts}
		if first {
			inst.OnPath = onPath(p, t.Command, pathDirs)
		}
		first = false
		found = append(found, inst)
	}
	return found, skipped
}

// onPath says whether p is the program cmd in one of dirs.
func onPath(p, cmd string, dirs []string) bool {
	for _, d := range dirs {
		if d != "" && strings.TrimSuffix(d, "/")+"/"+cmd == p {
			return true
		}
	}
	return false
}
