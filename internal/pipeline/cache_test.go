package pipeline

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestCachePlanned(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		src  string
		want map[string][]Cache // by job key
	}{
		{"none", "jobs: {a: {steps: [{run: x}]}}", map[string][]Cache{"a": nil}},
		{"the issue's example", `jobs:
  a:
    cache: [{key: "go-${{ hashFiles('go.sum') }}", restore_keys: [go-], paths: [~/.cache/go-build, ~/go/pkg/mod]}]
    steps: [{run: x}]`,
			map[string][]Cache{"a": {{Key: "go-${{ hashFiles('go.sum') }}", RestoreKeys: []string{"go-"}, Paths: []string{"~/.cache/go-build", "~/go/pkg/mod"}}}}},
		{"one mapping, one path, hashFiles written canonically", `jobs:
  a:
    cache: {key: "${{hashFiles( './a' ,'b''s/**',  '!x')}}", paths: node_modules/, when: always}
    steps: [{run: x}]`,
			map[string][]Cache{"a": {{Key: "${{ hashFiles('./a', 'b''s/**', '!x') }}", Paths: []string{"node_modules"}, When: CacheAlways}}}},
		{"matrix and env substituted, on_success left out", `env: {V: "3"}
jobs:
  t:
    matrix: {os: [linux]}
    cache: [{key: "${{ matrix.os }}-v${{ env.V }}", restore_keys: ["${{ matrix.os }}-"], paths: [a], when: on_success}]
    steps: [{run: x}]`,
			map[string][]Cache{"t (os=linux)": {{Key: "linux-v3", RestoreKeys: []string{"linux-"}, Paths: []string{"a"}}}}},
		{"defaults, replaced by a job's own", `defaults: {cache: [{key: d, paths: [d]}]}
jobs:
  a: {steps: [{run: x}]}
  b: {cache: [{key: b, paths: [b]}], steps: [{run: x}]}
  c: {cache: [], steps: [{run: x}]}`,
			map[string][]Cache{"a": {{Key: "d", Paths: []string{"d"}}}, "b": {{Key: "b", Paths: []string{"b"}}}, "c": nil}},
		{"run values kept for the run", `jobs:
  a: {cache: [{key: "${{ branch }}-x", paths: [a]}], steps: [{run: x}]}`,
			map[string][]Cache{"a": {{Key: "${{ branch }}-x", Paths: []string{"a"}}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := mustCompile(t, tt.src)
			for key, want := range tt.want {
				j := p.Job(key)
				if j == nil {
					t.Fatalf("no job %q", key)
				}
				if !reflect.DeepEqual(j.Caches, want) {
					t.Errorf("job %s: caches = %#v, want %#v", key, j.Caches, want)
				}
			}
		})
	}
}

func TestCacheRunValues(t *testing.T) {
	t.Parallel()
	p := mustCompile(t, `jobs:
  a: {cache: [{key: "${{ branch }}-k", restore_keys: ["${{ branch }}-"], paths: [a]}], steps: [{run: x}]}`)
	j, err := p.Job("a").WithRunValues(ConditionInput{Branch: "feature"})
	if err != nil {
		t.Fatal(err)
	}
	if c := j.Caches[0]; c.Key != "feature-k" || c.RestoreKeys[0] != "feature-" {
		t.Errorf("cache after run values: %+v", c)
	}
	if p.Job("a").Caches[0].Key != "${{ branch }}-k" {
		t.Error("WithRunValues changed the plan's job")
	}
}

func TestCacheErrors(t *testing.T) {
	t.Parallel()
	job := func(v string) string { return "jobs:\n  a:\n    cache: " + v + "\n    steps: [{run: x}]" }
	tests := []struct {
		name, src  string
		kind       ErrorKind
		path       string
		line, col  int
		msgContain string
	}{
		{"no key", job("[{paths: [a]}]"), ErrRequired, "jobs.a.cache[0].key", 3, 13, "needs a key"},
		{"no paths", job("[{key: k}]"), ErrRequired, "jobs.a.cache[0].paths", 3, 13, "at least one path"},
		{"absolute path", job("[{key: k, paths: [/etc]}]"), ErrInvalid, "jobs.a.cache[0].paths[0]", 3, 30, "relative to the workspace"},
		{"dot dot", job("[{key: k, paths: [~/../x]}]"), ErrInvalid, "jobs.a.cache[0].paths[0]", 3, 30, "must not leave"},
		{"other user's home", job("[{key: k, paths: [~bob/x]}]"), ErrInvalid, "jobs.a.cache[0].paths[0]", 3, 30, "another user's home"},
		{"glob", job("[{key: k, paths: ['*.o']}]"), ErrInvalid, "jobs.a.cache[0].paths[0]", 3, 30, "globs are not supported"},
		{"whole workspace", job("[{key: k, paths: [.]}]"), ErrInvalid, "jobs.a.cache[0].paths[0]", 3, 30, "whole workspace"},
		{"unknown key", job("[{key: k, path: [a]}]"), ErrUnknownKey, "jobs.a.cache[0].path", 3, 22, `did you mean "paths"`},
		{"bad when", job("[{key: k, paths: [a], when: never}]"), ErrInvalid, "jobs.a.cache[0].when", 3, 40, "on_success, on_failure, always"},
		{"empty key", job(`[{key: "", paths: [a]}]`), ErrRequired, "jobs.a.cache[0].key", 3, 19, "empty"},
		{"comma in key", job(`[{key: "a,b", paths: [a]}]`), ErrInvalid, "jobs.a.cache[0].key", 3, 19, "comma"},
		{"empty restore key", job(`[{key: k, restore_keys: [""], paths: [a]}]`), ErrInvalid, "jobs.a.cache[0].restore_keys[0]", 3, 37, "match every entry"},
		{"secret in key", job(`[{key: "${{ secrets.X }}", paths: [a]}]`), ErrUnknownReference, "jobs.a.cache[0].key", 3, 20, "cannot stand in a cache key"},
		{"unknown function", job(`[{key: "${{ hashfiles('a') }}", paths: [a]}]`), ErrUnknownReference, "jobs.a.cache[0].key", 3, 20, "cannot stand in a cache key"},
		{"hashFiles unquoted", job(`[{key: "${{ hashFiles(go.sum) }}", paths: [a]}]`), ErrExpression, "jobs.a.cache[0].key", 3, 20, "single-quoted"},
		{"hashFiles leaves", job(`[{key: "${{ hashFiles('../x') }}", paths: [a]}]`), ErrExpression, "jobs.a.cache[0].key", 3, 20, "must not leave"},
		{"hashFiles empty", job(`[{key: "${{ hashFiles() }}", paths: [a]}]`), ErrExpression, "jobs.a.cache[0].key", 3, 20, "one or more"},
		{"same key twice", job("[{key: k, paths: [a]}, {key: k, paths: [b]}]"), ErrInvalid, "jobs.a.cache[1].key", 3, 41, "another cache"},
		{"not a list", job("yes"), ErrType, "jobs.a.cache", 3, 12, "a list of caches"},
		{"in defaults", "defaults: {cache: [{key: k, paths: [/x]}]}\njobs: {a: {steps: [{run: x}]}}", ErrInvalid, "defaults.cache[0].paths[0]", 1, 37, "relative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			errs := compileErrs(t, tt.src)
			e := errs[0]
			for _, x := range errs {
				if x.Path == tt.path {
					e = x
					break
				}
			}
			if e.Kind != tt.kind || e.Path != tt.path || e.Line != tt.line || e.Column != tt.col || !strings.Contains(e.Message, tt.msgContain) {
				t.Errorf("got %v (kind %v, path %q, %d:%d, msg %q); want kind %v path %q at %d:%d containing %q",
					errs, e.Kind, e.Path, e.Line, e.Column, e.Message, tt.kind, tt.path, tt.line, tt.col, tt.msgContain)
			}
		})
	}
}

func TestExpandCacheKey(t *testing.T) {
	t.Parallel()
	var got [][]string
	hash := func(ps []string) (string, error) {
		got = append(got, ps)
		return "H" + strings.Join(ps, "+"), nil
	}
	key := "go-" + HashFilesRef([]string{"go.sum", "it's/**"}) + "-" + HashFilesRef([]string{"x"})
	out, err := ExpandCacheKey(key, hash)
	if err != nil {
		t.Fatal(err)
	}
	if out != "go-Hgo.sum+it's/**-Hx" {
		t.Errorf("expanded to %q", out)
	}
	if len(got) != 2 || !reflect.DeepEqual(got[0], []string{"go.sum", "it's/**"}) {
		t.Errorf("hash called with %q", got)
	}
	boom := errors.New("boom")
	if _, err := ExpandCacheKey(key, func([]string) (string, error) { return "", boom }); !errors.Is(err, boom) {
		t.Errorf("error = %v, want boom", err)
	}
	if out, _ := ExpandCacheKey("plain", hash); out != "plain" {
		t.Errorf("plain key became %q", out)
	}
}

func TestCacheKeyMatches(t *testing.T) {
	t.Parallel()
	hex := strings.Repeat("0123456789abcdef", 4)
	planned := "go-" + HashFilesRef([]string{"go.sum"}) + "-linux"
	tests := []struct {
		planned, key string
		want         bool
	}{
		{planned, "go-" + hex + "-linux", true},
		{planned, "go--linux", true}, // hashFiles of no file is ""
		{planned, "go-" + strings.ToUpper(hex) + "-linux", false},
		{planned, "go-" + hex[:63] + "-linux", false},
		{planned, "go-" + hex + "-linux-extra", false},
		{planned, "x-go-" + hex + "-linux", false},
		{planned, "npm-" + hex + "-linux", false},
		{planned, "go-" + hex + hex + "-linux", false},
		{"plain.key", "plain.key", true},
		{"plain.key", "plainXkey", false}, // no pattern meaning in the literal parts
		{"plain", "plain\n", false},
		{"a-" + HashFilesRef([]string{"x"}) + HashFilesRef([]string{"y"}), "a-" + hex + hex, true},
		{"a-" + HashFilesRef([]string{"x"}) + HashFilesRef([]string{"y"}), "a-" + hex, true},
		{"a-" + HashFilesRef([]string{"x"}) + HashFilesRef([]string{"y"}), "a-", true},
	}
	for _, tt := range tests {
		if got := CacheKeyMatches(tt.planned, tt.key); got != tt.want {
			t.Errorf("CacheKeyMatches(%q, %q) = %v, want %v", tt.planned, tt.key, got, tt.want)
		}
	}
}

func TestMatchHashFiles(t *testing.T) {
	t.Parallel()
	tests := []struct {
		patterns []string
		name     string
		want     bool
	}{
		{[]string{"go.sum"}, "go.sum", true},
		{[]string{"go.sum"}, "sub/go.sum", false},
		{[]string{"**/go.sum"}, "sub/go.sum", true},
		{[]string{"**/go.sum"}, "go.sum", true},
		{[]string{"./src/*.go"}, "src/a.go", true},
		{[]string{"**/*.lock", "!vendor/**"}, "vendor/x.lock", false},
		{[]string{"**/*.lock", "!vendor/**"}, "app/x.lock", true},
		{[]string{"!vendor/**", "**/*.lock"}, "vendor/x.lock", true},
	}
	for _, tt := range tests {
		if got := MatchHashFiles(tt.patterns, tt.name); got != tt.want {
			t.Errorf("MatchHashFiles(%q, %q) = %v, want %v", tt.patterns, tt.name, got, tt.want)
		}
	}
}

// FuzzCacheKey: whatever a key says, compiling it does not panic, and a key that compiles
// expands to one without a hashFiles call, each call given patterns that check clean.
func FuzzCacheKey(f *testing.F) {
	for _, k := range []string{"go-${{ hashFiles('go.sum') }}", "${{hashFiles('a','b''c', '!x/**')}}-${{ matrix.os }}", "${{ hashFiles(')", "a-${{ env.V }}", "${{ branch }}"} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		src := "env: {V: v}\njobs:\n  a:\n    matrix: {os: [linux]}\n    cache: [{key: " + strconvQuote(key) + ", paths: [x]}]\n    steps: [{run: x}]\n"
		p, err := Compile([]byte(src), Options{})
		if err != nil {
			return
		}
		for _, j := range p.Jobs {
			for _, c := range j.Caches {
				out, err := ExpandCacheKey(c.Key, func(ps []string) (string, error) {
					for _, p := range ps {
						if msg := checkHashPattern(p); msg != "" {
							t.Errorf("pattern %q of %q: %s", p, c.Key, msg)
						}
					}
					return "h", nil
				})
				if err != nil || strings.Contains(out, "hashFiles(") && hashFilesCall.MatchString(out) {
					t.Errorf("key %q expands to %q, %v", c.Key, out, err)
				}
			}
		}
	})
}

func strconvQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
