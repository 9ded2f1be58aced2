package pipeline

import (
	"slices"
	"strings"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// secretNamePattern is what a secret's name looks like: an environment variable's name
// in upper case. Names are case-sensitive, and lower case is refused rather than folded,
// so that one secret has one spelling everywhere.
var secretNamePattern = lazyre.New(`^[A-Z_][A-Z0-9_]*$`)

// MaxSecretNameLen bounds a secret's name.
const MaxSecretNameLen = 128

// ValidSecretName reports whether name may name a secret.
func ValidSecretName(name string) bool {
	return len(name) <= MaxSecretNameLen && secretNamePattern.MatchString(name)
}

// SecretRef is the canonical reference to a secret that a plan's env values hold.
func SecretRef(name string) string { return "${{ secrets." + name + " }}" }

// secretRefPattern finds canonical references (what SecretRef writes).
var secretRefPattern = lazyre.New(`\$\{\{ secrets\.([A-Z_][A-Z0-9_]*) \}\}`)

// SecretRefs lists the secrets s refers to, each once, in order of first use.
func SecretRefs(s string) []string {
	if !strings.Contains(s, "${{") {
		return nil
	}
	var out []string
	for _, m := range secretRefPattern.FindAllStringSubmatch(s, -1) {
		if !slices.Contains(out, m[1]) {
			out = append(out, m[1])
		}
	}
	return out
}

// Secrets lists the secrets a job refers to in its own env, its steps' and services' env
// and its registry credentials, sorted:
// exactly what the worker that claims it is given.
func (j *Job) Secrets() []string {
	var out []string
	add := func(env map[string]string) {
		for _, v := range env {
			for _, n := range SecretRefs(v) {
				if !slices.Contains(out, n) {
					out = append(out, n)
				}
			}
		}
	}
	add(j.Env)
	for _, st := range j.Steps {
		add(st.Env)
		add(st.With)
	}
	for _, sv := range j.Services {
		add(sv.Env)
	}
	if c := j.Container; c != nil && c.Credentials != nil {
		add(map[string]string{"username": c.Credentials.Username, "password": c.Credentials.Password})
	}
	slices.Sort(out)
	return out
}

// ExpandSecrets replaces each secret reference in s by its value; a reference without a
// value becomes empty (a job whose secret is missing fails before its first step, so a
// step never sees that).
func ExpandSecrets(s string, values map[string]string) string {
	if !strings.Contains(s, "${{") {
		return s
	}
	return secretRefPattern.ReplaceAllStringFunc(s, func(ref string) string {
		return values[secretRefPattern.FindStringSubmatch(ref)[1]]
	})
}
