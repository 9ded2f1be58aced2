package api_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// curlExample is one curl command of the docs.
type curlExample struct {
	where   string // file:line
	method  string
	url     string
	headers http.Header
	body    string
	hasBody bool
}

// shellWords splits a command line as sh would for the quoting the docs use: '...',
// "..." and backslash-newline continuations.
func shellWords(s string) ([]string, bool) {
	var words []string
	var cur strings.Builder
	in, started := byte(0), false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in != 0 && c == in:
			in = 0
		case in != 0:
			cur.WriteByte(c)
		case c == '\'' || c == '"':
			in, started = c, true
		case c == '\\' && i+1 < len(s) && s[i+1] == '\n':
			i++
		case c == ' ' || c == '\t' || c == '\n':
			if started {
				words = append(words, cur.String())
				cur.Reset()
				started = false
			}
		default:
			cur.WriteByte(c)
			started = true
		}
	}
	if started {
		words = append(words, cur.String())
	}
	return words, in == 0
}

var curlStart = regexp.MustCompile(`(?:^\$ |^|\| )curl `)

// docCurls finds the curl commands in the code blocks of a Markdown file.
func docCurls(t *testing.T, path string) []curlExample {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	var out []curlExample
	fence := false
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(strings.TrimSpace(lines[i]), "```") {
			fence = !fence
			continue
		}
		loc := curlStart.FindStringIndex(lines[i])
		if !fence || loc == nil {
			continue
		}
		start := i
		cmd := lines[i][loc[1]-len("curl "):]
		words, closed := shellWords(cmd)
		for (!closed || strings.HasSuffix(cmd, "\\")) && i+1 < len(lines) {
			i++
			cmd += "\n" + lines[i]
			words, closed = shellWords(cmd)
		}
		ex := curlExample{where: filepath.Base(path) + ":" + strconv.Itoa(start+1), method: http.MethodGet, headers: http.Header{}}
		for j := 1; j < len(words); j++ {
			w := words[j]
			arg := func() string {
				if j+1 < len(words) {
					j++
					return words[j]
				}
				return ""
			}
			switch w {
			case "-X", "--request":
				ex.method = arg()
			case "-H", "--header":
				k, v, _ := strings.Cut(arg(), ":")
				ex.headers.Add(strings.TrimSpace(k), strings.TrimSpace(v))
			case "-d", "--data", "--data-raw", "--data-binary":
				ex.body, ex.hasBody = arg(), true
				if ex.method == http.MethodGet {
					ex.method = http.MethodPost
				}
				if strings.HasPrefix(ex.body, "@") {
					// A file of the repository (examples/...), else one of the reader's
					// (.gantry.yml, stdin): a pipeline stands in for it.
					ex.body = "jobs: {a: {steps: [{run: make}]}}"
					if data, err := os.ReadFile(filepath.Join("..", "..", words[j][1:])); err == nil {
						ex.body = string(data)
					}
				}
			case "-o", "-w", "-u", "--user":
				arg()
			default:
				if strings.Contains(w, "/api/v1/") || strings.HasPrefix(w, "http") || strings.HasPrefix(w, "$B") {
					ex.url = w
				}
			}
		}
		if ex.url != "" {
			out = append(out, ex)
		}
	}
	return out
}

// requestPath is the path and query of a documented URL ($B/api/v1/runs,
// http://127.0.0.1:8080/api/v1/runs?x=1).
func requestPath(u string) string {
	if rest, ok := strings.CutPrefix(u, "http://"); ok {
		u = rest
	} else if rest, ok := strings.CutPrefix(u, "https://"); ok {
		u = rest
	}
	if i := strings.Index(u, "/"); i >= 0 {
		return u[i:]
	}
	return "/"
}

// TestDocsCurlExamples: every curl command in the docs that sends a body says its
// Content-Type, JSON or YAML, and none is answered 415 when replayed against a
// coordinator; the environment example is answered 200, and so is the approve example
// on a job that waits for that environment. A refused example names the header to add.
func TestDocsCurlExamples(t *testing.T) {
	t.Parallel()
	files, _ := filepath.Glob(filepath.Join("..", "..", "docs", "*.md"))
	files = append(files, filepath.Join("..", "..", "README.md"))
	var examples []curlExample
	for _, f := range files {
		examples = append(examples, docCurls(t, f)...)
	}
	if len(examples) < 50 {
		t.Fatalf("found %d curl examples in the docs; the parser lost them", len(examples))
	}
	b := setup(t)
	replay := func(ex curlExample, path string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), ex.method, b.url+path, strings.NewReader(ex.body))
		if err != nil {
			t.Errorf("%s: %v", ex.where, err)
			return 0
		}
		for k, v := range ex.headers {
			if k != "Authorization" {
				req.Header[k] = v
			}
		}
		if req.Header.Get("Content-Type") == "" {
			// What curl -d sends when told nothing else.
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode == http.StatusUnsupportedMediaType {
			t.Errorf("%s: curl %s %s is answered 415", ex.where, ex.method, ex.url)
		}
		return res.StatusCode
	}
	writes, environment := 0, false
	var approve *curlExample
	for _, ex := range examples {
		if !ex.hasBody {
			continue
		}
		writes++
		path := requestPath(ex.url)
		hooks := strings.HasPrefix(path, "/api/v1/hooks/")
		if ct := ex.headers.Get("Content-Type"); !hooks && !strings.Contains(ct, "json") && !strings.Contains(ct, "yaml") {
			t.Errorf("%s: curl %s %s sends a body without -H 'Content-Type: application/json': %q", ex.where, ex.method, ex.url, ex.headers)
		}
		code := replay(ex, path)
		if path == "/api/v1/projects/shop/environments/production" {
			environment = true
			if code != http.StatusOK {
				t.Errorf("%s: the environment example is answered %d, want 200", ex.where, code)
			}
		}
		if strings.HasSuffix(path, "/approve") {
			approve = &ex
		}
	}
	// The approve example, on a job that waits for the environment made above.
	if approve == nil {
		t.Fatal("no approve example found in the docs")
	}
	r := b.do(t, http.MethodPost, "/api/v1/runs", "application/json",
		`{"pipeline": "jobs:\n  deploy: {environment: production, steps: [{run: ./deploy}]}\n", "project": "shop", "ref": "refs/heads/main"}`, nil)
	var run struct{ Jobs []struct{ ID, Status string } }
	r.decode(t, &run)
	if r.status != http.StatusAccepted || len(run.Jobs) != 1 || run.Jobs[0].Status != "waiting_approval" {
		t.Fatalf("a run waiting for approval: %d %s", r.status, r.body)
	}
	if code := replay(*approve, "/api/v1/jobs/"+run.Jobs[0].ID+"/approve"); code != http.StatusOK {
		t.Errorf("%s: the approve example is answered %d, want 200", approve.where, code)
	}
	if writes < 20 || !environment {
		t.Errorf("replayed %d examples with a body (the environment's: %t); the parser lost some", writes, environment)
	}

	// What curl -d alone gets: a 415 that names the header to add.
	r = b.do(t, http.MethodPost, "/api/v1/projects", "application/x-www-form-urlencoded", `{"name": "web"}`, nil)
	if r.status != http.StatusUnsupportedMediaType || !strings.Contains(string(r.body), `\"Content-Type: application/json\"`) ||
		!strings.Contains(string(r.body), "curl -d") {
		t.Errorf("a form-encoded body: %d %s", r.status, r.body)
	}
	r = b.do(t, http.MethodPost, "/api/v1/projects", "", `{"name": "web"}`, nil)
	if r.status != http.StatusUnsupportedMediaType || !strings.Contains(string(r.body), `\"Content-Type: application/json\"`) {
		t.Errorf("a body without a Content-Type: %d %s", r.status, r.body)
	}
}
