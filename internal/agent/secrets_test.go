package agent

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/google/uuid"
)

// secretBundle is a real coordinator with a secrets key, its data in dir, and a worker.
type secretBundle struct {
	*bundle
	dir string
}

func setupSecrets(t *testing.T) *secretBundle {
	t.Helper()
	dir := t.TempDir()
	db := filepath.Join(dir, "gantry.db")
	sqlitetest.Create(t, db)
	st, err := sqlite.Open(t.Context(), db, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bs := newBlobs(t, filepath.Join(dir, "blobs"))
	key := make([]byte, secret.KeySize)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	kr, err := secret.NewKeyring(key)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(api.Config{Store: st, HeartbeatEvery: 200 * time.Millisecond, LeaseTTL: 5 * time.Second,
		Blobs: bs, Secrets: kr}).Handler())
	t.Cleanup(func() {
		srv.Close()
		_ = st.Close()
	})
	b := &secretBundle{bundle: &bundle{st: st, url: srv.URL, blobs: bs}, dir: dir}
	b.start(t, 2)
	return b
}

func (b *secretBundle) call(t *testing.T, method, path, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), method, b.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	out, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(out)
}

func (b *secretBundle) setSecret(t *testing.T, project, name, value string) {
	t.Helper()
	if _, err := b.st.GetProjectByName(t.Context(), project); err != nil {
		if err := b.st.CreateProject(t.Context(), &store.Project{Name: project}); err != nil {
			t.Fatal(err)
		}
	}
	body, _ := json.Marshal(map[string]string{"value": value})
	status, ans := b.call(t, http.MethodPut, "/api/v1/projects/"+project+"/secrets/"+name, string(body))
	if status != http.StatusCreated && status != http.StatusOK {
		t.Fatalf("set secret %s: %d %s", name, status, ans)
	}
	if strings.Contains(ans, value) {
		t.Fatalf("the answer to setting a secret holds its value: %s", ans)
	}
}

func (b *secretBundle) submitIn(t *testing.T, project string, tr store.Trigger, env map[string]string, yaml string) uuid.UUID {
	t.Helper()
	p, err := pipeline.Compile([]byte(yaml), pipeline.Options{})
	if err != nil {
		t.Fatal(err)
	}
	run, _, _, err := b.st.CreateRun(t.Context(), store.CreateRunParams{Project: project, Plan: p, Trigger: tr, Env: env})
	if err != nil {
		t.Fatal(err)
	}
	return run.ID
}

func hashOf(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

// urlEncodeStep prints the query escaping of $1 for the characters the test values use.
const urlEncodeStep = `sed -e 's|%|%25|g' -e 's|/|%2F|g' -e 's|+|%2B|g' -e 's|=|%3D|g' -e 's|&|%26|g' -e 's|?|%3F|g' -e 's| |+|g'`

// secretValue has characters that base64 and URL encoding change.
const secretValue = "tok/9f+8e=7d&c 6b?5a4"

func secretPipeline() string {
	return `
jobs:
  deploy:
    env:
      DEPLOY_KEY: ${{ secrets.DEPLOY_KEY }}
    steps:
      - env:
          CERT: "${{ secrets.CERT }}"
          URL: "https://deploy:${{ secrets.DEPLOY_KEY }}@example.com"
        run: |
          test "$(printf %s "$DEPLOY_KEY" | sha256sum | cut -d' ' -f1)" = ` + hashOf(secretValue) + ` || { echo wrong secret; exit 3; }
          test "$URL" = "https://deploy:$DEPLOY_KEY@example.com" || exit 4
          echo "plain: $DEPLOY_KEY"
          echo "url: $URL"
          echo "std: $(printf %s "$DEPLOY_KEY" | base64 -w0)"
          echo "raw: $(printf %s "$DEPLOY_KEY" | base64 -w0 | tr -d =)"
          echo "urlsafe: $(printf %s "$DEPLOY_KEY" | base64 -w0 | tr '+/' '-_')"
          echo "query: $(printf %s "$DEPLOY_KEY" | ` + urlEncodeStep + `)"
          echo "$CERT"
          echo "secret env: $RUN_TOKEN"
          echo "plain env: $PLAIN"
`
}

const certValue = "-----BEGIN TEST-----\nMIIcertlineone111\nMIIcertlinetwo222\n-----END TEST-----"

// secretForms are what must not appear in a log or at rest.
func secretForms(v string) []string {
	out := []string{v, base64.StdEncoding.EncodeToString([]byte(v)), base64.RawURLEncoding.EncodeToString([]byte(v)), url.QueryEscape(v)}
	for _, l := range strings.Split(v, "\n") {
		if len(l) >= 3 {
			out = append(out, l)
		}
	}
	return out
}

// TestSecretsReachTheStepMaskedAndNeverRest: a job's secrets reach its step's env and
// nothing else: the log shows *** for the value, each line of a multi-line value, and
// their base64 and URL-encoded forms; and no byte of the coordinator's data (database,
// WAL, shared memory, log blobs) nor of the worker's work dir holds a value or its base64.
func TestSecretsReachTheStepMaskedAndNeverRest(t *testing.T) {
	t.Parallel()
	b := setupSecrets(t)
	b.setSecret(t, "web", "DEPLOY_KEY", secretValue)
	b.setSecret(t, "web", "CERT", certValue)
	const runToken = "run-scoped-token-31337"
	const plainCanary = "plain-env-canary-4242"

	body, _ := json.Marshal(map[string]any{"pipeline": secretPipeline(), "project": "web",
		"env": map[string]string{"PLAIN": plainCanary}, "secret_env": map[string]string{"RUN_TOKEN": runToken}})
	status, ans := b.call(t, http.MethodPost, "/api/v1/runs", string(body))
	if status != http.StatusAccepted {
		t.Fatalf("submit: %d %s", status, ans)
	}
	if strings.Contains(ans, runToken) {
		t.Fatalf("the run's answer holds its secret env value: %s", ans)
	}
	var run struct {
		ID uuid.UUID `json:"id"`
	}
	if err := json.Unmarshal([]byte(ans), &run); err != nil {
		t.Fatal(err)
	}
	b.wantSuccess(t, run.ID)
	log := b.jobLog(t, run.ID, "deploy")
	for _, want := range []string{"plain: ***", "url: https://deploy:***@example.com", "std: ***", "raw: ***", "urlsafe: ***",
		"query: ***", "***\n", "secret env: ***", "plain env: " + plainCanary} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	for _, v := range []string{secretValue, certValue, runToken} {
		for _, f := range secretForms(v) {
			if strings.Contains(log, f) {
				t.Errorf("log holds %q:\n%s", f, log)
			}
		}
	}
	// No API answer about the run or its job holds a value.
	for _, path := range []string{"/api/v1/runs/" + run.ID.String()} {
		_, ans := b.call(t, http.MethodGet, path, "")
		for _, v := range []string{secretValue, runToken} {
			if strings.Contains(ans, v) {
				t.Errorf("GET %s holds a secret value: %s", path, ans)
			}
		}
	}

	// The job's reads are audited: which secret, which job; never a value.
	reads, err := b.st.ListAudit(t.Context(), store.ListAuditParams{Project: "web", Action: "secret.read"})
	if err != nil || len(reads) != 2 {
		t.Fatalf("secret.read entries = %d, %v; want DEPLOY_KEY's and CERT's", len(reads), err)
	}

	// The grep: every byte the coordinator keeps, while it runs.
	data := readAll(t, b.dir)
	if !bytes.Contains(data, []byte(plainCanary)) {
		t.Fatal("the plain env value is nowhere in the data dir: the grep reads the wrong place")
	}
	for _, v := range []string{secretValue, certValue, runToken} {
		for _, f := range secretForms(v) {
			if bytes.Contains(data, []byte(f)) {
				t.Errorf("the data dir holds %q", f)
			}
		}
	}
}

// readAll concatenates every regular file under dir.
func readAll(t *testing.T, dir string) []byte {
	t.Helper()
	var all []byte
	files := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		files++
		all = append(all, b...)
		all = append(all, 0)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 2 {
		t.Fatalf("only %d files under %s", files, dir)
	}
	return all
}

// TestMissingSecretFailsBeforeTheFirstStep: the job fails with a message naming the
// secret, and its steps never run.
func TestMissingSecretFailsBeforeTheFirstStep(t *testing.T) {
	t.Parallel()
	b := setupSecrets(t)
	b.setSecret(t, "web", "OTHER", "other-value-1")
	marker := filepath.Join(t.TempDir(), "ran")
	id := b.submitIn(t, "web", store.Trigger{Branch: "main"}, nil, `
jobs:
  deploy:
    env: { KEY: "${{ secrets.DEPLOY_KEY }}" }
    steps:
      - run: touch `+marker+`
`)
	if r := b.waitRun(t, id); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	log := b.jobLog(t, id, "deploy")
	if !strings.Contains(log, "secret DEPLOY_KEY is not set for project web") {
		t.Errorf("log does not name the missing secret:\n%s", log)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the step ran")
	}
}

// TestForkPullRequestsGetNoSecrets: a run of a pull request from a fork gets no secrets
// (the job fails saying so) until the project opts in.
func TestForkPullRequestsGetNoSecrets(t *testing.T) {
	t.Parallel()
	b := setupSecrets(t)
	b.setSecret(t, "web", "DEPLOY_KEY", secretValue)
	yaml := `
jobs:
  test:
    env: { KEY: "${{ secrets.DEPLOY_KEY }}" }
    steps:
      - run: test -n "$KEY"
`
	fork := store.Trigger{Event: "pull_request", PRNumber: 7, Fork: true}
	id := b.submitIn(t, "web", fork, nil, yaml)
	if r := b.waitRun(t, id); r.Status != store.RunFailed {
		t.Fatalf("fork run %s, want failed", r.Status)
	}
	if log := b.jobLog(t, id, "test"); !strings.Contains(log, "not given to a pull request from a fork") || strings.Contains(log, secretValue) {
		t.Errorf("fork log:\n%s", log)
	}
	// A pull request from the repository itself gets them.
	b.wantSuccess(t, b.submitIn(t, "web", store.Trigger{Event: "pull_request", PRNumber: 8}, nil, yaml))

	status, ans := b.call(t, http.MethodPut, "/api/v1/projects/web/secret-settings", `{"secrets_for_forks": true}`)
	if status != http.StatusOK {
		t.Fatalf("opt in: %d %s", status, ans)
	}
	b.wantSuccess(t, b.submitIn(t, "web", fork, nil, yaml))
}

// TestEnvironmentSecretComesFirst: a job of environment production gets production's
// secret where one is set, and the project-wide one otherwise; a job of no environment
// gets the project-wide ones.
func TestEnvironmentSecretComesFirst(t *testing.T) {
	t.Parallel()
	b := setupSecrets(t)
	b.setSecret(t, "web", "TOKEN", "project-wide-token")
	b.setSecret(t, "web", "OTHER", "project-wide-other")
	body, _ := json.Marshal(map[string]string{"value": "production-token", "environment": "production"})
	if status, ans := b.call(t, http.MethodPut, "/api/v1/projects/web/secrets/TOKEN", string(body)); status != http.StatusCreated {
		t.Fatalf("set production's TOKEN: %d %s", status, ans)
	}
	check := func(token string) string {
		return `test "$(printf %s "$TOKEN" | sha256sum | cut -d' ' -f1)" = ` + hashOf(token) + ` && ` +
			`test "$(printf %s "$OTHER" | sha256sum | cut -d' ' -f1)" = ` + hashOf("project-wide-other")
	}
	b.wantSuccess(t, b.submitIn(t, "web", store.Trigger{Branch: "main"}, nil, `
jobs:
  deploy:
    environment: production
    env: { TOKEN: "${{ secrets.TOKEN }}", OTHER: "${{ secrets.OTHER }}" }
    steps:
      - run: `+check("production-token")+`
  test:
    env: { TOKEN: "${{ secrets.TOKEN }}", OTHER: "${{ secrets.OTHER }}" }
    steps:
      - run: `+check("project-wide-token")+`
`))
}

// TestSwappedSecretDoesNotOpen: a sealed value copied onto another secret's row (by
// someone with write access to the database) does not open there: the job fails before
// its first step instead of running with the other secret's value.
func TestSwappedSecretDoesNotOpen(t *testing.T) {
	t.Parallel()
	b := setupSecrets(t)
	b.setSecret(t, "web", "ADMIN_TOKEN", "the-admin-token-value")
	b.setSecret(t, "web", "PUBLIC_TOKEN", "the-public-token-value")
	admin, err := b.st.GetSecret(t.Context(), store.SecretKey{Project: "web", Name: "ADMIN_TOKEN"})
	if err != nil {
		t.Fatal(err)
	}
	swapped := *admin
	swapped.Name = "PUBLIC_TOKEN"
	if _, err := b.st.PutSecret(t.Context(), &swapped); err != nil {
		t.Fatal(err)
	}
	id := b.submitIn(t, "web", store.Trigger{Branch: "main"}, nil, `
jobs:
  leak:
    env: { T: "${{ secrets.PUBLIC_TOKEN }}" }
    steps:
      - run: echo "got $T"
`)
	if r := b.waitRun(t, id); r.Status != store.RunFailed {
		t.Fatalf("run %s, want failed", r.Status)
	}
	log := b.jobLog(t, id, "leak")
	if !strings.Contains(log, "secret PUBLIC_TOKEN of project web cannot be decrypted") || strings.Contains(log, "got") {
		t.Errorf("log:\n%s", log)
	}
}

// TestOutputHoldingASecretIsWithheld: a job output that holds a secret value the job's
// log masks (the value, inside other text, its base64, or a value a step registered with
// ::add-mask::) is withheld: the job's log says so by name, the coordinator never gets it
// (not in the store, the API, or any byte of its data), and a job that needs it sees ""
// in its run, env and if:; an output holding no secret next to it passes, and within the
// job a later step still reads the step's output.
func TestOutputHoldingASecretIsWithheld(t *testing.T) {
	t.Parallel()
	b := setupSecrets(t)
	const token = "out-token-value-7731"
	b.setSecret(t, "web", "TOKEN", token)
	// The registered value is made by the step, so the pipeline's text, which the store
	// keeps, does not hold it.
	registered := "reg-" + hashOf("registered")[:16]
	run := b.submitIn(t, "web", store.Trigger{Branch: "main"}, nil, `
jobs:
  a:
    env: { TOKEN: "${{ secrets.TOKEN }}" }
    steps:
      - id: w
        run: |
          echo "token=$TOKEN" >> "$GANTRY_OUTPUT"
          echo "url=https://u:$TOKEN@example.com" >> "$GANTRY_OUTPUT"
          echo "encoded=$(printf %s "$TOKEN" | base64 -w0)" >> "$GANTRY_OUTPUT"
          m="reg-$(printf %s registered | sha256sum | cut -c1-16)"
          echo "::add-mask::$m"
          echo "registered=$m" >> "$GANTRY_OUTPUT"
          echo "version=1.2.$((2+1))" >> "$GANTRY_OUTPUT"
      - run: test "${{ steps.w.outputs.token }}" = "$TOKEN"
  b:
    needs: [a]
    env: { URL: "${{ needs.a.outputs.url }}" }
    steps:
      - run: |
          echo "token=[${{ needs.a.outputs.token }}] url=[$URL] encoded=[${{ needs.a.outputs.encoded }}]"
          echo "registered=[${{ needs.a.outputs.registered }}] version=[${{ needs.a.outputs.version }}]"
  c:
    needs: [a]
    if: needs.a.outputs.token != ""
    steps: [{run: "true"}]
`)
	if r := b.waitRun(t, run); r.Status != store.RunSuccess {
		t.Fatalf("run %s, want success\na:\n%s\nb:\n%s", r.Status, b.jobLog(t, run, "a"), b.jobLog(t, run, "b"))
	}
	forms := append(secretForms(token), registered)

	aLog := b.jobLog(t, run, "a")
	for _, name := range []string{"token", "url", "encoded", "registered"} {
		if want := "output " + name + " withheld: it holds a secret value"; !strings.Contains(aLog, want) {
			t.Errorf("a's log lacks %q:\n%s", want, aLog)
		}
	}
	if strings.Contains(aLog, "output version withheld") {
		t.Errorf("a's log withholds the harmless output:\n%s", aLog)
	}
	bLog := b.jobLog(t, run, "b")
	for _, want := range []string{"token=[] url=[] encoded=[]", "registered=[] version=[1.2.3]"} {
		if !strings.Contains(bLog, want) {
			t.Errorf("b's log lacks %q:\n%s", want, bLog)
		}
	}
	for _, f := range forms {
		if strings.Contains(bLog, f) || strings.Contains(aLog, f) {
			t.Errorf("a log holds %q:\na:\n%s\nb:\n%s", f, aLog, bLog)
		}
	}
	if c, _ := b.jobByKey(t, run, "c"); c.Status != store.JobSkipped {
		t.Errorf("c: %s, want skipped: its if: sees no token", c.Status)
	}

	a, _ := b.jobByKey(t, run, "a")
	if want := map[string]string{"version": "1.2.3"}; !maps.Equal(a.Outputs, want) {
		t.Errorf("stored outputs %q, want %q", a.Outputs, want)
	}
	status, ans := b.call(t, http.MethodGet, "/api/v1/jobs/"+a.ID.String(), "")
	var view struct {
		Outputs map[string]string `json:"outputs"`
	}
	if err := json.Unmarshal([]byte(ans), &view); status != http.StatusOK || err != nil {
		t.Fatalf("GET the job: %d %v %s", status, err, ans)
	}
	if want := map[string]string{"version": "1.2.3"}; !maps.Equal(view.Outputs, want) {
		t.Errorf("API outputs %q, want %q", view.Outputs, want)
	}
	data := readAll(t, b.dir)
	if !bytes.Contains(data, []byte("1.2.3")) {
		t.Fatal("the harmless output is nowhere in the data dir: the grep reads the wrong place")
	}
	for _, f := range forms {
		if strings.Contains(ans, f) {
			t.Errorf("GET the job holds %q: %s", f, ans)
		}
		if bytes.Contains(data, []byte(f)) {
			t.Errorf("the data dir holds %q", f)
		}
	}
}
