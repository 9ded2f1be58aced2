package toolchain

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// installs makes the toolchains a test finds: "path version [lts]", as Probe prints them
// (a tab between path and version), the first on PATH.
func installs(t *testing.T, tool Tool, lines ...string) []Installed {
	t.Helper()
	var out strings.Builder
	out.WriteString("PATH\t/usr/bin:/usr/local/bin\n")
	for _, l := range lines {
		p, v, _ := strings.Cut(l, " ")
		out.WriteString(p + "\t" + v + "\n")
	}
	found, skipped := tool.Parse(out.String())
	if len(skipped) > 0 {
		t.Fatalf("skipped: %v", skipped)
	}
	return found
}

func TestChooseGo(t *testing.T) {
	t.Parallel()
	found := installs(t, Go,
		"/usr/local/bin/go go1.25.3",
		"/sdk/go1.26.8/bin/go go1.26.8",
		"/sdk/go1.26.1/bin/go go1.26.1",
		"/sdk/go1.25.7/bin/go go1.25.7",
		"/sdk/go1.22.12/bin/go go1.22.12",
		"/sdk/go1.27rc1/bin/go go1.27rc1",
		"/sdk/go1.20/bin/go go1.20",
	)
	tests := []struct{ spec, want string }{
		{"1.26.1", "1.26.1"},
		{"1.26", "1.26.8"},
		{"1.25", "1.25.7"},
		{"1", "1.26.8"},
		{"^1.22", "1.26.8"},
		{"~1.26.0", "1.26.8"},
		{"~1.22.1", "1.22.12"},
		{">=1.21", "1.26.8"},
		{">=1.21 <1.23", "1.22.12"},
		{">=1.21, <1.26", "1.25.7"},
		{"1.x", "1.26.8"},
		{"1.25.x", "1.25.7"},
		{"*", "1.26.8"},
		{"stable", "1.26.8"},
		{"latest", "1.26.8"},
		{"oldstable", "1.25.7"},
		{"1.27rc1", "1.27rc1"},
		{"1.27.0-rc.1", "1.27rc1"},
		{">=1.27.0-0", "1.27rc1"},
		{"1.20", "1.20"},
		{"1.20.0", "1.20"},
		{"v1.22", "1.22.12"},
		{"1.22 || 1.20", "1.22.12"},
		{"", "1.25.3"}, // none asked for: the one on PATH
	}
	for _, tt := range tests {
		got, err := Go.Choose(tt.spec, false, found)
		if err != nil || got.String() != tt.want {
			t.Errorf("Choose(%q) = %s, %v; want %s", tt.spec, got, err, tt.want)
		}
	}
	for _, spec := range []string{"1.27", "1.24", "2", "^1.28", "1.26.2", ">1.26.8 <1.27.0"} {
		_, err := Go.Choose(spec, false, found)
		if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), "1.26.8 at /sdk/go1.26.8/bin/go") {
			t.Errorf("Choose(%q): %v; want ErrNotInstalled naming what was found", spec, err)
		}
	}
	if _, err := Go.Choose("one point two", false, found); err == nil || errors.Is(err, ErrNotInstalled) {
		t.Errorf("Choose of no version: %v; want an error saying what a version is", err)
	}
}

func TestChooseAmongEqualTakesPath(t *testing.T) {
	t.Parallel()
	found := installs(t, Go, "/usr/bin/go go1.26.8", "/usr/local/go/bin/go go1.26.8")
	got, err := Go.Choose("1.26", false, found)
	if err != nil || got.Path != "/usr/bin/go" || !got.OnPath {
		t.Fatalf("Choose = %+v, %v; want the one on PATH", got, err)
	}
	got, _ = Go.Choose("oldstable", false, found)
	if got.Path != "" {
		t.Fatalf("oldstable with one minor line found: %+v", got)
	}
}

func TestChooseNode(t *testing.T) {
	t.Parallel()
	found := installs(t, Node,
		"/usr/bin/node v18.19.0 hydrogen",
		"/nvm/v20.11.1/bin/node v20.11.1 iron",
		"/nvm/v20.9.0/bin/node v20.9.0 iron",
		"/nvm/v22.3.0/bin/node v22.3.0 jod",
		"/nvm/v23.1.0/bin/node v23.1.0",
		"/nvm/v24.0.0-rc.1/bin/node v24.0.0-rc.1",
	)
	tests := []struct{ spec, want string }{
		{"20", "v20.11.1"},
		{"v20", "v20.11.1"},
		{"20.9", "v20.9.0"},
		{"20.9.0", "v20.9.0"},
		{"^20.10", "v20.11.1"},
		{">=18 <21", "v20.11.1"},
		{"18.x", "v18.19.0"},
		{"node", "v23.1.0"},
		{"latest", "v23.1.0"},
		{"current", "v23.1.0"},
		{"lts/*", "v22.3.0"},
		{"lts/iron", "v20.11.1"},
		{"lts/Hydrogen", "v18.19.0"},
		{"lts/-1", "v20.11.1"},
		{"lts/-2", "v18.19.0"},
		{"24.0.0-rc.1", "v24.0.0-rc.1"},
		{"", "v18.19.0"},
	}
	for _, tt := range tests {
		got, err := Node.Choose(tt.spec, false, found)
		if err != nil || got.String() != tt.want {
			t.Errorf("Choose(%q) = %s, %v; want %s", tt.spec, got, err, tt.want)
		}
	}
	for _, spec := range []string{"24", "lts/krypton", "lts/-3", "16", "lts/nosuchname"} {
		if _, err := Node.Choose(spec, false, found); !errors.Is(err, ErrNotInstalled) {
			t.Errorf("Choose(%q): %v; want ErrNotInstalled", spec, err)
		}
	}
	if _, err := Node.Choose("20-nightly", false, found); !errors.Is(err, ErrUnsupported) {
		t.Errorf("Choose of a nightly: %v; want ErrUnsupported", err)
	}
}

func TestChoosePython(t *testing.T) {
	t.Parallel()
	found := installs(t, Python,
		"/usr/bin/python3 3.11.7",
		"/tc/3.12.3/bin/python3 3.12.3",
		"/tc/3.12.1/bin/python3 3.12.1",
		"/tc/3.13.0/bin/python3 3.13.0rc2",
		"/tc/3.9.18/bin/python3 3.9.18",
	)
	tests := []struct {
		spec     string
		allowPre bool
		want     string
	}{
		{"3.12", false, "3.12.3"},
		{"3.12.1", false, "3.12.1"},
		{"3", false, "3.12.3"},
		{"3.x", false, "3.12.3"},
		{">=3.9", false, "3.12.3"},
		{">=3.9,<3.12", false, "3.11.7"},
		{"~=3.11", false, "3.12.3"},
		{"~=3.12.0", false, "3.12.3"},
		{"==3.11.*", false, "3.11.7"},
		{"3.13", true, "3.13.0rc2"},
		{"3.12", true, "3.12.3"},
		{"3.13-dev", false, "3.13.0rc2"},
		{"3.13.0rc2", false, "3.13.0rc2"},
		{"3.13.0-rc.2", false, "3.13.0rc2"},
		{"stable", false, "3.12.3"},
	}
	for _, tt := range tests {
		got, err := Python.Choose(tt.spec, tt.allowPre, found)
		if err != nil || got.String() != tt.want {
			t.Errorf("Choose(%q, allow-prereleases %v) = %s, %v; want %s", tt.spec, tt.allowPre, got, err, tt.want)
		}
	}
	if _, err := Python.Choose("3.13", false, found); !errors.Is(err, ErrNotInstalled) {
		t.Errorf("3.13 without allow-prereleases: %v; want ErrNotInstalled", err)
	}
	for _, spec := range []string{"pypy3.10", "graalpy-24", "3.13t"} {
		if _, err := Python.Choose(spec, false, found); !errors.Is(err, ErrUnsupported) {
			t.Errorf("Choose(%q): %v; want ErrUnsupported", spec, err)
		}
	}
}

func TestParseSkipsWhatIsNotAVersion(t *testing.T) {
	t.Parallel()
	found, skipped := Go.Parse("/a/go\tdevel go1.27-abcdef\n/b/go\tgo1.26.8 X:nocoverageredesign\nnot a line\n")
	if len(found) != 1 || found[0].String() != "1.26.8" || found[0].OnPath || len(skipped) != 1 {
		t.Fatalf("found %+v, skipped %v", found, skipped)
	}
}

func TestFromFile(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool          Tool
		name, content string
		want          []string
	}{
		{Go, "go.mod", "module x\n\ngo 1.22.0\n\ntoolchain go1.23.4\n", []string{"1.23.4"}},
		{Go, "sub/go.mod", "module x\n\ngo 1.22\n", []string{"1.22"}},
		{Go, "go.work", "go 1.25.1\n\nuse .\n", []string{"1.25.1"}},
		{Go, ".tool-versions", "nodejs 20.1.0\ngolang 1.26.2\n", []string{"1.26.2"}},
		{Go, ".go-version", "\n1.26\n", []string{"1.26"}},
		{Node, ".nvmrc", "v20.11.1\n", []string{"20.11.1"}},
		{Node, ".nvmrc", "lts/iron\n", []string{"lts/iron"}},
		{Node, ".node-version", "22\r\n", []string{"22"}},
		{Node, ".tool-versions", "python 3.12\nnodejs 20.9.0\n", []string{"20.9.0"}},
		{Node, "package.json", `{"engines": {"node": ">=18"}, "volta": {"node": "20.11.1"}}`, []string{"20.11.1"}},
		{Node, "package.json", `{"engines": {"node": "^20.9 || >=22"}}`, []string{"^20.9 || >=22"}},
		{Node, "package.json", `{"devEngines": {"runtime": [{"name": "bun"}, {"name": "node", "version": "^22"}]}}`, []string{"^22"}},
		{Python, ".python-version", "# the versions we test\n3.11\n\n3.12\n", []string{"3.11", "3.12"}},
		{Python, "pyproject.toml", "[project]\nname = \"x\"\nrequires-python = \">=3.9\"\n", []string{">=3.9"}},
		{Python, "pyproject.toml", "[tool.poetry.dependencies]\npython = \"^3.10\"\n", []string{"^3.10"}},
		{Python, "Pipfile", "[requires]\npython_version = \"3.11\"\n", []string{"3.11"}},
		{Python, ".tool-versions", "python 3.12.1\n", []string{"3.12.1"}},
	}
	for _, tt := range tests {
		got, err := tt.tool.FromFile(tt.name, []byte(tt.content))
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s %s: %q, %v; want %q", tt.tool.Label, tt.name, got, err, tt.want)
		}
	}
	for _, tt := range []struct {
		tool          Tool
		name, content string
	}{
		{Go, "go.mod", "module x\n"},
		{Node, "package.json", `{"name": "x"}`},
		{Node, "package.json", `{"volta": {"extends": "../package.json"}}`},
		{Python, "pyproject.toml", "[project]\nname = \"x\"\n"},
		{Python, "pyproject.toml", "[project\n"},
	} {
		if got, err := tt.tool.FromFile(tt.name, []byte(tt.content)); err == nil {
			t.Errorf("%s %s %q: %q, want an error", tt.tool.Label, tt.name, tt.content, got)
		}
	}
}

// TestProbe runs the probe script on this machine with a PATH of fake toolchains
// and finds them, the one on PATH first.
func TestProbe(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("the probe is a POSIX shell script")
	}
	dir := t.TempDir()
	fake := func(sub, version string) string {
		d := filepath.Join(dir, sub)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		script := "#!/bin/sh\n[ \"$1 $2\" = 'env GOVERSION' ] && echo " + version + "\n"
		if err := os.WriteFile(filepath.Join(d, "go"), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	a, b := fake("a", "go1.25.3"), fake("b", "go1.26.8")
	notExec := filepath.Join(dir, "c")
	_ = os.MkdirAll(notExec, 0o755)
	_ = os.WriteFile(filepath.Join(notExec, "go"), []byte("x"), 0o644)
	path := strings.Join([]string{notExec, a, b, a, "/usr/bin", "/bin"}, ":")
	cmd := exec.Command("sh", "-c", Go.Probe())
	// The Go the probe also finds (/usr/local/go) starts a telemetry upload in the
	// background that writes below the user's config directory after it exits: one that
	// cannot be made keeps it out of dir, which the test removes.
	cmd.Env = []string{"PATH=" + path, "HOME=" + dir, "XDG_CONFIG_HOME=/dev/null", "RUNNER_TOOL_CACHE=" + dir + "/none"}
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("probe: %v", err)
	}
	found, skipped := Go.Parse(string(out))
	if len(skipped) > 0 || len(found) < 2 || found[0].Path != a+"/go" || !found[0].OnPath || found[1].Path != b+"/go" {
		t.Fatalf("found %+v, skipped %v\n%s", found, skipped, out)
	}
	got, err := Go.Choose("^1.26", false, found)
	if err != nil || got.Path != b+"/go" {
		t.Fatalf("Choose(^1.26) = %+v, %v", got, err)
	}
}
