package ghaexpr

import (
	"errors"
	"testing"
)

func TestInterpolate(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"no expressions", "no expressions"},
		{"echo ${{ inputs.name }}", "echo x"},
		{"${{inputs.name}}", "x"},
		{"x${{inputs.name}}y${{ inputs.name }}z", "xxyxz"},
		{"${{ inputs.count }}-${{ inputs.flag }}-${{ inputs.none }}-${{ 1.50 }}", "3-true--1.5"},
		{"${{ 1e15 }} ${{ 0.1 }} ${{ 0x10 == 16 }}", "1E+15 0.1 true"},
		{"${{ github.missing }}", ""},
		{"${{ matrix.n }}", "[\n  1,\n  2,\n  3\n]"},
		{"${{ github.event.issue.labels[0] }}", "{\n  \"id\": 1,\n  \"name\": \"bug\"\n}"},
		{"${{ github.event.issue.labels.*.name }}", "[\n  \"bug\",\n  \"help wanted\"\n]"},
		{"${{ fromJSON('[]') }}|${{ fromJSON('{}') }}", "[]|{}"},
		{"a ${{ '${{' }} b", "a ${{ b"},
		{"${{ '}}' }}", "}}"},
		{"${{ 'it''s }}' }}", "it's }}"},
		{"${{ format('{{0}}') }}", "{0}"},
		{"it''s ${{ 'it''s' }}", "it''s it's"},
		{"}} ${{ 'a' }} }}", "}} a }}"},
		{"$ {{ not }} {{ this }}", "$ {{ not }} {{ this }}"},
		{"$${{ 'a' }}$", "$a$"},
		{"${{ 'a' }}${{ 'b' }}", "ab"},
		{"line1\n${{ env.NAME }}\nline3", "line1\nGantry\nline3"},
		{"${{ inputs.name || 'default' }}", "x"},
		{"${{ inputs.none || 'default' }}", "default"},
		{"${{ steps.build-1.outputs.x }}", "y"},
	}
	c := testContext()
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := Interpolate(tt.in, c)
			if err != nil {
				t.Fatalf("Interpolate(%q): %v", tt.in, err)
			}
			if got != tt.want {
				t.Errorf("Interpolate(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestInterpolateErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   string
		kind ErrorKind
		msg  string
	}{
		{"echo ${{ inputs.name", ErrSyntax,
			"The expression is not closed. An unescaped ${{ sequence was found, but the closing }} sequence was not found. Located at position 6 within expression: echo ${{ inputs.name"},
		{"${{ 'unclosed }}", ErrSyntax,
			"The expression is not closed. An unescaped ${{ sequence was found, but the closing }} sequence was not found. Located at position 1 within expression: ${{ 'unclosed }}"},
		{"a ${{ }}", ErrSyntax,
			"${{ }} at byte 2: An expression was expected. Located at position 1 within expression: "},
		{"a ${{ a = b }}", ErrSyntax,
			"${{ }} at byte 2: Unexpected symbol: '='. Located at position 3 within expression: a = b"},
		{"${{ 'ok' }} ${{ nope }}", ErrUnknownName,
			"${{ }} at byte 12: Unrecognized named-value: 'nope'. Located at position 1 within expression: nope"},
		// Every expression is parsed before any is evaluated.
		{"${{ nope }} ${{ ) }}", ErrSyntax,
			"${{ }} at byte 12: Unexpected symbol: ')'. Located at position 1 within expression: )"},
	}
	c := testContext()
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := Interpolate(tt.in, c)
			if err == nil {
				t.Fatalf("Interpolate(%q) = %q, want an error", tt.in, got)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("error %v is not %s", err, tt.kind)
			}
			var e *Error
			if !errors.As(err, &e) {
				t.Errorf("error %T does not wrap *Error", err)
			}
			if err.Error() != tt.msg {
				t.Errorf("error:\n got %s\nwant %s", err, tt.msg)
			}
		})
	}
}

func TestCondition(t *testing.T) {
	t.Parallel()
	const (
		ok = iota
		failed
		cancelled
	)
	status := func(s int) func(string) bool {
		return func(name string) bool {
			switch name {
			case "success":
				return s == ok
			case "failure":
				return s == failed
			case "cancelled":
				return s == cancelled
			}
			return true
		}
	}
	tests := []struct {
		src    string
		status int
		want   bool
	}{
		{"", ok, true},
		{"  ", failed, false},
		{"true", ok, true},
		{"true", failed, false}, // success() && (true)
		{"false", ok, false},
		{"${{ true }}", ok, true},
		{"${{ true }}", failed, false},
		{"  ${{ github.ref == 'refs/heads/main' }}  ", ok, true},
		{"github.ref == 'refs/heads/main'", ok, true},
		{"github.ref == 'refs/heads/dev'", ok, false},
		{"inputs.name", ok, true},
		{"inputs.none", ok, false},
		{"${{ inputs.none }}", ok, false},
		{"fromJSON('[]')", ok, true},
		{"failure()", failed, true},
		{"failure()", ok, false},
		{"Failure()", failed, true},
		{"${{ failure() }}", failed, true},
		{"always()", failed, true},
		{"always()", cancelled, true},
		{"${{ always() }}", cancelled, true},
		{"cancelled()", cancelled, true},
		{"!cancelled()", cancelled, false},
		{"!cancelled()", failed, true}, // a status call anywhere drops the implicit success()
		{"success() || failure()", failed, true},
		{"contains(format('{0}', failure()), 'true')", failed, true},
		{"failure() && nope.x", ok, false}, // && stops before the unknown name
		{"nope.x", failed, false},          // the implicit success() stops before it too
		// Text with ${{ }} in part of it is a string, true when not empty: GitHub's gotcha.
		{"${{ false }} == 'x'", ok, true},
		{"${{ inputs.none }}${{ '' }}", ok, false},
		{"${{ 'a' }}b", failed, false},
		{"x${{ always() }}", failed, true},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			c := testContext()
			c.Status = status(tt.status)
			got, err := Condition(tt.src, c)
			if err != nil {
				t.Fatalf("Condition(%q): %v", tt.src, err)
			}
			if got != tt.want {
				t.Errorf("Condition(%q) = %v, want %v", tt.src, got, tt.want)
			}
		})
	}
}

func TestConditionErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		src  string
		kind ErrorKind
	}{
		{"nope.x", ErrUnknownName},
		{"a = b", ErrSyntax},
		{"${{ a = b }}", ErrSyntax},
		{"${{ }}", ErrSyntax},
		{"${{ true", ErrSyntax},
		{"x ${{ nope }}", ErrUnknownName},
		{"format('{9}')", ErrFunction},
	}
	for _, tt := range tests {
		t.Run(tt.src, func(t *testing.T) {
			t.Parallel()
			if got, err := Condition(tt.src, testContext()); !errors.Is(err, tt.kind) {
				t.Errorf("Condition(%q) = %v, %v; want a %s error", tt.src, got, err, tt.kind)
			}
		})
	}
	if got, err := Condition("true", nil); err != nil || !got {
		t.Errorf("Condition with a nil Context = %v, %v; want true", got, err)
	}
}
