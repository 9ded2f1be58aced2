package pipeline

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCheckoutPlanned(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want map[string]*Checkout // by job key
	}{
		{"default is nil", "jobs: {a: {steps: [{run: x}]}}", map[string]*Checkout{"a": nil}},
		{"true is the default", "jobs: {a: {checkout: true, steps: [{run: x}]}}", map[string]*Checkout{"a": nil}},
		{"empty mapping is the default", "jobs: {a: {checkout: {}, steps: [{run: x}]}}", map[string]*Checkout{"a": nil}},
		{"false skips", "jobs: {a: {checkout: false, steps: [{run: x}]}}", map[string]*Checkout{"a": {Skip: true}}},
		{"every option", "jobs:\n  a:\n    checkout: {depth: 1, submodules: true, lfs: true, path: src/./app/}\n    steps: [{run: x}]",
			map[string]*Checkout{"a": {Depth: 1, Submodules: true, LFS: true, Path: "src/app"}}},
		{"defaults apply to every job", "defaults: {checkout: false}\njobs:\n  a: {steps: [{run: x}]}\n  b: {steps: [{run: x}]}",
			map[string]*Checkout{"a": {Skip: true}, "b": {Skip: true}}},
		{"a job's mapping turns checkout back on", "defaults: {checkout: false}\njobs:\n  a: {checkout: {depth: 5}, steps: [{run: x}]}\n  b: {checkout: true, steps: [{run: x}]}",
			map[string]*Checkout{"a": {Depth: 5}, "b": nil}},
		{"a job's keys layer over those of defaults", "defaults: {checkout: {depth: 1, path: src}}\njobs:\n  a: {checkout: {lfs: true}, steps: [{run: x}]}\n  b: {checkout: {depth: 0}, steps: [{run: x}]}\n  c: {checkout: false, steps: [{run: x}]}",
			map[string]*Checkout{"a": {Depth: 1, LFS: true, Path: "src"}, "b": {Path: "src"}, "c": {Skip: true}}},
		{"matrix instances share it", "jobs:\n  t:\n    matrix: {go: ['1', '2']}\n    checkout: {path: code}\n    steps: [{run: x}]",
			map[string]*Checkout{"t (go=1)": {Path: "code"}, "t (go=2)": {Path: "code"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustCompile(t, tt.src)
			for key, want := range tt.want {
				j := p.Job(key)
				if j == nil {
					t.Fatalf("no job %q in %v", key, p.Waves)
				}
				if !reflect.DeepEqual(j.Checkout, want) {
					t.Errorf("job %s: checkout = %+v, want %+v", key, j.Checkout, want)
				}
			}
		})
	}
}

// A plan whose jobs say nothing of checkout marshals as it did before the key existed, so
// stored plans and golden files do not change.
func TestCheckoutOmittedFromJSONByDefault(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, "jobs: {a: {steps: [{run: x}]}, b: {checkout: false, steps: [{run: x}]}}")
	a, err := json.Marshal(p.Job("a"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(a), "checkout") {
		t.Errorf("default checkout marshalled: %s", a)
	}
	b, err := json.Marshal(p.Job("b"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"checkout":{"skip":true}`) {
		t.Errorf("checkout: false not in %s", b)
	}
	var back Job
	if err := json.Unmarshal(b, &back); err != nil || back.Checkout == nil || !back.Checkout.Skip {
		t.Errorf("round trip: %+v, %v", back.Checkout, err)
	}
}

func TestCheckoutErrors(t *testing.T) {
	t.Parallel()
	job := func(v string) string { return "jobs:\n  a:\n    checkout: " + v + "\n    steps: [{run: x}]" }
	tests := []struct {
		name, src  string
		kind       ErrorKind
		path       string
		line, col  int
		msgContain string
	}{
		{"absolute path", job("{path: /etc}"), ErrInvalid, "jobs.a.checkout.path", 3, 22, "must be relative to the workspace"},
		{"dot dot", job("{path: src/../../x}"), ErrInvalid, "jobs.a.checkout.path", 3, 22, "must not leave the workspace with .."},
		{"workspace itself", job("{path: ./}"), ErrInvalid, "jobs.a.checkout.path", 3, 22, "names the workspace itself"},
		{"empty path", job(`{path: ""}`), ErrInvalid, "jobs.a.checkout.path", 3, 22, "is empty"},
		{"backslash", job(`{path: 'a\b'}`), ErrInvalid, "jobs.a.checkout.path", 3, 22, "must use / as separator"},
		{"negative depth", job("{depth: -1}"), ErrInvalid, "jobs.a.checkout.depth", 3, 23, "from 0 to"},
		{"depth not a number", job("{depth: all}"), ErrType, "jobs.a.checkout.depth", 3, 23, "a whole number"},
		{"unknown key suggests", job("{submodule: true}"), ErrUnknownKey, "jobs.a.checkout.submodule", 3, 16, `did you mean "submodules"`},
		{"string instead of bool", job("no-thanks"), ErrType, "jobs.a.checkout", 3, 15, "false, true or a mapping"},
		{"list", job("[a]"), ErrType, "jobs.a.checkout", 3, 15, "a mapping"},
		{"lfs not a bool", job("{lfs: yes please}"), ErrType, "jobs.a.checkout.lfs", 3, 21, "true or false"},
		{"in defaults", "defaults: {checkout: {path: ../up}}\njobs: {a: {steps: [{run: x}]}}", ErrInvalid, "defaults.checkout.path", 1, 29, "must not leave the workspace"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := compileErrs(t, tt.src)
			e := errs[0]
			if e.Kind != tt.kind || e.Path != tt.path || e.Line != tt.line || e.Column != tt.col || !strings.Contains(e.Message, tt.msgContain) {
				t.Errorf("got %v (kind %v, path %q, %d:%d, msg %q); want kind %v path %q at %d:%d containing %q",
					errs, e.Kind, e.Path, e.Line, e.Column, e.Message, tt.kind, tt.path, tt.line, tt.col, tt.msgContain)
			}
		})
	}
}
