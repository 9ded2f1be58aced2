package pipeline

import (
	"errors"
	"strings"
	"testing"
)

// compileErrs compiles src, expecting it to be rejected, and returns the errors.
func compileErrs(t *testing.T, src string) Errors {
	t.Helper()
	p, err := Compile([]byte(src), Options{})
	if err == nil {
		t.Fatalf("Compile accepted the definition, planned %d jobs; want an error", len(p.Jobs))
	}
	var errs Errors
	if !errors.As(err, &errs) {
		t.Fatalf("Compile error is %T, want Errors: %v", err, err)
	}
	if p != nil {
		t.Fatalf("Compile returned a plan together with errors")
	}
	return errs
}

func TestCompileErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		src        string
		kind       ErrorKind
		path       string
		line, col  int
		msgContain string
	}{
		{"unknown top-level key suggests", "nmae: x\njobs: {a: {steps: [{run: x}]}}", ErrUnknownKey, "nmae", 1, 1, `did you mean "name"`},
		{"unknown job key suggests separator slip", "jobs:\n  a:\n    runs-on: [linux]\n    steps: [{run: x}]", ErrUnknownKey, "jobs.a.runs-on", 3, 5, `did you mean "runs_on"`},
		{"unknown step key", "jobs:\n  a:\n    steps:\n      - run: x\n        comand: y", ErrUnknownKey, "jobs.a.steps[0].comand", 5, 9, `unknown key "comand"`},
		{"unknown key far from any", "jobs:\n  a:\n    steps: [{run: x}]\n    zzzzzz: 1", ErrUnknownKey, "jobs.a.zzzzzz", 4, 5, `unknown key "zzzzzz" in job a`},
		{"duplicate key in job", "jobs:\n  a:\n    steps: [{run: x}]\n    steps: [{run: y}]", ErrDuplicateKey, "jobs.a.steps", 4, 5, "first defined on line 3"},
		{"duplicate job", "jobs:\n  a: {steps: [{run: x}]}\n  a: {steps: [{run: y}]}", ErrDuplicateKey, "jobs.a", 3, 3, `duplicate key "a"`},
		{"steps of wrong type", "jobs:\n  a:\n    steps: make build", ErrType, "jobs.a.steps", 3, 12, `expected a list of steps, found the string "make build"`},
		{"job without steps", "jobs:\n  a:\n    needs: []", ErrRequired, "jobs.a.steps", 2, 3, `job "a" has no steps`},
		{"empty steps", "jobs:\n  a:\n    steps: []", ErrRequired, "jobs.a.steps", 3, 12, "at least one step"},
		{"step without run", "jobs:\n  a:\n    steps:\n      - name: x", ErrRequired, "jobs.a.steps[0].run", 4, 9, "needs a run command"},
		{"empty run", "jobs:\n  a:\n    steps:\n      - run: \"  \"", ErrRequired, "jobs.a.steps[0].run", 4, 14, "run command is empty"},
		{"no jobs", "name: x", ErrRequired, "jobs", 1, 1, "needs a jobs mapping"},
		{"only templates", "jobs:\n  .base: {steps: [{run: x}]}", ErrRequired, "jobs", 2, 3, "templates"},
		{"empty jobs", "jobs: {}", ErrRequired, "jobs", 1, 7, "at least one job"},
		{"root not a mapping", "- a\n- b", ErrType, "", 1, 1, "expected the pipeline, found a list"},
		{"bad job name", "jobs:\n  \"a b\": {steps: [{run: x}]}", ErrInvalid, "jobs.a b", 2, 3, "job name"},
		{"unknown need suggests", "jobs:\n  build: {steps: [{run: x}]}\n  deploy:\n    needs: [biuld]\n    steps: [{run: x}]", ErrUnknownNeed, "jobs.deploy.needs[0]", 4, 13, `did you mean "build"`},
		{"need as a string", "jobs:\n  deploy:\n    needs: nope\n    steps: [{run: x}]", ErrUnknownNeed, "jobs.deploy.needs[0]", 3, 12, `needs "nope"`},
		{"self need", "jobs:\n  a:\n    needs: [a]\n    steps: [{run: x}]", ErrCycle, "jobs.a.needs[0]", 3, 13, `job "a" needs itself`},
		{"need listed twice", "jobs:\n  a: {steps: [{run: x}]}\n  b:\n    needs: [a, a]\n    steps: [{run: x}]", ErrInvalid, "jobs.b.needs[1]", 4, 16, "listed twice"},
		{"cycle is named", "jobs:\n  a:\n    needs: [c]\n    steps: [{run: x}]\n  b:\n    needs: [a]\n    steps: [{run: x}]\n  c:\n    needs: [b]\n    steps: [{run: x}]", ErrCycle, "jobs.a.needs[0]", 3, 13, "a -> c -> b -> a"},
		{"undeclared stage", "stages: [build]\njobs:\n  a:\n    stage: biuld\n    steps: [{run: x}]", ErrUnknownReference, "jobs.a.stage", 4, 12, `did you mean "build"`},
		{"stage without stages", "jobs:\n  a:\n    stage: build\n    steps: [{run: x}]", ErrUnknownReference, "jobs.a.stage", 3, 12, "declares no stages"},
		{"missing stage", "stages: [build]\njobs:\n  a:\n    steps: [{run: x}]", ErrRequired, "jobs.a.stage", 3, 3, "needs a stage"},
		{"need of later stage", "stages: [one, two]\njobs:\n  a:\n    stage: one\n    needs: [b]\n    steps: [{run: x}]\n  b:\n    stage: two\n    steps: [{run: x}]", ErrInvalid, "jobs.a.needs[0]", 5, 13, "later stage"},
		{"stage listed twice", "stages: [a, a]\njobs: {j: {stage: a, steps: [{run: x}]}}", ErrDuplicateKey, "stages[1]", 1, 13, "listed twice"},
		{"bad priority suggests", "jobs:\n  a:\n    priority: hgih\n    steps: [{run: x}]", ErrInvalid, "jobs.a.priority", 3, 15, `did you mean "high"`},
		{"duration without unit", "jobs:\n  a:\n    timeout: 30\n    steps: [{run: x}]", ErrInvalid, "jobs.a.timeout", 3, 14, "has no unit"},
		{"bad duration", "defaults:\n  timeout: 5x\njobs: {a: {steps: [{run: x}]}}", ErrInvalid, "defaults.timeout", 2, 12, "not a duration"},
		{"zero timeout", "jobs:\n  a:\n    timeout: 0s\n    steps: [{run: x}]", ErrInvalid, "jobs.a.timeout", 3, 14, "longer than zero"},
		{"bad memory", "jobs:\n  a:\n    resources: {memory: 4GB}\n    steps: [{run: x}]", ErrInvalid, "jobs.a.resources.memory", 3, 25, "not a size"},
		{"bad cpu", "jobs:\n  a:\n    resources: {cpu: lots}\n    steps: [{run: x}]", ErrInvalid, "jobs.a.resources.cpu", 3, 22, "not a CPU amount"},
		{"zero cpu", "jobs:\n  a:\n    resources: {cpu: 0}\n    steps: [{run: x}]", ErrInvalid, "jobs.a.resources.cpu", 3, 22, "more than zero"},
		{"unknown resource", "jobs:\n  a:\n    resources: {gpu: 1}\n    steps: [{run: x}]", ErrUnknownKey, "jobs.a.resources.gpu", 3, 17, "unknown key"},
		{"retry attempts out of range", "jobs:\n  a:\n    retry: {max_attempts: 0}\n    steps: [{run: x}]", ErrInvalid, "jobs.a.retry.max_attempts", 3, 27, "from 1 to 100"},
		{"retry attempts not a number", "jobs:\n  a:\n    retry: {max_attempts: three}\n    steps: [{run: x}]", ErrType, "jobs.a.retry.max_attempts", 3, 27, "whole number"},
		{"retry on unknown kind", "jobs:\n  a:\n    retry: {on: [crash]}\n    steps: [{run: x}]", ErrInvalid, "jobs.a.retry.on[0]", 3, 18, "failure, lost, timeout"},
		{"bool of wrong type", "jobs:\n  a:\n    continue_on_error: maybe\n    steps: [{run: x}]", ErrType, "jobs.a.continue_on_error", 3, 24, "true or false"},
		{"bad shell", "jobs:\n  a:\n    steps: [{run: x, shell: zsh}]", ErrInvalid, "jobs.a.steps[0].shell", 3, 29, "bash"},
		{"unknown matrix ref", "jobs:\n  a:\n    matrix: {go: [\"1.25\"]}\n    steps:\n      - run: echo ${{ matrix.os }}", ErrUnknownReference, "jobs.a.steps[0].run", 5, 19, "not an axis of this job (axes: go)"},
		{"matrix ref without matrix", "jobs:\n  a:\n    steps:\n      - run: \"echo ${{ matrix.go }}\"", ErrUnknownReference, "jobs.a.steps[0].run", 4, 20, "has no matrix"},
		{"unsupported reference", "jobs:\n  a:\n    steps:\n      - run: echo ${{ secrets.TOKEN }}", ErrUnknownReference, "jobs.a.steps[0].run", 4, 19, "secrets.TOKEN"},
		{"unclosed reference", "jobs:\n  a:\n    steps:\n      - run: echo ${{ matrix.go", ErrInvalid, "jobs.a.steps[0].run", 4, 19, "not closed"},
		{"unknown env ref", "env: {APP: x}\njobs:\n  a:\n    steps:\n      - run: echo ${{ env.AP }}", ErrUnknownReference, "jobs.a.steps[0].run", 5, 19, `did you mean "APP"`},
		{"env ref in block scalar", "jobs:\n  a:\n    steps:\n      - run: |\n          echo one\n          echo ${{ env.NOPE }}", ErrUnknownReference, "jobs.a.steps[0].run", 4, 14, "env.NOPE is not set"},
		{"reserved env", "env: {GANTRY_RUN_ID: x}\njobs: {a: {steps: [{run: x}]}}", ErrInvalid, "env.GANTRY_RUN_ID", 1, 7, "reserved"},
		{"bad env name", "jobs:\n  a:\n    env: {1X: y}\n    steps: [{run: x}]", ErrInvalid, "jobs.a.env.1X", 3, 11, "variable name"},
		{"env value is a list", "jobs:\n  a:\n    env: {X: [1]}\n    steps: [{run: x}]", ErrType, "jobs.a.env.X", 3, 14, "expected a value"},
		{"if syntax error", "jobs:\n  a:\n    if: branch ==\n    steps: [{run: x}]", ErrExpression, "jobs.a.if", 3, 17, ""},
		{"if assignment hints ==", "jobs:\n  a:\n    if: branch = \"main\"\n    steps: [{run: x}]", ErrExpression, "jobs.a.if", 3, 16, "compare with =="},
		{"if unknown name", "jobs:\n  a:\n    if: brnach == \"main\"\n    steps: [{run: x}]", ErrExpression, "jobs.a.if", 3, 9, "brnach"},
		{"if not boolean", "jobs:\n  a:\n    if: branch\n    steps: [{run: x}]", ErrExpression, "jobs.a.if", 3, 9, "must be true or false, and this gives text"},
		{"if needs a job not needed", "jobs:\n  b: {steps: [{run: x}]}\n  c: {steps: [{run: x}]}\n  a:\n    needs: [b]\n    if: needs.c.result == \"success\"\n    steps: [{run: x}]", ErrUnknownReference, "jobs.a.if", 6, 15, `does not need "c"`},
		{"if result word", "jobs:\n  b: {steps: [{run: x}]}\n  a:\n    needs: [b]\n    if: needs.b.result == \"failure\"\n    steps: [{run: x}]", ErrExpression, "jobs.a.if", 5, 27, `did you mean "failed"`},
		{"if other needs field", "jobs:\n  b: {steps: [{run: x}]}\n  a:\n    needs: [b]\n    if: needs.b.status\n    steps: [{run: x}]", ErrUnknownReference, "jobs.a.if", 5, 17, "has .result and .outputs"},
		{"needs output of a job not needed", "jobs:\n  b: {steps: [{run: x}]}\n  a:\n    steps: [{run: 'echo ${{ needs.b.outputs.v }}'}]", ErrUnknownReference, "jobs.a.steps[0].run", 4, 25, `this job does not need "b"`},
		{"steps output of a later step", "jobs:\n  a:\n    steps:\n      - run: 'echo ${{ steps.later.outputs.v }}'\n      - {id: later, run: x}", ErrUnknownReference, "jobs.a.steps[0].run", 4, 20, `no step before this one has id "later"`},
		{"steps in job env", "jobs:\n  a:\n    env: {X: '${{ steps.s.outputs.v }}'}\n    steps: [{id: s, run: x}]", ErrUnknownReference, "jobs.a.env.X", 3, 15, "may stand only in a step's run"},
		{"steps in job if", "jobs:\n  a:\n    if: steps.s.outcome == \"success\"\n    steps: [{id: s, run: x}]", ErrExpression, "jobs.a.if", 3, 9, "only in a step's if:"},
		{"step if unknown id", "jobs:\n  a:\n    steps:\n      - {id: s, run: x}\n      - {if: steps.t.outcome == \"failed\", run: x}", ErrUnknownReference, "jobs.a.steps[1].if", 5, 20, `no step before this one has id "t"`},
		{"step outcome word", "jobs:\n  a:\n    steps:\n      - {id: s, run: x}\n      - {if: steps.s.outcome == \"failure\", run: x}", ErrExpression, "jobs.a.steps[1].if", 5, 33, `did you mean "failed"`},
		{"duplicate step id", "jobs:\n  a:\n    steps:\n      - {id: s, run: x}\n      - {id: s, run: y}", ErrDuplicateKey, "jobs.a.steps[1].id", 5, 14, "earlier step"},
		{"bad output name", "jobs:\n  a:\n    outputs: {1x: y}\n    steps: [{run: x}]", ErrInvalid, "jobs.a.outputs.1x", 3, 15, "output name"},
		{"needs output in labels", "jobs:\n  b: {steps: [{run: x}]}\n  a:\n    needs: [b]\n    runs_on: ['${{ needs.b.outputs.l }}']\n    steps: [{run: x}]", ErrUnknownReference, "jobs.a.runs_on[0]", 5, 16, "known only when the job starts"},
		{"if matrix axis unknown", "jobs:\n  a:\n    matrix: {os: [linux]}\n    if: matrix.go == \"1\"\n    steps: [{run: x}]", ErrUnknownReference, "jobs.a.if", 4, 16, "no matrix value"},
		{"if quoted column", "jobs:\n  a:\n    if: \"success() && brnach\"\n    steps: [{run: x}]", ErrExpression, "jobs.a.if", 3, 23, "brnach"},
		{"artifact escapes", "jobs:\n  a:\n    steps: [{run: x}]\n    artifacts: {paths: [../secret]}", ErrInvalid, "jobs.a.artifacts.paths[0]", 4, 25, "must not leave the workspace"},
		{"artifact absolute", "jobs:\n  a:\n    steps: [{run: x}]\n    artifacts: [/etc/passwd]", ErrInvalid, "jobs.a.artifacts[0]", 4, 17, "relative"},
		{"artifact bad glob", "jobs:\n  a:\n    steps: [{run: x}]\n    artifacts: {paths: [\"bin/[x\"]}", ErrInvalid, "jobs.a.artifacts.paths[0]", 4, 25, "glob"},
		{"artifact without paths", "jobs:\n  a:\n    steps: [{run: x}]\n    artifacts: {name: bin}", ErrRequired, "jobs.a.artifacts.paths", 4, 16, "at least one path"},
		{"artifact path from matrix escapes", "jobs:\n  a:\n    matrix: {d: [\"..\"]}\n    steps: [{run: x}]\n    artifacts: [\"${{ matrix.d }}/x\"]", ErrInvalid, "jobs.a.artifacts[0]", 5, 17, "must not leave"},
		{"exclude unknown axis", "jobs:\n  a:\n    matrix:\n      go: [1]\n      exclude: [{os: linux}]\n    steps: [{run: x}]", ErrUnknownReference, "jobs.a.matrix.exclude[0].os", 5, 17, "does not have"},
		{"exclude unknown value", "jobs:\n  a:\n    matrix:\n      go: [1]\n      exclude: [{go: 2}]\n    steps: [{run: x}]", ErrInvalid, "jobs.a.matrix.exclude[0].go", 5, 17, "go=2"},
		{"everything excluded", "jobs:\n  a:\n    matrix:\n      go: [1]\n      exclude: [{go: 1}]\n    steps: [{run: x}]", ErrInvalid, "jobs.a.matrix", 4, 7, "no combinations"},
		{"empty axis", "jobs:\n  a:\n    matrix: {go: []}\n    steps: [{run: x}]", ErrRequired, "jobs.a.matrix.go", 3, 18, "no values"},
		{"empty matrix", "jobs:\n  a:\n    matrix: {}\n    steps: [{run: x}]", ErrRequired, "jobs.a.matrix", 3, 13, "no axes"},
		{"duplicate axis value", "jobs:\n  a:\n    matrix: {go: [1, 1]}\n    steps: [{run: x}]", ErrInvalid, "jobs.a.matrix.go[1]", 3, 22, "listed twice"},
		{"bad label", "jobs:\n  a:\n    runs_on: [\"linux box\"]\n    steps: [{run: x}]", ErrInvalid, "jobs.a.runs_on[0]", 3, 15, "label"},
		{"concurrency without group", "jobs:\n  a:\n    concurrency: {cancel_in_progress: true}\n    steps: [{run: x}]", ErrRequired, "jobs.a.concurrency.group", 3, 18, "group"},
		{"unsupported tag", "jobs:\n  a:\n    steps: [{run: !secret x}]", ErrType, "jobs.a.steps[0].run", 3, 19, "unsupported YAML tag"},
		{"syntax error has a line", "jobs:\n  a:\n    steps: [{run: x}\n  b: 1", ErrSyntax, "", 4, 3, "must be specified"},
		{"json syntax error", "{\"jobs\": {\"a\": {\"steps\": [{\"run\": \"x\"}]}},,}", ErrSyntax, "", 1, 43, ""},
		{"two documents", "jobs: {a: {steps: [{run: x}]}}\n---\njobs: {b: {steps: [{run: x}]}}", ErrSyntax, "", 2, 1, "more than one YAML document"},
		{"empty", "  \n# nothing\n", ErrRequired, "", 0, 0, "empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := compileErrs(t, tt.src)
			for _, e := range errs {
				if e.Kind == tt.kind && e.Path == tt.path {
					if e.Line != tt.line || e.Column != tt.col {
						t.Errorf("%s at %d:%d, want %d:%d", e.Path, e.Line, e.Column, tt.line, tt.col)
					}
					if !strings.Contains(e.Message, tt.msgContain) {
						t.Errorf("message %q does not contain %q", e.Message, tt.msgContain)
					}
					if !errors.Is(errs, tt.kind) {
						t.Errorf("errors.Is(errs, %s) = false", tt.kind)
					}
					return
				}
			}
			t.Errorf("no %s error at %q; got:\n%v", tt.kind, tt.path, errs)
		})
	}
}
