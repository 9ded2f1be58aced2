package pipeline

import (
	"errors"
	"slices"

	"fmt"
	"strconv"
	"strings"

	"github.com/gantry-ci/gantry/internal/ghaexpr"

	"go.yaml.in/yaml/v3"
)

// GitHub's contexts written in Gantry's terms: in text (${{ }} in run, names, env
// values and settings) and in if: expressions.

// ghaTextKind says where a piece of text stands, which decides what it may read.
type ghaTextKind int

const (
	ghaRunScript   ghaTextKind = iota // a step's run: shell variables may stand in
	ghaStepName                       // a step's name
	ghaEnvValue                       // an env value: secrets may stand
	ghaPlanTime                       // a setting decided when the plan is made
	ghaCacheKey                       // a cache key: hashFiles() may stand, for the worker
	ghaOutputValue                    // a job's outputs: steps.X.outputs.Y may stand
	ghaRunCreation                    // decided when a run is created: a concurrency group
)

// runCreationContexts are the contexts an expression decided when a run is created may
// read (RunCreationExprError).
var runCreationContexts = []string{"github", "inputs", "vars", "matrix", "env"}

// ghaTextError is an expression error in text, reported at the ${{ it sits in.
func (t *ghaTranslator) textError(s string, at *yaml.Node, p string, offset int, msg string) {
	t.d.addAt(ErrExpression, text{v: s, node: at, path: p}, offset, "%s", msg)
}

// text translates every ${{ }} of s into Gantry's form.
func (t *ghaTranslator) text(s string, at *yaml.Node, p string, j *ghaJob, st *ghaStep, kind ghaTextKind) string {
	if !strings.Contains(s, "${{") {
		return s
	}
	var b strings.Builder
	rest := s
	for {
		start := strings.Index(rest, "${{")
		if start < 0 {
			b.WriteString(rest)
			return b.String()
		}
		b.WriteString(rest[:start])
		offset := len(s) - len(rest) + start
		end := strings.Index(rest[start:], "}}")
		if end < 0 {
			t.textError(s, at, p, offset, "${{ is not closed with }}")
			return s
		}
		inner := rest[start+3 : start+end]
		var v string
		n, err := parseGHA(inner)
		if err == nil {
			v, err = t.interp(n, j, st, kind)
		}
		if err != nil {
			// What Gantry's references cannot say, the worker evaluates as GitHub
			// does, when the step runs.
			if kept, ok := t.workerExpr(inner, kind); ok {
				v, err = kept, nil
			} else if kerr := t.workerExprError(inner, kind); kerr != nil {
				err = kerr
			}
		}
		if err == nil {
			b.WriteString(v)
		}
		if err != nil {
			t.textError(s, at, p, offset+3+err.offset, err.msg)
		}
		rest = rest[start+end+2:]
	}
}

// interp writes an expression that stands in text: a reference, a literal, or format()
// of those.
func (t *ghaTranslator) interp(n ghaNode, j *ghaJob, st *ghaStep, kind ghaTextKind) (string, *ghaExprError) {
	switch n := n.(type) {
	case *ghaLit:
		return n.val, nil
	case *ghaParen:
		return t.interp(n.x, j, st, kind)
	case *ghaRef:
		return t.refText(n, j, st, kind)
	case *ghaCall:
		if strings.EqualFold(n.name, "format") && len(n.args) > 0 {
			f, ok := n.args[0].(*ghaLit)
			if !ok || f.kind != 's' {
				return "", &ghaExprError{n.at, "format() needs its format string written out"}
			}
			return formatText(f.val, n.at, func(i int) (string, *ghaExprError) {
				if i+1 >= len(n.args) {
					return "", &ghaExprError{n.at, fmt.Sprintf("format() has no argument {%d}", i)}
				}
				return t.interp(n.args[i+1], j, st, kind)
			})
		}
		if strings.EqualFold(n.name, "hashFiles") && kind == ghaCacheKey {
			return hashFilesText(n)
		}
		return "", &ghaExprError{n.at, fmt.Sprintf("%s() in text is not supported; Gantry puts in references (matrix.X, env.X, github.sha ...) and format() of them, and hashFiles() in a cache key", n.name)}
	}
	return "", &ghaExprError{n.pos(), "only a reference, a literal or format() may stand in text; an operator here is not supported"}
}

// hashFilesText writes hashFiles('glob', ...) as Gantry keeps it in a cache key, for the
// worker to compute over the workspace.
func hashFilesText(n *ghaCall) (string, *ghaExprError) {
	if len(n.args) == 0 {
		return "", &ghaExprError{n.at, "hashFiles() needs at least one pattern"}
	}
	args := make([]string, len(n.args))
	for i, a := range n.args {
		lit, ok := a.(*ghaLit)
		if !ok || lit.kind != 's' {
			return "", &ghaExprError{a.pos(), "hashFiles() takes patterns written out as strings"}
		}
		args[i] = "'" + strings.ReplaceAll(lit.val, "'", "''") + "'"
	}
	return "${{ hashFiles(" + strings.Join(args, ", ") + ") }}", nil
}

// formatText expands GitHub's format(): {N} is argument N, {{ and }} are braces.
func formatText(f string, at int, arg func(int) (string, *ghaExprError)) (string, *ghaExprError) {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		switch {
		case strings.HasPrefix(f[i:], "{{"):
			b.WriteByte('{')
			i++
		case strings.HasPrefix(f[i:], "}}"):
			b.WriteByte('}')
			i++
		case f[i] == '{':
			end := strings.IndexByte(f[i:], '}')
			if end < 0 {
				return "", &ghaExprError{at, "format string has { without }"}
			}
			k, err := strconv.Atoi(f[i+1 : i+end])
			if err != nil || k < 0 {
				return "", &ghaExprError{at, fmt.Sprintf("format string: %q is not {N}", f[i:i+end+1])}
			}
			v, e := arg(k)
			if e != nil {
				return "", e
			}
			b.WriteString(v)
			i += end
		default:
			b.WriteByte(f[i])
		}
	}
	return b.String(), nil
}

// githubRunValues are github.* properties that are one of Gantry's run values, which it
// puts in when a run is created.
var githubRunValues = map[string]string{
	"sha": "${{ sha }}", "ref": "${{ ref }}", "ref_name": "${{ branch }}${{ tag }}", "event_name": "${{ event }}",
	"repository": "${{ repository }}", "event.pull_request.number": "${{ pr.number }}", "event.number": "${{ pr.number }}",
	"event.pull_request.head.repo.fork": "${{ pr.fork }}",
}

// githubShellValues are github.* and runner.* properties known only on the worker: a run
// reads them from the variable Gantry sets.
var githubShellValues = map[string]string{
	"github.workspace": "${GANTRY_WORKSPACE}", "github.run_id": "${GANTRY_RUN_ID}", "github.run_attempt": "${GANTRY_ATTEMPT}",
	"github.run_number": "${GANTRY_RUN_NUMBER}", "runner.temp": "${RUNNER_TEMP:-${TMPDIR:-/tmp}}",
}

func (t *ghaTranslator) knownEnv(j *ghaJob, st *ghaStep, name string) bool {
	switch {
	case st != nil:
		return contains(st.env, name)
	case j != nil:
		return contains(j.env, name)
	}
	return contains(t.env, name)
}

// refText writes a context reference that stands in text.
func (t *ghaTranslator) refText(r *ghaRef, j *ghaJob, st *ghaStep, kind ghaTextKind) (string, *ghaExprError) {
	full := r.name()
	one := len(r.path) == 1 && r.path[0] != "*"
	switch r.head {
	case "matrix":
		if noMatrixKey(r, j) {
			return "", nil
		}
		if name, ok := flatMatrixName(r, j); ok {
			return "${{ matrix." + name + " }}", nil
		}
		if one && j != nil && j.flat[r.path[0]] {
			return "", wholeMatrixObject(r)
		}
		if one {
			return "${{ matrix." + r.path[0] + " }}", nil
		}
	case "env":
		if !one {
			break
		}
		name := r.path[0]
		switch {
		case t.knownEnv(j, st, name):
			return "${{ env." + name + " }}", nil
		case kind == ghaRunScript:
			// Set by an earlier step through $GITHUB_ENV, or by the run: the shell has it.
			return "${" + name + "}", nil
		}
		return "", &ghaExprError{r.at, fmt.Sprintf("env.%s is not set in the workflow's, job's or step's env; Gantry puts env values in when it plans, so a variable set by an earlier step can be read only as $%s in a run", name, name)}
	case "secrets":
		if !one {
			break
		}
		name := strings.ToUpper(r.path[0])
		if name == "GITHUB_TOKEN" {
			return "", &ghaExprError{r.at, "Gantry has no GitHub token (secrets.GITHUB_TOKEN); keep a token as a project secret and read that"}
		}
		switch kind {
		case ghaEnvValue:
			// Read by the worker, so that a secret the project does not have reads as
			// "" (and the log says so), as on GitHub.
			return WorkerExpr("secrets." + name), nil
		case ghaRunScript:
			if st != nil {
				if !contains(st.secrets, name) {
					st.secrets = append(st.secrets, name)
				}
				return "${" + name + "}", nil
			}
		}
		return "", &ghaExprError{r.at, fmt.Sprintf("secrets.%s may stand only in env values and a step's run", name)}
	case "inputs":
		if one {
			return "${{ inputs." + r.path[0] + " }}", nil
		}
	case "github":
		p := strings.Join(r.path, ".")
		if v, ok := githubRunValues[p]; ok {
			return v, nil
		}
		if len(r.path) == 3 && r.path[0] == "event" && r.path[1] == "inputs" {
			return "${{ inputs." + r.path[2] + " }}", nil
		}
		switch p {
		case "workflow":
			return t.workflow, nil
		case "job":
			if j != nil {
				return j.id, nil
			}
		}
	case "runner":
		if one && r.path[0] == "os" {
			return "Linux", nil
		}
	case "needs":
		if len(r.path) == 3 && r.path[0] != "*" && r.path[1] == "outputs" {
			if kind == ghaPlanTime || kind == ghaCacheKey || kind == ghaRunCreation {
				return "", &ghaExprError{r.at, full + " is known only when the job is claimed; it may stand in the job's name, a step's run and name, env values, outputs and an environment's url"}
			}
			return "${{ " + full + " }}", nil
		}
	case "steps":
		if noStepID(r, j) {
			return "", nil
		}
		if (len(r.path) == 3 && r.path[1] == "outputs") || (len(r.path) == 2 && (r.path[1] == "outcome" || r.path[1] == "conclusion")) {
			if kind == ghaPlanTime || kind == ghaCacheKey || kind == ghaRunCreation {
				return "", &ghaExprError{r.at, full + " is known only when the step runs; it may stand in a later step's run, name and env and in the job's outputs and environment url"}
			}
			if len(r.path) == 2 {
				// GitHub's words for a step's result (failure, not Gantry's failed):
				// the worker puts them in.
				return WorkerExpr(full), nil
			}
			return "${{ " + full + " }}", nil
		}
	}
	if v, ok := githubShellValues[full]; ok {
		if kind == ghaRunScript {
			return v, nil
		}
		return "", &ghaExprError{r.at, fmt.Sprintf("%s is known only on the worker; read it in a run as %s", full, v)}
	}
	if r.head == "github" && len(r.path) > 0 && slices.Contains(workerGitHub, strings.ToLower(r.path[0])) && r.path[0] != "*" && !workerKind(kind) {
		return "", &ghaExprError{r.at, fmt.Sprintf("%s is known only when the job runs; it may stand in a step's run and name, in env and with: values, a job's outputs and if:", full)}
	}
	return "", &ghaExprError{r.at, noCounterpart(full, "")}
}

// noCounterpart says that a reference has no counterpart in Gantry (where: in its if:).
func noCounterpart(full, where string) string {
	if strings.EqualFold(full, "github.run_number") {
		// The number is taken in the transaction that creates the run, after the
		// conditions of the jobs that need nothing were decided: only the worker has it.
		return full + " is known only when a step runs; it may stand in a step's run, name, env, with: and if:, not in a job's if:"
	}
	return full + " has no counterpart in Gantry" + where
}

// condition translates an if: into Gantry's expression language. GitHub lets the whole
// expression be wrapped in ${{ }}.
func (t *ghaTranslator) condition(v string, at *yaml.Node, p string, j *ghaJob) string {
	src, lead := v, 0
	trimmed := strings.TrimSpace(v)
	if strings.HasPrefix(trimmed, "${{") && strings.HasSuffix(trimmed, "}}") && strings.Count(trimmed, "${{") == 1 {
		lead = strings.Index(v, "${{") + 3
		src = trimmed[3 : len(trimmed)-2]
	}
	n, err := parseGHA(src)
	var out string
	if err == nil {
		out, err = t.cond(n, j, true)
	}
	if err != nil {
		// What Gantry's language cannot say is decided as GitHub decides it.
		// A step's if: is decided by the worker, which knows the run's number too.
		kerr := conditionExprError(src, strings.Contains(p, ".steps["))
		if kerr == nil {
			return GitHubCondition(strings.TrimSpace(src))
		}
		if _, perr := ghaexpr.Parse(src); perr != nil || strings.Contains(kerr.msg, "vars") || strings.Contains(kerr.msg, "has no counterpart") {
			err = kerr
		}
		t.d.addAt(ErrExpression, text{v: v, node: at, path: p}, lead+err.offset, "%s", err.msg)
		return v
	}
	return out
}

// conditionGitHub are the properties of the github context an if: reads as GitHub
// decides it (ghacond.go).
var conditionGitHub = []string{"sha", "ref", "ref_name", "ref_type", "repository", "repository_owner", "event_name", "event",
	"actor", "triggering_actor", "base_ref", "head_ref", "*"}

// parseGitHub parses an expression with GitHub's evaluator, its error where it is.
func parseGitHub(src string) (ghaexpr.Node, *ghaExprError) {
	n, err := ghaexpr.Parse(src)
	if err != nil {
		var e *ghaexpr.Error
		if errors.As(err, &e) {
			return nil, &ghaExprError{e.Offset, e.Msg}
		}
		return nil, &ghaExprError{0, err.Error()}
	}
	return n, nil
}

// conditionExprError says why an if: cannot be decided as GitHub decides it, or nil;
// step says it is a step's, which the worker decides.
func conditionExprError(src string, step bool) *ghaExprError {
	n, perr := parseGitHub(src)
	if perr != nil {
		return perr
	}
	for _, r := range ghaexpr.Refs(n) {
		head := strings.ToLower(r.Context)
		name := strings.Join(append([]string{head}, r.Path...), ".")
		switch head {
		case "github":
			if len(r.Path) > 0 && !slices.Contains(conditionGitHub, strings.ToLower(r.Path[0])) &&
				!(step && strings.EqualFold(r.Path[0], "run_number")) {
				return &ghaExprError{r.At, noCounterpart(name, "'s if:")}
			}
		case "needs", "inputs", "env", "matrix", "steps", "vars":
		case "runner":
			if len(r.Path) != 1 || !strings.EqualFold(r.Path[0], "os") {
				return &ghaExprError{r.At, name + " has no counterpart in Gantry's if:"}
			}
		default:
			return &ghaExprError{r.At, fmt.Sprintf("an if: cannot read %s here", head)}
		}
	}
	return nil
}

// truthy writes GitHub's coercion of a value to a boolean: null, "", false and 0 are
// false, everything else true. Text is false only when empty; a matrix value was a YAML
// scalar, so false and 0 written there are false too.
func truthy(e string, typ byte) string {
	switch typ {
	case ghaBool:
		return e
	case ghaText:
		return "(" + e + ` != "")`
	case ghaMatrix:
		return "(" + e + ` not in ["", "false", "0"])`
	}
	return "(" + e + " != nil && " + e + ` != "" && ` + e + " != false && " + e + " != 0)"
}

// cond writes an expression for if:; asBool is set where GitHub coerces the value to a
// boolean.
func (t *ghaTranslator) cond(n ghaNode, j *ghaJob, asBool bool) (string, *ghaExprError) {
	switch n := n.(type) {
	case *ghaLit:
		if asBool {
			switch n.kind {
			case 's':
				return strconv.FormatBool(n.val != ""), nil
			case 'n':
				f, _ := strconv.ParseFloat(n.val, 64)
				return strconv.FormatBool(f != 0), nil
			case 'z':
				return "false", nil
			}
		}
		switch n.kind {
		case 's':
			return exprString(n.val), nil
		case 'z':
			return "nil", nil
		}
		return n.val, nil
	case *ghaParen:
		x, err := t.cond(n.x, j, asBool)
		return "(" + x + ")", err
	case *ghaUnary:
		x, err := t.cond(n.x, j, true)
		return "!" + x, err
	case *ghaBinary:
		switch n.op {
		case "&&", "||":
			l, err := t.cond(n.l, j, true)
			if err != nil {
				return "", err
			}
			r, err := t.cond(n.r, j, true)
			return l + " " + n.op + " " + r, err
		}
		l, err := t.operand(comparedLiteral(n.l, n.r), n.r, j)
		if err != nil {
			return "", err
		}
		r, err := t.operand(comparedLiteral(n.r, n.l), n.l, j)
		return l + " " + n.op + " " + r, err
	case *ghaRef:
		e, typ, err := t.refExpr(n, j)
		if err != nil {
			return "", err
		}
		if asBool {
			return truthy(e, typ), nil
		}
		return e, nil
	case *ghaCall:
		return t.call(n, j, asBool)
	}
	return "", &ghaExprError{n.pos(), "unsupported expression"}
}

// operand writes one side of a comparison. Compared with a number, text is read as a
// number, as GitHub does (matrix.go >= 1.25).
func (t *ghaTranslator) operand(n, other ghaNode, j *ghaJob) (string, *ghaExprError) {
	e, err := t.cond(n, j, false)
	if err != nil {
		return "", err
	}
	lit, isLit := other.(*ghaLit)
	if ref, ok := n.(*ghaRef); ok && isLit && lit.kind == 'n' {
		if _, typ, _ := t.refExpr(ref, j); typ == ghaText || typ == ghaMatrix {
			return "float(" + e + ")", nil
		}
	}
	return e, nil
}

// comparedLiteral rewrites a string compared with a job result or an event name into
// Gantry's word for it: 'failure' is "failed", 'workflow_dispatch' is "dispatch".
func comparedLiteral(n, other ghaNode) ghaNode {
	lit, ok := n.(*ghaLit)
	ref, ok2 := other.(*ghaRef)
	if !ok || !ok2 || lit.kind != 's' {
		return n
	}
	switch {
	case ref.head == "needs" && len(ref.path) == 2 && ref.path[1] == "result",
		ref.head == "steps" && len(ref.path) == 2 && (ref.path[1] == "outcome" || ref.path[1] == "conclusion"),
		ref.head == "job" && len(ref.path) == 1 && ref.path[0] == "status":
		if alias, ok := resultAliases[strings.ToLower(lit.val)]; ok {
			return &ghaLit{at: lit.at, kind: 's', val: alias}
		}
	case ref.head == "github" && ref.name() == "github.event_name":
		if alias, ok := onEventAlias[lit.val]; ok {
			return &ghaLit{at: lit.at, kind: 's', val: alias}
		}
	}
	return n
}

// Types of what a reference reads in if:, which decide how GitHub's coercions are
// written in Gantry's typed expressions.
const (
	ghaBool   = 'b' // a boolean
	ghaText   = 's' // text
	ghaMatrix = 'm' // a matrix value: text that was a YAML scalar, true or 1.26
	ghaAny    = 'a' // anything (inputs are typed by their declaration)
)

// refExpr writes a context reference in if:, and the type of its value.
func (t *ghaTranslator) refExpr(r *ghaRef, j *ghaJob) (string, byte, *ghaExprError) {
	full := r.name()
	one := len(r.path) == 1 && r.path[0] != "*"
	switch r.head {
	case "matrix":
		if noMatrixKey(r, j) {
			return exprString(""), ghaText, nil
		}
		if name, ok := flatMatrixName(r, j); ok {
			return memberExpr(r.head, name), ghaMatrix, nil
		}
		if one && j != nil && j.flat[r.path[0]] {
			return "", 0, wholeMatrixObject(r)
		}
		if one {
			return memberExpr(r.head, r.path[0]), ghaMatrix, nil
		}
	case "env":
		if one {
			return memberExpr(r.head, r.path[0]), ghaText, nil
		}
	case "inputs":
		if one {
			return memberExpr(r.head, r.path[0]), t.inputType(r.path[0]), nil
		}
	case "needs":
		if len(r.path) == 2 && r.path[0] != "*" && r.path[1] == "result" {
			return memberExpr(memberExpr("needs", r.path[0]), "result"), ghaText, nil
		}
		if len(r.path) == 3 && r.path[0] != "*" && r.path[1] == "outputs" {
			return memberExpr(memberExpr(memberExpr("needs", r.path[0]), "outputs"), r.path[2]), ghaText, nil
		}
	case "steps":
		switch {
		case noStepID(r, j):
			return exprString(""), ghaText, nil
		case len(r.path) == 3 && r.path[0] != "*" && r.path[1] == "outputs":
			return memberExpr(memberExpr(memberExpr("steps", r.path[0]), "outputs"), r.path[2]), ghaText, nil
		case len(r.path) == 2 && r.path[0] != "*" && (r.path[1] == "outcome" || r.path[1] == "conclusion"):
			return memberExpr(memberExpr("steps", r.path[0]), r.path[1]), ghaText, nil
		}
	case "secrets":
		return "", 0, &ghaExprError{r.at, "an if: cannot read secrets (GitHub does not allow it either); set the secret in a step's env"}
	case "runner":
		if one && r.path[0] == "os" {
			return exprString("Linux"), ghaText, nil
		}
	case "github":
		p := strings.Join(r.path, ".")
		switch p {
		case "ref", "sha", "repository":
			return p, ghaText, nil
		case "ref_name":
			return "(branch + tag)", ghaText, nil
		case "event_name":
			return "event", ghaText, nil
		case "event.pull_request.number", "event.number":
			return "pr.number", ghaAny, nil
		case "event.pull_request.head.repo.fork":
			return "pr.fork", ghaBool, nil
		case "workflow":
			return exprString(t.workflow), ghaText, nil
		case "job":
			return exprString(j.id), ghaText, nil
		}
		if len(r.path) == 3 && r.path[0] == "event" && r.path[1] == "inputs" {
			return memberExpr("inputs", r.path[2]), t.inputType(r.path[2]), nil
		}
	}
	return "", 0, &ghaExprError{r.at, noCounterpart(full, "'s if:")}
}

// inputType is how if: sees a dispatch input: a declared boolean as a boolean, a string
// or choice as text, anything else (a number, or an input the workflow does not declare)
// as it comes.
func (t *ghaTranslator) inputType(name string) byte {
	switch t.inputs[name] {
	case string(InputBoolean):
		return ghaBool
	case string(InputString), string(InputChoice), "environment":
		return ghaText
	}
	return ghaAny
}

// call writes a function call in if:.
func (t *ghaTranslator) call(n *ghaCall, j *ghaJob, asBool bool) (string, *ghaExprError) {
	arity := func(lo, hi int) *ghaExprError {
		if len(n.args) < lo || len(n.args) > hi {
			if lo == hi {
				return &ghaExprError{n.at, fmt.Sprintf("%s() takes %d arguments, not %d", n.name, lo, len(n.args))}
			}
			return &ghaExprError{n.at, fmt.Sprintf("%s() takes %d to %d arguments, not %d", n.name, lo, hi, len(n.args))}
		}
		return nil
	}
	args := func() ([]string, *ghaExprError) {
		out := make([]string, len(n.args))
		for i, a := range n.args {
			v, err := t.cond(a, j, false)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	switch strings.ToLower(n.name) {
	case "success", "failure", "always", "cancelled":
		if err := arity(0, 0); err != nil {
			return "", err
		}
		return strings.ToLower(n.name) + "()", nil
	case "contains", "startswith", "endswith":
		if err := arity(2, 2); err != nil {
			return "", err
		}
		a, err := args()
		if err != nil {
			return "", err
		}
		name := map[string]string{"contains": "contains", "startswith": "startsWith", "endswith": "endsWith"}[strings.ToLower(n.name)]
		return name + "(" + a[0] + ", " + a[1] + ")", nil
	case "format":
		if len(n.args) == 0 {
			return "", arity(1, 1)
		}
		f, ok := n.args[0].(*ghaLit)
		if !ok || f.kind != 's' {
			return "", &ghaExprError{n.at, "format() needs its format string written out"}
		}
		a, err := args()
		if err != nil {
			return "", err
		}
		var parts []string
		s, ferr := formatText(f.val, n.at, func(i int) (string, *ghaExprError) {
			if i+1 >= len(a) {
				return "", &ghaExprError{n.at, fmt.Sprintf("format() has no argument {%d}", i)}
			}
			return "\x00" + strconv.Itoa(i+1) + "\x00", nil
		})
		if ferr != nil {
			return "", ferr
		}
		for k, piece := range strings.Split(s, "\x00") {
			if k%2 == 0 {
				if piece != "" {
					parts = append(parts, exprString(piece))
				}
				continue
			}
			i, _ := strconv.Atoi(piece)
			parts = append(parts, "string("+a[i]+")")
		}
		if len(parts) == 0 {
			parts = []string{`""`}
		}
		return "(" + strings.Join(parts, " + ") + ")", nil
	case "join":
		if err := arity(1, 2); err != nil {
			return "", err
		}
		a, err := args()
		if err != nil {
			return "", err
		}
		sep := `","`
		if len(a) == 2 {
			sep = a[1]
		}
		return "join(" + a[0] + ", " + sep + ")", nil
	case "tojson":
		if err := arity(1, 1); err != nil {
			return "", err
		}
		a, err := args()
		if err != nil {
			return "", err
		}
		return "toJSON(" + a[0] + ")", nil
	case "fromjson":
		if err := arity(1, 1); err != nil {
			return "", err
		}
		a, err := args()
		if err != nil {
			return "", err
		}
		e := "fromJSON(" + a[0] + ")"
		if asBool {
			return truthy(e, ghaAny), nil
		}
		return e, nil
	case "hashfiles":
		return "", &ghaExprError{n.at, "hashFiles() reads files on the worker and has no meaning in if:"}
	}
	return "", &ghaExprError{n.at, fmt.Sprintf("unknown function %s(); GitHub's are contains, startsWith, endsWith, format, join, toJSON, fromJSON, hashFiles, success, failure, always and cancelled", n.name)}
}

// workerContexts are the contexts the worker fills for expressions it evaluates.
var workerContexts = []string{"github", "env", "matrix", "steps", "needs", "runner", "job", "secrets", "inputs", "vars"}

// workerGitHub are the properties of the github context the worker fills.
var workerGitHub = []string{"sha", "ref", "ref_name", "ref_type", "repository", "repository_owner", "event_name", "event",
	"run_id", "run_number", "run_attempt", "job", "workspace", "server_url", "api_url", "graphql_url", "token", "action", "action_path",
	"action_ref", "action_repository", "base_ref", "head_ref", "workflow", "actor", "triggering_actor", "*"}

// workerKinds are the places whose expressions the worker may evaluate: what it puts in
// when a step runs.
func workerKind(kind ghaTextKind) bool {
	return kind == ghaRunScript || kind == ghaStepName || kind == ghaEnvValue || kind == ghaOutputValue || kind == ghaRunCreation
}

// workerExpr keeps an expression for the worker (WorkerExpr) when it stands where the
// worker evaluates text and reads only what the worker knows.
func (t *ghaTranslator) workerExpr(inner string, kind ghaTextKind) (string, bool) {
	if !workerKind(kind) || t.workerExprError(inner, kind) != nil {
		return "", false
	}
	return WorkerExpr(strings.TrimSpace(inner)), true
}

// workerExprError says why an expression cannot be left to the worker, or nil.
func (t *ghaTranslator) workerExprError(inner string, kind ghaTextKind) *ghaExprError {
	if !workerKind(kind) {
		return nil
	}
	n, perr := parseGitHub(inner)
	if perr != nil {
		return perr
	}
	if kind == ghaRunCreation {
		for _, r := range ghaexpr.Refs(n) {
			if !slices.Contains(runCreationContexts, strings.ToLower(r.Context)) {
				return &ghaExprError{r.At, runCreationMessage(r.Context)}
			}
		}
		return nil
	}
	for _, r := range ghaexpr.Refs(n) {
		head := strings.ToLower(r.Context)
		name := strings.Join(append([]string{head}, r.Path...), ".")
		switch {
		case !slices.Contains(workerContexts, head):
			return &ghaExprError{r.At, fmt.Sprintf("%s is not a context a step's text may read here (%s)", head, strings.Join(workerContexts, ", "))}
		case head == "github" && len(r.Path) > 0 && !slices.Contains(workerGitHub, strings.ToLower(r.Path[0])):
			return &ghaExprError{r.At, noCounterpart(name, "")}
		}
	}
	return nil
}

// noStepID reports a reference to a step id no step of the job has, which GitHub reads
// as null ("" in text), as it does a typo or a step removed since.
func noStepID(r *ghaRef, j *ghaJob) bool {
	return j != nil && j.stepIDs != nil && len(r.path) >= 1 && r.path[0] != "*" && !j.stepIDs[r.path[0]]
}
