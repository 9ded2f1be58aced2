package pipeline

import (
	"testing"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// TestRegexpsCompile: the package's regular expressions are compiled when first used
// (lazyre); every one of them compiles, so none can fail a user's command instead.
func TestRegexpsCompile(t *testing.T) {
	lazyre.MustCompileAll()
}
