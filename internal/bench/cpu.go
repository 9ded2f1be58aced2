package bench

import (
	"fmt"
	"syscall"
	"time"
)

// cpuUse is the CPU a scenario run on a coordinator spent, and what it is divided by.
// The coordinator and the `gantry worker` processes are read from wait4's rusage once
// they are stopped: each over its whole life, start-up and shutdown included, with the
// processes it reaped (a worker's steps, a coordinator's git). Simulated workers are
// goroutines of the bench process, which no rusage tells apart from its other
// goroutines: where they stand in for the workers, the bench process's own CPU over the
// scenario (getrusage RUSAGE_SELF), its setup left out, counts as theirs.
type cpuUse struct {
	// count is how many units of work the scenario put through (jobs, unless unit says
	// otherwise); 0 leaves the scenario without CPU metrics.
	count float64
	unit  string
	// counted says what count counts, for the note.
	counted string
	// workers says whose CPU the worker figure is.
	workers workerKind
	// setup is the bench process's CPU on setup the workers have no part in: writing a
	// report file, a store's history by SQL.
	setup time.Duration
	// workerCPU is the CPU of the `gantry worker` processes, when the scenario ran some.
	workerCPU time.Duration
}

// workerKind says who did the workers' part of a scenario.
type workerKind int

const (
	// simulatedWorkers: goroutines of the bench process (the default).
	simulatedWorkers workerKind = iota
	// realWorkers: `gantry worker` processes; the bench process only submits and reads.
	realWorkers
	// noWorkers: nothing takes the jobs, or the bench process is a reader, not a worker.
	noWorkers
)

// countJobs sets how many jobs the scenario put through, the divisor of its CPU per job;
// counted says which jobs they are.
func (r *Result) countJobs(n int, counted string) {
	r.cpu.count, r.cpu.unit, r.cpu.counted = float64(n), "job", counted
}

// countUnits sets the divisor of a scenario whose work is not counted in jobs: CPU per
// unit, counted saying what it divides by.
func (r *Result) countUnits(n float64, unit, counted string) {
	r.cpu.count, r.cpu.unit, r.cpu.counted = n, unit, counted
}

// setup runs fn, whose CPU in the bench process is the scenario's setup, not its
// workers': it is taken out of the bench process's figure. Only for setup that runs
// while no simulated worker does, since their CPU in the same span would go with it.
func (r *Result) setup(fn func() error) error {
	began := selfCPU()
	err := fn()
	r.cpu.setup += selfCPU() - began
	return err
}

// selfCPU is the bench process's user and system CPU so far, of all its threads.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// addCPU adds the CPU per job metrics: of the coordinator and the workers together, and
// of each, from the coordinator's CPU and the bench process's over the scenario.
func (r *Result) addCPU(coordinator, bench time.Duration) {
	u := r.cpu
	if u.count <= 0 {
		return
	}
	per := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / u.count }
	what := "per " + u.unit
	var workers time.Duration
	var whose string
	switch u.workers {
	case simulatedWorkers:
		workers = max(0, bench-u.setup)
		whose = "the bench process's over the scenario (getrusage RUSAGE_SELF; the simulated workers are its goroutines, " +
			"so this holds its submitters and readers too, and leaves its setup out)"
	case realWorkers:
		workers = u.workerCPU
		whose = "the `gantry worker` processes', each over its life with the steps it ran (wait4's rusage); " +
			"the bench process, which here only submits and reads, is not counted"
	case noWorkers:
		whose = "none: no worker takes part, and the bench process, a client here, is not counted"
	}
	r.add("CPU "+what, per(coordinator+workers), "ms", nil)
	r.add("coordinator CPU "+what, per(coordinator), "ms", nil)
	if u.workers != noWorkers {
		r.add("worker CPU "+what, per(workers), "ms", nil)
	}
	r.Notes = append(r.Notes, fmt.Sprintf("CPU %s: user and system CPU of the coordinator and the workers, divided by %s; "+
		"the coordinator's is the `gantry server` process's over its whole life, start-up and shutdown included, with "+
		"the processes it reaped (wait4's rusage); the workers' is %s", what, u.counted, whose))
}

// addServerCPU adds the PostgreSQL server's CPU per job (pgcpu.go), apart from the
// coordinator's and the workers': "CPU per job" stays theirs, as before it was read.
func (r *Result) addServerCPU(server time.Duration) {
	u := r.cpu
	if u.count <= 0 {
		return
	}
	r.add("PostgreSQL CPU per "+u.unit, float64(server.Microseconds())/1000/u.count, "ms", nil)
	r.Notes = append(r.Notes, fmt.Sprintf("PostgreSQL CPU per %s: user and system CPU of the PostgreSQL server's "+
		"processes on this machine (its postmaster, with every child alive or reaped: the coordinator's backends, "+
		"the checkpointer, the WAL writer, autovacuum), from the scenario's database's creation to the coordinator's "+
		"stop, divided by %s; not in CPU per %s", u.unit, u.counted, u.unit))
}
