package storetest

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/store"
)

var runNumberTests = []test{
	{"PerProjectInCreationOrder", testRunNumbersPerProject},
	{"ConcurrentCreationsUnique", testRunNumbersConcurrent},
	{"RefusedCreationTakesNone", testRunNumbersRefused},
	{"ClaimCarriesNumber", testRunNumbersClaim},
	{"LargeRunsNumbered", testRunNumbersLarge},
}

const numberYAML = `
name: numbered
jobs:
  a:
    steps:
      - run: echo a
`

// testRunNumbersPerProject: each project numbers its runs from 1 in creation order,
// failed runs included; reads and lookups by number carry the number; an idempotent
// replay keeps its run's number and takes none.
func testRunNumbersPerProject(t *testing.T, h Harness) {
	_, b := setup(t, h)
	web1, _ := b.createRun(numberYAML, store.CreateRunParams{Project: "web", IdempotencyKey: "k1"})
	api1, _ := b.createRun(numberYAML, store.CreateRunParams{Project: "api"})
	web2, created, err := b.s.CreateFailedRun(b.ctx, store.CreateFailedRunParams{Project: "web", Name: ".gantry.yml",
		Errors: []store.RunError{{Message: "yaml: bad"}}})
	if err != nil || !created {
		t.Fatalf("CreateFailedRun = %v, %v", created, err)
	}
	replay, _, created, err := b.s.CreateRun(b.ctx, store.CreateRunParams{Project: "web", IdempotencyKey: "k1", Plan: compile(t, numberYAML)})
	if err != nil || created {
		t.Fatalf("CreateRun replay = created %v, %v", created, err)
	}
	if replay.ID != web1.ID || replay.Number != 1 {
		t.Errorf("replay = run %s #%d, want %s #1", replay.ID, replay.Number, web1.ID)
	}
	web3, _ := b.createRun(numberYAML, store.CreateRunParams{Project: "web"})
	def, _ := b.create(numberYAML)
	for _, c := range []struct {
		what string
		run  *store.Run
		want int
	}{{"web's first", web1, 1}, {"api's first", api1, 1}, {"web's failed second", web2, 2}, {"web's third", web3, 3}, {"default's first", def, 1}} {
		if c.run.Number != c.want {
			t.Errorf("%s run: number %d returned, want %d", c.what, c.run.Number, c.want)
		}
		if got := b.getRun(c.run.ID); got.Number != c.want {
			t.Errorf("%s run: GetRun number %d, want %d", c.what, got.Number, c.want)
		}
		got, err := b.s.GetRunByNumber(b.ctx, c.run.Project, c.want)
		if err != nil {
			t.Errorf("GetRunByNumber(%s, %d): %v", c.run.Project, c.want, err)
		} else if got.ID != c.run.ID || got.Number != c.want || got.Project != c.run.Project {
			t.Errorf("GetRunByNumber(%s, %d) = %s (%s #%d), want %s", c.run.Project, c.want, got.ID, got.Project, got.Number, c.run.ID)
		}
	}
	runs, err := b.s.ListRuns(b.ctx, store.ListRunsParams{Project: "web"})
	if err != nil {
		t.Fatalf("ListRuns: %v", err)
	}
	var listed []int
	for _, r := range runs {
		listed = append(listed, r.Number)
	}
	if !slices.Equal(listed, []int{3, 2, 1}) {
		t.Errorf("ListRuns(web) numbers %v, want [3 2 1]", listed)
	}
	for _, c := range []struct {
		project string
		number  int
	}{{"web", 4}, {"web", 0}, {"api", 2}, {"nope", 1}} {
		_, err := b.s.GetRunByNumber(b.ctx, c.project, c.number)
		wantErr(t, fmt.Sprintf("GetRunByNumber(%s, %d)", c.project, c.number), err, store.ErrNotFound)
	}
}

// testRunNumbersConcurrent: runs created at once, in one project and in two, take each
// number once, with no gap.
func testRunNumbersConcurrent(t *testing.T, h Harness) {
	_, b := setup(t, h)
	plan := compile(t, numberYAML)
	const callers, each = 8, 4
	var (
		mu  sync.Mutex
		got = map[string][]int{}
		wg  sync.WaitGroup
	)
	start := make(chan struct{})
	for i := range callers {
		project := []string{"web", "api"}[i%2]
		wg.Go(func() {
			<-start
			for k := range each {
				var (
					run *store.Run
					err error
				)
				if k == 2 {
					run, _, err = b.s.CreateFailedRun(b.ctx, store.CreateFailedRunParams{Project: project, Name: "bad",
						Errors: []store.RunError{{Message: "bad"}}})
				} else {
					run, _, _, err = b.s.CreateRun(b.ctx, store.CreateRunParams{Project: project, Plan: plan})
				}
				if err != nil {
					t.Errorf("create a run of %s: %v", project, err)
					return
				}
				mu.Lock()
				got[project] = append(got[project], run.Number)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	want := make([]int, callers/2*each)
	for i := range want {
		want[i] = i + 1
	}
	for _, project := range []string{"web", "api"} {
		nums := slices.Sorted(slices.Values(got[project]))
		if !slices.Equal(nums, want) {
			t.Errorf("%s: concurrent creations took numbers %v, want each of 1..%d once", project, nums, len(want))
		}
		runs, err := b.s.ListRuns(b.ctx, store.ListRunsParams{Project: project, Limit: 500})
		if err != nil {
			t.Fatalf("ListRuns: %v", err)
		}
		var stored []int
		for _, r := range runs {
			stored = append(stored, r.Number)
		}
		if stored = slices.Sorted(slices.Values(stored)); !slices.Equal(stored, want) {
			t.Errorf("%s: stored numbers %v, want 1..%d", project, stored, len(want))
		}
	}
}

// testRunNumbersLarge: a run of more rows than one statement takes (its number is then
// taken by a statement of its own) is numbered as one that fits, in turn with them.
func testRunNumbersLarge(t *testing.T, h Harness) {
	_, b := setup(t, h)
	var large strings.Builder
	large.WriteString("name: large\njobs:\n")
	for i := range 150 {
		fmt.Fprintf(&large, "  j%d:\n    steps: [{run: 'true'}]\n", i)
	}
	var runs []*store.Run
	for _, yaml := range []string{large.String(), numberYAML, large.String(), numberYAML} {
		run, jobs := b.createRun(yaml, store.CreateRunParams{Project: "big"})
		if len(jobs) == 0 {
			t.Fatalf("run %s has no jobs", run.ID)
		}
		runs = append(runs, run)
	}
	for i, run := range runs {
		if run.Number != i+1 {
			t.Errorf("run %d of project big: number %d returned, want %d", i+1, run.Number, i+1)
		}
		if got := b.getRun(run.ID); got.Number != i+1 {
			t.Errorf("run %d of project big: GetRun number %d, want %d", i+1, got.Number, i+1)
		}
	}
	if jobs, err := b.s.ListJobs(b.ctx, runs[2].ID); err != nil || len(jobs) != 150 {
		t.Errorf("ListJobs of the second large run: %d jobs, %v; want 150", len(jobs), err)
	}
}

// testRunNumbersRefused: a creation the store refuses (a schedule tick already taken)
// gives its number back.
func testRunNumbersRefused(t *testing.T, h Harness) {
	_, b := setup(t, h)
	tick := &store.ScheduleTick{Key: "file:.gantry.yml 0 * * * * UTC", At: epoch.Add(time.Hour)}
	first, _ := b.createRun(numberYAML, store.CreateRunParams{Project: "web", Tick: tick})
	_, _, _, err := b.s.CreateRun(b.ctx, store.CreateRunParams{Project: "web", Tick: tick, Plan: compile(t, numberYAML)})
	wantErr(t, "CreateRun of a tick taken", err, store.ErrConflict)
	next, _ := b.createRun(numberYAML, store.CreateRunParams{Project: "web"})
	if first.Number != 1 || next.Number != 2 {
		t.Errorf("numbers %d then %d around a refused creation, want 1 then 2", first.Number, next.Number)
	}
}

// testRunNumbersClaim: the run a claim hands the worker carries its number.
func testRunNumbersClaim(t *testing.T, h Harness) {
	_, b := setup(t, h)
	b.createRun(numberYAML, store.CreateRunParams{Project: "web"})
	b.createRun(numberYAML, store.CreateRunParams{Project: "web"})
	var nums []int
	for _, c := range b.claimAll() {
		nums = append(nums, c.Run.Number)
	}
	if slices.Sort(nums); !slices.Equal(nums, []int{1, 2}) {
		t.Errorf("claimed runs' numbers %v, want [1 2]", nums)
	}
}
