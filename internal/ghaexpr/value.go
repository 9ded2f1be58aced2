package ghaexpr

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
	"unsafe"
)

// filtered is the result of an object filter (a.*, a[*]). GitHub keeps it apart from other
// arrays because an index after it applies to each element, not to the array: a.*.b is the
// b of every element of a. Eval returns it as a plain []any.
type filtered []any

// kind is a value's type in GitHub's terms.
type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

func kindOf(v any) kind {
	switch v.(type) {
	case nil:
		return kindNull
	case bool:
		return kindBool
	case float64:
		return kindNumber
	case string:
		return kindString
	case []any, filtered:
		return kindArray
	}
	return kindObject
}

func isPrimitive(v any) bool { return kindOf(v) <= kindString }

// canon converts a Go value to one of the types expressions work on: nil, bool, float64,
// string, []any, map[string]any (or filtered). Callers may fill Context.Values with other Go
// types (int, map[string]string, []string, json.Number, named types); those are converted
// one level at a time as expressions read them, so reading into a large context costs only
// what is read.
func canon(v any) any {
	switch x := v.(type) {
	case nil, bool, float64, string, []any, map[string]any, filtered:
		return v
	case int:
		return float64(x)
	case int64:
		return float64(x)
	case int32:
		return float64(x)
	case uint64:
		return float64(x)
	case float32:
		return float64(x)
	case json.Number:
		return parseNumber(string(x))
	case []string:
		out := make([]any, len(x))
		for i, s := range x {
			out[i] = s
		}
		return out
	case map[string]string:
		out := make(map[string]any, len(x))
		for k, s := range x {
			out[k] = s
		}
		return out
	}
	return canonReflect(reflect.ValueOf(v))
}

func canonReflect(rv reflect.Value) any {
	switch rv.Kind() {
	case reflect.Bool:
		return rv.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return float64(rv.Int())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return float64(rv.Uint())
	case reflect.Float32, reflect.Float64:
		return rv.Float()
	case reflect.String:
		return rv.String()
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = rv.Index(i).Interface()
		}
		return out
	case reflect.Map:
		out := make(map[string]any, rv.Len())
		it := rv.MapRange()
		for it.Next() {
			k := it.Key()
			if k.Kind() == reflect.String {
				out[k.String()] = it.Value().Interface()
			} else {
				out[fmt.Sprint(k.Interface())] = it.Value().Interface()
			}
		}
		return out
	case reflect.Pointer, reflect.Interface:
		if rv.IsNil() {
			return nil
		}
		return canon(rv.Elem().Interface())
	}
	// A struct, func or channel has no meaning in an expression; its printed form is the
	// least surprising thing to show.
	return fmt.Sprint(rv.Interface())
}

// maxValueDepth bounds how deep canonDeep and toJSON walk, so a value that contains itself
// ends in an error instead of a stack overflow.
const maxValueDepth = 1000

// canonDeep makes a result wholly of the documented types. It copies only where the
// caller's values used other Go types, so a result that already conforms keeps its
// identity. path holds the maps and slices being walked, so a value that contains itself
// is returned as it is rather than walked forever.
func canonDeep(v any, depth int, path map[unsafe.Pointer]bool) (any, bool) {
	if depth > maxValueDepth {
		return nil, false
	}
	v = canon(v)
	var p unsafe.Pointer
	switch x := v.(type) {
	case map[string]any:
		p = reflect.ValueOf(x).UnsafePointer()
	case []any:
		if len(x) > 0 {
			p = unsafe.Pointer(unsafe.SliceData(x))
		}
	}
	if p != nil {
		if path[p] {
			return v, true
		}
		path[p] = true
		defer delete(path, p)
	}
	switch x := v.(type) {
	case filtered:
		out := make([]any, len(x))
		for i, e := range x {
			c, ok := canonDeep(e, depth+1, path)
			if !ok {
				return nil, false
			}
			out[i] = c
		}
		return out, true
	case []any:
		var out []any
		for i, e := range x {
			c, ok := canonDeep(e, depth+1, path)
			if !ok {
				return nil, false
			}
			if out == nil && !sameValue(c, e) {
				out = make([]any, len(x))
				copy(out, x[:i])
			}
			if out != nil {
				out[i] = c
			}
		}
		if out == nil {
			return x, true
		}
		return out, true
	case map[string]any:
		var out map[string]any
		for k, e := range x {
			c, ok := canonDeep(e, depth+1, path)
			if !ok {
				return nil, false
			}
			if out == nil && !sameValue(c, e) {
				out = make(map[string]any, len(x))
				for k2, e2 := range x {
					out[k2] = e2
				}
			}
			if out != nil {
				out[k] = c
			}
		}
		if out == nil {
			return x, true
		}
		return out, true
	}
	return v, true
}

// sameValue reports whether canonDeep left e as it was: the same scalar of the same type, or
// the same map or slice.
func sameValue(c, e any) bool {
	switch cv := c.(type) {
	case nil:
		return e == nil
	case bool, string:
		return c == e
	case float64:
		ev, ok := e.(float64)
		return ok && (ev == cv || math.IsNaN(ev) && math.IsNaN(cv))
	case []any, map[string]any:
		return kindOf(e) == kindOf(c) && sameRef(c, e)
	}
	return false
}

// sameRef is GitHub's equality for objects and arrays: the same object, not equal contents.
// Go gives every empty slice the same address, so any two empty arrays are the same.
func sameRef(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		return ok && reflect.ValueOf(x).UnsafePointer() == reflect.ValueOf(y).UnsafePointer()
	case []any:
		y, ok := b.([]any)
		return ok && len(x) == len(y) && unsafe.SliceData(x) == unsafe.SliceData(y)
	}
	// A filtered array is made afresh by every evaluation, so it is never the same as anything.
	return false
}

// lookup reads a property of an object the way GitHub does: names are case-insensitive. An
// exact match wins; among keys that differ only in case the smallest wins, so the answer
// does not depend on map order.
func lookup(m map[string]any, name string) (any, bool) {
	if v, ok := m[name]; ok {
		return v, true
	}
	found := false
	var best string
	for k := range m {
		if foldEqual(k, name) && (!found || k < best) {
			best, found = k, true
		}
	}
	if !found {
		return nil, false
	}
	return m[best], true
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// values returns an object's values in key order. GitHub keeps insertion order, which a Go
// map does not have; key order at least makes the answer the same every time.
func values(m map[string]any) []any {
	out := make([]any, 0, len(m))
	for _, k := range sortedKeys(m) {
		out = append(out, m[k])
	}
	return out
}

// Truthy reports whether GitHub treats v as true: null, false, 0, NaN and the empty string are false;
// every other value, every object and every array (even empty) is true.
func Truthy(v any) bool {
	switch x := canon(v).(type) {
	case nil:
		return false
	case bool:
		return x
	case float64:
		return x != 0 && !math.IsNaN(x)
	case string:
		return x != ""
	}
	return true
}

// ToString converts v to a string the way GitHub's expressions do (in format, join and
// string comparisons): null is the empty string, booleans are 'true' and 'false', numbers are printed
// with up to 15 significant digits ('1', '1.5', '1E+15'), an object is 'Object' and an
// array 'Array'. Interpolate differs only for objects and arrays, which it writes as JSON.
func ToString(v any) string {
	switch x := canon(v).(type) {
	case nil:
		return ""
	case bool:
		if x {
			return "true"
		}
		return "false"
	case float64:
		return formatNumber(x)
	case string:
		return x
	case []any, filtered:
		return "Array"
	}
	return "Object"
}

// formatNumber prints f as .NET's "G15" format does, which is what GitHub prints: at most
// 15 significant digits, no trailing zeros, and scientific notation (1E+15, 1E-05) when the
// exponent is 15 or more, or -5 or less.
func formatNumber(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	s := strconv.FormatFloat(f, 'e', 14, 64) // [-]d.dddddddddddddde±dd
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	e := strings.IndexByte(s, 'e')
	exp, _ := strconv.Atoi(s[e+1:])
	digits := strings.TrimRight(s[:1]+s[2:e], "0")
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	switch {
	case digits == "":
		b.WriteByte('0')
	case exp >= 15 || exp <= -5:
		b.WriteString(digits[:1])
		if len(digits) > 1 {
			b.WriteByte('.')
			b.WriteString(digits[1:])
		}
		b.WriteByte('E')
		if exp < 0 {
			b.WriteByte('-')
			exp = -exp
		} else {
			b.WriteByte('+')
		}
		if exp < 10 {
			b.WriteByte('0')
		}
		b.WriteString(strconv.Itoa(exp))
	case exp >= 0:
		if len(digits) <= exp+1 {
			b.WriteString(digits)
			b.WriteString(strings.Repeat("0", exp+1-len(digits)))
		} else {
			b.WriteString(digits[:exp+1])
			b.WriteByte('.')
			b.WriteString(digits[exp+1:])
		}
	default:
		b.WriteString("0.")
		b.WriteString(strings.Repeat("0", -exp-1))
		b.WriteString(digits)
	}
	return b.String()
}

// toNumber is GitHub's numeric coercion: null is 0, booleans 0 and 1, strings are parsed,
// objects and arrays are NaN.
func toNumber(v any) float64 {
	switch x := v.(type) {
	case nil:
		return 0
	case bool:
		if x {
			return 1
		}
		return 0
	case float64:
		return x
	case string:
		return parseNumber(x)
	}
	return math.NaN()
}

// parseNumber reads a string as GitHub does (after JavaScript's Number()): trimmed, the
// empty string is 0, then a decimal with optional sign and exponent, 0x hex or 0o octal
// (32-bit), or Infinity; anything else is NaN.
func parseNumber(s string) float64 {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return 0
	case isDecimal(s):
		f, _ := strconv.ParseFloat(s, 64) // out of range gives ±Inf, as in .NET
		return f
	case len(s) > 2 && s[0] == '0' && s[1] == 'x':
		if u, err := strconv.ParseUint(s[2:], 16, 32); err == nil && isDigits(s[2:], 16) {
			return float64(int32(uint32(u)))
		}
	case len(s) > 2 && s[0] == '0' && s[1] == 'o':
		if u, err := strconv.ParseUint(s[2:], 8, 32); err == nil && isDigits(s[2:], 8) {
			return float64(int32(uint32(u)))
		}
	case strings.EqualFold(s, "Infinity") || strings.EqualFold(s, "+Infinity"):
		return math.Inf(1)
	case strings.EqualFold(s, "-Infinity"):
		return math.Inf(-1)
	}
	return math.NaN()
}

// isDecimal matches [+-]?(d+(.d*)?|.d+)([eE][+-]?d+)?, what .NET's Double.TryParse accepts
// with the styles GitHub uses. strconv.ParseFloat alone would also take "inf", "0x1p3"
// and "1_000".
func isDecimal(s string) bool {
	i := 0
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		i++
	}
	intDigits := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
		intDigits++
	}
	fracDigits := 0
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			fracDigits++
		}
	}
	if intDigits+fracDigits == 0 {
		return false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		expDigits := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			expDigits++
		}
		if expDigits == 0 {
			return false
		}
	}
	return i == len(s)
}

// isDigits reports whether s is all digits of the base; strconv would also take '_'.
func isDigits(s string, base int) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '7':
		case c >= '8' && c <= '9' && base == 16:
		case (c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') && base == 16:
		default:
			return false
		}
	}
	return true
}

// coerce brings two values to the same kind for comparison, as GitHub does: a number and a
// string compare as numbers; null and booleans become numbers; objects and arrays are never
// converted, so they compare equal only to themselves.
func coerce(a, b any) (any, any) {
	ka, kb := kindOf(a), kindOf(b)
	switch {
	case ka == kb:
	case ka == kindNumber && kb == kindString:
		b = parseNumber(b.(string))
	case ka == kindString && kb == kindNumber:
		a = parseNumber(a.(string))
	case ka == kindBool || ka == kindNull:
		return coerce(toNumber(a), b)
	case kb == kindBool || kb == kindNull:
		return coerce(a, toNumber(b))
	}
	return a, b
}

// looseEqual is GitHub's ==.
func looseEqual(a, b any) bool {
	a, b = coerce(a, b)
	if kindOf(a) != kindOf(b) {
		return false
	}
	switch x := a.(type) {
	case nil:
		return true
	case bool:
		return x == b.(bool)
	case float64:
		return x == b.(float64) // NaN is unequal to everything, as in GitHub
	case string:
		return foldEqual(x, b.(string))
	}
	return sameRef(a, b)
}

// looseCompare is GitHub's ordering for <, <=, > and >=: -1, 0 or 1, and ok false when the
// values do not compare (different kinds, NaN, objects).
func looseCompare(a, b any) (int, bool) {
	a, b = coerce(a, b)
	if kindOf(a) != kindOf(b) {
		return 0, false
	}
	switch x := a.(type) {
	case bool:
		y := b.(bool)
		switch {
		case x == y:
			return 0, true
		case !x:
			return -1, true
		}
		return 1, true
	case float64:
		y := b.(float64)
		switch {
		case math.IsNaN(x) || math.IsNaN(y):
			return 0, false
		case x < y:
			return -1, true
		case x > y:
			return 1, true
		}
		return 0, true
	case string:
		return foldCompare(x, b.(string)), true
	}
	return 0, false
}

// foldCompare compares strings ignoring case, as .NET's OrdinalIgnoreCase does: rune by
// rune, each upper-cased.
func foldCompare(a, b string) int {
	for a != "" && b != "" {
		ra, na := utf8.DecodeRuneInString(a)
		rb, nb := utf8.DecodeRuneInString(b)
		ra, rb = unicode.ToUpper(ra), unicode.ToUpper(rb)
		if ra != rb {
			if ra < rb {
				return -1
			}
			return 1
		}
		a, b = a[na:], b[nb:]
	}
	switch {
	case a == "" && b == "":
		return 0
	case a == "":
		return -1
	}
	return 1
}

func foldEqual(a, b string) bool { return foldCompare(a, b) == 0 }

// upper is the form foldCompare compares, for substring tests.
func upper(s string) string { return strings.Map(unicode.ToUpper, s) }

// toJSON writes v as GitHub's toJSON does: two-space indentation, "key": value, [] and {}
// for empty collections, numbers as ToString prints them. Object keys are sorted.
func toJSON(v any) (string, bool) {
	var b strings.Builder
	ok := writeJSON(&b, v, 0)
	return b.String(), ok
}

func writeJSON(b *strings.Builder, v any, depth int) bool {
	if depth > maxValueDepth {
		return false
	}
	switch x := canon(v).(type) {
	case nil:
		b.WriteString("null")
	case bool, float64:
		b.WriteString(ToString(x))
	case string:
		writeJSONString(b, x)
	case []any, filtered:
		var items []any
		if f, ok := x.(filtered); ok {
			items = f
		} else {
			items = x.([]any)
		}
		if len(items) == 0 {
			b.WriteString("[]")
			return true
		}
		b.WriteByte('[')
		for i, e := range items {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(b, depth+1)
			if !writeJSON(b, e, depth+1) {
				return false
			}
		}
		newline(b, depth)
		b.WriteByte(']')
	case map[string]any:
		if len(x) == 0 {
			b.WriteString("{}")
			return true
		}
		b.WriteByte('{')
		for i, k := range sortedKeys(x) {
			if i > 0 {
				b.WriteByte(',')
			}
			newline(b, depth+1)
			writeJSONString(b, k)
			b.WriteString(": ")
			if !writeJSON(b, x[k], depth+1) {
				return false
			}
		}
		newline(b, depth)
		b.WriteByte('}')
	}
	return true
}

func newline(b *strings.Builder, depth int) {
	b.WriteByte('\n')
	for range depth {
		b.WriteString("  ")
	}
}

// writeJSONString quotes s as Newtonsoft.Json does by default (GitHub's serializer): only
// quotes, backslashes, control characters and the line separators are escaped.
func writeJSONString(b *strings.Builder, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case 0x85, 0x2028, 0x2029:
			b.WriteString(`\u`)
			b.WriteByte(hex[r>>12&0xf])
			b.WriteByte(hex[r>>8&0xf])
			b.WriteByte(hex[r>>4&0xf])
			b.WriteByte(hex[r&0xf])
		default:
			if r < 0x20 {
				b.WriteString(`\u00`)
				b.WriteByte(hex[r>>4])
				b.WriteByte(hex[r&0xf])
				continue
			}
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
