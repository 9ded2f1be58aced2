package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	goccyyaml "github.com/goccy/go-yaml"
	goccyparser "github.com/goccy/go-yaml/parser"
	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// decoder walks a yaml.Node tree by hand instead of unmarshalling into structs, so that
// every value keeps its position, every mistake is collected instead of stopping at the
// first, and alias expansion is metered.
type decoder struct {
	limits Limits
	errs   Errors
	nodes  int  // nodes visited so far, alias expansions counted again
	abort  bool // a limit was hit: stop walking, the one ErrLimit error says why
	// dispatch is the definition's on: dispatch, whose inputs ${{ inputs.NAME }} is
	// checked against; nil when it declares none.
	dispatch *DispatchTrigger
	// refs is what needs and steps references may name in the text being substituted;
	// nil outside a job.
	refs *refScope
	// workflows reads the reusable workflows a workflow calls (Options.Workflows), and
	// path is where the definition was read from (Options.Path).
	workflows WorkflowLoader
	path      string
	// checkReusable is Options.CheckReusable, and inputsFrom what declares the inputs
	// ${{ inputs.NAME }} is checked against, for messages ("" for on: dispatch).
	checkReusable bool
	inputsFrom    string
}

// inputsDeclarer names what declares the inputs of the definition being compiled.
func (d *decoder) inputsDeclarer() string {
	if d.inputsFrom != "" {
		return d.inputsFrom
	}
	return "on: dispatch"
}

func (d *decoder) add(kind ErrorKind, n *yaml.Node, path, format string, args ...any) {
	e := &Error{Kind: kind, Path: path, Message: fmt.Sprintf(format, args...)}
	if n != nil {
		e.Line, e.Column = n.Line, n.Column
	}
	d.errs = append(d.errs, e)
}

// yamlLine extracts the line number from a go.yaml.in/yaml/v3 syntax error. The library
// reports syntax errors only as text ("yaml: line 7: ..."), so this is the one place that
// reads an error message; it only recovers the position and never decides behaviour.
var yamlLine = lazyre.New(`^yaml: line (\d+): `)

// parseDocument parses src into a single YAML document node.
func (d *decoder) parseDocument(src []byte) (doc *yaml.Node) {
	if len(src) > d.limits.MaxBytes {
		d.add(ErrLimit, nil, "", "definition is %d bytes; the limit is %s", len(src), formatBytes(int64(d.limits.MaxBytes)))
		return nil
	}
	if len(bytes.TrimSpace(src)) == 0 {
		d.add(ErrRequired, nil, "", "definition is empty")
		return nil
	}
	defer func() {
		// The parser is well fuzzed, but a definition arrives from the network: a panic in
		// it must become an error, not a crashed coordinator.
		if r := recover(); r != nil {
			d.add(ErrSyntax, nil, "", "cannot parse definition: %v", r)
			doc = nil
		}
	}()
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var root yaml.Node
	if err := dec.Decode(&root); err != nil {
		d.syntaxError(src, err)
		return nil
	}
	var extra yaml.Node
	switch err := dec.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		d.syntaxError(src, err)
		return nil
	default:
		d.add(ErrSyntax, &extra, "", "definition holds more than one YAML document; put one pipeline in each file")
		return nil
	}
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		return root.Content[0]
	}
	d.add(ErrRequired, nil, "", "definition is empty")
	return nil
}

func (d *decoder) syntaxError(src []byte, err error) {
	if errors.Is(err, io.EOF) {
		d.add(ErrRequired, nil, "", "definition is empty")
		return
	}
	msg := err.Error()
	line := 0
	if m := yamlLine.FindStringSubmatch(msg); m != nil {
		line, _ = strconv.Atoi(m[1])
		msg = msg[len(m[0]):]
	} else {
		msg = strings.TrimPrefix(msg, "yaml: ")
	}
	if strings.Contains(msg, "max depth") || strings.Contains(msg, "excessive aliasing") {
		d.errs = append(d.errs, &Error{Kind: ErrLimit, Line: line, Message: msg})
		return
	}
	if e := locateSyntaxError(src); e != nil {
		d.errs = append(d.errs, e)
		return
	}
	d.errs = append(d.errs, &Error{Kind: ErrSyntax, Line: line, Message: msg})
}

// locateSyntaxError asks a second parser where a syntax error is. go.yaml.in/yaml/v3
// reports only the line where the enclosing construct began; github.com/goccy/go-yaml
// reports the offending token's line and column and says what it expected there. It is
// consulted only for documents the first parser rejected; when it disagrees (accepts the
// document, or fails without a position) the first parser's report stands.
func locateSyntaxError(src []byte) (out *Error) {
	defer func() {
		if recover() != nil {
			out = nil
		}
	}()
	_, err := goccyparser.ParseBytes(src, 0)
	var se *goccyyaml.SyntaxError
	if !errors.As(err, &se) || se.Token == nil || se.Token.Position == nil {
		return nil
	}
	return &Error{Kind: ErrSyntax, Line: se.Token.Position.Line, Column: se.Token.Position.Column, Message: se.Message}
}

// checkShape bounds nesting depth before any schema walk, without following aliases.
func (d *decoder) checkShape(n *yaml.Node, depth int) bool {
	if depth > d.limits.MaxDepth {
		d.add(ErrLimit, n, "", "definition nests deeper than %d levels", d.limits.MaxDepth)
		d.abort = true
		return false
	}
	for _, c := range n.Content {
		if !d.checkShape(c, depth+1) {
			return false
		}
	}
	return true
}

// resolve follows aliases and meters every node the schema walk visits.
func (d *decoder) resolve(n *yaml.Node) *yaml.Node {
	for hops := 0; n != nil && n.Kind == yaml.AliasNode; hops++ {
		if hops > d.limits.MaxDepth {
			d.add(ErrLimit, n, "", "alias chain longer than %d", d.limits.MaxDepth)
			d.abort = true
			return nil
		}
		n = n.Alias
	}
	if n == nil {
		return nil
	}
	d.nodes++
	if d.nodes > d.limits.MaxNodes {
		if !d.abort {
			d.add(ErrLimit, n, "", "definition expands to more than %d nodes (aliases included)", d.limits.MaxNodes)
		}
		d.abort = true
		return nil
	}
	return n
}

// field is one key of a mapping, after merge keys are applied.
type field struct {
	key     string
	keyNode *yaml.Node
	val     *yaml.Node
	path    string
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func indexPath(path string, i int) string { return path + "[" + strconv.Itoa(i) + "]" }

// fields lists a mapping's keys in document order. Keys from YAML merge keys (<<) come
// first and lose to keys written out; a key written out twice is an error.
func (d *decoder) fields(n *yaml.Node, path, what string) []field {
	at := n
	n = d.resolve(n)
	if n == nil {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		d.typeError(at, n, path, what)
		return nil
	}
	var merged, own []field
	seen := map[string]*yaml.Node{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := d.resolve(n.Content[i]), n.Content[i+1]
		if d.abort || k == nil {
			return nil
		}
		if k.Kind != yaml.ScalarNode {
			d.add(ErrType, k, path, "mapping keys must be plain strings")
			continue
		}
		if k.Tag == "!!merge" {
			merged = append(merged, d.mergeFields(v, path, what)...)
			continue
		}
		if first, dup := seen[k.Value]; dup {
			d.add(ErrDuplicateKey, k, joinPath(path, k.Value), "duplicate key %q (first defined on line %d)", k.Value, first.Line)
			continue
		}
		seen[k.Value] = k
		own = append(own, field{key: k.Value, keyNode: k, val: v, path: joinPath(path, k.Value)})
	}
	out := make([]field, 0, len(merged)+len(own))
	for _, f := range merged {
		if seen[f.key] == nil {
			seen[f.key] = f.keyNode
			out = append(out, f)
		}
	}
	return append(out, own...)
}

func (d *decoder) mergeFields(v *yaml.Node, path, what string) []field {
	v = d.resolve(v)
	if v == nil {
		return nil
	}
	switch v.Kind {
	case yaml.MappingNode:
		return d.fields(v, path, what)
	case yaml.SequenceNode:
		// In a merge sequence the earlier mappings win.
		var out []field
		have := map[string]bool{}
		for _, m := range v.Content {
			for _, f := range d.fields(m, path, what) {
				if !have[f.key] {
					have[f.key] = true
					out = append(out, f)
				}
			}
		}
		return out
	}
	d.add(ErrType, v, path, "merge key << takes a mapping or a list of mappings")
	return nil
}

// object walks a mapping whose keys are fixed by the schema. Unknown keys are errors that
// suggest the nearest known key.
func (d *decoder) object(n *yaml.Node, path, what string, known []string, fn func(f field)) {
	for _, f := range d.fields(n, path, what) {
		if d.abort {
			return
		}
		if !contains(known, f.key) && !(path == "" && isTemplateKey(f.key)) {
			d.add(ErrUnknownKey, f.keyNode, f.path, "unknown key %q in %s%s", f.key, what, suggest(f.key, known))
			continue
		}
		fn(f)
	}
}

// items lists a sequence's elements. A single scalar is accepted where a list is expected
// when single is true (runs_on: linux), and reads as a list of one.
func (d *decoder) items(n *yaml.Node, path, what string, single bool) []*yaml.Node {
	at := n
	n = d.resolve(n)
	if n == nil {
		return nil
	}
	if n.Kind == yaml.SequenceNode {
		return n.Content
	}
	if single && n.Kind == yaml.ScalarNode && n.Tag != "!!null" {
		return []*yaml.Node{n}
	}
	d.typeError(at, n, path, what)
	return nil
}

// typeError reports at the node as written (an alias, say) and describes what it stands for.
func (d *decoder) typeError(at, n *yaml.Node, path, want string) {
	d.add(ErrType, at, path, "expected %s, found %s", want, describe(n))
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "nothing (null)"
		case "!!bool":
			return "a boolean " + n.Value
		case "!!int", "!!float":
			return "a number " + n.Value
		case "!!str":
			return fmt.Sprintf("the string %q", clip(n.Value, 40))
		}
		return fmt.Sprintf("%s %q", n.Tag, clip(n.Value, 40))
	}
	return "an unsupported node"
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// scalar returns a scalar's text. Strings, numbers and booleans are all accepted as text,
// so `name: 2024` or `GO: 1.26` mean what the author wrote; null and collections are not.
func (d *decoder) str(n *yaml.Node, path, what string) (string, bool) {
	at := n
	n = d.resolve(n)
	if n == nil {
		return "", false
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" {
		d.typeError(at, n, path, what)
		return "", false
	}
	if n.Tag != "!!str" && n.Tag != "!!int" && n.Tag != "!!float" && n.Tag != "!!bool" {
		d.add(ErrType, n, path, "unsupported YAML tag %s", n.Tag)
		return "", false
	}
	return n.Value, true
}

func (d *decoder) boolean(n *yaml.Node, path string) (bool, bool) {
	at := n
	n = d.resolve(n)
	if n == nil {
		return false, false
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
		d.typeError(at, n, path, "true or false")
		return false, false
	}
	v, err := strconv.ParseBool(strings.ToLower(n.Value))
	if err != nil {
		d.add(ErrInvalid, n, path, "expected true or false, found %q", n.Value)
		return false, false
	}
	return v, true
}

func (d *decoder) integer(n *yaml.Node, path string, lo, hi int) (int, bool) {
	at := n
	n = d.resolve(n)
	if n == nil {
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		d.typeError(at, n, path, "a whole number")
		return 0, false
	}
	v, err := strconv.ParseInt(n.Value, 0, 64)
	if err != nil || v < int64(lo) || v > int64(hi) {
		d.add(ErrInvalid, n, path, "expected a whole number from %d to %d, found %s", lo, hi, n.Value)
		return 0, false
	}
	return int(v), true
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// suggest returns `; did you mean "x"?` for the closest candidate within a small edit
// distance, or "" when nothing is close.
func suggest(got string, candidates []string) string {
	best, bestDist := "", 0
	for _, c := range candidates {
		dist := editDistance(strings.ToLower(got), strings.ToLower(c))
		limit := 2
		if len(c) <= 3 {
			limit = 1
		}
		// Separator slips (runs-on, runsOn, continue-on-error) are the most common typo.
		if normalizeKey(got) == normalizeKey(c) {
			dist = 0
		}
		if dist <= limit && (best == "" || dist < bestDist) {
			best, bestDist = c, dist
		}
	}
	if best == "" {
		return ""
	}
	return fmt.Sprintf("; did you mean %q?", best)
}

func normalizeKey(s string) string {
	s = strings.ToLower(s)
	return strings.NewReplacer("-", "", "_", "", " ", "").Replace(s)
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
