package pipeline

import (
	"fmt"
	"path"
	"strings"
)

// MaxArtifactName bounds the length of an artifact's path.
const MaxArtifactName = 1024

// MatchArtifactPath reports whether name, a slash-separated path relative to the
// workspace, matches pattern, an artifacts path: segments are matched as path.Match does,
// and a "**" segment matches any number of segments, none included. A malformed pattern
// matches nothing.
func MatchArtifactPath(pattern, name string) bool {
	return matchSegments(strings.Split(pattern, "/"), strings.Split(name, "/"))
}

func matchSegments(pat, name []string) bool {
	for len(pat) > 0 {
		if pat[0] == "**" {
			// Collapse a run of "**" and try every split of the remaining segments.
			for len(pat) > 0 && pat[0] == "**" {
				pat = pat[1:]
			}
			if len(pat) == 0 {
				return true
			}
			for i := range name {
				if matchSegments(pat, name[i:]) {
					return true
				}
			}
			return false
		}
		if len(name) == 0 {
			return false
		}
		if ok, err := path.Match(pat[0], name[0]); err != nil || !ok {
			return false
		}
		pat, name = pat[1:], name[1:]
	}
	return len(name) == 0
}

// CheckArtifactName says what is wrong with name as the path an artifact is kept under,
// or "" when it is a clean path inside the workspace. A downstream job's worker writes the
// file there, so nothing that could leave the workspace passes.
func CheckArtifactName(name string) string {
	switch {
	case name == "":
		return "is empty"
	case len(name) > MaxArtifactName:
		return fmt.Sprintf("is longer than %d bytes", MaxArtifactName)
	case strings.HasPrefix(name, "/"):
		return "must be relative to the workspace"
	case strings.ContainsAny(name, "\\\x00"):
		return "must use / as separator and hold no NUL"
	case path.Clean(name) != name || name == "." || name == ".." || strings.HasPrefix(name, "../"):
		return "must be a clean path inside the workspace (no ., .. or empty segments)"
	}
	return ""
}
