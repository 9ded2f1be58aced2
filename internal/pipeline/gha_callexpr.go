package pipeline

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
)

// The expressions of a called workflow are rewritten before its jobs are translated:
// inputs.X becomes what the caller gave (gha_call.go), secrets.X what the caller passes,
// needs.J the job's new id, and an expression left reading no context at all (an input
// the caller wrote out) is evaluated there and then. What is not rewritten stays as
// written, so the translation reports and places it as it does any workflow's text.

// exprRewrite says what becomes of the references and status functions of an expression.
// ref gets a context property as written (its context in lower case and the names after
// it, "*" for a filter, as far as they are written out) and returns the text to put in its
// place, or false to leave it; a non-empty problem stops the rewrite. status gets a status
// function's lower-case name; nil leaves them all.
type exprRewrite struct {
	ref    func(head string, path []string) (text string, ok bool, problem string)
	status func(name string) (string, bool)
	// written, when set, is asked instead of ref, with the reference as written.
	written func(src, head string, path []string) (text string, ok bool, problem string)
}

// rewriteExpr rewrites the references of src, a GitHub expression without ${{ }}.
// Everything it does not rewrite keeps its text, spacing included.
func rewriteExpr(src string, rw exprRewrite) (string, *ghaExprError) {
	toks, err := lexGHA(src)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	last := 0
	isOp := func(t ghaToken, v string) bool { return t.kind == 'o' && t.val == v }
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		if t.kind != 'i' || i > 0 && isOp(toks[i-1], ".") {
			continue
		}
		switch t.val {
		case "true", "false", "null":
			continue
		}
		if isOp(toks[i+1], "(") {
			if rw.status != nil && isOp(toks[i+2], ")") {
				if v, ok := rw.status(strings.ToLower(t.val)); ok {
					b.WriteString(src[last:t.at])
					b.WriteString(v)
					last = toks[i+2].at + 1
					i += 2
				}
			}
			continue
		}
		var path []string
		end, k := t.at+len(t.val), i+1
	chain:
		for {
			switch {
			case isOp(toks[k], ".") && toks[k+1].kind == 'i':
				path = append(path, toks[k+1].val)
				end, k = toks[k+1].at+len(toks[k+1].val), k+2
			case isOp(toks[k], ".") && isOp(toks[k+1], "*"):
				path = append(path, "*")
				end, k = toks[k+1].at+1, k+2
			case isOp(toks[k], "[") && (toks[k+1].kind == 's' || isOp(toks[k+1], "*")) && isOp(toks[k+2], "]"):
				name := toks[k+1].val
				if toks[k+1].kind != 's' {
					name = "*"
				}
				path = append(path, name)
				end, k = toks[k+2].at+1, k+3
			default:
				break chain
			}
		}
		var v, problem string
		var ok bool
		if rw.written != nil {
			v, ok, problem = rw.written(src[t.at:end], strings.ToLower(t.val), path)
		} else {
			v, ok, problem = rw.ref(strings.ToLower(t.val), path)
		}
		if problem != "" {
			return "", &ghaExprError{t.at, problem}
		}
		if ok {
			b.WriteString(src[last:t.at])
			b.WriteString(v)
			last = end
		}
		i = k - 1
	}
	b.WriteString(src[last:])
	return b.String(), nil
}

// refPath writes the names after a context as an expression reads them: .name, or
// ['name'] where a name is not one a dot can take.
func refPath(path []string) string {
	var b strings.Builder
	for _, p := range path {
		switch {
		case p == "*":
			b.WriteString(".*")
		case isRefName(p):
			b.WriteString("." + p)
		default:
			b.WriteString("[" + quoteGHA(p) + "]")
		}
	}
	return b.String()
}

// isRefName reports a name GitHub reads after a dot: letters, digits, _ and -, not
// starting with a digit or -.
func isRefName(s string) bool {
	if s == "" || s[0] == '-' || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isIdentByte(s[i]) && s[i] != '-' {
			return false
		}
	}
	return true
}

// quoteGHA writes s as a string literal of GitHub's expressions.
func quoteGHA(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// simpleExpr reports an expression that needs no parentheses where it is put in: one
// reference, literal or function call.
func simpleExpr(src string) bool {
	n, err := parseGHA(src)
	if err != nil {
		return false
	}
	switch n.(type) {
	case *ghaRef, *ghaLit, *ghaCall, *ghaParen:
		return true
	}
	return false
}

// exprSegment is one ${{ }} of a text: where it starts and ends in the text, and the
// expression inside.
type exprSegment struct {
	start, end int
	inner      string
}

// exprSegments finds each ${{ }} of s. As GitHub's template reader does, an expression
// ends at the first }} outside a single-quoted string. ok is false when one is not closed.
func exprSegments(s string) (segs []exprSegment, ok bool) {
	for i := 0; ; {
		open := strings.Index(s[i:], "${{")
		if open < 0 {
			return segs, true
		}
		open += i
		inString := false
		end := -1
		for j := open + 3; j < len(s) && end < 0; j++ {
			switch {
			case s[j] == '\'':
				inString = !inString
			case !inString && strings.HasPrefix(s[j:], "}}"):
				end = j
			}
		}
		if end < 0 {
			return segs, false
		}
		segs = append(segs, exprSegment{start: open, end: end + 2, inner: s[open+3 : end]})
		i = end + 2
	}
}

// rewriteTemplate rewrites every ${{ }} of s. One that is left reading no context is
// put in as the text of its value, as GitHub would put it in. The error's offset is in s.
func rewriteTemplate(s string, rw exprRewrite) (string, *ghaExprError) {
	segs, ok := exprSegments(s)
	if !ok || len(segs) == 0 {
		return s, nil // text() reports an unclosed ${{ where it stands
	}
	var b strings.Builder
	last := 0
	for _, seg := range segs {
		out, err := rewriteExpr(seg.inner, rw)
		if err != nil {
			err.offset += seg.start + 3
			return "", err
		}
		b.WriteString(s[last:seg.start])
		if v, ok := foldConst(out); ok {
			b.WriteString(interpolatedText(v))
		} else {
			b.WriteString("${{" + out + "}}")
		}
		last = seg.end
	}
	b.WriteString(s[last:])
	return b.String(), nil
}

// foldConst evaluates an expression that reads no context and calls no status function
// nor hashFiles: an input the caller wrote out, fromJSON of one. ok is false for any
// other expression, and for one that fails (which then fails where GitHub would).
func foldConst(src string) (any, bool) {
	n, err := ghaexpr.Parse(strings.TrimSpace(src))
	if err != nil || len(ghaexpr.Refs(n)) > 0 {
		return nil, false
	}
	status := false
	v, err := ghaexpr.Eval(n, &ghaexpr.Context{Status: func(string) bool { status = true; return true }})
	if err != nil || status {
		return nil, false
	}
	return v, true
}

// interpolatedText is the text GitHub puts in for a value in a template: objects and
// arrays as JSON (see ghaexpr.Interpolate).
func interpolatedText(v any) string {
	switch v.(type) {
	case []any, map[string]any:
		s, err := ghaexpr.Interpolate("${{ toJSON(x) }}", &ghaexpr.Context{Values: map[string]any{"x": v}})
		if err == nil {
			return s
		}
	}
	return ghaexpr.ToString(v)
}

// valueNode makes a YAML node of a value an expression came to, at the position of at:
// an input the caller wrote out stands where the called workflow read it, with its type.
func valueNode(v any, at *yaml.Node) *yaml.Node {
	switch v := v.(type) {
	case nil:
		return gNode(yaml.ScalarNode, "!!null", "", at)
	case bool:
		return gBool(v, at)
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			return gNode(yaml.ScalarNode, "!!int", strconv.FormatInt(int64(v), 10), at)
		}
		return gNode(yaml.ScalarNode, "!!float", ghaexpr.ToString(v), at)
	case string:
		return gStr(v, at)
	case []any:
		out := gSeq(at)
		for _, x := range v {
			out.Content = append(out.Content, valueNode(x, at))
		}
		return out
	case map[string]any:
		out := gMap(at)
		for _, k := range sortedKeys(v) {
			put(out, k, at, valueNode(v[k], at))
		}
		return out
	}
	return gStr(ghaexpr.ToString(v), at)
}

// wholeExpr returns the expression of a text that is one ${{ }} and nothing else.
func wholeExpr(s string) (string, bool) {
	segs, ok := exprSegments(s)
	if !ok || len(segs) != 1 || strings.TrimSpace(s[:segs[0].start]) != "" || strings.TrimSpace(s[segs[0].end:]) != "" {
		return "", false
	}
	return segs[0].inner, true
}

// templateExpr writes a with: value or a default, as the caller wrote it, as one
// expression of the called workflow: a value written out as its literal, ${{ e }} as e,
// and text around expressions as format().
func templateExpr(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		return "''"
	}
	switch n.Tag {
	case "!!bool":
		if b, err := strconv.ParseBool(n.Value); err == nil {
			return strconv.FormatBool(b)
		}
	case "!!int", "!!float":
		if f, err := strconv.ParseFloat(n.Value, 64); err == nil {
			return ghaexpr.ToString(f)
		}
		if i, err := strconv.ParseInt(n.Value, 0, 64); err == nil {
			return strconv.FormatInt(i, 10)
		}
	}
	s := n.Value
	if inner, ok := wholeExpr(s); ok {
		inner = strings.TrimSpace(inner)
		if simpleExpr(inner) {
			return inner
		}
		return "(" + inner + ")"
	}
	segs, ok := exprSegments(s)
	if !ok || len(segs) == 0 {
		return quoteGHA(s)
	}
	var f strings.Builder
	var args []string
	last := 0
	brace := strings.NewReplacer("{", "{{", "}", "}}")
	for i, seg := range segs {
		f.WriteString(brace.Replace(s[last:seg.start]))
		f.WriteString("{" + strconv.Itoa(i) + "}")
		args = append(args, strings.TrimSpace(seg.inner))
		last = seg.end
	}
	f.WriteString(brace.Replace(s[last:]))
	return "format(" + quoteGHA(f.String()) + ", " + strings.Join(args, ", ") + ")"
}

// ghaCallRewrite is how the expressions of one call's jobs are rewritten.
type ghaCallRewrite struct {
	t      *ghaTranslator
	prefix string            // the caller's id and -
	jobs   map[string]string // the called workflow's job ids, by their lower case
	// inputs are the expressions the inputs read, by lower-case name; declared the
	// names the workflow declares.
	inputs   map[string]string
	declared []string
	// secrets are the expressions of the secrets the caller passes, by lower-case name;
	// inherit passes every secret as it is.
	secrets map[string]string
	inherit bool
	// callerNeeds are the caller's needs, which the status functions of its if: read;
	// callerCond is its if: ("" for none) and callerRewritten the same with GitHub's
	// success() over callerNeeds written out and no status function left ("" when it
	// comes to true).
	callerNeeds     []string
	callerCond      string
	callerRewritten string
	file            string
	// caller is the id of the calling job, for messages.
	caller string
	// remote is the called workflow's repository and commit, for its own calls of ./.
	remote *ghaWorkflowFile
}

// expr rewrites an expression of the called workflow.
func (rw *ghaCallRewrite) expr(outputs bool) exprRewrite { return rw.rewriter(outputs, false) }

// rewriter rewrites an expression of the called workflow; for a label (a job's name), an
// input the caller fills from its needs stays an expression, which the job's claim
// evaluates, and any other input known only when the jobs run reads as the text of the
// caller's expression.
func (rw *ghaCallRewrite) rewriter(outputs, label bool) exprRewrite {
	return exprRewrite{ref: func(head string, p []string) (string, bool, string) {
		switch head {
		case "inputs":
			if len(p) == 0 || p[0] == "*" {
				return "", false, "a called workflow reads its inputs by name here (inputs.NAME)"
			}
			v, ok := rw.inputs[strings.ToLower(p[0])]
			if !ok {
				return "", false, fmt.Sprintf("inputs.%s is not an input of %s (on.workflow_call.inputs: %s)", p[0], rw.file, strings.Join(rw.declared, ", "))
			}
			if len(p) > 1 {
				return "", false, fmt.Sprintf("inputs.%s is a %s, which has no properties", p[0], "value")
			}
			if _, known := foldConst(v); label && !known && !claimReadable(v) {
				// What a need left is put in when the job is claimed, where a job's
				// name reading needs is evaluated (claimName); anything else known only
				// when the jobs run shows as the caller's expression.
				v = quoteGHA(strings.TrimSuffix(strings.TrimPrefix(v, "("), ")"))
			}
			if !simpleExpr(v) {
				v = "(" + v + ")"
			}
			return v, true, ""
		case "secrets":
			if rw.inherit || len(p) == 0 || p[0] == "*" || strings.EqualFold(p[0], "GITHUB_TOKEN") {
				return "", false, ""
			}
			if v, ok := rw.secrets[strings.ToLower(p[0])]; ok {
				if !simpleExpr(v) {
					v = "(" + v + ")"
				}
				return v, true, ""
			}
			// A secret the caller does not pass reads as "", as on GitHub.
			return "''", true, ""
		case "needs", "jobs":
			if head == "jobs" && !outputs || len(p) == 0 {
				return "", false, ""
			}
			id, ok := rw.jobs[strings.ToLower(p[0])]
			if !ok {
				return "", false, ""
			}
			return "needs" + refPath(append([]string{rw.prefix + id}, p[1:]...)), true, ""
		}
		return "", false, ""
	}}
}

// text rewrites a text of the called workflow; problems are reported at the node.
func (rw *ghaCallRewrite) text(s string, at *yaml.Node, p string, outputs bool) string {
	return rw.rewriteText(s, at, p, rw.expr(outputs))
}

// label rewrites a job's name of the called workflow (see rewriter).
func (rw *ghaCallRewrite) label(s string, at *yaml.Node, p string) string {
	return rw.rewriteText(s, at, p, rw.rewriter(false, true))
}

func (rw *ghaCallRewrite) rewriteText(s string, at *yaml.Node, p string, x exprRewrite) string {
	out, err := rewriteTemplate(s, x)
	if err != nil {
		rw.t.textError(s, at, p, err.offset, err.msg)
		return s
	}
	return out
}

// condition rewrites an if: of the called workflow; "" for one that came to nothing.
func (rw *ghaCallRewrite) condition(s string, at *yaml.Node, p string) string {
	src := bareCondition(s)
	out, err := rewriteExpr(src, rw.expr(false))
	if err != nil {
		lead := strings.Index(s, src)
		rw.t.d.addAt(ErrExpression, text{v: s, node: at, path: p}, max(lead, 0)+err.offset, "%s", err.msg)
		return s
	}
	return out
}

// statusOf writes the status functions of an if: as the results of the needs they
// read, so that a condition of the caller and one of a called job can be joined.
func statusOf(needs []string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		var parts []string
		switch name {
		case "success":
			for _, n := range needs {
				parts = append(parts, "needs"+refPath([]string{n})+".result == 'success'")
			}
			if len(parts) == 0 {
				return "true", true
			}
			return "(" + strings.Join(parts, " && ") + ")", true
		case "failure":
			for _, n := range needs {
				parts = append(parts, "needs"+refPath([]string{n})+".result == 'failure'")
			}
			if len(parts) == 0 {
				return "false", true
			}
			return "(" + strings.Join(parts, " || ") + ")", true
		case "always":
			return "true", true
		}
		return "", false
	}
}

// callsStatus reports an expression that calls a status function.
func callsStatus(src string) bool {
	found := false
	_, _ = rewriteExpr(src, exprRewrite{ref: keepRef,
		status: func(name string) (string, bool) {
			switch name {
			case "success", "failure", "always", "cancelled":
				found = true
			}
			return "", false
		}})
	return found
}

// callerCondition is the caller's if: with its status functions written as the results
// of the caller's needs, and the success() GitHub adds to a condition without one made
// explicit: it reads the same for every job of the call.
func (rw *ghaCallRewrite) callerCondition(cond string) string {
	success, _ := statusOf(rw.callerNeeds)("success")
	switch {
	case cond == "" && success == "true":
		return ""
	case cond == "":
		return success
	case !callsStatus(cond) && success == "true":
		return "(" + cond + ")"
	case !callsStatus(cond):
		return success + " && (" + cond + ")"
	}
	out, err := rewriteExpr(cond, exprRewrite{ref: keepRef, status: statusOf(rw.callerNeeds)})
	if err != nil {
		return cond
	}
	return "(" + out + ")"
}

// joinConditions is the if: of a job a call added: the caller's and the job's own.
// ownNeeds are the job's needs in the called workflow, which the status functions of its
// own if: read on GitHub.
func (rw *ghaCallRewrite) joinConditions(own string, ownNeeds []string) string {
	caller := rw.callerCond
	switch {
	case caller == "" && len(rw.callerNeeds) == 0:
		return own // the job's needs are its own: its if: reads as written
	case !callsStatus(caller) && !callsStatus(own):
		// GitHub's success() is added to both alike, over the caller's needs and the
		// job's own, which the job has all of.
		switch {
		case caller == "":
			return own
		case own == "":
			return caller
		}
		return "(" + caller + ") && (" + own + ")"
	}
	// A status function reads the needs of the workflow it is written in: each is
	// written out over those, and the two parts joined.
	ownPart, _ := statusOf(ownNeeds)("success")
	switch {
	case own == "":
	case callsStatus(own):
		if out, err := rewriteExpr(own, exprRewrite{ref: keepRef, status: statusOf(ownNeeds)}); err == nil {
			ownPart = "(" + out + ")"
		}
	case ownPart == "true":
		ownPart = "(" + own + ")"
	default:
		ownPart += " && (" + own + ")"
	}
	parts := []string{"!cancelled()"}
	for _, p := range []string{rw.callerRewritten, ownPart} {
		if p != "" && p != "true" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, " && ")
}

// keepRef leaves every reference as it is.
func keepRef(string, []string) (string, bool, string) { return "", false, "" }
