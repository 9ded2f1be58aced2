package pipeline

import (
	"fmt"
	"strings"

	"go.yaml.in/yaml/v3"
)

// setupTool describes one actions/setup-* action.
type setupTool struct {
	label, cmd, versionKey, fileKey string
	// version prints the version of the program at "$bin", without a leading v or go.
	version string
	// dirs are places a toolchain may be installed besides PATH, as shell globs.
	dirs string
}

var setupTools = map[string]setupTool{
	"actions/setup-go": {label: "Go", cmd: "go", versionKey: "go-version", fileKey: "go-version-file",
		version: `"$bin" env GOVERSION | sed 's/^go//'`,
		dirs:    `/usr/local/go/bin "$HOME"/sdk/go*/bin /usr/lib/go-*/bin /opt/hostedtoolcache/go/*/*/bin`},
	"actions/setup-node": {label: "Node.js", cmd: "node", versionKey: "node-version", fileKey: "node-version-file",
		version: `"$bin" --version | sed 's/^v//'`,
		dirs:    `/usr/local/bin /usr/bin /opt/hostedtoolcache/node/*/*/bin "$HOME"/.nvm/versions/node/*/bin`},
	"actions/setup-python": {label: "Python", cmd: "python3", versionKey: "python-version", fileKey: "python-version-file",
		version: `"$bin" -c 'import platform; print(platform.python_version())'`,
		dirs:    `/usr/local/bin /usr/bin /opt/hostedtoolcache/Python/*/*/bin`},
}

// setup becomes a step that finds the requested version on the worker (PATH first, then
// the usual install places), puts its directory on the PATH of the later steps, and
// otherwise fails naming the version: Gantry never downloads a toolchain.
func (t *ghaTranslator) setup(j *ghaJob, st *ghaStep, r *yaml.Node, u field, action string, args map[string]field, name, cond *field) *yaml.Node {
	d := t.d
	tool := setupTools[action]
	t.unsupportedInputs(action, args, []string{tool.versionKey, tool.fileKey},
		[]string{"cache", "cache-dependency-path", "check-latest", "architecture", "token", "registry-url", "scope", "always-auth", "allow-prereleases", "update-environment"})
	want, wantFile := "", ""
	if f, ok := args[tool.versionKey]; ok {
		if v, _, ok := t.actionInput(j, st, f, ghaRunScript); ok {
			want = strings.TrimSpace(strings.SplitN(strings.TrimSpace(v), "\n", 2)[0])
		}
	}
	if f, ok := args[tool.fileKey]; ok && want == "" {
		if v, _, ok := t.actionInput(j, st, f, ghaRunScript); ok {
			wantFile = strings.TrimSpace(v)
		}
	}
	stepName := "Set up " + tool.label
	if want != "" {
		stepName += " " + want
	}
	if name != nil {
		if v, ok := d.str(name.val, name.path, "a step name"); ok {
			stepName = t.text(v, d.resolve(name.val), name.path, j, st, ghaStepName)
		}
	}
	out := gMap(r)
	put(out, "name", u.keyNode, gStr(stepName, u.val))
	if cond != nil {
		if v, ok := d.str(cond.val, cond.path, "an expression"); ok {
			put(out, "if", cond.keyNode, gStr(t.condition(v, d.resolve(cond.val), cond.path, j), d.resolve(cond.val)))
		}
	}
	put(out, "shell", u.keyNode, gStr("sh", u.val))
	put(out, "run", u.val, gStr(setupScript(action, tool, want, wantFile), u.val))
	return out
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func setupScript(action string, tool setupTool, want, wantFile string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# %s, run by Gantry: find %s on this worker; nothing is downloaded\n", action, tool.label)
	fmt.Fprintf(&b, "want=%s\n", shellQuote(want))
	if wantFile != "" {
		fmt.Fprintf(&b, "file=%s\n", shellQuote(wantFile))
		b.WriteString(`case "$file" in
  *go.mod) want=$(sed -n 's/^toolchain go//p; s/^go //p' "$file" | tail -n 1) ;;
  *) want=$(head -n 1 "$file" | tr -d ' \r') ;;
esac
`)
	}
	fmt.Fprintf(&b, "label=%s\ncmd=%s\n", shellQuote(tool.label), shellQuote(tool.cmd))
	fmt.Fprintf(&b, "version() { %s; }\n", tool.version)
	b.WriteString(`w=${want#v}; w=${w#^}; w=${w#\~}; w=${w#>=}; w=${w%.x}; w=${w%.\*}
matches() {
  case "$w" in ""|stable|latest|oldstable|lts/*|node|"*"|x) return 0 ;; esac
  case "$1." in "$w".*) return 0 ;; esac
  return 1
}
found=""
for bin in $(command -v "$cmd") ` + tool.dirs + ` ; do
  case "$bin" in */"$cmd") ;; *) bin="$bin/$cmd" ;; esac
  [ -x "$bin" ] || continue
  v=$(version 2>/dev/null) || continue
  if matches "$v"; then
    dir=$(dirname "$bin")
    echo "$label $v at $bin"
    if [ "$(command -v "$cmd")" != "$bin" ]; then
      if [ -n "${GANTRY_PATH:-}" ]; then echo "$dir" >> "$GANTRY_PATH"; else echo "$label $v is not first on PATH; later steps find $(command -v "$cmd" || echo nothing)" >&2; exit 1; fi
    fi
    exit 0
  fi
  found="$found $v"
done
echo "` + action + `: $label ${want:-(any)} is not on this worker${found:+ (found:$found)}; Gantry runs this action natively and does not download toolchains: install $label $want on the worker or in the job's image" >&2
exit 1
`)
	return b.String()
}
