package api

import (
	"fmt"
	"testing"
)

// countingWorkflows serves one called workflow of another repository and counts reads.
type countingWorkflows struct {
	body  string
	reads int
}

func (c *countingWorkflows) LocalWorkflow(file string) ([]byte, error) {
	return nil, fmt.Errorf("no repository to read %s from", file)
}

func (c *countingWorkflows) RemoteWorkflow(owner, repo, file, ref string) ([]byte, string, error) {
	c.reads++
	return []byte(c.body), "0123456789abcdef0123456789abcdef01234567", nil
}

func TestCompileSubmittedReusesPlansOfTheSameDefinition(t *testing.T) {
	t.Parallel()
	s := &Server{}
	def := []byte("jobs:\n  a: {steps: [{run: 'true'}]}\n")
	first, err := s.compileSubmitted(def, nil)
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.compileSubmitted(append([]byte(nil), def...), nil)
	if err != nil {
		t.Fatal(err)
	}
	if again != first {
		t.Error("the same definition was compiled again")
	}
	other, err := s.compileSubmitted([]byte("jobs:\n  b: {steps: [{run: 'true'}]}\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if other == first || other.Jobs[0].Key != "b" {
		t.Errorf("another definition got the first one's plan: jobs %v", other.Jobs[0].Key)
	}
	// A definition with errors is compiled, and refused, every time.
	for range 2 {
		if _, err := s.compileSubmitted([]byte("jobs:\n  a: {needs: [nope], steps: [{run: 'true'}]}\n"), nil); err == nil {
			t.Fatal("a definition needing an unknown job was accepted")
		}
	}
}

func TestCompileSubmittedReadsCalledWorkflowsEveryTime(t *testing.T) {
	t.Parallel()
	s := &Server{}
	wf := &countingWorkflows{body: "on: workflow_call\njobs:\n  inner: {runs-on: x, steps: [{run: a}]}\n"}
	def := []byte("on: push\njobs:\n  call:\n    uses: acme/shared/.github/workflows/w.yml@main\n")
	for i := range 2 {
		plan, err := s.compileSubmitted(def, wf)
		if err != nil {
			t.Fatal(err)
		}
		if len(plan.Jobs) == 0 {
			t.Fatal("the called workflow's jobs are not in the plan")
		}
		if wf.reads != i+1 {
			t.Fatalf("compile %d: the called workflow was read %d times, want %d", i+1, wf.reads, i+1)
		}
	}
}
