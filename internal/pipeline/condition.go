package pipeline

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/expr-lang/expr"
	"github.com/expr-lang/expr/ast"
	"github.com/expr-lang/expr/file"
	"github.com/expr-lang/expr/parser"
	"github.com/expr-lang/expr/vm"
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
}

// ConditionInput is what a condition is evaluated against when its job's needs are done,
// or when the run is created for a job that needs nothing.
type ConditionInput struct {
	Branch, Event, SHA string
	// Env is the run's env (given at submit); the job's own env is laid over it, as it is
	// for the job's steps.
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
}

type exprEnv struct {
	Branch    string               `expr:"branch"`
	Event     string               `expr:"event"`
	SHA       string               `expr:"sha"`
	Env       map[string]string    `expr:"env"`
	Matrix    map[string]string    `expr:"matrix"`
	Needs     map[string]needEntry `expr:"needs"`
	Success   func() bool          `expr:"success"`
	Failure   func() bool          `expr:"failure"`
	Always    func() bool          `expr:"always"`
	Cancelled func() bool          `expr:"cancelled"`
}

type needEntry struct {
	Result string `expr:"result"`
}

// condScope is what a job's condition may refer to, checked when it compiles. env.X is
// not checked: the run's env, given at submit, is not known when the plan is made, and a
// name that neither the job nor the run sets reads as "".
type condScope struct {
	needs  []string
	matrix []string
}

// exprError is a problem at a rune offset inside an expression.
type exprError struct {
	kind   ErrorKind
	offset int
	msg    string
}

// compileCondition compiles src and, when scope is not nil, checks every needs.X and
// matrix.X it reads against what the job has.
func compileCondition(src string, scope *condScope) (*Condition, *exprError) {
	tree, err := parser.Parse(src)
	if err != nil {
		return nil, fromExprErr(err)
	}
	c := &Condition{Source: src, implicitSuccess: true}
	check := &refChecker{scope: scope}
	ast.Walk(&tree.Node, check)
	if check.err != nil {
		return nil, check.err
	}
	c.implicitSuccess = !check.callsStatus
	prog, err := expr.Compile(src, expr.Env(exprEnv{}), expr.AsBool())
	if err != nil {
		return nil, fromExprErr(err)
	}
	c.program = prog
	return c, nil
}

func fromExprErr(err error) *exprError {
	var fe *file.Error
	if errors.As(err, &fe) {
		return &exprError{kind: ErrExpression, offset: fe.From, msg: fe.Message}
	}
	return &exprError{kind: ErrExpression, msg: err.Error()}
}

type refChecker struct {
	scope       *condScope
	callsStatus bool
	err         *exprError
}

func (r *refChecker) Visit(node *ast.Node) {
	if r.err != nil {
		return
	}
	switch n := (*node).(type) {
	case *ast.CallNode:
		if id, ok := n.Callee.(*ast.IdentifierNode); ok && contains(statusFuncs, id.Value) {
			r.callsStatus = true
		}
	case *ast.MemberNode:
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
			if prop, ok := n.Property.(*ast.StringNode); ok && prop.Value != "result" {
				r.fail(ErrUnknownReference, n.Property, "needs.<job> has only .result, not .%s", prop.Value)
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
		if id.Value == "needs" || id.Value == "matrix" {
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
		if !ok || prop.Value != "result" {
			continue
		}
		if s, ok := pair[1].(*ast.StringNode); ok && !contains(results, s.Value) {
			hint := suggest(s.Value, results)
			if alias, ok := resultAliases[strings.ToLower(s.Value)]; ok {
				hint = fmt.Sprintf("; did you mean %q?", alias)
			}
			r.fail(ErrExpression, pair[1], "%q is never a job result; results are %s%s", s.Value, strings.Join(results, ", "), hint)
		}
	}
}

func (r *refChecker) fail(kind ErrorKind, at ast.Node, format string, args ...any) {
	r.err = &exprError{kind: kind, offset: at.Location().From, msg: fmt.Sprintf(format, args...)}
}

// Eval gives the condition's value. env and matrix are the job's own (Job.Env and its
// matrix values); env is laid over in.Env.
func (c *Condition) Eval(in ConditionInput, env map[string]string, matrix []MatrixValue) (bool, error) {
	if c.program == nil {
		return false, fmt.Errorf("condition %q is not compiled", c.Source)
	}
	success := in.succeeded
	if c.implicitSuccess && !success() {
		return false, nil
	}
	e := exprEnv{
		Branch: in.Branch, Event: in.Event, SHA: in.SHA,
		Env:       mergeEnv(in.Env, env),
		Matrix:    make(map[string]string, len(matrix)),
		Needs:     make(map[string]needEntry, len(in.Needs)),
		Success:   success,
		Failure:   func() bool { return in.UpstreamFailed },
		Always:    func() bool { return true },
		Cancelled: func() bool { return in.Cancelled },
	}
	for _, m := range matrix {
		e.Matrix[m.Name] = m.Value
	}
	for name, r := range in.Needs {
		e.Needs[name] = needEntry{Result: r}
	}
	out, err := expr.Run(c.program, e)
	if err != nil {
		return false, fmt.Errorf("evaluate if: %s: %w", c.Source, err)
	}
	b, _ := out.(bool)
	return b, nil
}

// mergeEnv lays job over run, without changing either.
func mergeEnv(run, job map[string]string) map[string]string {
	if len(run) == 0 {
		return job
	}
	out := make(map[string]string, len(run)+len(job))
	for k, v := range run {
		out[k] = v
	}
	for k, v := range job {
		out[k] = v
	}
	return out
}

// ShouldRun evaluates the job's if: condition, or the default success() when it has none.
// It is the condition's value only; Decide is what the store acts on.
func (j *Job) ShouldRun(in ConditionInput) (bool, error) {
	c := j.If
	if c == nil {
		c = defaultCondition
	}
	return c.Eval(in, j.Env, j.Matrix)
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
		c = defaultCondition
	}
	if in.Cancelled {
		// Nothing new starts in a run being cancelled, whatever its condition says.
		return Decision{Reason: "the run was cancelled"}
	}
	if (j.If == nil || c.implicitSuccess) && !in.succeeded() {
		return Decision{Reason: in.upstreamReason()}
	}
	ok, err := c.Eval(in, j.Env, j.Matrix)
	switch {
	case err != nil:
		return Decision{Reason: fmt.Sprintf("if: %s could not be evaluated", c.Source), Err: err}
	case !ok:
		return Decision{Reason: fmt.Sprintf("if: %s was false", c.Source)}
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

var defaultCondition = mustCondition("success()")

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
