package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/builtin"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/parser/lexer"
	"github.com/expr-lang/expr/vm"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// Job results as an if: expression sees them in needs.<job>.result. They are the job
// statuses of the API.
const (
	ResultSuccess   = "success"
	ResultFailed    = "failed"
	ResultCancelled = "cancelled"
	ResultSkipped   = "skipped"
)

var results = []string{ResultSuccess, ResultFailed, ResultCancelled, ResultSkipped}

// resultAliases are words other systems use for job results, mapped to Gantry's.
var resultAliases = map[string]string{
	"failure": ResultFailed, "failing": ResultFailed, "error": ResultFailed,
	"succeeded": ResultSuccess, "successful": ResultSuccess, "passed": ResultSuccess,
	"canceled": ResultCancelled, "skip": ResultSkipped,
}

// statusFuncs are the functions that look at how the jobs before this one ended. An
// expression that calls none of them runs only when everything before it succeeded, as if
// it were written `success() && (...)`.
var statusFuncs = []string{"success", "failure", "always", "cancelled"}

// Condition is a compiled `if:` expression. It marshals to JSON as its source text.
type Condition struct {
	Source  string
	program *vm.Program
	// implicitSuccess is set when the expression calls no status function.
	implicitSuccess bool
	// inputTypes are the declared types of the dispatch inputs the expression reads,
	// when the definition declares inputs (see Job.InputTypes).
	inputTypes map[string]InputType
	// inputsRead are the names the expression reads as inputs.X: one not given reads as
	// "" rather than nil.
	inputsRead []string
	// matrixRead are the names it reads as matrix.X: one an instance lacks reads as "".
	matrixRead []string
	// readsNeeds: it reads needs (a step's condition then needs them at claim).
	readsNeeds bool
	// gha is the expression of a condition kept as GitHub wrote it (ghacond.go); the
	// rest is then unset.
	gha string
}

// ConditionInput is what a condition is evaluated against when its job's needs are done,
// or when the run is created for a job that needs nothing.
type ConditionInput struct {
	// The run's trigger, as store.Trigger holds it: ref, branch, tag, sha, event and the
	// repository's full name.
	Ref, Branch, Tag, SHA, Event, Repository string
	// Inputs are the dispatch inputs in canonical text (event dispatch); a name that is
	// not here reads as "". Job.InputTypes turns them back into booleans and numbers.
	Inputs map[string]string
	// PRNumber and Fork describe the pull request (event pull_request): pr.number and
	// pr.fork.
	PRNumber int
	Fork     bool
	// Env is the run's env (given at submit); it is laid over the job's own env, as it is
	// for the job's steps: --env overrides the file.
	Env map[string]string
	// Needs maps each name in Job.NeedsNames to the result of that job: one of
	// ResultSuccess, ResultFailed, ResultCancelled or ResultSkipped. For a matrix job it is
	// the combined result of its instances (see CombineResults).
	Needs map[string]string
	// UpstreamFailed is true when any job this one depends on, directly or through other
	// jobs, failed. A failed job with continue_on_error counts as a success.
	UpstreamFailed bool
	// Cancelled is true when the run is being cancelled.
	Cancelled bool
	// NeedOutputs are the outputs of each need, by name (see Job.WithNeeds).
	NeedOutputs map[string]map[string]string
	// Steps are the job's steps that have ids and came before the one whose if: is
	// evaluated; only a step's condition reads them.
	Steps map[string]StepState
	// Payload is the forge's webhook payload of the run's event, which a workflow's
	// conditions read as github.event; nil for a run no webhook started. Actor is who
	// started the run, as the forge or Gantry names them (github.actor).
	Payload json.RawMessage
	Actor   string
	// Vars are the run's configuration variables (vars.NAME); one not there reads as "".
	Vars map[string]string
	// BaseRef and HeadRef are the pull request's base and head branches (event
	// pull_request): github.base_ref and github.head_ref, "" for any other event.
	BaseRef, HeadRef string
	// RunID is the run's id (github.run_id), where it is known.
	RunID string
	// RunNumber is the run's number in its project (github.run_number), where it is
	// known: on the worker, for a step's if:.
	RunNumber int
	// WorkflowRun is the run whose activity started this one (event workflow_run); the
	// zero value for other runs.
	WorkflowRun WorkflowRunValues
}

// WorkflowRunValues are what a run of workflow_run knows of the run that started it:
// workflow_run.X in Gantry's language (in if: and as ${{ workflow_run.X }}).
type WorkflowRunValues struct {
	ID         string `expr:"id"`
	Name       string `expr:"name"`
	Number     int    `expr:"number"`
	Action     string `expr:"action"`     // requested, in_progress, completed
	Conclusion string `expr:"conclusion"` // success, failure, cancelled, skipped; "" until completed
	Branch     string `expr:"branch"`     // the branch it was for
	SHA        string `expr:"sha"`
}

// workflowRunFields are the names workflow_run has.
var workflowRunFields = []string{"id", "name", "number", "action", "conclusion", "branch", "sha"}

// value is the field's text, as ${{ workflow_run.FIELD }} puts it in.
func (w WorkflowRunValues) value(field string) string {
	switch field {
	case "id":
		return w.ID
	case "name":
		return w.Name
	case "number":
		if w.Number == 0 {
			return ""
		}
		return strconv.Itoa(w.Number)
	case "action":
		return w.Action
	case "conclusion":
		return w.Conclusion
	case "branch":
		return w.Branch
	case "sha":
		return w.SHA
	}
	return ""
}

// StepState is what steps.<id> shows of a step that came before.
type StepState struct {
	// Outcome is the step's result as it ended: success, failed, cancelled or skipped.
	// Conclusion is the same, except that a failed step that continues on error
	// concludes success.
	Outcome    string            `json:"outcome"`
	Conclusion string            `json:"conclusion"`
	Outputs    map[string]string `json:"outputs,omitempty"`
}

type exprEnv struct {
	Ref         string               `expr:"ref"`
	Branch      string               `expr:"branch"`
	Tag         string               `expr:"tag"`
	Event       string               `expr:"event"`
	SHA         string               `expr:"sha"`
	Repository  string               `expr:"repository"`
	Inputs      map[string]any       `expr:"inputs"`
	PR          prEntry              `expr:"pr"`
	WorkflowRun WorkflowRunValues    `expr:"workflow_run"`
	Env         map[string]string    `expr:"env"`
	Matrix      map[string]string    `expr:"matrix"`
	Needs       map[string]needEntry `expr:"needs"`
	Steps       map[string]stepEntry `expr:"steps"`
	Success     func() bool          `expr:"success"`
	Failure     func() bool          `expr:"failure"`
	Always      func() bool          `expr:"always"`
	Cancelled   func() bool          `expr:"cancelled"`
}

type needEntry struct {
	Result  string            `expr:"result"`
	Outputs map[string]string `expr:"outputs"`
}

type stepEntry struct {
	Outcome    string            `expr:"outcome"`
	Conclusion string            `expr:"conclusion"`
	Outputs    map[string]string `expr:"outputs"`
}

// prEntry is pr in an expression. Outside a pull request its number is 0 and fork false.
type prEntry struct {
	Number int  `expr:"number"`
	Fork   bool `expr:"fork"`
}

// prFields are the names pr has, for checking pr.X when a condition compiles.
var prFields = []string{"number", "fork"}

// exprNames are the top-level names an expression may read or call besides expr-lang's
// builtins: the fields of exprEnv and the GitHub-style functions.
var exprNames = []string{"ref", "branch", "tag", "event", "sha", "repository", "inputs", "pr", "workflow_run", "env", "matrix", "needs",
	"success", "failure", "always", "cancelled", "startsWith", "endsWith", "contains"}

// stepExprNames are exprNames with steps, which only a step's if: may read.
var stepExprNames = append(append([]string(nil), exprNames...), "steps")

// condScope is what a job's condition may refer to, checked when it compiles. env.X is
// not checked: the run's env, given at submit, is not known when the plan is made, and a
// name that neither the job nor the run sets reads as "".
type condScope struct {
	needs  []string
	matrix []string
	// inputs are the definition's on: dispatch inputs; nil when it declares none, and
	// then inputs.X is not checked (a run can be dispatched with a definition that has
	// no on:, and a name nobody gave reads as "").
	inputs *DispatchTrigger
	// inputsFrom names what declares them (decoder.inputsDeclarer).
	inputsFrom string
	// steps are the ids of the steps before the one whose if: this is; nil in a job's
	// if:, where steps cannot be read.
	steps []string
}

// exprError is a problem at a rune offset inside an expression.
type exprError struct {
	kind   ErrorKind
	offset int
	msg    string
}

// compileCondition compiles src and, when scope is not nil, checks every needs.X,
// matrix.X, inputs.X and pr.X it reads against what the job and the definition have.
func compileCondition(src string, scope *condScope) (*Condition, *exprError) {
	if strings.HasPrefix(src, ghaCondPrefix) {
		return compileGitHubCondition(src)
	}
	code := callForms(src)
	tree, err := parser.Parse(code)
	if err != nil {
		return nil, fromExprErr(err)
	}
	c := &Condition{Source: src, implicitSuccess: true}
	check := &refChecker{scope: scope, lets: map[string]bool{}}
	ast.Walk(&tree.Node, &letCollector{names: check.lets})
	ast.Walk(&tree.Node, check)
	if check.err != nil {
		return nil, check.err
	}
	c.implicitSuccess = !check.callsStatus
	c.inputsRead = check.inputs
	c.matrixRead = check.matrix
	c.readsNeeds = check.readsNeeds
	if scope != nil && scope.inputs != nil {
		for _, name := range check.inputs {
			in, _ := scope.inputs.Input(name)
			if in.Type == InputBoolean || in.Type == InputNumber {
				if c.inputTypes == nil {
					c.inputTypes = map[string]InputType{}
				}
				c.inputTypes[name] = in.Type
			}
		}
	}
	prog, err := expr.Compile(code, exprOptions...)
	if err != nil {
		return nil, fromExprErr(err)
	}
	c.program = prog
	return c, nil
}

// ReadsNeedOutputs says whether the condition reads needs (their outputs among them).
func (c *Condition) ReadsNeedOutputs() bool { return c != nil && c.readsNeeds }

// InputTypes gives the declared types of the boolean and number dispatch inputs the
// condition reads, for Job.InputTypes; nil when it reads none.
func (c *Condition) InputTypes() map[string]InputType {
	if c == nil {
		return nil
	}
	return c.inputTypes
}

// The GitHub-style functions. expr-lang lexes startsWith, endsWith and contains as infix
// operators (s startsWith "x"), so callForms renames their call form to these
// same-length names before parsing, keeping every offset in an error message right.
var callNames = map[string]string{"startsWith": "StartsWith", "endsWith": "EndsWith", "contains": "Contains"}

var exprOptions = []expr.Option{
	expr.Env(exprEnv{}), expr.AsBool(),
	expr.Function("StartsWith", func(p ...any) (any, error) { return stringTest(p, strings.HasPrefix) }, new(func(any, any) bool)),
	expr.Function("EndsWith", func(p ...any) (any, error) { return stringTest(p, strings.HasSuffix) }, new(func(any, any) bool)),
	expr.Function("Contains", containsFunc, new(func(any, any) bool)),
}

// callForms rewrites startsWith(, endsWith( and contains( where they are called as
// functions: at the start of the expression or after an operator, an opening bracket or
// a comma, rather than after an operand as the infix operators stand.
func callForms(src string) string {
	toks, err := lexer.Lex(file.NewSource(src))
	if err != nil {
		// The parser reports the same error, with its position.
		return src
	}
	runes := []rune(src)
	changed := false
	for i, t := range toks {
		name, ok := callNames[t.Value]
		if !ok || t.Kind != lexer.Operator || i+1 >= len(toks) || toks[i+1].Kind != lexer.Bracket || toks[i+1].Value != "(" {
			continue
		}
		if i > 0 {
			prev := toks[i-1]
			operand := prev.Kind == lexer.Identifier || prev.Kind == lexer.Number || prev.Kind == lexer.String ||
				prev.Kind == lexer.Bytes || (prev.Kind == lexer.Bracket && strings.ContainsAny(prev.Value, ")]}"))
			if operand {
				continue
			}
		}
		copy(runes[t.From:], []rune(name))
		changed = true
	}
	if !changed {
		return src
	}
	return string(runes)
}

// scalarText is a value as the string functions compare it: GitHub's coercion, with null
// as "", booleans as true or false and numbers in shortest form.
func scalarText(v any) (string, bool) {
	switch x := v.(type) {
	case nil:
		return "", true
	case string:
		return x, true
	case bool:
		return strconv.FormatBool(x), true
	case int:
		return strconv.Itoa(x), true
	case int64:
		return strconv.FormatInt(x, 10), true
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64), true
	}
	return "", false
}

// stringTest is startsWith and endsWith: case-insensitive, as on GitHub, so a workflow
// ported from there keeps its meaning.
func stringTest(p []any, test func(s, x string) bool) (any, error) {
	s, ok1 := scalarText(p[0])
	x, ok2 := scalarText(p[1])
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("expected a string, number or boolean, found %T and %T", p[0], p[1])
	}
	return test(strings.ToLower(s), strings.ToLower(x)), nil
}

// containsFunc is contains(search, item): for a list, whether an element equals item
// (strings compared without case); otherwise whether the text of search holds the text
// of item, without case.
func containsFunc(p ...any) (any, error) {
	if list, ok := p[0].([]any); ok {
		for _, el := range list {
			if looselyEqual(el, p[1]) {
				return true, nil
			}
		}
		return false, nil
	}
	if list, ok := p[0].([]string); ok {
		for _, el := range list {
			if looselyEqual(el, p[1]) {
				return true, nil
			}
		}
		return false, nil
	}
	return stringTest(p, strings.Contains)
}

func looselyEqual(a, b any) bool {
	as, aok := a.(string)
	bs, bok := b.(string)
	if aok && bok {
		return strings.EqualFold(as, bs)
	}
	if aok || bok {
		return false
	}
	af, aNum := number(a)
	bf, bNum := number(b)
	if aNum && bNum {
		return af == bf
	}
	return a == b
}

func number(v any) (float64, bool) {
	switch x := v.(type) {
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case float64:
		return x, true
	}
	return 0, false
}

func fromExprErr(err error) *exprError {
	var fe *file.Error
	if errors.As(err, &fe) {
		return &exprError{kind: ErrExpression, offset: fe.From, msg: exprMessage(userNames(fe.Message))}
	}
	return &exprError{kind: ErrExpression, msg: exprMessage(userNames(err.Error()))}
}

// Messages of expr-lang's parser and checker, which name its tokens and Go's types
// (unexpected token Operator("&&"), expected bool, but got map[string]string), and what
// exprMessage says instead, in the words the rest of Gantry's errors use.
var (
	unexpectedToken = lazyre.New(`unexpected token (EOF|(Operator|Bracket|String|Identifier|Number|Bytes)\("((?:[^"\\]|\\.)*)"\))`)
	goTypeWords     = lazyre.New(`\b(map\[[^\]]*\][\w{}. ]+|\[\][\w{}. ]+|interface \{\}|string|bool|float64|int|int64|func\([^)]*\)[ \w]*)`)
	unrecognized    = lazyre.New(`unrecognized character: U\+[0-9A-F]+ '(.+)'`)
)

// exprMessage rewrites an expr-lang message in Gantry's words: `unexpected "&&"`, `the
// expression ends too early`, types as text, number, true or false, mapping and list.
func exprMessage(msg string) string {
	if strings.HasPrefix(msg, "expected bool, but got ") {
		return "an if: must be true or false, and this gives " + typeWord(strings.TrimPrefix(msg, "expected bool, but got "))
	}
	msg = goTypeWords.ReplaceAllStringFunc(msg, typeWord)
	msg = strings.Replace(msg, "type text has no field", "text has no field", 1)
	msg = unexpectedToken.ReplaceAllStringFunc(msg, func(m string) string {
		sub := unexpectedToken.FindStringSubmatch(m)
		switch sub[2] {
		case "":
			return "the expression ends too early"
		case "String":
			return fmt.Sprintf("unexpected string %q", sub[3])
		case "Identifier":
			return "unexpected name " + sub[3]
		case "Number":
			return "unexpected number " + sub[3]
		}
		return fmt.Sprintf("unexpected %q", sub[3])
	})
	if m := unrecognized.FindStringSubmatch(msg); m != nil {
		msg = strings.Replace(msg, m[0], "unexpected character "+strconv.Quote(m[1]), 1)
	}
	return strings.Replace(msg, "literal not terminated", "a string is not closed with its quote", 1)
}

// typeWord names a Go type as a user of expressions knows it.
func typeWord(t string) string {
	switch {
	case t == "string":
		return "text"
	case t == "bool":
		return "true or false"
	case t == "int" || t == "int64" || t == "float64":
		return "a number"
	case strings.HasPrefix(t, "map["):
		return "a mapping"
	case strings.HasPrefix(t, "[]"):
		return "a list"
	case strings.HasPrefix(t, "func("):
		return "a function"
	case t == "interface {}":
		return "a value"
	}
	return t
}

// userNames gives the functions back the names the user wrote in a message from
// expr-lang.
func userNames(msg string) string {
	for user, internal := range callNames {
		msg = strings.ReplaceAll(msg, internal, user)
	}
	return msg
}

// letCollector gathers the names let binds, which an expression may then read.
type letCollector struct{ names map[string]bool }

func (l *letCollector) Visit(node *ast.Node) {
	if v, ok := (*node).(*ast.VariableDeclaratorNode); ok {
		l.names[v.Name] = true
	}
}

type refChecker struct {
	scope       *condScope
	lets        map[string]bool
	callsStatus bool
	// inputs are the names read as inputs.X, matrix those read as matrix.X.
	inputs, matrix []string
	readsNeeds     bool
	err            *exprError
}

// knownNames are what a top-level name may be: exprNames, the internal names of the
// functions, and expr-lang's builtins (len, lower, ...).
var knownNames = func() map[string]bool {
	m := map[string]bool{}
	for _, n := range stepExprNames {
		m[n] = true
	}
	for _, n := range callNames {
		m[n] = true
	}
	for _, n := range builtin.Names {
		m[n] = true
	}
	return m
}()

func (r *refChecker) Visit(node *ast.Node) {
	if r.err != nil {
		return
	}
	switch n := (*node).(type) {
	case *ast.CallNode:
		if id, ok := n.Callee.(*ast.IdentifierNode); ok && contains(statusFuncs, id.Value) {
			r.callsStatus = true
		}
	case *ast.IdentifierNode:
		names := exprNames
		if r.scope != nil && r.scope.steps != nil {
			names = stepExprNames
		}
		switch {
		case n.Value == "steps" && r.scope != nil && r.scope.steps == nil && !r.lets[n.Value]:
			r.fail(ErrExpression, n, "steps may be read only in a step's if:, not a job's")
		case !knownNames[n.Value] && !r.lets[n.Value]:
			r.fail(ErrExpression, n, "unknown name %s; an if: may read %s%s", n.Value, strings.Join(names, ", "), suggest(n.Value, names))
		case n.Value == "needs":
			r.readsNeeds = true
		}
	case *ast.MemberNode:
		if id, ok := n.Node.(*ast.IdentifierNode); ok && (id.Value == "inputs" || id.Value == "matrix") {
			if prop, ok := n.Property.(*ast.StringNode); ok {
				if id.Value == "inputs" {
					r.inputs = append(r.inputs, prop.Value)
				} else {
					r.matrix = append(r.matrix, prop.Value)
				}
			}
		}
		r.member(n)
	case *ast.BinaryNode:
		r.comparison(n)
	}
}

// member checks needs.X, needs.X.result and matrix.X.
func (r *refChecker) member(n *ast.MemberNode) {
	if r.scope == nil {
		return
	}
	if inner, ok := n.Node.(*ast.MemberNode); ok {
		if id, ok := inner.Node.(*ast.IdentifierNode); ok && id.Value == "needs" {
			if prop, ok := n.Property.(*ast.StringNode); ok && prop.Value != "result" && prop.Value != "outputs" {
				r.fail(ErrUnknownReference, n.Property, "needs.<job> has .result and .outputs, not .%s", prop.Value)
			}
		}
		if id, ok := inner.Node.(*ast.IdentifierNode); ok && id.Value == "steps" {
			if prop, ok := n.Property.(*ast.StringNode); ok && prop.Value != "outcome" && prop.Value != "conclusion" && prop.Value != "outputs" {
				r.fail(ErrUnknownReference, n.Property, "steps.<id> has .outcome, .conclusion and .outputs, not .%s", prop.Value)
			}
		}
		return
	}
	id, ok := n.Node.(*ast.IdentifierNode)
	if !ok {
		return
	}
	prop, ok := n.Property.(*ast.StringNode)
	if !ok {
		if id.Value == "needs" || id.Value == "matrix" || id.Value == "inputs" || id.Value == "pr" || id.Value == "workflow_run" || id.Value == "steps" {
			r.fail(ErrExpression, n.Property, "%s must be indexed by a name written out, as in %s.name", id.Value, id.Value)
		}
		return
	}
	var have []string
	var what string
	switch id.Value {
	case "needs":
		have, what = r.scope.needs, "this job does not need %q"
	case "matrix":
		have, what = r.scope.matrix, "this job has no matrix value %q"
	case "pr":
		have, what = prFields, "pr has no field %q"
	case "workflow_run":
		have, what = workflowRunFields, "workflow_run has no field %q"
	case "steps":
		if r.scope.steps == nil {
			return
		}
		have, what = r.scope.steps, "no step before this one has id %q"
	case "inputs":
		if r.scope.inputs == nil {
			return
		}
		have, what = make([]string, len(r.scope.inputs.Inputs)), r.scope.inputsFrom+" declares no input %q"
		for i, in := range r.scope.inputs.Inputs {
			have[i] = in.Name
		}
	default:
		return
	}
	if !contains(have, prop.Value) {
		msg := fmt.Sprintf(what, prop.Value)
		if len(have) > 0 {
			msg += " (has: " + strings.Join(have, ", ") + ")" + suggest(prop.Value, have)
		}
		r.err = &exprError{kind: ErrUnknownReference, offset: n.Property.Location().From, msg: msg}
	}
}

// comparison catches comparing a job result with a word that is never a result, such as
// needs.build.result == "failure", which would silently always be false.
func (r *refChecker) comparison(n *ast.BinaryNode) {
	if n.Operator != "==" && n.Operator != "!=" {
		return
	}
	for _, pair := range [][2]ast.Node{{n.Left, n.Right}, {n.Right, n.Left}} {
		m, ok := pair[0].(*ast.MemberNode)
		if !ok {
			continue
		}
		prop, ok := m.Property.(*ast.StringNode)
		if !ok || (prop.Value != "result" && prop.Value != "outcome" && prop.Value != "conclusion") {
			continue
		}
		if s, ok := pair[1].(*ast.StringNode); ok && !contains(results, s.Value) {
			hint := suggest(s.Value, results)
			if alias, ok := resultAliases[strings.ToLower(s.Value)]; ok {
				hint = fmt.Sprintf("; did you mean %q?", alias)
			}
			what := "a job result"
			if prop.Value != "result" {
				what = "a step " + prop.Value
			}
			r.fail(ErrExpression, pair[1], "%q is never %s; results are %s%s", s.Value, what, strings.Join(results, ", "), hint)
		}
	}
}

func (r *refChecker) fail(kind ErrorKind, at ast.Node, format string, args ...any) {
	r.err = &exprError{kind: kind, offset: at.Location().From, msg: fmt.Sprintf(format, args...)}
}

// Eval gives the condition's value. env and matrix are the job's own (Job.Env and its
// matrix values); in.Env is laid over env. types are Job.InputTypes.
func (c *Condition) Eval(in ConditionInput, env map[string]string, matrix []MatrixValue, types map[string]InputType) (bool, error) {
	return c.eval(in, env, matrix, types, in.succeeded)
}

// EvalStep gives the value of a step's condition. in.UpstreamFailed says a step before
// it failed (and does not continue on error), in.Cancelled that the job is being
// cancelled; success() is true when neither is, whatever the needs' results.
func (c *Condition) EvalStep(in ConditionInput, job *Job) (bool, error) {
	return c.eval(in, job.Env, job.Matrix, job.InputTypes, func() bool { return !in.Cancelled && !in.UpstreamFailed })
}

func (c *Condition) eval(in ConditionInput, env map[string]string, matrix []MatrixValue, types map[string]InputType, success func() bool) (bool, error) {
	if c.gha != "" {
		return c.evalGitHub(in, env, matrix, success)
	}
	if c.program == nil {
		return false, fmt.Errorf("condition %q is not compiled", c.Source)
	}
	if c.implicitSuccess && !success() {
		return false, nil
	}
	e := exprEnv{
		Ref: in.Ref, Branch: in.Branch, Tag: in.Tag, Event: in.Event, SHA: in.SHA, Repository: in.Repository,
		Inputs:      typedInputs(in.Inputs, types, c.inputsRead),
		PR:          prEntry{Number: in.PRNumber, Fork: in.Fork},
		WorkflowRun: in.WorkflowRun,
		Env:         mergeEnv(env, in.Env),
		Matrix:      make(map[string]string, len(matrix)),
		Needs:       make(map[string]needEntry, len(in.Needs)),
		Success:     success,
		Failure:     func() bool { return in.UpstreamFailed },
		Always:      func() bool { return true },
		Cancelled:   func() bool { return in.Cancelled },
	}
	for _, name := range c.matrixRead {
		e.Matrix[name] = ""
	}
	for _, m := range matrix {
		e.Matrix[m.Name] = m.Value
	}
	for name, r := range in.Needs {
		e.Needs[name] = needEntry{Result: r, Outputs: in.NeedOutputs[name]}
	}
	if in.Steps != nil {
		e.Steps = make(map[string]stepEntry, len(in.Steps))
		for id, st := range in.Steps {
			e.Steps[id] = stepEntry(st)
		}
	}
	out, err := expr.Run(c.program, e)
	if err != nil {
		return false, fmt.Errorf("evaluate if: %s: %w", c.Source, err)
	}
	b, _ := out.(bool)
	return b, nil
}

// typedInputs gives inputs.X its type back: a boolean input reads as true or false and a
// number as a number, so that inputs.deploy == true and inputs.count > 2 mean what they
// say; every other input, and one whose text does not parse, reads as its text.
func typedInputs(given map[string]string, types map[string]InputType, read []string) map[string]any {
	out := make(map[string]any, len(given)+len(read))
	// A declared boolean input nobody gave is false, as a dispatch would have made it;
	// any other input nobody gave is "".
	for _, name := range read {
		out[name] = ""
		if types[name] == InputBoolean {
			out[name] = false
		}
	}
	for name, v := range given {
		out[name] = v
		switch types[name] {
		case InputBoolean:
			if b, err := strconv.ParseBool(v); err == nil {
				out[name] = b
			}
		case InputNumber:
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				out[name] = f
			}
		}
	}
	return out
}

// mergeEnv lays top over base, without changing either.
func mergeEnv(base, top map[string]string) map[string]string {
	if len(top) == 0 {
		return base
	}
	out := make(map[string]string, len(base)+len(top))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range top {
		out[k] = v
	}
	return out
}

// ShouldRun evaluates the job's if: condition, or the default success() when it has none.
// It is the condition's value only; Decide is what the store acts on.
func (j *Job) ShouldRun(in ConditionInput) (bool, error) {
	c := j.If
	if c == nil {
		c = defaultCondition()
	}
	return c.Eval(in, j.Env, j.Matrix, j.InputTypes)
}

// Decision is what becomes of a job once its needs are done, or at once for a job that
// needs nothing.
type Decision struct {
	Run bool
	// Reason says, in words for the user, why the job does not run; empty when it runs.
	Reason string
	// Err is set when the condition could not be evaluated; the job does not run.
	Err error
}

// Decide is the one policy for whether a job runs, for root jobs when their run is created
// and for every other job when its needs are done: its if: condition (success() when it
// has none) must hold, and the run must not be being cancelled. A job that does not run
// gets the reason a user is shown: the need that did not succeed when that is what stopped
// it, otherwise the condition that was false.
func (j *Job) Decide(in ConditionInput) Decision {
	c := j.If
	if c == nil {
		c = defaultCondition()
	}
	if in.Cancelled {
		// Nothing new starts in a run being cancelled, whatever its condition says.
		return Decision{Reason: "the run was cancelled"}
	}
	if (j.If == nil || c.implicitSuccess) && !in.succeeded() {
		return Decision{Reason: in.upstreamReason()}
	}
	ok, err := c.Eval(in, j.Env, j.Matrix, j.InputTypes)
	switch {
	case err != nil:
		return Decision{Reason: fmt.Sprintf("if: %s could not be evaluated", c.Text()), Err: err}
	case !ok:
		return Decision{Reason: fmt.Sprintf("if: %s was false", c.Text())}
	}
	return Decision{Run: true}
}

// succeeded is success(): every need succeeded and nothing before failed.
func (in ConditionInput) succeeded() bool {
	if in.Cancelled || in.UpstreamFailed {
		return false
	}
	for _, r := range in.Needs {
		if r != ResultSuccess {
			return false
		}
	}
	return true
}

// upstreamReason names the needs that did not succeed, the worst result first.
func (in ConditionInput) upstreamReason() string {
	for _, result := range []string{ResultFailed, ResultCancelled, ResultSkipped} {
		var names []string
		for _, name := range sortedKeys(in.Needs) {
			if in.Needs[name] == result {
				names = append(names, name)
			}
		}
		if len(names) == 0 {
			continue
		}
		verb := result
		if result != ResultFailed {
			verb = "was " + result
		}
		if len(names) == 1 {
			return fmt.Sprintf("a job it needs (%s) %s", names[0], verb)
		}
		if result != ResultFailed {
			verb = "were " + result
		}
		return fmt.Sprintf("jobs it needs (%s) %s", strings.Join(names, ", "), verb)
	}
	if in.UpstreamFailed {
		return "a job before it failed"
	}
	return "its needs did not succeed"
}

// defaultCondition is success(), a job's condition when it has none. It is compiled when
// first asked for, not when every gantry process starts (an expr-lang compile).
var defaultCondition = sync.OnceValue(func() *Condition { return mustCondition("success()") })

func mustCondition(src string) *Condition {
	c, err := compileCondition(src, nil)
	if err != nil {
		panic(err.msg)
	}
	return c
}

// CombineResults folds the results of a matrix job's instances into the one result that
// needs.<job>.result shows: failed if any failed, else cancelled if any was cancelled,
// else skipped if all were skipped, else success.
func CombineResults(rs []string) string {
	if len(rs) == 0 {
		return ResultSkipped
	}
	has := map[string]int{}
	for _, r := range rs {
		has[r]++
	}
	switch {
	case has[ResultFailed] > 0:
		return ResultFailed
	case has[ResultCancelled] > 0:
		return ResultCancelled
	case has[ResultSkipped] == len(rs):
		return ResultSkipped
	}
	return ResultSuccess
}

// MarshalJSON writes the condition as its source text, with && and < left as they are.
func (c *Condition) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c.Source); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// UnmarshalJSON compiles the condition from its source text. References were checked when
// the plan was made, so they are not checked again here.
func (c *Condition) UnmarshalJSON(b []byte) error {
	var src string
	if err := json.Unmarshal(b, &src); err != nil {
		return fmt.Errorf("condition: %w", err)
	}
	compiled, cerr := compileCondition(src, nil)
	if cerr != nil {
		return fmt.Errorf("condition %q: %s", src, cerr.msg)
	}
	*c = *compiled
	return nil
}
