package bench

import (
	"strings"
	"testing"
	"time"
)

func TestParseProcStat(t *testing.T) {
	t.Parallel()
	// user nice system idle iowait irq softirq steal guest guest_nice
	stat := "cpu  100 5 40 800 20 3 2 10 7 0\ncpu0 50 2 20 400 10 1 1 5 3 0\ncpu1 50 3 20 400 10 2 1 5 4 0\nintr 12345 0 1\nctxt 999\n"
	s, err := parseProcStat(strings.NewReader(stat))
	if err != nil {
		t.Fatal(err)
	}
	// Busy: user, nice, system, irq, softirq, steal (guest is within user); idle and
	// iowait are not.
	if s.busy != 160 || s.total != 980 || s.cpus != 2 {
		t.Errorf("busy %d, total %d, cpus %d; want 160, 980, 2", s.busy, s.total, s.cpus)
	}
	for name, bad := range map[string]string{
		"no cpu line":       "intr 1 2\n",
		"short cpu line":    "cpu  1 2 3\ncpu0 1 2 3\n",
		"not a number":      "cpu  1 2 x 4 5 6 7 8\ncpu0 1 2 3 4 5 6 7 8\n",
		"no cpu of its own": "cpu  1 2 3 4 5 6 7 8\n",
	} {
		if _, err := parseProcStat(strings.NewReader(bad)); err == nil {
			t.Errorf("%s: parsed %q", name, bad)
		}
	}
}

func TestParseLoadavg(t *testing.T) {
	t.Parallel()
	v, err := parseLoadavg("1.93 2.40 2.10 3/412 12345\n")
	if err != nil || v != 1.93 {
		t.Errorf("got %v, %v; want 1.93", v, err)
	}
	for _, bad := range []string{"", "high 1 1 1/1 1"} {
		if _, err := parseLoadavg(bad); err == nil {
			t.Errorf("parsed %q", bad)
		}
	}
}

// The machine's busy CPU over a scenario is its busy share of the time between the two
// samples, in cores; the load average is the later sample's.
func TestAddMachine(t *testing.T) {
	t.Parallel()
	r := &Result{}
	r.addMachine(machineSample{busy: 1000, total: 4000, cpus: 2, load1: 0.5}, machineSample{busy: 1150, total: 4200, cpus: 2, load1: 1.75})
	if v, ok := r.Metric(machineBusyMetric); !ok || v != 1.5 {
		t.Errorf("%s = %v (present %v), want 1.5 cores", machineBusyMetric, v, ok)
	}
	if v, ok := r.Metric(loadMetric); !ok || v != 1.75 {
		t.Errorf("%s = %v (present %v), want 1.75", loadMetric, v, ok)
	}
	if r.Metrics[0].Unit != "of 2 cores" {
		t.Errorf("unit %q", r.Metrics[0].Unit)
	}
	// Samples that went backwards (a counter reset) say nothing.
	empty := &Result{}
	empty.addMachine(machineSample{busy: 10, total: 40, cpus: 2}, machineSample{busy: 5, total: 50, cpus: 2})
	if len(empty.Metrics) != 0 {
		t.Errorf("metrics from samples that went backwards: %+v", empty.Metrics)
	}
}

// On this machine's /proc, CPU this process burns between two samples shows as busy.
func TestSampleMachine(t *testing.T) {
	t.Parallel()
	before, ok := sampleMachine()
	if !ok {
		t.Fatal("/proc/stat or /proc/loadavg could not be read")
	}
	began := selfCPU()
	x := 0
	for selfCPU()-began < 50*time.Millisecond {
		for i := range 100000 {
			x += i
		}
	}
	_ = x
	after, ok := sampleMachine()
	if !ok {
		t.Fatal("/proc/stat or /proc/loadavg could not be read")
	}
	// 50 ms is at least 5 ticks of 10 ms; allow for ticks that fell on either side.
	if after.busy-before.busy < 3 || after.total <= before.total || after.cpus < 1 || after.load1 < 0 {
		t.Errorf("before %+v, after %+v: the CPU burnt between them does not show", before, after)
	}
}
