package ghaexpr

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// testValues is a context shaped like the worker's: GitHub's names plus one the caller added.
func testValues() map[string]any {
	return map[string]any{
		"github": map[string]any{
			"sha":        "abc123",
			"ref":        "refs/heads/main",
			"event_name": "push",
			"event": map[string]any{
				"number": 42.0,
				"issue": map[string]any{
					"labels": []any{
						map[string]any{"name": "bug", "id": 1.0},
						map[string]any{"name": "help wanted", "id": 2.0},
					},
				},
			},
		},
		"env": map[string]any{"EMPTY": "", "ZERO": "0", "NAME": "Gantry", "JSON": `{"a": [1, 2]}`},
		"inputs": map[string]any{
			"count": 3.0,
			"flag":  true,
			"name":  "x",
			"none":  nil,
		},
		"matrix": map[string]any{"os": "ubuntu", "go-version": "1.22", "n": []any{1.0, 2.0, 3.0}},
		"steps": map[string]any{
			"build-1": map[string]any{"outputs": map[string]any{"x": "y"}, "conclusion": "success"},
		},
		"custom": "value",
	}
}

func testContext() *Context { return &Context{Values: testValues()} }

// sameResult is reflect.DeepEqual with NaN equal to NaN.
func sameResult(a, b any) bool {
	if x, ok := a.(float64); ok {
		if y, ok := b.(float64); ok && math.IsNaN(x) && math.IsNaN(y) {
			return true
		}
	}
	return reflect.DeepEqual(a, b)
}

func TestEval(t *testing.T) {
	t.Parallel()
	tests := []struct {
		group, expr string
		want        any
	}{
		// Literals.
		{"literal", "null", nil},
		{"literal", "true", true},
		{"literal", "false", false},
		{"literal", "1", 1.0},
		{"literal", "-1.5", -1.5},
		{"literal", "+2", 2.0},
		{"literal", ".5", 0.5},
		{"literal", "5.", 5.0},
		{"literal", "1e3", 1000.0},
		{"literal", "1E-2", 0.01},
		{"literal", "0xff", 255.0},
		{"literal", "0xFFFFFFFF", -1.0}, // GitHub reads hex as a 32-bit integer
		{"literal", "0o17", 15.0},
		{"literal", "NaN", math.NaN()},
		{"literal", "Infinity", math.Inf(1)},
		{"literal", "-Infinity", math.Inf(-1)},
		{"literal", "'it''s'", "it's"},
		{"literal", "''", ""},
		{"literal", "'${{ x }}'", "${{ x }}"},
		{"literal", "  'spaces around'  ", "spaces around"},

		// ! and truthiness.
		{"not", "!true", false},
		{"not", "!0", true},
		{"not", "!'a'", false},
		{"not", "!''", true},
		{"not", "!!'a'", true},
		{"not", "!null", true},
		{"not", "!NaN", true},
		{"not", "!github", false},
		{"not", "!fromJSON('[]')", false},
		{"not", "!'0'", false},
		{"not", "!'false'", false},

		// == and != with GitHub's coercions.
		{"equal", "1 == 1.0", true},
		{"equal", "'a' == 'A'", true},
		{"equal", "'abc' != 'ABD'", true},
		{"equal", "'abc' != 'ABC'", false},
		{"equal", "null == null", true},
		{"equal", "null == 0", true},
		{"equal", "null == false", true},
		{"equal", "null == ''", true},
		{"equal", "null == 'null'", false},
		{"equal", "true == 1", true},
		{"equal", "true == '1'", true},
		{"equal", "true == 'true'", false}, // 'true' is NaN as a number
		{"equal", "false == ''", true},
		{"equal", "false == 0", true},
		{"equal", "1 == '1'", true},
		{"equal", "'1.0' == 1", true},
		{"equal", "' 1 ' == 1", true},
		{"equal", "'0x10' == 16", true},
		{"equal", "'1e2' == 100", true},
		{"equal", "'' == 0", true},
		{"equal", "'abc' == 0", false},
		{"equal", "NaN == NaN", false},
		{"equal", "NaN != NaN", true},
		{"equal", "Infinity == 'Infinity'", true},
		{"equal", "github == github", true},
		{"equal", "matrix.n == matrix.n", true},
		{"equal", "github.event == github['EVENT']", true},
		{"equal", "fromJSON('[1]') == fromJSON('[1]')", false},
		{"equal", "fromJSON('{}') == fromJSON('{}')", false},
		{"equal", "github == 'Object'", false},
		{"equal", "matrix.n == 'Array'", false},
		{"equal", "github == null", false},
		{"equal", "github != null", true},
		{"equal", "github.event.issue.labels.* == github.event.issue.labels.*", false},

		// < <= > >=.
		{"order", "1 < 2", true},
		{"order", "2 < 1", false},
		{"order", "2 <= 2", true},
		{"order", "3 > 2", true},
		{"order", "2 >= 3", false},
		{"order", "3 >= 3", true},
		{"order", "'a' < 'B'", true},
		{"order", "'B' > 'a'", true},
		{"order", "'abc' <= 'ABC'", true},
		{"order", "'abc' < 'abcd'", true},
		{"order", "false < true", true},
		{"order", "true > false", true},
		{"order", "true >= true", true},
		{"order", "null < 1", true},
		{"order", "'10' > 9", true},
		{"order", "'abc' < 1", false},
		{"order", "'abc' > 1", false},
		{"order", "'abc' >= 1", false},
		{"order", "NaN < 1", false},
		{"order", "NaN >= NaN", false},
		{"order", "github < github", false},
		{"order", "github <= github", true},
		{"order", "github > 1", false},
		{"order", "-Infinity < -1e308", true},

		// && and || return an operand and stop at the first that decides.
		{"logical", "true && 'yes'", "yes"},
		{"logical", "'' && 'yes'", ""},
		{"logical", "0 && 'yes'", 0.0},
		{"logical", "null && hashFiles('x')", nil}, // hashFiles is an error here, but is not reached
		{"logical", "inputs.none || 'default'", "default"},
		{"logical", "inputs.name || 'default'", "x"},
		{"logical", "0 || null", nil},
		{"logical", "false || 0", 0.0},
		{"logical", "true || fromJSON('not json')", true},
		{"logical", "false || false || 'third'", "third"},
		{"logical", "1 && 2 && 3", 3.0},
		{"logical", "inputs.flag && 'on' || 'off'", "on"},
		{"logical", "!inputs.flag && 'on' || 'off'", "off"},
		{"logical", "github || 1", testValues()["github"]},

		// Precedence: ! > comparison > equality > && > ||.
		{"precedence", "true || false && false", true},
		{"precedence", "(true || false) && false", false},
		{"precedence", "!false && false", false},
		{"precedence", "!(false && false)", true},
		{"precedence", "2 == 2 > 1", false}, // 2 == (2 > 1) is 2 == true is 2 == 1
		{"precedence", "1 < 2 == 2 < 3", true},
		{"precedence", "!1 == 0", true},
		{"precedence", "1 == 1 && 2 == 2", true},

		// Property access and indexes.
		{"property", "github.sha", "abc123"},
		{"property", "github.SHA", "abc123"},
		{"property", "GitHub.Sha", "abc123"},
		{"property", "github['sha']", "abc123"},
		{"property", "github['SHA']", "abc123"},
		{"property", "github[format('{0}', 'sha')]", "abc123"},
		{"property", "(github).sha", "abc123"},
		{"property", "github.event.number", 42.0},
		{"property", "github['event']['number']", 42.0},
		{"property", "github.missing", nil},
		{"property", "github.missing.deeper[0].x", nil},
		{"property", "inputs.name.length", nil},
		{"property", "inputs.none.x", nil},
		{"property", "steps.build-1.outputs.x", "y"},
		{"property", "steps['build-1'].outputs['x']", "y"},
		{"property", "matrix.go-version", "1.22"},
		{"property", "matrix['go-version']", "1.22"},
		{"property", "matrix.n[0]", 1.0},
		{"property", "matrix.n[2]", 3.0},
		{"property", "matrix.n[3]", nil},
		{"property", "matrix.n[-1]", nil},
		{"property", "matrix.n[1.7]", 2.0},
		{"property", "matrix.n['1']", 2.0},
		{"property", "matrix.n[true]", 2.0},
		{"property", "matrix.n['x']", nil},
		{"property", "matrix.n.x", nil},
		{"property", "matrix.n[github]", nil},
		{"property", "github[matrix.n]", nil},
		{"property", "fromJSON('{\"1\": \"one\"}')[1]", "one"},
		{"property", "fromJSON(env.JSON).a[1]", 2.0},
		{"property", "fromJSON(env.JSON).A[0]", 1.0},
		{"property", "github.event.issue.labels[1].name", "help wanted"},
		{"property", "fromJSON('{\"true\": 1}').true", 1.0},
		{"property", "fromJSON('{\"NaN\": 1}').NaN", 1.0},

		// Context names.
		{"context", "custom", "value"},
		{"context", "CUSTOM", "value"},
		{"context", "vars", nil},
		{"context", "vars.X", nil},
		{"context", "secrets.TOKEN", nil},
		{"context", "inputs.none", nil},

		// The object filter.
		{"filter", "github.event.issue.labels.*.name", []any{"bug", "help wanted"}},
		{"filter", "github.event.issue.labels[*].name", []any{"bug", "help wanted"}},
		{"filter", "github.event.issue.labels.*.ID", []any{1.0, 2.0}},
		{"filter", "github.event.issue.labels.*.missing", []any{}},
		{"filter", "matrix.n.*", []any{1.0, 2.0, 3.0}},
		{"filter", "fromJSON('{\"b\": {\"x\": 2}, \"a\": {\"x\": 1}, \"c\": 3}').*.x", []any{1.0, 2.0}},
		{"filter", "fromJSON('{\"b\": 2, \"a\": 1}').*", []any{1.0, 2.0}},
		{"filter", "fromJSON('[[1, 2], [3]]').*[0]", []any{1.0, 3.0}},
		{"filter", "fromJSON('[[1, 2], [3]]').*[1]", []any{2.0}},
		{"filter", "fromJSON('[[1, 2], [3]]').*.*", []any{1.0, 2.0, 3.0}},
		{"filter", "fromJSON('[{\"a\": {\"b\": 1}}, {\"a\": {\"b\": 2}}]').*.a.b", []any{1.0, 2.0}},
		{"filter", "fromJSON('[{\"a\": null}, {}]').*.a", []any{nil}},
		{"filter", "fromJSON('[]').*", []any{}},
		{"filter", "inputs.name.*", []any{}},
		{"filter", "inputs.none.*", []any{}},
		{"filter", "inputs.none.*.x", []any{}},
		{"filter", "contains(github.event.issue.labels.*.name, 'BUG')", true},
		{"filter", "join(github.event.issue.labels.*.name, '|')", "bug|help wanted"},
		{"filter", "toJSON(github.event.issue.labels.*.name)", "[\n  \"bug\",\n  \"help wanted\"\n]"},
		{"filter", "github.event.issue.labels.*.name[0]", []any{}},
		{"filter", "!github.event.issue.labels.*.missing", false},

		// contains.
		{"contains", "contains('Hello world', 'WORLD')", true},
		{"contains", "contains('abc', 'd')", false},
		{"contains", "contains('abc', '')", true},
		{"contains", "contains(null, '')", true},
		{"contains", "contains(123, 2)", true},
		{"contains", "contains(true, 'RU')", true},
		{"contains", "contains(1.5, '.')", true},
		{"contains", "contains('abc', github)", false},
		{"contains", "contains(matrix.n, 2)", true},
		{"contains", "contains(matrix.n, '2')", true},
		{"contains", "contains(matrix.n, 4)", false},
		{"contains", "contains(fromJSON('[\"A\", \"b\"]'), 'a')", true},
		{"contains", "contains(fromJSON('[]'), 1)", false},
		{"contains", "contains(fromJSON('[null]'), null)", true},
		{"contains", "contains(github, 'sha')", false},
		{"contains", "CONTAINS('a', 'A')", true},

		// startsWith and endsWith.
		{"startsWith", "startsWith('Hello', 'he')", true},
		{"startsWith", "startsWith('Hello', 'lo')", false},
		{"startsWith", "startsWith('ab', 'abc')", false},
		{"startsWith", "startsWith('ab', '')", true},
		{"startsWith", "startsWith(12, 1)", true},
		{"startsWith", "startsWith(null, '')", true},
		{"startsWith", "startsWith(github, 'O')", false},
		{"startsWith", "startsWith('Object', github)", false},
		{"startsWith", "startswith(github.ref, 'refs/heads/')", true},
		{"endsWith", "endsWith('Hello', 'LO')", true},
		{"endsWith", "endsWith('Hello', 'he')", false},
		{"endsWith", "endsWith(true, 'UE')", true},
		{"endsWith", "endsWith(matrix.n, '3')", false},
		{"endsWith", "ENDSWITH(github.ref, '/MAIN')", true},

		// format.
		{"format", "format('Hello {0} {1} {2}', 'Mona', 'the', 'Octocat')", "Hello Mona the Octocat"},
		{"format", "format('{{Hello {0}!}}', 'Mona')", "{Hello Mona!}"},
		{"format", "format('}}{{')", "}{"},
		{"format", "format('{{0}}', 1)", "{0}"},
		{"format", "format('{0}{0}', 'a')", "aa"},
		{"format", "format('{1}', 'a', 'b')", "b"},
		{"format", "format('{1}', nope, 'b')", "b"}, // an argument not used is not evaluated
		{"format", "format('no args')", "no args"},
		{"format", "format('')", ""},
		{"format", "format('{0}', null)", ""},
		{"format", "format('{0}|{1}|{2}', 1.5, true, 1e15)", "1.5|true|1E+15"},
		{"format", "format('{0} {1}', github, matrix.n)", "Object Array"},
		{"format", "format(1)", "1"},
		{"format", "format('{00}', 'x')", "x"},
		{"format", "Format('{0}', 'x')", "x"},

		// join.
		{"join", "join(matrix.n)", "1,2,3"},
		{"join", "join(matrix.n, ', ')", "1, 2, 3"},
		{"join", "join(matrix.n, 0)", "10203"},
		{"join", "join(matrix.n, github)", "1,2,3"},
		{"join", "join(matrix.n, null)", "123"},
		{"join", "join('abc', '-')", "abc"},
		{"join", "join(1.5)", "1.5"},
		{"join", "join(null)", ""},
		{"join", "join(github)", ""},
		{"join", "join(fromJSON('[]'), '-')", ""},
		{"join", "join(fromJSON('[\"only\"]'), nope)", "only"}, // one element: the separator is not evaluated
		{"join", "join(fromJSON('[\"a\", null, true, {}, []]'))", "a,,true,Object,Array"},

		// toJSON.
		{"toJSON", "toJSON(1)", "1"},
		{"toJSON", "toJSON(1.25)", "1.25"},
		{"toJSON", "toJSON(true)", "true"},
		{"toJSON", "toJSON(null)", "null"},
		{"toJSON", "toJSON('a\"b\\\\c\n')", "\"a\\\"b\\\\\\\\c\\n\""},
		{"toJSON", "toJSON('<&>é')", "\"<&>é\""},
		{"toJSON", "toJSON('\t\r\b\f\x01\x1f\u0085\u2028\u2029')", `"\t\r\b\f\u0001\u001f\u0085\u2028\u2029"`},
		{"toJSON", "toJSON(fromJSON('[]'))", "[]"},
		{"toJSON", "toJSON(fromJSON('{}'))", "{}"},
		{"toJSON", "toJSON(fromJSON('{\"b\": [1, {}], \"a\": {\"x\": null}}'))", "{\n  \"a\": {\n    \"x\": null\n  },\n  \"b\": [\n    1,\n    {}\n  ]\n}"},
		{"toJSON", "toJson(matrix.n)", "[\n  1,\n  2,\n  3\n]"},

		// fromJSON.
		{"fromJSON", "fromJSON('{\"a\": 1}').a", 1.0},
		{"fromJSON", "fromJSON('true')", true},
		{"fromJSON", "fromJSON('null')", nil},
		{"fromJSON", "fromJSON(' 12 ')", 12.0},
		{"fromJSON", "fromJSON('\"s\"')", "s"},
		{"fromJSON", "fromJSON('[1, \"a\", null]')", []any{1.0, "a", nil}},
		{"fromJSON", "fromJSON(1)", 1.0},
		{"fromJSON", "fromJSON(true)", true},
		{"fromJSON", "FROMJSON(toJSON(matrix.n))[2]", 3.0},
		{"fromJSON", "fromJSON(toJSON(github)).event.number", 42.0},
	}
	c := testContext()
	for _, tt := range tests {
		t.Run(tt.group+"/"+tt.expr, func(t *testing.T) {
			t.Parallel()
			got, err := EvalString(tt.expr, c)
			if err != nil {
				t.Fatalf("EvalString(%q): %v", tt.expr, err)
			}
			if !sameResult(got, tt.want) {
				t.Errorf("EvalString(%q) = %#v, want %#v", tt.expr, got, tt.want)
			}
		})
	}
}

func TestEvalErrors(t *testing.T) {
	t.Parallel()
	hashErr := errors.New("disk on fire")
	tests := []struct {
		expr      string
		hashFiles func([]string) (string, error)
		kind      ErrorKind
		msg       string // the whole Error()
	}{
		{expr: "nope", kind: ErrUnknownName,
			msg: "Unrecognized named-value: 'nope'. Located at position 1 within expression: nope"},
		{expr: "github.sha == nope.x", kind: ErrUnknownName,
			msg: "Unrecognized named-value: 'nope'. Located at position 15 within expression: github.sha == nope.x"},
		{expr: "format('{0}', nope)", kind: ErrUnknownName,
			msg: "Unrecognized named-value: 'nope'. Located at position 15 within expression: format('{0}', nope)"},
		{expr: "format('{0')", kind: ErrFunction,
			msg: "The following format string is invalid: {0. Located at position 1 within expression: format('{0')"},
		{expr: "format('a}b')", kind: ErrFunction,
			msg: "The following format string is invalid: a}b. Located at position 1 within expression: format('a}b')"},
		{expr: "format('{a}', 1)", kind: ErrFunction,
			msg: "The following format string is invalid: {a}. Located at position 1 within expression: format('{a}', 1)"},
		{expr: "format('{0:x}', 1)", kind: ErrFunction,
			msg: "The following format string is invalid: {0:x}. Located at position 1 within expression: format('{0:x}', 1)"},
		{expr: "format('{256}', 1)", kind: ErrFunction,
			msg: "The following format string is invalid: {256}. Located at position 1 within expression: format('{256}', 1)"},
		{expr: "format('{1}', 1)", kind: ErrFunction,
			msg: "The following format string references more arguments than were supplied: {1}. Located at position 1 within expression: format('{1}', 1)"},
		{expr: "format('{0} {', nope)", kind: ErrFunction, // the format is checked before arguments are evaluated
			msg: "The following format string is invalid: {0} {. Located at position 1 within expression: format('{0} {', nope)"},
		{expr: "1 == fromJSON('nope')", kind: ErrFunction,
			msg: "fromJSON: 'nope' is not JSON: invalid character 'o' in literal null (expecting 'u'). Located at position 6 within expression: 1 == fromJSON('nope')"},
		{expr: "fromJSON('')", kind: ErrFunction,
			msg: "fromJSON: '' is not JSON: the text is empty. Located at position 1 within expression: fromJSON('')"},
		{expr: "fromJSON('1 2')", kind: ErrFunction,
			msg: "fromJSON: '1 2' is not JSON: text follows the value at byte 3. Located at position 1 within expression: fromJSON('1 2')"},
		{expr: "fromJSON(inputs.none)", kind: ErrFunction,
			msg: "fromJSON: '' is not JSON: the text is empty. Located at position 1 within expression: fromJSON(inputs.none)"},
		{expr: "hashFiles('**/go.sum')", kind: ErrFunction,
			msg: "hashFiles is not available here. Located at position 1 within expression: hashFiles('**/go.sum')"},
		{expr: "hashFiles('a', 'b')", kind: ErrFunction,
			hashFiles: func([]string) (string, error) { return "", hashErr },
			msg:       "hashFiles('a', 'b') failed: disk on fire. Located at position 1 within expression: hashFiles('a', 'b')"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			c := testContext()
			c.HashFiles = tt.hashFiles
			v, err := EvalString(tt.expr, c)
			if err == nil {
				t.Fatalf("EvalString(%q) = %#v, want an error", tt.expr, v)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %v is not %s", err, tt.kind)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("error %T is not *Error", err)
			}
			if err.Error() != tt.msg {
				t.Errorf("error:\n got %s\nwant %s", err, tt.msg)
			}
			if tt.hashFiles != nil && !errors.Is(err, hashErr) {
				t.Errorf("error %v does not wrap HashFiles's", err)
			}
		})
	}
}

func TestHashFiles(t *testing.T) {
	t.Parallel()
	var got []string
	c := &Context{HashFiles: func(p []string) (string, error) {
		got = p
		return "f00d", nil
	}}
	v, err := EvalString("hashFiles('**/go.sum', format('{0}/x', 'dir'), 1, null)", c)
	if err != nil {
		t.Fatal(err)
	}
	if v != "f00d" {
		t.Errorf("hashFiles = %#v, want f00d", v)
	}
	if want := []string{"**/go.sum", "dir/x", "1", ""}; !reflect.DeepEqual(got, want) {
		t.Errorf("patterns = %q, want %q", got, want)
	}
}

func TestStatusFunctions(t *testing.T) {
	t.Parallel()
	type status struct{ success, failure, cancelled bool }
	fn := func(s status) func(string) bool {
		return func(name string) bool {
			switch name {
			case "success":
				return s.success
			case "failure":
				return s.failure
			case "cancelled":
				return s.cancelled
			}
			return name == "always"
		}
	}
	tests := []struct {
		expr   string
		status *status // nil leaves Context.Status nil
		want   bool
	}{
		{"success()", nil, true},
		{"always()", nil, true},
		{"failure()", nil, false},
		{"cancelled()", nil, false},
		{"success()", &status{success: true}, true},
		{"failure()", &status{failure: true}, true},
		{"Failure()", &status{failure: true}, true},
		{"success()", &status{failure: true}, false},
		{"cancelled()", &status{cancelled: true}, true},
		{"always()", &status{cancelled: true}, true},
		{"success() || failure()", &status{failure: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			c := &Context{}
			if tt.status != nil {
				c.Status = fn(*tt.status)
			}
			got, err := EvalString(tt.expr, c)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("%s = %v, want %v", tt.expr, got, tt.want)
			}
		})
	}
}

// TestGoTypes checks values of other Go types than the documented ones are read as GitHub
// would read their JSON, and come out of Eval as the documented types.
func TestGoTypes(t *testing.T) {
	t.Parallel()
	type label string
	c := &Context{Values: map[string]any{
		"env":    map[string]string{"A": "b"},
		"list":   []string{"x", "y"},
		"count":  3,
		"small":  uint8(7),
		"ratio":  float32(0.5),
		"nested": map[string][]string{"k": {"v"}},
		"named":  label("hi"),
		"ptr":    &[]int{1, 2},
		"nilptr": (*int)(nil),
		"typed":  map[string]any{"ints": []int{4, 5}},
	}}
	tests := []struct {
		expr string
		want any
	}{
		{"env.a", "b"},
		{"list[1]", "y"},
		{"count == 3", true},
		{"count", 3.0},
		{"small", 7.0},
		{"ratio", 0.5},
		{"named", "hi"},
		{"ptr[1]", 2.0},
		{"nilptr", nil},
		{"nested", map[string]any{"k": []any{"v"}}},
		{"list", []any{"x", "y"}},
		{"typed", map[string]any{"ints": []any{4.0, 5.0}}},
		{"typed.ints.*", []any{4.0, 5.0}},
		{"toJSON(nested)", "{\n  \"k\": [\n    \"v\"\n  ]\n}"},
		{"contains(list, 'Y')", true},
		{"join(list, '+')", "x+y"},
	}
	for _, tt := range tests {
		t.Run(tt.expr, func(t *testing.T) {
			t.Parallel()
			got, err := EvalString(tt.expr, c)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("%s = %#v, want %#v", tt.expr, got, tt.want)
			}
		})
	}
}

// TestEvalKeepsIdentity checks a result that is already of the documented types is the
// caller's own value, not a copy: reading github.event must not copy the event.
func TestEvalKeepsIdentity(t *testing.T) {
	t.Parallel()
	c := testContext()
	got, err := EvalString("github.event", c)
	if err != nil {
		t.Fatal(err)
	}
	want := c.Values["github"].(map[string]any)["event"]
	if !sameRef(got, want) {
		t.Error("github.event was copied")
	}
}

func TestEvalCyclicValue(t *testing.T) {
	t.Parallel()
	m := map[string]any{}
	m["self"] = m
	c := &Context{Values: map[string]any{"loop": m}}
	if v, err := EvalString("loop.self.self.self == loop", c); err != nil || v != true {
		t.Errorf("loop.self.self.self == loop = %v, %v; want true", v, err)
	}
	if _, err := EvalString("toJSON(loop)", c); !errors.Is(err, ErrLimit) {
		t.Errorf("toJSON of a cycle: %v, want ErrLimit", err)
	}
	if _, err := EvalString("fromJSON('[1]')[0] && loop", c); err != nil {
		t.Errorf("a cycle made only of maps of the documented types is returned as is: %v", err)
	}
}

func TestEvalNilArguments(t *testing.T) {
	t.Parallel()
	n, err := Parse("github.sha || 'none'")
	if err != nil {
		t.Fatal(err)
	}
	if v, err := Eval(n, nil); err != nil || v != "none" {
		t.Errorf("Eval with a nil Context = %#v, %v; want none", v, err)
	}
	if _, err := Eval(nil, nil); err == nil {
		t.Error("Eval of a nil Node did not fail")
	}
}

// TestEvalConcurrent evaluates one Node from many goroutines; run with -race.
func TestEvalConcurrent(t *testing.T) {
	t.Parallel()
	n, err := Parse("format('{0}-{1}', join(github.event.issue.labels.*.name), toJSON(matrix))")
	if err != nil {
		t.Fatal(err)
	}
	c := testContext()
	var wg sync.WaitGroup
	results := make([]any, 16)
	for i := range results {
		wg.Go(func() {
			v, err := Eval(n, c)
			if err != nil {
				t.Error(err)
			}
			results[i] = v
		})
	}
	wg.Wait()
	for _, r := range results {
		if r != results[0] || !strings.HasPrefix(r.(string), "bug,help wanted-{") {
			t.Fatalf("results differ or are wrong: %q", results)
		}
	}
}

func TestClip(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 40) // 80 bytes: the cut falls inside a rune
	got := clip(long)
	if !strings.HasSuffix(got, "...'") || !utf8.ValidString(got) || len(got) > 65 {
		t.Errorf("clip(%q) = %q", long, got)
	}
	if got := clip("it's"); got != "'it''s'" {
		t.Errorf("clip(it's) = %q", got)
	}
}
