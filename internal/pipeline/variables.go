package pipeline

import (
	"strings"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// variableNamePattern is what a configuration variable's name looks like on GitHub:
// letters, digits and _, not starting with a digit.
var variableNamePattern = lazyre.New(`^[A-Za-z_][A-Za-z0-9_]*$`)

// MaxVariableNameLen bounds a configuration variable's name.
const MaxVariableNameLen = 128

// ValidVariableName reports whether name may name a configuration variable (vars.NAME):
// letters, digits and _, not starting with a digit nor with GITHUB_ (in any case), which
// GitHub keeps for its own, at most MaxVariableNameLen bytes. Names are case-insensitive,
// as on GitHub: vars.greeting reads GREETING.
func ValidVariableName(name string) bool {
	return len(name) <= MaxVariableNameLen && variableNamePattern.MatchString(name) &&
		!strings.HasPrefix(strings.ToUpper(name), "GITHUB_")
}

// VariableNameRule says what ValidVariableName accepts, for messages.
const VariableNameRule = "letters, digits and _, not starting with a digit or GITHUB_, at most 128 bytes"
