package pipeline

import (
	"fmt"
	"path"
	"regexp"
	"strings"
	"unicode"

	"go.yaml.in/yaml/v3"

	"github.com/gantry-ci/gantry/internal/lazyre"
)

// Cache is one of a job's caches, after defaults: directories restored before the job's
// first step from the newest entry whose key matches, and saved after its steps under
// Key when no entry of that exact key was restored.
type Cache struct {
	// Key names the entry saved. It may hold ${{ hashFiles('glob', ...) }}, kept as
	// written here and computed by the worker over the workspace after the checkout.
	Key string `json:"key"`
	// RestoreKeys are prefixes tried in order when no entry has the exact key; each
	// takes the newest entry whose key starts with it.
	RestoreKeys []string `json:"restore_keys,omitempty"`
	// Paths are files or directories: relative to the workspace, or to the home
	// directory of the step's user when they start with ~.
	Paths []string `json:"paths"`
	// When says after which outcome of the steps the cache is saved: on_success
	// (written "" in a plan), on_failure or always.
	When CacheWhen `json:"when,omitempty"`
}

// CacheWhen says after which outcome of a job's steps its cache is saved.
type CacheWhen string

// The outcomes a cache can be saved after.
const (
	CacheOnSuccess CacheWhen = "on_success"
	CacheOnFailure CacheWhen = "on_failure"
	CacheAlways    CacheWhen = "always"
)

// SaveAfter reports whether a cache with this when is saved after steps that succeeded
// (or not).
func (w CacheWhen) SaveAfter(success bool) bool {
	switch w {
	case CacheAlways:
		return true
	case CacheOnFailure:
		return !success
	default:
		return success
	}
}

// Limits of a job's caches.
const (
	MaxCaches       = 16
	MaxCacheKey     = 512
	maxCachePaths   = 64
	maxRestoreKeys  = 16
	maxHashPatterns = 32
)

var (
	cacheKeys  = []string{"key", "restore_keys", "paths", "when"}
	cacheWhens = []string{string(CacheOnSuccess), string(CacheOnFailure), string(CacheAlways)}
	// hashFilesCall is the canonical form a plan keeps of a hashFiles call.
	hashFilesCall = lazyre.New(`\$\{\{ hashFiles\(((?:'(?:[^']|'')*'(?:, )?)+)\) \}\}`)
	hashFilesArg  = lazyre.New(`'((?:[^']|'')*)'`)
)

// cacheSpec is one entry of cache: as written.
type cacheSpec struct {
	node        *yaml.Node
	path        string
	key         text
	restoreKeys []text
	paths       []text
	when        CacheWhen
}

// caches decodes cache: a list of caches, or a single mapping that reads as a list of one.
func (d *decoder) caches(n *yaml.Node, p string) []cacheSpec {
	r := d.resolve(n)
	if r == nil {
		return nil
	}
	out := []cacheSpec{}
	if r.Kind == yaml.MappingNode {
		if c, ok := d.cache(r, p); ok {
			out = append(out, c)
		}
		return out
	}
	items := d.items(n, p, "a list of caches, each a mapping of key, restore_keys, paths and when", false)
	if len(items) > MaxCaches {
		d.add(ErrLimit, r, p, "a job may have at most %d caches, not %d", MaxCaches, len(items))
		return out
	}
	for i, item := range items {
		if c, ok := d.cache(item, indexPath(p, i)); ok {
			out = append(out, c)
		}
	}
	return out
}

func (d *decoder) cache(n *yaml.Node, p string) (cacheSpec, bool) {
	c := cacheSpec{node: d.resolve(n), path: p}
	if c.node == nil {
		return c, false
	}
	if c.node.Kind != yaml.MappingNode {
		d.typeError(n, c.node, p, "a cache: a mapping of key, restore_keys, paths and when")
		return c, false
	}
	d.object(c.node, p, "a cache", cacheKeys, func(f field) {
		switch f.key {
		case "key":
			if v, ok := d.str(f.val, f.path, "a cache key"); ok {
				c.key = text{v: v, node: d.resolve(f.val), path: f.path}
			}
		case "restore_keys":
			items := d.items(f.val, f.path, "a list of key prefixes", true)
			if len(items) > maxRestoreKeys {
				d.add(ErrLimit, f.val, f.path, "at most %d restore keys, not %d", maxRestoreKeys, len(items))
				return
			}
			for i, item := range items {
				ip := indexPath(f.path, i)
				if v, ok := d.str(item, ip, "a key prefix"); ok {
					if strings.TrimSpace(v) == "" {
						d.add(ErrInvalid, item, ip, "a restore key is empty; it would match every entry")
						continue
					}
					c.restoreKeys = append(c.restoreKeys, text{v: v, node: d.resolve(item), path: ip})
				}
			}
		case "paths":
			items := d.items(f.val, f.path, "a list of paths", true)
			if len(items) > maxCachePaths {
				d.add(ErrLimit, f.val, f.path, "at most %d cache paths, not %d", maxCachePaths, len(items))
				return
			}
			for i, item := range items {
				ip := indexPath(f.path, i)
				v, ok := d.str(item, ip, "a path")
				if !ok {
					continue
				}
				if msg := CheckCachePath(v); msg != "" {
					d.add(ErrInvalid, item, ip, "cache path %q %s", v, msg)
					continue
				}
				c.paths = append(c.paths, text{v: v, node: d.resolve(item), path: ip})
			}
		case "when":
			if v, ok := d.enum(f.val, f.path, "a cache's when", cacheWhens); ok {
				c.when = CacheWhen(v)
			}
		}
	})
	ok := true
	if c.key.node == nil {
		d.add(ErrRequired, c.node, p+".key", "a cache needs a key")
		ok = false
	} else if strings.TrimSpace(c.key.v) == "" {
		d.add(ErrRequired, c.key.node, c.key.path, "the cache key is empty")
		ok = false
	}
	if len(c.paths) == 0 {
		// A list whose every path was refused has been told about already.
		if !d.hadErrorAt(p + ".paths") {
			d.add(ErrRequired, c.node, p+".paths", "a cache needs at least one path")
		}
		ok = false
	}
	return c, ok
}

func (d *decoder) hadErrorAt(prefix string) bool {
	for _, e := range d.errs {
		if strings.HasPrefix(e.Path, prefix) {
			return true
		}
	}
	return false
}

// CheckCachePath says what is wrong with p as a cache path, or "" when it is a clean path
// inside the workspace or, starting with ~, inside the home directory.
func CheckCachePath(p string) string {
	rest := p
	home := p == "~" || strings.HasPrefix(p, "~/")
	if home {
		rest = strings.TrimPrefix(strings.TrimPrefix(p, "~"), "/")
	}
	switch {
	case strings.TrimSpace(p) == "":
		return "is empty"
	case strings.HasPrefix(p, "~") && !home:
		return "names another user's home; use ~ or ~/path"
	case strings.HasPrefix(p, "/") || (len(p) > 1 && p[1] == ':'):
		return "must be relative to the workspace, or start with ~ for the home directory"
	case strings.Contains(p, `\`):
		return "must use / as separator"
	case strings.ContainsFunc(p, unicode.IsControl):
		return "must not hold control characters"
	case strings.ContainsAny(p, "*?["):
		return "must name a file or directory; globs are not supported in cache paths"
	case strings.Contains(p, "${{"):
		return "must not hold ${{ }}"
	}
	if rest == "" {
		return ""
	}
	for _, seg := range strings.Split(rest, "/") {
		if seg == ".." {
			return "must not leave the workspace or home directory with .."
		}
	}
	if !home && path.Clean(p) == "." {
		return "names the whole workspace; name the directories to keep"
	}
	return ""
}

// compileCaches substitutes matrix and env values into a job's caches and checks their
// keys. hashFiles calls are kept, written canonically, for the worker.
func (d *decoder) compileCaches(cs []cacheSpec, in instance, env map[string]string) []Cache {
	if len(cs) == 0 {
		return nil
	}
	var out []Cache
	seen := map[string]bool{}
	for _, c := range cs {
		before := len(d.errs)
		cache := Cache{Key: d.substituteCacheKey(c.key, in, env)}
		if c.when != CacheOnSuccess {
			cache.When = c.when
		}
		// A key whose references were told about is not checked further: what is left of
		// it would only confuse.
		if msg := checkCacheKey(cache.Key); len(d.errs) == before && msg != "" {
			d.add(ErrInvalid, c.key.node, c.key.path, "cache key %q %s", cache.Key, msg)
		} else if len(d.errs) == before && seen[cache.Key] {
			d.add(ErrInvalid, c.key.node, c.key.path, "another cache of this job has the key %q", cache.Key)
		}
		seen[cache.Key] = true
		for _, rk := range c.restoreKeys {
			before := len(d.errs)
			v := d.substituteCacheKey(rk, in, env)
			if len(d.errs) > before {
				continue
			}
			if msg := checkCacheKey(v); msg != "" {
				d.add(ErrInvalid, rk.node, rk.path, "restore key %q %s", v, msg)
				continue
			}
			cache.RestoreKeys = append(cache.RestoreKeys, v)
		}
		for _, p := range c.paths {
			v := path.Clean(p.v)
			if !contains(cache.Paths, v) {
				cache.Paths = append(cache.Paths, v)
			}
		}
		out = append(out, cache)
	}
	return out
}

// CheckCacheKey says what is wrong with a cache key (or restore key) computed on the
// worker, or "".
func CheckCacheKey(k string) string { return checkCacheKey(k) }

// checkCacheKey checks a key (or restore key) after substitution; a hashFiles call stands
// for the 64 hexadecimal digits it becomes.
func checkCacheKey(k string) string {
	bare := hashFilesCall.ReplaceAllString(k, strings.Repeat("0", 64))
	switch {
	case strings.TrimSpace(bare) == "":
		return "is empty"
	case len(bare) > MaxCacheKey:
		return fmt.Sprintf("is longer than %d bytes", MaxCacheKey)
	case strings.ContainsFunc(bare, unicode.IsControl):
		return "must not hold control characters"
	case strings.Contains(bare, ","):
		return "must not hold a comma"
	}
	return ""
}

// substituteCacheKey puts matrix and env values into a cache key and writes each
// hashFiles('glob', ...) call canonically, for the worker to compute. The run's own
// values (${{ branch }}, ${{ sha }} ...) are kept as references and put in when a run
// is created, as in a step's run.
func (d *decoder) substituteCacheKey(t text, in instance, env map[string]string) string {
	return d.replaceRefs(t, func(offset int, inner string) string {
		var b strings.Builder
		if rest, ok := strings.CutPrefix(inner, "hashFiles"); ok {
			args, msg := parseHashFiles(strings.TrimSpace(rest))
			if msg != "" {
				d.addAt(ErrExpression, t, offset, "%s", msg)
				return ""
			}
			return HashFilesRef(args)
		}
		m := refPattern.FindStringSubmatch(inner)
		switch {
		case contains(runNames, inner) || (m != nil && (m[1] == "inputs" || m[1] == "pr" || m[1] == "workflow_run")):
			if msg := d.checkRunRef(m); msg != "" {
				d.addAt(ErrUnknownReference, t, offset, "%s", msg)
			}
			b.WriteString(runRef(inner))
		case m == nil || m[1] == "secrets":
			d.addAt(ErrUnknownReference, t, offset, "${{ %s }} cannot stand in a cache key; use ${{ hashFiles('glob', ...) }}, ${{ matrix.<axis> }}, ${{ env.<NAME> }} or one of ${{ %s }}",
				inner, strings.Join(runNames, " }}, ${{ "))
		case m[1] == "matrix":
			v, ok := lookupMatrix(in, m[2])
			if !ok {
				d.addAt(ErrUnknownReference, t, offset, "%s", missingMatrixMessage(m[2], in))
			}
			b.WriteString(v)
		default:
			v, ok := env[m[2]]
			if !ok {
				d.addAt(ErrUnknownReference, t, offset, "env.%s is not set here%s", m[2], suggest(m[2], sortedKeys(env)))
			}
			if len(SecretRefs(v)) > 0 || strings.Contains(v, "${{") {
				d.addAt(ErrInvalid, t, offset, "env.%s holds a secret or a value known only when the job runs, which cannot stand in a cache key", m[2])
				v = ""
			}
			b.WriteString(v)
		}
		return b.String()
	})
}

// parseHashFiles reads the arguments of a hashFiles call, "('a', 'b/**')": one or more
// single-quoted glob patterns (” is a quote), each relative to the workspace, those
// starting with ! excluding what they match.
func parseHashFiles(call string) ([]string, string) {
	const usage = "hashFiles takes one or more single-quoted glob patterns, as in hashFiles('**/go.sum')"
	if !strings.HasPrefix(call, "(") || !strings.HasSuffix(call, ")") {
		return nil, usage
	}
	s := strings.TrimSpace(call[1 : len(call)-1])
	var args []string
	for s != "" {
		if s[0] != '\'' {
			return nil, usage
		}
		var b strings.Builder
		i := 1
		closed := false
		for i < len(s) {
			if s[i] == '\'' {
				if i+1 < len(s) && s[i+1] == '\'' {
					b.WriteByte('\'')
					i += 2
					continue
				}
				closed = true
				i++
				break
			}
			b.WriteByte(s[i])
			i++
		}
		if !closed {
			return nil, "a pattern of hashFiles is not closed with '"
		}
		args = append(args, b.String())
		s = strings.TrimSpace(s[i:])
		if s == "" {
			break
		}
		if s[0] != ',' {
			return nil, usage
		}
		s = strings.TrimSpace(s[1:])
		if s == "" {
			return nil, usage
		}
	}
	if len(args) == 0 {
		return nil, usage
	}
	if len(args) > maxHashPatterns {
		return nil, fmt.Sprintf("hashFiles takes at most %d patterns", maxHashPatterns)
	}
	for _, a := range args {
		if msg := checkHashPattern(a); msg != "" {
			return nil, fmt.Sprintf("hashFiles pattern %q %s", a, msg)
		}
	}
	return args, ""
}

func checkHashPattern(p string) string {
	p = strings.TrimPrefix(p, "!")
	p = strings.TrimPrefix(p, "./")
	switch {
	case strings.TrimSpace(p) == "":
		return "is empty"
	case strings.HasPrefix(p, "/"):
		return "must be relative to the workspace"
	case strings.ContainsAny(p, "\\\x00"):
		return "must use / as separator"
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "must not leave the workspace with .."
		}
		if seg == "**" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return "is not a valid glob pattern"
		}
	}
	return ""
}

// HashFilesRef is the canonical text a plan keeps of hashFiles(patterns...).
func HashFilesRef(patterns []string) string {
	quoted := make([]string, len(patterns))
	for i, p := range patterns {
		quoted[i] = "'" + strings.ReplaceAll(p, "'", "''") + "'"
	}
	return "${{ hashFiles(" + strings.Join(quoted, ", ") + ") }}"
}

// ExpandCacheKey computes the hashFiles calls a planned cache key holds with hash, which
// is given each call's patterns.
func ExpandCacheKey(key string, hash func(patterns []string) (string, error)) (string, error) {
	var firstErr error
	out := hashFilesCall.ReplaceAllStringFunc(key, func(call string) string {
		var patterns []string
		for _, m := range hashFilesArg.FindAllStringSubmatch(hashFilesCall.FindStringSubmatch(call)[1], -1) {
			patterns = append(patterns, strings.ReplaceAll(m[1], "''", "'"))
		}
		v, err := hash(patterns)
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("hashFiles(%s): %w", strings.Join(patterns, ", "), err)
		}
		return v
	})
	return out, firstErr
}

// CacheKeyMatches reports whether key is one the worker can compute from the planned key
// (or restore key) planned: planned with each hashFiles call replaced by what hashFiles
// gives, 64 lowercase hexadecimal digits or nothing. The coordinator checks keys so:
// it cannot check the digits, which only the workspace has, but a worker cannot save
// or restore under a key of another shape than those its job declares.
func CacheKeyMatches(planned, key string) bool {
	var b strings.Builder
	b.WriteString(`\A`)
	last := 0
	for _, loc := range hashFilesCall.FindAllStringIndex(planned, -1) {
		b.WriteString(regexp.QuoteMeta(planned[last:loc[0]]))
		b.WriteString(`(?:[0-9a-f]{64})?`)
		last = loc[1]
	}
	b.WriteString(regexp.QuoteMeta(planned[last:]))
	b.WriteString(`\z`)
	re, err := regexp.Compile(b.String())
	return err == nil && re.MatchString(key)
}

// MatchHashFiles reports whether name, a slash-separated path relative to the workspace,
// is one hashFiles(patterns...) hashes: the last pattern that matches it decides, those
// starting with ! excluding.
func MatchHashFiles(patterns []string, name string) bool {
	in := false
	for _, p := range patterns {
		neg := strings.HasPrefix(p, "!")
		p = strings.TrimPrefix(strings.TrimPrefix(p, "!"), "./")
		if MatchArtifactPath(strings.TrimSuffix(p, "/"), name) {
			in = !neg
		}
	}
	return in
}
