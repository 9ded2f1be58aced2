package bench

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// Every scenario says what the whole machine was doing while it ran: wall times swing
// with what else runs on the machine's cores, so a wall figure is read with the load it
// was taken under (CPU per job much less so).
const (
	// machineBusyMetric is the machine's busy CPU over the scenario, in cores: the
	// scenario's own processes and everything else on the machine.
	machineBusyMetric = "machine CPU busy"
	// loadMetric is the machine's 1-minute load average at the scenario's end.
	loadMetric = "load average (1 min)"
)

// machineSample is the machine's CPU time so far, of all its CPUs, and its load average.
type machineSample struct {
	busy, total uint64 // clock ticks
	cpus        int
	load1       float64
}

// sampleMachine reads /proc/stat and /proc/loadavg; ok is false where they cannot be
// read (a system without /proc).
func sampleMachine() (s machineSample, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return s, false
	}
	defer f.Close()
	if s, err = parseProcStat(f); err != nil {
		return s, false
	}
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return s, false
	}
	if s.load1, err = parseLoadavg(string(raw)); err != nil {
		return s, false
	}
	return s, true
}

// parseProcStat reads the machine's busy and total CPU time from /proc/stat's `cpu`
// line, and counts its `cpuN` lines. Busy is user, nice, system, irq, softirq and
// steal (guest time is within user); idle and iowait are not busy.
func parseProcStat(r io.Reader) (machineSample, error) {
	var s machineSample
	found := false
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 || !strings.HasPrefix(fields[0], "cpu") {
			continue
		}
		if fields[0] != "cpu" {
			s.cpus++
			continue
		}
		if len(fields) < 9 {
			return s, fmt.Errorf("/proc/stat: %d fields in its cpu line, want 8 or more", len(fields)-1)
		}
		var ticks [8]uint64
		for i := range ticks {
			v, err := strconv.ParseUint(fields[i+1], 10, 64)
			if err != nil {
				return s, fmt.Errorf("/proc/stat: cpu line: %w", err)
			}
			ticks[i] = v
		}
		user, nice, system, idle, iowait, irq, softirq, steal := ticks[0], ticks[1], ticks[2], ticks[3], ticks[4], ticks[5], ticks[6], ticks[7]
		s.busy = user + nice + system + irq + softirq + steal
		s.total = s.busy + idle + iowait
		found = true
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("/proc/stat: %w", err)
	}
	if !found || s.cpus == 0 {
		return s, fmt.Errorf("/proc/stat: no cpu lines")
	}
	return s, nil
}

// parseLoadavg reads the 1-minute load average from /proc/loadavg.
func parseLoadavg(text string) (float64, error) {
	fields := strings.Fields(text)
	if len(fields) == 0 {
		return 0, fmt.Errorf("/proc/loadavg is empty")
	}
	v, err := strconv.ParseFloat(fields[0], 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/loadavg: %w", err)
	}
	return v, nil
}

// addMachine adds what the machine was doing between two samples: its busy CPU in cores
// (of all it has) and its load average at the end.
func (r *Result) addMachine(before, after machineSample) {
	if after.total <= before.total || after.busy < before.busy {
		return
	}
	busy := float64(after.busy-before.busy) / float64(after.total-before.total) * float64(after.cpus)
	r.add(machineBusyMetric, busy, fmt.Sprintf("of %d cores", after.cpus), nil)
	r.add(loadMetric, after.load1, "", nil)
	r.Notes = append(r.Notes, "machine CPU busy: the whole machine's CPU over the scenario, "+
		"in cores (/proc/stat: user, system, irq and steal time of every process, the scenario's own and any other's); "+
		"load average: the machine's 1-minute load average as the scenario ended (/proc/loadavg). "+
		"They say how busy the machine was, which moves wall times far more than CPU per job")
}
