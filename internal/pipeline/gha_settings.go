package pipeline

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/ghaexpr"
)

// timeout-minutes and continue-on-error written as expressions (${{ matrix.slow && 30 ||
// 10 }}) are decided when the plan is made, for each instance of the job's matrix, by
// GitHub's rules (internal/ghaexpr), reading matrix and literals: as a job's name: and
// runs-on are (gha_jobname.go, gha_runson.go).

// A run step's shell: given by an expression (curl's ${{ contains(matrix.image,
// 'windows') && 'msys2 {0}' || 'bash' }}) is decided the same way, and mapped as a shell
// written out is (ghaShellOf).

// ghaSettingExpr is one such setting: of the job (step < 0) or of its step-th step as
// translated.
type ghaSettingExpr struct {
	key  string // "timeout-minutes", "continue-on-error" or "shell"
	step int
	src  string
	node *yaml.Node
	path string
}

// settingExpr reports whether a setting's value is an expression, and records it to be
// evaluated per instance (for a step, pending until steps() knows its index).
func (t *ghaTranslator) settingExpr(j *ghaJob, key string, n *yaml.Node, p string, step bool) bool {
	r := t.d.resolve(n)
	if r == nil || r.Kind != yaml.ScalarNode || !strings.Contains(r.Value, "${{") {
		return false
	}
	src := strings.TrimSpace(r.Value)
	inner := strings.TrimSuffix(strings.TrimPrefix(src, "${{"), "}}")
	if !strings.HasPrefix(src, "${{") || !strings.HasSuffix(src, "}}") || strings.Contains(inner, "${{") {
		t.d.add(ErrInvalid, r, p, "%s: write a number, or one expression in ${{ }}", key)
		return true
	}
	n2, err := ghaexpr.Parse(inner)
	if err != nil {
		t.d.add(ErrExpression, r, p, "%v", err)
		return true
	}
	for _, ref := range ghaexpr.Refs(n2) {
		if !strings.EqualFold(ref.Context, "matrix") {
			t.d.add(ErrExpression, r, p, "%s is decided for each instance of the matrix when the plan is made, so an expression there may read matrix and literals only, not %s", key, ref.Context)
			return true
		}
	}
	e := ghaSettingExpr{key: key, step: -1, src: inner, node: r, path: p}
	if step {
		t.pendingSettings = append(t.pendingSettings, e)
	} else {
		t.settingExprs[j.id] = append(t.settingExprs[j.id], e)
	}
	return true
}

// placeSettings gives the settings of the step just translated its index.
func (t *ghaTranslator) placeSettings(j *ghaJob, index int) {
	for _, e := range t.pendingSettings {
		e.step = index
		t.settingExprs[j.id] = append(t.settingExprs[j.id], e)
	}
	t.pendingSettings = nil
}

// applySettings evaluates the settings for each instance of their jobs.
func (t *ghaTranslator) applySettings(p *Plan) {
	for _, job := range p.Jobs {
		for _, e := range t.settingExprs[job.Name] {
			v, err := ghaexpr.EvalString(e.src, &ghaexpr.Context{Values: map[string]any{"matrix": MatrixContext(job.Matrix)}})
			if err != nil {
				t.d.add(ErrExpression, e.node, e.path, "for %s: %v", job.Key, err)
				continue
			}
			switch e.key {
			case "timeout-minutes":
				f, ok := v.(float64)
				if s, isText := v.(string); isText {
					// A matrix value is text in the plan; GitHub had it as a number.
					f, err = strconv.ParseFloat(strings.TrimSpace(s), 64)
					ok = err == nil
				}
				if !ok || f <= 0 || f > 60*24*365 || math.IsNaN(f) {
					shown := ghaexpr.ToString(v)
					if v == nil {
						shown = "null"
					}
					t.d.add(ErrInvalid, e.node, e.path, "for %s: timeout-minutes comes to %s, not a number of minutes more than zero", job.Key, shown)
					continue
				}
				d := Duration(time.Duration(f * float64(time.Minute)))
				if e.step < 0 {
					job.Timeout = d
				} else if e.step < len(job.Steps) {
					job.Steps[e.step].Timeout = d
				}
			case "continue-on-error":
				b := ghaexpr.Truthy(v)
				if e.step < 0 {
					job.ContinueOnError = b
				} else if e.step < len(job.Steps) {
					job.Steps[e.step].ContinueOnError = b
				}
			case "shell":
				s, isText := v.(string)
				sh, msg := ghaShellOf(strings.TrimSpace(s))
				if !isText || strings.Contains(s, "${{") {
					msg = fmt.Sprintf("shell comes to %s, not a shell", ghaexpr.ToString(v))
				}
				if msg != "" {
					t.d.add(ErrInvalid, e.node, e.path, "for %s: %s", job.Key, msg)
					continue
				}
				if e.step >= 0 && e.step < len(job.Steps) {
					job.Steps[e.step].Shell = sh.name
					job.Steps[e.step].Run = sh.prelude + job.Steps[e.step].Run
					t.noteShell(job.Name, e.step, sh)
				}
			default:
				panic(fmt.Sprintf("setting %s", e.key))
			}
		}
	}
}

// noteShell records the shell an instance's step came to, for gantry convert.
func (t *ghaTranslator) noteShell(job string, step int, sh ghaShell) {
	if t.evaluatedShells == nil {
		t.evaluatedShells = map[string]map[int][]ghaShell{}
	}
	if t.evaluatedShells[job] == nil {
		t.evaluatedShells[job] = map[int][]ghaShell{}
	}
	for _, have := range t.evaluatedShells[job][step] {
		if have.name == sh.name && have.prelude == sh.prelude {
			return
		}
	}
	t.evaluatedShells[job][step] = append(t.evaluatedShells[job][step], sh)
}

// staticShells writes into gantry convert's definition the shells that expressions came
// to: one per step, which Gantry's language can say when every instance of the matrix
// comes to the same shell. A step whose instances differ cannot be said in one step,
// and is refused with the way to write it.
func (t *ghaTranslator) staticShells(out *yaml.Node) {
	jobs := mappingValue(out, "jobs")
	for _, job := range sortedKeysOf(t.evaluatedShells) {
		steps := mappingValue(mappingValue(jobs, job), "steps")
		for step, shells := range t.evaluatedShells[job] {
			if steps == nil || step >= len(steps.Content) {
				continue
			}
			st := steps.Content[step]
			if len(shells) > 1 {
				var names []string
				for _, sh := range shells {
					names = append(names, strconv.Quote(sh.name))
				}
				t.d.add(ErrInvalid, st, fmt.Sprintf("jobs.%s.steps[%d].shell", job, step),
					"the instances of the matrix run this step with different shells (%s), which one step of Gantry's language cannot say: write a step for each shell, with an if: on the matrix value", strings.Join(names, ", "))
				continue
			}
			if shells[0].name != DefaultShell {
				put(st, "shell", st, gStr(shells[0].name, st))
			}
			if run := mappingValue(st, "run"); run != nil {
				run.Value = shells[0].prelude + run.Value
			}
		}
	}
}

func sortedKeysOf[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
