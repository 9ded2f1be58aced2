package executor

import (
	"fmt"
	"strings"
)

// A step's shell may be one of GitHub's that run a script file rather than a -c string:
// pwsh and powershell (the file ends in .ps1), cmd (.cmd), or any command line with {0}
// where the file's path goes (msys2 {0}, perl {0}, bash -l {0}). Such a step runs as
// a small sh script that writes the step's script to a file of its own in $RUNNER_TEMP
// (else $TMPDIR or /tmp), runs the command with {0} replaced by the file's path, removes
// the file and exits as the command did. So every executor runs them alike, wherever sh
// is (the worker, the sandbox, a container, a pod), and a program the environment does
// not have is a failure of the step that names it, with exit code 127.

// knownShells are GitHub's shells that run a file: the command line and the file's
// extension, and the lines GitHub's runner puts before and after the script.
var knownShells = map[string]struct {
	command, ext, before, after string
}{
	"pwsh": {command: `pwsh -command ". '{0}'"`, ext: ".ps1",
		before: "$ErrorActionPreference = 'stop'\n",
		after:  "\nif ((Test-Path -LiteralPath variable:\\LASTEXITCODE)) { exit $LASTEXITCODE }\n"},
	"powershell": {command: `powershell -command ". '{0}'"`, ext: ".ps1",
		before: "$ErrorActionPreference = 'stop'\n",
		after:  "\nif ((Test-Path -LiteralPath variable:\\LASTEXITCODE)) { exit $LASTEXITCODE }\n"},
	"cmd": {command: `cmd /D /E:ON /V:OFF /S /C "CALL "{0}""`, ext: ".cmd"},
}

// templateWrapper is the sh script that runs a templated shell. Its arguments: the
// shell as the step gave it (for messages), the file's extension, the script, then the
// command's words with {0} in them.
const templateWrapper = `shell=$1 ext=$2 body=$3
shift 3
if ! command -v "$1" >/dev/null 2>&1; then
  printf 'gantry: shell "%s": %s is not installed here (not on PATH: %s)\n' "$shell" "$1" "$PATH" >&2
  exit 127
fi
dir=$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/gantry-step.XXXXXX") || exit 1
file="$dir/script$ext"
printf '%s' "$body" > "$file" || exit 1
n=$#
while [ "$n" -gt 0 ]; do
  a=$1 out=
  shift
  while :; do
    case $a in
      *'{0}'*) out=$out${a%%'{0}'*}$file; a=${a#*'{0}'} ;;
      *) out=$out$a; break ;;
    esac
  done
  set -- "$@" "$out"
  n=$((n - 1))
done
# A cancel's SIGTERM reaches the command too: this script waits for it to end, within
# the grace, and exits as it did.
trap : TERM INT
"$@"
rc=$?
rm -rf "$dir"
exit $rc
`

// templateArgs is the command line of a step whose shell runs a file, or ok false for a
// shell that is neither one of knownShells nor a command with {0}.
func templateArgs(shell, script string) (args []string, ok bool, err error) {
	command, ext := shell, ""
	if k, known := knownShells[shell]; known {
		command, ext = k.command, k.ext
		script = k.before + script + k.after
	} else if !strings.Contains(shell, "{0}") {
		return nil, false, nil
	}
	words, err := ShellWords(command)
	if err != nil {
		return nil, true, fmt.Errorf("shell %q: %w", shell, err)
	}
	if len(words) == 0 || strings.Contains(words[0], "{0}") {
		return nil, true, fmt.Errorf("shell %q: a command comes before {0}", shell)
	}
	return append([]string{"sh", "-c", templateWrapper, "sh", shell, ext, script}, words...), true, nil
}

// ShellWords splits a shell's command line into words: at spaces and tabs, except
// within single or double quotes, which group and are removed. A backslash is an
// ordinary character (D:\cygwin\bin\bash.exe '{0}' is two words).
func ShellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, c := range s {
		switch {
		case quote != 0:
			if c == quote {
				quote = 0
			} else {
				cur.WriteRune(c)
			}
		case c == '\'' || c == '"':
			quote, inWord = c, true
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(c)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("a %c quote is not closed", quote)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
