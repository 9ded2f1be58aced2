package pipeline

import (
	"time"
)

// Plan is a pipeline after validation, matrix expansion and DAG construction: the exact set
// of jobs a run will contain. It is plain data, safe to marshal to JSON and store.
type Plan struct {
	Name string `json:"name"`
	// On is the compiled on: (nil without one: the pipeline runs on every push). Running
	// a plan ignores it; internal/trigger decides with it whether an event starts a run.
	On     *Triggers `json:"on,omitempty"`
	Stages []string  `json:"stages,omitempty"`
	// Jobs in topological order: by wave, then by their order in the document.
	Jobs []*Job `json:"jobs"`
	// Waves groups job keys by depth in the DAG: wave 0 needs nothing, wave n needs at least
	// one job of wave n-1 and none of a later wave.
	Waves [][]string `json:"waves"`
	// Warnings are what a valid definition leaves to be checked later: the settings of a
	// reusable workflow checked on its own that are decided when a workflow calls it
	// (Options.CheckReusable, WarnDecidedWhenCalled).
	Warnings []*Error `json:"warnings,omitempty"`
}

// Title is what the job is shown as: its display name, else its key.
func (j *Job) Title() string {
	if j.DisplayName != "" {
		return j.DisplayName
	}
	return j.Key
}

// Job lookup by key; nil when absent.
func (p *Plan) Job(key string) *Job {
	for _, j := range p.Jobs {
		if j.Key == key {
			return j
		}
	}
	return nil
}

// Job is one schedulable unit: a job of the definition, or one instance of a matrix job.
type Job struct {
	// Key is unique within the plan: the job name, or for a matrix instance the name
	// followed by its values, as in "test (go=1.26, shard=2)".
	Key string `json:"key"`
	// Name is the job's name in the definition (the same for every matrix instance).
	Name string `json:"name"`
	// DisplayName is the job's name: with its matrix values put in, what logs, the
	// command line and the dashboard show; "" when the definition gives none (show Key).
	// Instances whose names come out alike are told apart by their matrix values, so no
	// two jobs of a plan show the same name.
	DisplayName string `json:"display_name,omitempty"`
	// NameTemplate is the job's name: when it reads what its needs left
	// (${{ needs.JOB.outputs.NAME }}, or a GitHub expression reading needs): known only
	// when the job is claimed, which evaluates it (ClaimedName). DisplayName shows it as
	// written until then. "" for every other name.
	NameTemplate string `json:"name_template,omitempty"`
	// FailFast cancels the other instances of a matrix job when one of them fails.
	FailFast bool          `json:"fail_fast,omitempty"`
	Matrix   []MatrixValue `json:"matrix,omitempty"`
	Stage    string        `json:"stage,omitempty"`
	Wave     int           `json:"wave"`
	// Needs holds the keys of the jobs this one waits for, with matrix jobs fanned in.
	Needs []string `json:"needs,omitempty"`
	// NeedsNames holds the definition names this job waits for (explicit or from stages);
	// these are the names an if: expression may read as needs.<name>.result.
	NeedsNames []string `json:"needs_names,omitempty"`
	// NoInputs is true for a job with needs none of which keeps artifacts: a worker has
	// nothing to fetch and need not ask. (False, as in plans made before it existed,
	// means ask.)
	NoInputs  bool       `json:"no_inputs,omitempty"`
	If        *Condition `json:"if,omitempty"`
	RunsOn    []string   `json:"runs_on,omitempty"`
	Resources Resources  `json:"resources"`
	Priority  Priority   `json:"priority"`
	Timeout   Duration   `json:"timeout"`
	// CancelGrace is the time between SIGTERM and SIGKILL on cancel or timeout; zero
	// when the definition leaves it to the coordinator's default.
	CancelGrace Duration     `json:"cancel_grace,omitempty"`
	Retry       RetryPolicy  `json:"retry"`
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	// Environment is where the job deploys; nil when it names none. The project's
	// environment of that name decides whether the job may run and who must approve it.
	Environment *Environment `json:"environment,omitempty"`
	Artifacts   *Artifacts   `json:"artifacts,omitempty"`
	// Reports are the test reports the worker reads after the steps; nil when none.
	Reports *Reports `json:"reports,omitempty"`
	// Caches are restored before the first step and saved after the steps.
	Caches          []Cache `json:"cache,omitempty"`
	ContinueOnError bool    `json:"continue_on_error,omitempty"`
	Network         bool    `json:"network,omitempty"`
	// Checkout tunes how the run's commit is put into the workspace before the first
	// step; nil is the default (all of it, at the workspace's root), so plans that say
	// nothing about it stay as they were.
	Checkout *Checkout `json:"checkout,omitempty"`
	// Image is the container image the job's steps run in (NAME[:TAG|@sha256:DIGEST]);
	// "" runs them on the worker's host. A job with an image runs only on a worker with
	// the docker executor: its RunsOn holds DockerLabel.
	Image string `json:"image,omitempty"`
	// Container tunes the job's container; nil is the defaults (the image's user,
	// unprivileged, pulled when not present). Set only with Image.
	Container *Container `json:"container,omitempty"`
	// Services start beside the job's container, reachable from it by their names; for
	// a job without an image, on the worker's Docker Engine with their ports published
	// on its loopback. A job with services runs only on a worker with DockerLabel.
	Services []Service         `json:"services,omitempty"`
	Env      map[string]string `json:"env,omitempty"`
	Steps    []Step            `json:"steps"`
	// Outputs are the job's declared outputs, name to value; the values may hold
	// ${{ steps.ID.outputs.NAME }}, which the worker puts in when the steps are done. Nil
	// when the job declares none: then every output its steps write is the job's.
	Outputs map[string]string `json:"outputs,omitempty"`
	// ReadsNeeds says the job reads what its needs left: needs.JOB.outputs.NAME in its
	// env, steps or outputs, or needs in a step's if:. The coordinator then puts them in
	// when the job is claimed (see WithNeeds).
	ReadsNeeds bool `json:"reads_needs,omitempty"`
	// DynamicMatrix is set on the placeholder of a job whose matrix is computed from its
	// needs' outputs: a job of no steps that never runs, replaced by its instances once
	// its needs are done (see ExpandMatrix).
	DynamicMatrix *DynamicMatrix `json:"dynamic_matrix,omitempty"`

	// InputTypes are the declared types of the boolean and number dispatch inputs If
	// reads, so that the condition sees them typed when the store decides the job.
	InputTypes map[string]InputType `json:"input_types,omitempty"`
}

// Checkout is a job's checkout: setting, after defaults.
type Checkout struct {
	// Skip is checkout: false: the workspace starts without the repository.
	Skip bool `json:"skip,omitempty"`
	// Depth > 0 checks out a shallow repository with that many commits of history.
	Depth      int  `json:"depth,omitempty"`
	Submodules bool `json:"submodules,omitempty"`
	LFS        bool `json:"lfs,omitempty"`
	// Path is the directory of the workspace the repository goes into: relative, inside
	// it, cleaned; "" is the workspace's root.
	Path string `json:"path,omitempty"`
}

// MatrixValue is one axis value of a matrix instance, in the order the axes were declared.
type MatrixValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Step is one command of a job. Steps of a job run in order in one workspace.
type Step struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	// ID names the step for steps.ID in later steps' if: and ${{ }}; "" when none.
	ID string `json:"id,omitempty"`
	// If decides, when the step's turn comes, whether it runs; nil runs it only when
	// every step before it succeeded.
	If  *Condition `json:"if,omitempty"`
	Run string     `json:"run"`
	// Shell is bash, sh or python3.
	Shell           string            `json:"shell"`
	Env             map[string]string `json:"env,omitempty"`
	Once            bool              `json:"once,omitempty"`
	ContinueOnError bool              `json:"continue_on_error,omitempty"`
	Timeout         Duration          `json:"timeout,omitempty"`
	// Uses names the action the step runs instead of Run: owner/repo[/dir]@ref, a
	// directory of the workspace (./dir), or docker://image. "" for a run step.
	Uses string `json:"uses,omitempty"`
	// With are the action's inputs as the step gives them, with the same references as
	// Env (secrets, steps) still to be put in by the worker.
	With map[string]string `json:"with,omitempty"`
	// Actions pins every action the step may run, its own and those its composite
	// actions use, by their uses text: set when a run is created (see the actions
	// package), so that every attempt of the job runs the same code.
	Actions map[string]ActionPin `json:"actions,omitempty"`
}

// ActionPin is where an action's code comes from and the commit a run uses.
type ActionPin struct {
	// URL is the git repository the action was resolved from.
	URL string `json:"url"`
	// Commit is the full commit id the action's ref named when the run was created.
	Commit string `json:"commit"`
}

// Resources a job needs free on a worker. Zero means no requirement.
type Resources struct {
	MilliCPU    int64 `json:"milli_cpu,omitempty"`
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
}

// Concurrency puts a job in a named group of which at most one job runs at a time.
type Concurrency struct {
	Group string `json:"group"`
	// CancelInProgress cancels the job holding the group when another one becomes ready,
	// instead of queueing behind it.
	CancelInProgress bool `json:"cancel_in_progress,omitempty"`
}

// Environment is a job's deployment target.
type Environment struct {
	Name string `json:"name"`
	// URL is where the deployment can be seen, for people; "" when none was given or
	// when it is known only when the job ends (URLTemplate).
	URL string `json:"url,omitempty"`
	// URLTemplate is a url that reads what the job's steps leave
	// (${{ steps.ID.outputs.NAME }}, or a GitHub expression kept for the worker): the
	// worker evaluates it when the job's steps are done, as it does the job's outputs,
	// and reports the URL with the job's end. "" when the url is known before.
	URLTemplate string `json:"url_template,omitempty"`
}

// Artifacts lists the files a job keeps after its steps.
type Artifacts struct {
	Name     string   `json:"name,omitempty"`
	Paths    []string `json:"paths"`
	ExpireIn Duration `json:"expire_in,omitempty"`
	// When says after which outcome of the steps they are kept: ArtifactsOnSuccess
	// ("" too), ArtifactsOnFailure or ArtifactsAlways.
	When string `json:"when,omitempty"`
}

// Reports are a job's test report files by format: paths or globs in its workspace, as
// artifacts' paths are.
type Reports struct {
	JUnit      []string `json:"junit,omitempty"`
	GoTestJSON []string `json:"go-test-json,omitempty"`
	TAP        []string `json:"tap,omitempty"`
}

// Formats of test reports, as a job's reports: key names them.
const (
	ReportJUnit      = "junit"
	ReportGoTestJSON = "go-test-json"
	ReportTAP        = "tap"
)

// ByFormat gives the paths of each format that has any, in the order junit,
// go-test-json, tap.
func (r *Reports) ByFormat() []ReportPaths {
	if r == nil {
		return nil
	}
	var out []ReportPaths
	for _, f := range []ReportPaths{{ReportJUnit, r.JUnit}, {ReportGoTestJSON, r.GoTestJSON}, {ReportTAP, r.TAP}} {
		if len(f.Paths) > 0 {
			out = append(out, f)
		}
	}
	return out
}

// ReportPaths are the paths of a job's reports of one format.
type ReportPaths struct {
	Format string
	Paths  []string
}

// Values of Artifacts.When.
const (
	ArtifactsOnSuccess = "on_success"
	ArtifactsOnFailure = "on_failure"
	ArtifactsAlways    = "always"
)

// KeptAfter says whether the artifacts are kept after steps that ended so: success or
// failed (a cancelled or timed-out job keeps none: its files may be half written).
func (a *Artifacts) KeptAfter(status string) bool {
	if a == nil {
		return false
	}
	switch status {
	case "success":
		return a.When != ArtifactsOnFailure
	case "failed":
		return a.When == ArtifactsOnFailure || a.When == ArtifactsAlways
	}
	return false
}

// FailureKind says why a job attempt did not succeed.
type FailureKind string

// The failure kinds a retry policy can react to.
const (
	FailureExit    FailureKind = "failure" // a step exited non-zero
	FailureLost    FailureKind = "lost"    // the worker stopped renewing its lease
	FailureTimeout FailureKind = "timeout" // the job ran past its timeout
	// FailureFlaky is a failure whose only failing tests (in its one failed step) are
	// known flaky: a kind of FailureExit, which a policy that retries failures retries
	// too, while on: [flaky] retries it alone.
	FailureFlaky FailureKind = "flaky"
)

// RetryPolicy says how often and when a failed attempt is tried again.
type RetryPolicy struct {
	// MaxAttempts counts every attempt, the first included; 1 means no retry.
	MaxAttempts int           `json:"max_attempts"`
	Backoff     Duration      `json:"backoff"`
	MaxBackoff  Duration      `json:"max_backoff"`
	On          []FailureKind `json:"on"`
}

// Retries reports whether the policy retries a failure of this kind. A flaky failure is
// a failure too.
func (r RetryPolicy) Retries(kind FailureKind) bool {
	for _, k := range r.On {
		if k == kind || kind == FailureFlaky && k == FailureExit {
			return true
		}
	}
	return false
}

// Delay is the wait before the given attempt (2 for the first retry): exponential from
// Backoff, capped at MaxBackoff.
func (r RetryPolicy) Delay(attempt int) time.Duration {
	d := time.Duration(r.Backoff)
	for i := 2; i < attempt && d < time.Duration(r.MaxBackoff); i++ {
		d *= 2
	}
	if r.MaxBackoff > 0 && d > time.Duration(r.MaxBackoff) {
		d = time.Duration(r.MaxBackoff)
	}
	return d
}

// Priority is a dispatch lane; higher lanes are always served first.
type Priority string

// The priority lanes, highest first.
const (
	PriorityCritical Priority = "critical"
	PriorityHigh     Priority = "high"
	PriorityNormal   Priority = "normal"
	PriorityLow      Priority = "low"
)

// Rank orders lanes: 0 for critical up to 3 for low.
func (p Priority) Rank() int {
	switch p {
	case PriorityCritical:
		return 0
	case PriorityHigh:
		return 1
	case PriorityLow:
		return 3
	default:
		return 2
	}
}
