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

// ConditionInput is what a condition is evaluated against when its job's needs are done.
type ConditionInput struct {
	Branch, Event, SHA string
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

// condScope is what a job's condition may refer to, checked when it compiles.
type condScope struct {
	needs  []string
	matrix []string
	env    []string
}

// exprError is a problem at a rune offset inside an expression.
type exprError struct {
	kind   ErrorKind
	offset int
	msg    string
}

// compileCondition compiles src and, when scope is not nil, checks every needs.X, matrix.X
// and env.X it reads against what the job has.
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

// member checks needs.X, needs.X.result, matrix.X and env.X.
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
	case "env":
		have, what = r.scope.env, "env.%s is not set for this job"
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

// Eval decides whether the job runs. env and matrix are the job's own (Job.Env and its
// matrix values).
func (c *Condition) Eval(in ConditionInput, env map[string]string, matrix []MatrixValue) (bool, error) {
	if c.program == nil {
		return false, fmt.Errorf("condition %q is not compiled", c.Source)
	}
	success := func() bool {
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
	if c.implicitSuccess && !success() {
		return false, nil
	}
	e := exprEnv{
		Branch: in.Branch, Event: in.Event, SHA: in.SHA,
		Env:       env,
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

// ShouldRun evaluates the job's if: condition, or the default success() when it has none.
func (j *Job) ShouldRun(in ConditionInput) (bool, error) {
	c := j.If
	if c == nil {
		c = defaultCondition
	}
	return c.Eval(in, j.Env, j.Matrix)
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
