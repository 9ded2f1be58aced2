package web_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/google/uuid"
)

// TestDashboardDispatches: the dispatch page starts a registered workflow with typed
// inputs and a repository project's file at a ref, and lists the inputs the coordinator
// refuses.
func TestDashboardDispatches(t *testing.T) {
	t.Parallel()
	c := startCoordinator(t, false)
	ctx := t.Context()

	// A bare repository whose main holds a pipeline with on: dispatch, pushed with git.
	home := t.TempDir()
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@gantry.invalid", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@gantry.invalid"}
	git := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	bare, work := filepath.Join(t.TempDir(), "app.git"), filepath.Join(home, "work")
	git("", "init", "--quiet", "--bare", "-b", "main", bare)
	git("", "init", "--quiet", "-b", "main", work)
	file := "name: from-repo\non:\n  dispatch:\n    inputs:\n      target: { type: choice, options: [staging, production], required: true }\njobs:\n  deploy: { steps: [ { run: echo deploying to $GANTRY_INPUT_TARGET } ] }\n"
	if err := os.WriteFile(filepath.Join(work, ".gantry.yml"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	git(work, "add", "-A")
	git(work, "commit", "--quiet", "-m", "x")
	git(work, "push", "--quiet", bare, "HEAD:refs/heads/main")
	if err := c.st.CreateProject(ctx, &store.Project{Name: "app", RepoURL: "file://" + bare, Provider: "generic",
		DefaultBranch: "main", PipelinePath: ".gantry.yml", WebhookSecret: "x"}); err != nil {
		t.Fatal(err)
	}
	wf := &store.Workflow{Project: "ops", Name: "greet", Definition: []byte("on:\n  dispatch:\n    inputs:\n" +
		"      who: { type: string, required: true }\n      loud: { type: boolean }\n      times: { type: number, default: 1 }\n" +
		"jobs:\n  hello: { steps: [ { run: echo hello $GANTRY_INPUT_WHO $GANTRY_INPUT_LOUD $GANTRY_INPUT_TIMES } ] }\n")}
	if err := c.st.CreateWorkflow(ctx, wf); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, func(m chromedp.ConsoleMessage) bool { return strings.Contains(m.Text, "422") })
	b.do("open the dispatch page", chromedp.Navigate(c.url+"/"), chromedp.WaitVisible(chromedp.CSS(`a[data-nav="dispatch"]`)),
		chromedp.Click(chromedp.CSS(`a[data-nav="dispatch"]`)), chromedp.WaitVisible(chromedp.ID("dispatch-target")))
	if got := b.eval(`[...document.querySelectorAll("#dispatch-target option")].map(o => o.value).join(",")`); got != "project:app,workflow:"+wf.ID.String() {
		t.Fatalf("targets = %s", got)
	}

	// The project's file at a ref: a wrong input is listed, a right one starts the run.
	b.do("give a wrong input", chromedp.SetValue(chromedp.ID("dispatch-inputs-text"), "target=qa\ncolour=blue"),
		chromedp.Click(chromedp.ID("dispatch-run")))
	b.waitJS("the refused inputs", `!document.querySelector("#dispatch-errors").hidden &&
		document.querySelector("#dispatch-errors").innerText.includes("inputs.target") &&
		document.querySelector("#dispatch-errors").innerText.includes("inputs.colour")`)
	b.screenshot("dispatch-refused")
	// One wrong input is said once.
	b.do("give one wrong input", chromedp.SetValue(chromedp.ID("dispatch-inputs-text"), "target=qa"),
		chromedp.Click(chromedp.ID("dispatch-run")))
	b.waitJS("the one refused input", `!document.querySelector("#dispatch-errors").hidden &&
		!document.querySelector("#dispatch-errors").innerText.includes("inputs.colour")`)
	if got := b.eval(`String(document.querySelector("#dispatch-errors").innerText.split("inputs.target").length - 1)`); got != "1" {
		t.Errorf("one wrong input is said %s times: %q", got, b.eval(`document.querySelector("#dispatch-errors").innerText`))
	}
	b.do("dispatch main", chromedp.SetValue(chromedp.ID("dispatch-ref"), "main"),
		chromedp.SetValue(chromedp.ID("dispatch-inputs-text"), "target=staging"),
		chromedp.Click(chromedp.ID("dispatch-run")), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the project's run succeeded", `[...document.querySelectorAll(".node")].length === 1 &&
		document.querySelector(".node").dataset.status === "success"`)

	// The workflow: a form of its typed inputs.
	b.do("open the workflow's form", chromedp.Navigate(c.url+"/dispatch?workflow="+wf.ID.String()))
	b.waitJS("the workflow's inputs", `document.querySelector("#input-who") !== null`)
	if b.eval(`document.querySelector("#input-loud").type`) != "checkbox" || b.eval(`document.querySelector("#input-times").placeholder`) != "default: 1" {
		t.Errorf("the workflow's inputs are not typed controls: %s", b.eval(`document.querySelector("#dispatch-inputs").innerHTML`))
	}
	b.screenshot("dispatch-workflow")
	b.do("dispatch the workflow", chromedp.SetValue(chromedp.ID("input-who"), "world"), chromedp.Click(chromedp.ID("input-loud")),
		chromedp.Click(chromedp.ID("dispatch-run")), chromedp.WaitVisible(chromedp.CSS(`svg.dag`)))
	b.waitJS("the workflow's run succeeded", `document.querySelector(".node") && document.querySelector(".node").dataset.status === "success"`)
	runID := strings.TrimPrefix(b.eval(`location.pathname`), "/runs/")
	run, err := c.st.GetRun(ctx, uuid.MustParse(runID))
	if err != nil {
		t.Fatal(err)
	}
	if in := run.Trigger.Inputs; in == nil || (*in)["who"] != "world" || (*in)["loud"] != "true" || (*in)["times"] != "1" ||
		run.Trigger.WorkflowID != wf.ID.String() {
		t.Errorf("the workflow's run has trigger %+v (inputs %v)", run.Trigger, run.Trigger.Inputs)
	}
}
