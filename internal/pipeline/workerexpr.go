package pipeline

import (
	"encoding/base64"
	"fmt"
	"slices"
	"strings"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
	"github.com/gantry-ci/gantry/internal/lazyre"
)

// A workflow's ${{ }} that Gantry's references cannot say (an operator, a function,
// github.event.*, a secret GitHub gives every workflow) is kept in the plan as it is
// written, to be evaluated by the worker when the step runs, where and when GitHub
// evaluates it (internal/ghaexpr). The plan holds it as ${{ gha:BASE64 }}: the
// expression's text, base64url-encoded so that nothing in it (}}, quotes) is read as
// anything else.

const workerExprPrefix = "gha:"

// WorkerExpr writes a GitHub expression as the plan keeps it for the worker.
func WorkerExpr(src string) string {
	return "${{ " + workerExprPrefix + base64.RawURLEncoding.EncodeToString([]byte(src)) + " }}"
}

var workerExprPattern = lazyre.New(`\$\{\{ gha:([A-Za-z0-9_-]*) \}\}`)

// decodeWorkerExpr reads the expression of a kept reference's inner text (gha:BASE64).
func decodeWorkerExpr(inner string) (string, bool) {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(inner, workerExprPrefix))
	return string(b), err == nil && strings.HasPrefix(inner, workerExprPrefix)
}

// HasWorkerExprs says whether s holds an expression kept for the worker.
func HasWorkerExprs(s string) bool {
	return strings.Contains(s, "${{ "+workerExprPrefix)
}

// ExpandWorkerExprs replaces each expression s keeps for the worker by what eval makes
// of it; the first error is returned, with the text as far as it got.
func ExpandWorkerExprs(s string, eval func(expr string) (string, error)) (string, error) {
	if !HasWorkerExprs(s) {
		return s, nil
	}
	var first error
	out := workerExprPattern.ReplaceAllStringFunc(s, func(ref string) string {
		expr, ok := decodeWorkerExpr(strings.TrimSuffix(strings.TrimPrefix(ref, "${{ "), " }}"))
		if !ok {
			return ref
		}
		v, err := eval(expr)
		if err != nil && first == nil {
			first = err
		}
		return v
	})
	return out, first
}

// runTimeRefs finds, in one pattern, every reference the worker puts in when a step runs:
// an expression kept for it (1), steps.ID (2) .outputs.NAME, .outcome or .conclusion (3),
// and secrets.NAME as SecretRef writes it (4).
var runTimeRefs = lazyre.New(`\$\{\{ (?:gha:([A-Za-z0-9_-]*)|steps\.([A-Za-z_][A-Za-z0-9_-]*)\.(outputs\.[A-Za-z_][A-Za-z0-9_-]*|outcome|conclusion)|secrets\.([A-Z_][A-Z0-9_]*)) \}\}`)

// RunValues are what the worker puts into a step's text (its run, name, env and with:
// values) and the job's outputs and environment url when the step runs or the job ends.
type RunValues struct {
	// Steps are the steps that ran before: ${{ steps.ID.outputs.NAME }}, .outcome and
	// .conclusion read them; a step that did not run or set no such output gives "".
	Steps map[string]StepState
	// Secrets are the job's secrets, for ${{ secrets.NAME }} as SecretRef writes it;
	// nil leaves those as they are.
	Secrets map[string]string
	// Eval evaluates an expression kept for the worker (WorkerExpr); nil leaves those as
	// they are.
	Eval func(expr string) (string, error)
}

// Expand puts every reference s holds in, in one pass: each is replaced by its value as
// text, and nothing a value holds is read again. A step's output, a line a step wrote to
// $GITHUB_ENV, a secret or an event's text that reads like ${{ gha:... }} or ${{ steps.x
// }} stays that text, as on GitHub, where an expression's value is never evaluated
// again; evaluating the kept expressions and putting in the steps' values in two passes
// would let the first pass's values be read by the second (a step output crafted as a
// kept expression could read the job's secrets). The first error is returned, with the
// text as far as it got.
func (v RunValues) Expand(s string) (string, error) {
	if !strings.Contains(s, "${{") {
		return s, nil
	}
	var first error
	out := runTimeRefs.ReplaceAllStringFunc(s, func(ref string) string {
		m := runTimeRefs.FindStringSubmatch(ref)
		switch {
		case m[2] != "":
			st := v.Steps[m[2]]
			switch m[3] {
			case "outcome":
				return st.Outcome
			case "conclusion":
				return st.Conclusion
			}
			return st.Outputs[strings.TrimPrefix(m[3], "outputs.")]
		case m[4] != "":
			if v.Secrets == nil {
				return ref
			}
			return v.Secrets[m[4]]
		}
		expr, ok := decodeWorkerExpr(workerExprPrefix + m[1])
		if !ok || v.Eval == nil {
			return ref
		}
		val, err := v.Eval(expr)
		if err != nil && first == nil {
			first = err
		}
		return val
	})
	return out, first
}

// secretsInExpr finds secrets.NAME (and secrets['NAME']) in an expression's text, and
// github.token, which is the secret GITHUB_TOKEN.
var secretsInExpr = lazyre.New(`(?i)\bsecrets\s*(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*'([A-Za-z_][A-Za-z0-9_]*)'\s*\])|\bgithub\s*\.\s*token\b`)

// workerExprSecrets lists the secrets the expressions s keeps for the worker read.
func workerExprSecrets(s string) []string {
	var out []string
	for _, m := range workerExprPattern.FindAllStringSubmatch(s, -1) {
		expr, ok := decodeWorkerExpr(workerExprPrefix + m[1])
		if !ok {
			continue
		}
		for _, sm := range secretsInExpr.FindAllStringSubmatch(expr, -1) {
			name := strings.ToUpper(sm[1] + sm[2])
			if name == "" {
				name = GitHubTokenSecret
			}
			if !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// GitHubTokenSecret is the project secret that secrets.GITHUB_TOKEN and github.token
// read in a workflow: the token an admin keeps for the project's forge.
const GitHubTokenSecret = "GITHUB_TOKEN"

// OptionalSecrets are the secrets the job's workflow expressions read (see WorkerExpr):
// as on GitHub, one the project does not have reads as "", so the job runs without it
// (the coordinator says so in its log). Those in Secrets are not repeated.
func (j *Job) OptionalSecrets() []string {
	required := j.Secrets()
	var out []string
	add := func(s string) {
		for _, n := range workerExprSecrets(s) {
			if !slices.Contains(out, n) && !slices.Contains(required, n) {
				out = append(out, n)
			}
		}
	}
	for _, v := range j.Env {
		add(v)
	}
	for _, v := range j.Outputs {
		add(v)
	}
	for _, st := range j.Steps {
		add(st.Run)
		add(st.Name)
		for _, v := range st.Env {
			add(v)
		}
		for _, v := range st.With {
			add(v)
		}
	}
	slices.Sort(out)
	return out
}

// RunCreationExprError says why a GitHub expression cannot be decided when a run is
// created (a concurrency group), or "": it may read github (what the trigger tells),
// inputs, vars, matrix and env, and nothing a job or step makes.
func RunCreationExprError(expr string) string {
	n, err := ghaexpr.Parse(expr)
	if err != nil {
		return err.Error()
	}
	for _, r := range ghaexpr.Refs(n) {
		if !slices.Contains(runCreationContexts, strings.ToLower(r.Context)) {
			return runCreationMessage(r.Context)
		}
	}
	return ""
}

func runCreationMessage(context string) string {
	return fmt.Sprintf("%s is not known when a run is created, when a concurrency group is decided; it may read %s", context, strings.Join(runCreationContexts, ", "))
}
