package ghaexpr

import (
	"fmt"
	"testing"
)

func TestRefs(t *testing.T) {
	for src, want := range map[string]string{
		"github.event.pull_request.number == 1 && env.X": "[github.event.pull_request.number env.X]",
		"fromJSON(steps.x.outputs.m).a || matrix['os']":  "[steps.x.outputs.m matrix.os]",
		"needs.*.result":             "[needs.*]",
		"github.event.commits[0].id": "[github.event.commits.*]",
		"contains(toJSON(github), inputs[format('{0}', env.K)])": "[github inputs.* env.K]",
		"'literal'": "[]",
	} {
		n, err := Parse(src)
		if err != nil {
			t.Fatalf("Parse(%q): %v", src, err)
		}
		var got []string
		for _, r := range Refs(n) {
			s := r.Context
			for _, p := range r.Path {
				s += "." + p
			}
			got = append(got, s)
		}
		if fmt.Sprint(got) != want && !(want == "[]" && got == nil) {
			t.Errorf("Refs(%q) = %v, want %s", src, got, want)
		}
	}
}
