package ghaexpr

import (
	"encoding/json"
	"math"
	"testing"
)

func TestToString(t *testing.T) {
	t.Parallel()
	type name string
	tests := []struct {
		in   any
		want string
	}{
		{nil, ""},
		{true, "true"},
		{false, "false"},
		{"", ""},
		{"text", "text"},
		{name("named"), "named"},
		{0.0, "0"},
		{math.Copysign(0, -1), "-0"},
		{1.0, "1"},
		{-1.0, "-1"},
		{1.5, "1.5"},
		{0.1, "0.1"},
		{100.0, "100"},
		{1.0 / 3, "0.333333333333333"},
		{2.0 / 3, "0.666666666666667"},
		{123456789012345.0, "123456789012345"},
		{999999999999999.0, "999999999999999"},
		{1e14, "100000000000000"},
		{1e15, "1E+15"},
		{1234567890123456.0, "1.23456789012346E+15"},
		{9999999999999999.0, "1E+16"},
		{1e100, "1E+100"},
		{-2.5e20, "-2.5E+20"},
		{0.0001, "0.0001"},
		{0.00012345, "0.00012345"},
		{1e-5, "1E-05"},
		{1.5e-7, "1.5E-07"},
		{5e-324, "4.94065645841247E-324"},
		{math.MaxFloat64, "1.79769313486232E+308"},
		{math.NaN(), "NaN"},
		{math.Inf(1), "Infinity"},
		{math.Inf(-1), "-Infinity"},
		{3, "3"},
		{int64(-7), "-7"},
		{uint8(255), "255"},
		{float32(0.5), "0.5"},
		{json.Number("2.50"), "2.5"},
		{map[string]any{}, "Object"},
		{map[string]string{"a": "b"}, "Object"},
		{[]any{}, "Array"},
		{[]string{"a"}, "Array"},
		{filtered{}, "Array"},
		{struct{ A int }{1}, "{1}"},
	}
	for _, tt := range tests {
		if got := ToString(tt.in); got != tt.want {
			t.Errorf("ToString(%#v) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestTruthy(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in   any
		want bool
	}{
		{nil, false},
		{false, false},
		{true, true},
		{0.0, false},
		{math.Copysign(0, -1), false},
		{math.NaN(), false},
		{-1.0, true},
		{0.5, true},
		{math.Inf(-1), true},
		{0, false},
		{7, true},
		{"", false},
		{"0", true},
		{"false", true},
		{" ", true},
		{[]any{}, true},
		{map[string]any{}, true},
		{[]string(nil), true},
		{(*int)(nil), false},
	}
	for _, tt := range tests {
		if got := Truthy(tt.in); got != tt.want {
			t.Errorf("Truthy(%#v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseNumber(t *testing.T) {
	t.Parallel()
	nan := math.NaN()
	tests := []struct {
		in   string
		want float64
	}{
		{"", 0},
		{"   ", 0},
		{" 12 ", 12},
		{"\t-3\n", -3},
		{"1e3", 1000},
		{"1E+3", 1000},
		{"2e-1", 0.2},
		{"-1.5", -1.5},
		{"+.5", 0.5},
		{"5.", 5},
		{"007", 7},
		{"1e400", math.Inf(1)},
		{"-1e400", math.Inf(-1)},
		{"0x1F", 31},
		{"0x1f", 31},
		{"0x000000001", 1},
		{"0x7FFFFFFF", math.MaxInt32},
		{"0x80000000", math.MinInt32},
		{"0xFFFFFFFF", -1},
		{"0x100000000", nan},
		{"0X1F", nan},
		{"-0x1", nan},
		{"0x", nan},
		{"0xg", nan},
		{"0x1_0", nan},
		{"0o17", 15},
		{"0o8", nan},
		{"0o", nan},
		{"Infinity", math.Inf(1)},
		{"-Infinity", math.Inf(-1)},
		{"NaN", nan},
		{"inf", nan},
		{"1_000", nan},
		{"0x1p3", nan},
		{"1,000", nan},
		{"abc", nan},
		{"1e", nan},
		{"e1", nan},
		{".", nan},
		{"-", nan},
		{"1 2", nan},
	}
	for _, tt := range tests {
		got := parseNumber(tt.in)
		if got != tt.want && !(math.IsNaN(got) && math.IsNaN(tt.want)) {
			t.Errorf("parseNumber(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}
