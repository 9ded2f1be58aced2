package pipeline

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestSecretsStayReferences(t *testing.T) {
	t.Parallel()
	src := `
env:
  GLOBAL: "${{secrets.GLOBAL_TOKEN}}"
jobs:
  deploy:
    env:
      DEPLOY_KEY: "${{ secrets.DEPLOY_KEY }}"
      URL: "https://x:${{ secrets.PASSWORD }}@example.com"
    steps:
      - run: ./deploy "$DEPLOY_KEY"
        env:
          STEP_ONLY: "${{ secrets.STEP_TOKEN }}"
          COPY: "${{ env.DEPLOY_KEY }}"
      - run: "true"
`
	plan, err := Compile([]byte(src), Options{})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	j := plan.Jobs[0]
	if got, want := j.Secrets(), []string{"DEPLOY_KEY", "GLOBAL_TOKEN", "PASSWORD", "STEP_TOKEN"}; !slices.Equal(got, want) {
		t.Errorf("Secrets() = %v, want %v", got, want)
	}
	if j.Env["URL"] != "https://x:${{ secrets.PASSWORD }}@example.com" || j.Steps[0].Env["COPY"] != "${{ secrets.DEPLOY_KEY }}" {
		t.Errorf("env = %v", j.Env)
	}
	values := map[string]string{"PASSWORD": "pw", "DEPLOY_KEY": "k"}
	if got := ExpandSecrets(j.Env["URL"], values); got != "https://x:pw@example.com" {
		t.Errorf("ExpandSecrets = %q", got)
	}
	b, _ := json.Marshal(plan)
	if !strings.Contains(string(b), `secrets.STEP_TOKEN`) {
		t.Errorf("the plan lost the step's reference: %s", b)
	}
}

func TestSecretsRefused(t *testing.T) {
	t.Parallel()
	for name, src := range map[string]string{
		"in run":           `jobs: { a: { steps: [ { run: "echo ${{ secrets.TOKEN }}" } ] } }`,
		"in a label":       `jobs: { a: { runs_on: ["${{ secrets.TOKEN }}"], steps: [ { run: "true" } ] } }`,
		"lower case":       `jobs: { a: { env: { A: "${{ secrets.token }}" }, steps: [ { run: "true" } ] } }`,
		"dash":             `jobs: { a: { env: { A: "${{ secrets.MY-TOKEN }}" }, steps: [ { run: "true" } ] } }`,
		"env copy in run":  `jobs: { a: { env: { A: "${{ secrets.TOKEN }}" }, steps: [ { run: "echo ${{ env.A }}" } ] } }`,
		"env copy in name": `jobs: { a: { env: { A: "${{ secrets.TOKEN }}" }, steps: [ { name: "${{ env.A }}", run: "true" } ] } }`,
	} {
		if _, err := Compile([]byte(src), Options{}); err == nil || !strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: Compile = %v, want an error about the secret", name, err)
		}
	}
}

func TestValidSecretName(t *testing.T) {
	t.Parallel()
	for name, want := range map[string]bool{
		"DEPLOY_KEY": true, "_X": true, "A1": true,
		"": false, "1A": false, "deploy_key": false, "A-B": false, "A B": false, strings.Repeat("A", 129): false,
	} {
		if ValidSecretName(name) != want {
			t.Errorf("ValidSecretName(%q) = %v", name, !want)
		}
	}
}
