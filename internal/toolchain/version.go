package toolchain

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
	"github.com/Masterminds/semver/v3"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// ErrNotInstalled is Choose's error when no toolchain found matches the version asked
// for; the message names what was found.
var ErrNotInstalled = errors.New("not installed")

// ErrUnsupported is Choose's error for a version Gantry cannot look for: a PyPy or
// GraalPy, a free-threaded Python, a nightly Node.js.
var ErrUnsupported = errors.New("not supported by Gantry")

// Choose picks among found the toolchain a version spec asks for, by the rules of the
// tool's action:
//
//   - an exact version (1.22.3) that one; a prefix (1.22, 20) the newest of that line;
//   - a semantic version range (^1.22, ~1.22.1, >=1.21 <1.23, 1.x, 1.22.x, *, a - b,
//     || between ranges) the newest that satisfies it;
//   - stable and latest the newest release; for Go, oldstable the newest of the minor
//     line before the newest release's; for Node.js node and current as latest, lts/*
//     the newest LTS release, lts/NAME (lts/iron) the newest of that LTS line and lts/-N
//     the newest of the Nth LTS line before the newest;
//   - for Python, X.Y-dev the newest of X.Y, pre-releases too;
//   - "" the one on PATH, or else the newest found.
//
// Pre-releases (1.27rc1, 3.14.0b1, 21.0.0-rc.1) match only a spec that names one, or,
// for Python with allowPrereleases, a spec of a major and minor version that has no
// release yet. Among equal versions the first found wins: the one on PATH.
func (t Tool) Choose(spec string, allowPrereleases bool, found []Installed) (Installed, error) {
	spec = strings.TrimSpace(spec)
	match, err := t.matcher(spec, allowPrereleases, found)
	if err != nil {
		return Installed{}, err
	}
	best := -1
	for i, f := range found {
		if f.Version == nil || !match(f) {
			continue
		}
		if best < 0 || f.Version.GreaterThan(found[best].Version) {
			best = i
		}
	}
	if best < 0 {
		return Installed{}, fmt.Errorf("%s %s is %w here%s", t.Label, shownSpec(spec), ErrNotInstalled, foundList(found))
	}
	return found[best], nil
}

func shownSpec(spec string) string {
	if spec == "" {
		return "(any version)"
	}
	return spec
}

// foundList is " (found: 1.26.8 at /usr/local/go/bin/go, ...)", or " (none found)".
func foundList(found []Installed) string {
	if len(found) == 0 {
		return " (none found)"
	}
	parts := make([]string, len(found))
	for i, f := range found {
		parts[i] = f.String() + " at " + f.Path
	}
	return " (found: " + strings.Join(parts, ", ") + ")"
}

var goPre = lazyre.New(`^v?(\d+)\.(\d+)(?:\.(\d+))?(alpha|beta|rc)(\d+)$`)

// matcher turns a spec into a test of one toolchain.
func (t Tool) matcher(spec string, allowPre bool, found []Installed) (func(Installed) bool, error) {
	release := func(i Installed) bool { return i.Version.Prerelease() == "" }
	lower := strings.ToLower(spec)
	switch {
	case spec == "":
		for _, f := range found {
			if f.OnPath {
				return func(i Installed) bool { return i.Path == f.Path }, nil
			}
		}
		return func(Installed) bool { return true }, nil
	case lower == "stable" || lower == "latest" || t.Action == Node.Action && (lower == "node" || lower == "current"):
		return release, nil
	case t.Action == Go.Action && lower == "oldstable":
		newest := newestRelease(found, release)
		if newest == nil {
			return func(Installed) bool { return false }, nil
		}
		if newest.Minor() == 0 {
			return func(Installed) bool { return false }, nil
		}
		return func(i Installed) bool {
			return release(i) && i.Version.Major() == newest.Major() && i.Version.Minor() == newest.Minor()-1
		}, nil
	case t.Action == Node.Action && strings.HasPrefix(lower, "lts/"):
		return ltsMatcher(strings.TrimPrefix(lower, "lts/"), found)
	case t.Action == Node.Action && (strings.Contains(lower, "nightly") || strings.Contains(lower, "canary")):
		return nil, fmt.Errorf("%s %s: nightly and canary builds are %w", t.Label, spec, ErrUnsupported)
	}
	if t.Action == Python.Action {
		switch {
		case strings.HasPrefix(lower, "pypy") || strings.HasPrefix(lower, "graalpy"):
			return nil, fmt.Errorf("%s %s: Gantry finds CPython only; PyPy and GraalPy are %w", t.Label, spec, ErrUnsupported)
		case strings.HasSuffix(lower, "t") && !strings.HasSuffix(lower, "latest"):
			return nil, fmt.Errorf("%s %s: free-threaded builds are %w", t.Label, spec, ErrUnsupported)
		}
		spec = pep440ToSemver(spec)
		if v, ok := strings.CutSuffix(spec, "-dev"); ok && majorMinor.Regexp().MatchString(v) {
			spec, allowPre = "~"+v+".0-0", true
		} else if allowPre && majorMinor.Regexp().MatchString(spec) {
			spec = "~" + spec + ".0-0"
		}
	}
	if t.Action == Go.Action {
		if m := goPre.Regexp().FindStringSubmatch(spec); m != nil {
			spec = goSemver(m)
		}
	}
	c, err := semver.NewConstraint(spec)
	if err != nil {
		return nil, fmt.Errorf("%s version %q is neither a version, a range (^1.2, ~1.2.3, >=1.2 <1.4, 1.x) nor one of the action's names: %w", t.Label, spec, err)
	}
	return func(i Installed) bool { return c.Check(i.Version) }, nil
}

var majorMinor = lazyre.New(`^\d+\.\d+$`)

func newestRelease(found []Installed, release func(Installed) bool) *semver.Version {
	var best *semver.Version
	for _, f := range found {
		if f.Version != nil && release(f) && (best == nil || f.Version.GreaterThan(best)) {
			best = f.Version
		}
	}
	return best
}

// ltsCodenames are the LTS lines of Node.js by name, for an LTS release that does not
// say its own name (one built without process.release.lts).
var ltsCodenames = map[string]uint64{"argon": 4, "boron": 6, "carbon": 8, "dubnium": 10, "erbium": 12,
	"fermium": 14, "gallium": 16, "hydrogen": 18, "iron": 20, "jod": 22, "krypton": 24}

// ltsMatcher reads what follows lts/: *, a codename, or -N.
func ltsMatcher(which string, found []Installed) (func(Installed) bool, error) {
	isLTS := func(i Installed) bool { return i.LTS != "" && i.Version.Prerelease() == "" }
	switch {
	case which == "*":
		return isLTS, nil
	case strings.HasPrefix(which, "-"):
		n, err := strconv.Atoi(which[1:])
		if err != nil || n < 0 {
			return nil, fmt.Errorf("lts/%s: after lts/- comes a number of LTS lines back", which)
		}
		var majors []uint64
		for _, f := range found {
			if f.Version != nil && isLTS(f) && !slices.Contains(majors, f.Version.Major()) {
				majors = append(majors, f.Version.Major())
			}
		}
		slices.Sort(majors)
		slices.Reverse(majors)
		if n >= len(majors) {
			return func(Installed) bool { return false }, nil
		}
		want := majors[n]
		return func(i Installed) bool { return isLTS(i) && i.Version.Major() == want }, nil
	}
	major, known := ltsCodenames[which]
	return func(i Installed) bool {
		return isLTS(i) && (i.LTS == which || known && i.Version.Major() == major)
	}, nil
}

// pep440ToSemver rewrites what Python's packaging writes that semantic versions do not
// say: 3.13.0rc1 is 3.13.0-rc.1, ~=3.9 is >=3.9 <4, ==3.12.* is 3.12.x, and commas
// between clauses separate them as spaces do.
func pep440ToSemver(spec string) string {
	var out []string
	for _, part := range strings.Split(spec, ",") {
		part = strings.TrimSpace(part)
		switch {
		case strings.HasPrefix(part, "~="):
			v := strings.TrimSpace(part[2:])
			if n := strings.Count(v, "."); n == 1 {
				part = "^" + v
			} else if n >= 2 {
				part = "~" + v
			}
		case strings.HasPrefix(part, "==") && strings.HasSuffix(part, ".*"):
			part = strings.TrimSpace(strings.TrimSuffix(part[2:], ".*")) + ".x"
		case strings.HasPrefix(part, "=="):
			part = "=" + strings.TrimSpace(part[2:])
		}
		out = append(out, pythonPre.Regexp().ReplaceAllStringFunc(part, func(s string) string {
			m := pythonPre.Regexp().FindStringSubmatch(s)
			return m[1] + "-" + map[string]string{"a": "alpha", "b": "beta", "rc": "rc"}[m[2]] + "." + m[3]
		}))
	}
	return strings.Join(out, " ")
}

var pythonPre = lazyre.New(`(\d+\.\d+(?:\.\d+)?)(a|b|rc)(\d+)`)

// goSemver is a Go pre-release as a semantic version: 1.27rc1 is 1.27.0-rc.1.
func goSemver(m []string) string {
	patch := m[3]
	if patch == "" {
		patch = "0"
	}
	return m[1] + "." + m[2] + "." + patch + "-" + m[4] + "." + m[5]
}

// parseGoVersion reads go env GOVERSION: go1.26.8, go1.27rc1, go1.20 (a .0 release
// before Go 1.21), with any experiment after a space.
func parseGoVersion(out string) (*semver.Version, string, error) {
	f := strings.Fields(out)
	if len(f) == 0 || !strings.HasPrefix(f[0], "go") {
		return nil, "", fmt.Errorf("not a Go release (devel or unknown build)")
	}
	s := strings.TrimPrefix(f[0], "go")
	if m := goPre.Regexp().FindStringSubmatch(s); m != nil {
		s = goSemver(m)
	}
	v, err := semver.StrictNewVersion(padVersion(s))
	if err != nil {
		return nil, "", err
	}
	return v, "", nil
}

// parseNodeVersion reads node's "v20.11.1 iron" (the LTS codename, when there is one).
func parseNodeVersion(out string) (*semver.Version, string, error) {
	f := strings.Fields(out)
	if len(f) == 0 {
		return nil, "", fmt.Errorf("no version")
	}
	v, err := semver.StrictNewVersion(strings.TrimPrefix(f[0], "v"))
	if err != nil {
		return nil, "", err
	}
	lts := ""
	if len(f) > 1 {
		lts = strings.ToLower(f[1])
	}
	return v, lts, nil
}

// parsePythonVersion reads platform.python_version(): 3.12.3, 3.14.0b1, 3.13.0rc2.
func parsePythonVersion(out string) (*semver.Version, string, error) {
	f := strings.Fields(out)
	if len(f) == 0 {
		return nil, "", fmt.Errorf("no version")
	}
	s := pep440ToSemver(strings.TrimSuffix(f[0], "+"))
	v, err := semver.StrictNewVersion(padVersion(s))
	if err != nil {
		return nil, "", err
	}
	return v, "", nil
}

// padVersion gives a version of two numbers a patch of 0: 1.20 is 1.20.0.
func padVersion(s string) string {
	core, pre, hasPre := strings.Cut(s, "-")
	if strings.Count(core, ".") == 1 {
		core += ".0"
	}
	if hasPre {
		return core + "-" + pre
	}
	return core
}

// FromFile reads the versions a version file asks for, as the tool's action reads the
// file name. Most files ask for one; a Python version file may list several, one a line.
func (t Tool) FromFile(name string, content []byte) ([]string, error) {
	text := strings.ReplaceAll(string(content), "\r\n", "\n")
	base := path.Base(strings.ReplaceAll(name, `\`, "/"))
	var out []string
	var err error
	switch t.Action {
	case Go.Action:
		out = goFromFile(base, text)
	case Node.Action:
		out, err = nodeFromFile(text)
	case Python.Action:
		out, err = pythonFromFile(base, text)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s names no %s version", name, t.Label)
	}
	return out, nil
}

var (
	goModToolchain = regexp.MustCompile(`(?m)^toolchain\s+go(\S+)`)
	goModGo        = regexp.MustCompile(`(?m)^go\s+(\d\S*)`)
	toolVersions   = func(name string) *regexp.Regexp {
		return regexp.MustCompile(`(?m)^\s*` + name + `\s+([^\s#]+)`)
	}
	goToolVersions     = toolVersions("golang")
	nodeToolVersions   = toolVersions("nodejs")
	pythonToolVersions = toolVersions("python")
	actionYMLNode      = regexp.MustCompile(`(?m)^\s+using:\s*['"]?node(\d+)['"]?\s*(?:#.*)?$`)
	nodeLine           = regexp.MustCompile(`(?m)^(?:node(?:js)?\s+)?v?([^\s]+)$`)
)

// goFromFile reads go.mod or go.work (toolchain goX, else go X), .tool-versions
// (golang X), or any other file as the version itself (.go-version).
func goFromFile(base, text string) []string {
	switch {
	case base == "go.mod" || base == "go.work":
		if m := goModToolchain.FindStringSubmatch(text); m != nil {
			return []string{m[1]}
		}
		if m := goModGo.FindStringSubmatch(text); m != nil {
			return []string{m[1]}
		}
		return nil
	case base == ".tool-versions":
		if m := goToolVersions.FindStringSubmatch(text); m != nil {
			return []string{m[1]}
		}
		return nil
	}
	return firstLine(text)
}

func firstLine(text string) []string {
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			return []string{l}
		}
	}
	return nil
}

// nodeFromFile reads package.json (volta.node, devEngines.runtime's node, engines.node),
// .tool-versions (nodejs X), an action.yml (using: node20), or the first line that is a
// version alone, as .nvmrc and .node-version hold it.
func nodeFromFile(text string) ([]string, error) {
	var manifest map[string]any
	if err := json.Unmarshal([]byte(text), &manifest); err == nil && manifest != nil {
		str := func(m any, keys ...string) string {
			for _, k := range keys {
				mm, ok := m.(map[string]any)
				if !ok {
					return ""
				}
				m = mm[k]
			}
			s, _ := m.(string)
			return s
		}
		if v := str(manifest, "volta", "node"); v != "" {
			return []string{v}, nil
		}
		if rt, ok := str2(manifest, "devEngines", "runtime"); ok {
			for _, e := range rt {
				if strings.EqualFold(str(e, "name"), "node") && str(e, "version") != "" {
					return []string{str(e, "version")}, nil
				}
			}
		}
		if v := str(manifest, "engines", "node"); v != "" {
			return []string{v}, nil
		}
		if str(manifest, "volta", "extends") != "" {
			return nil, fmt.Errorf("volta.extends (a version in another file) is %w", ErrUnsupported)
		}
		return nil, nil
	}
	if m := nodeToolVersions.FindStringSubmatch(text); m != nil {
		return []string{m[1]}, nil
	}
	if m := actionYMLNode.FindStringSubmatch(text); m != nil {
		return []string{m[1]}, nil
	}
	if m := nodeLine.FindStringSubmatch(text); m != nil {
		return []string{m[1]}, nil
	}
	return firstLine(text), nil
}

// str2 reads an object or a list of objects at a key path of a JSON document.
func str2(m map[string]any, k1, k2 string) ([]any, bool) {
	a, ok := m[k1].(map[string]any)
	if !ok {
		return nil, false
	}
	switch v := a[k2].(type) {
	case map[string]any:
		return []any{v}, true
	case []any:
		return v, true
	}
	return nil, false
}

// pythonFromFile reads pyproject.toml (project.requires-python, else Poetry's
// tool.poetry.dependencies.python), Pipfile (requires.python_version or
// python_full_version), .tool-versions (python X), or a file of versions one a line,
// # comments and blank lines left out (.python-version).
func pythonFromFile(base, text string) ([]string, error) {
	switch {
	case strings.HasSuffix(base, ".toml") || base == "Pipfile":
		var doc map[string]any
		if _, err := toml.Decode(text, &doc); err != nil {
			return nil, fmt.Errorf("read TOML: %w", err)
		}
		get := func(keys ...string) string {
			var m any = doc
			for _, k := range keys {
				mm, ok := m.(map[string]any)
				if !ok {
					return ""
				}
				m = mm[k]
			}
			s, _ := m.(string)
			return s
		}
		for _, keys := range [][]string{{"project", "requires-python"}, {"tool", "poetry", "dependencies", "python"},
			{"requires", "python_full_version"}, {"requires", "python_version"}} {
			if v := get(keys...); v != "" {
				return []string{v}, nil
			}
		}
		return nil, nil
	case base == ".tool-versions":
		if m := pythonToolVersions.FindStringSubmatch(text); m != nil {
			return []string{m[1]}, nil
		}
		return nil, nil
	}
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out, nil
}
