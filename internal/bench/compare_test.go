package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCompare(t *testing.T) {
	t.Parallel()
	result := func(scenario, store string, metrics ...Metric) *Result {
		return &Result{Scenario: scenario, Store: store, Metrics: metrics}
	}
	old := &Report{Date: time.Date(2026, 11, 20, 10, 0, 0, 0, time.UTC), Commit: "old1234", Results: []*Result{
		result("throughput-64", SQLite, Metric{Name: "jobs/s", Value: 2000, Unit: "jobs/s"}, Metric{Name: "dispatch p99", Value: 40, Unit: "ms"}),
		result("throughput-64", Postgres, Metric{Name: "jobs/s", Value: 1000, Unit: "jobs/s"}),
		result("gone", SQLite, Metric{Name: "x", Value: 1, Unit: "ms"}),
	}}
	cur := &Report{Date: time.Date(2026, 11, 21, 10, 0, 0, 0, time.UTC), Commit: "new5678", Results: []*Result{
		result("throughput-64", SQLite, Metric{Name: "jobs/s", Value: 3000, Unit: "jobs/s"}, Metric{Name: "dispatch p99", Value: 50, Unit: "ms"}),
		result("throughput-64", Postgres, Metric{Name: "jobs/s", Value: 500, Unit: "jobs/s"}, Metric{Name: "coordinator RSS", Value: 60, Unit: "MiB"}),
	}}
	changes := Compare(old, cur)
	type row struct {
		scenario, store, metric string
		ratio                   float64
		hasRatio                bool
		better, judged          bool
	}
	want := []row{
		{"throughput-64", SQLite, "jobs/s", 1.5, true, true, true},
		{"throughput-64", SQLite, "dispatch p99", 1.25, true, false, true},
		{"throughput-64", Postgres, "jobs/s", 0.5, true, false, true},
		{"throughput-64", Postgres, "coordinator RSS", 0, false, false, false},
		{"gone", SQLite, "x", 0, false, false, false},
	}
	if len(changes) != len(want) {
		t.Fatalf("Compare gave %d changes, want %d: %+v", len(changes), len(want), changes)
	}
	for i, w := range want {
		c := changes[i]
		if c.Scenario != w.scenario || c.Store != w.store || c.Metric != w.metric {
			t.Errorf("change %d is %s/%s/%s, want %s/%s/%s", i, c.Scenario, c.Store, c.Metric, w.scenario, w.store, w.metric)
		}
		r, ok := c.Ratio()
		if ok != w.hasRatio || (ok && r != w.ratio) {
			t.Errorf("%s/%s/%s: ratio %g, %v; want %g, %v", c.Scenario, c.Store, c.Metric, r, ok, w.ratio, w.hasRatio)
		}
		b, judged := c.Better()
		if b != w.better || judged != w.judged {
			t.Errorf("%s/%s/%s: better %v, %v; want %v, %v", c.Scenario, c.Store, c.Metric, b, judged, w.better, w.judged)
		}
	}

	var out bytes.Buffer
	if err := WriteComparison(&out, old, cur, changes); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, line := range []string{
		"commit old1234",
		"throughput-64  sqlite    jobs/s           2,000 jobs/s  3,000 jobs/s  1.50x better",
		"throughput-64  sqlite    dispatch p99     40 ms         50 ms         1.25x worse",
		"throughput-64  postgres  jobs/s           1,000 jobs/s  500 jobs/s    0.50x worse",
		"throughput-64  postgres  coordinator RSS  -             60 MiB        new metric",
		"gone           sqlite    x                1 ms          -             not measured",
	} {
		if !strings.Contains(text, line) {
			t.Errorf("comparison lacks %q:\n%s", line, text)
		}
	}
}

func TestReadReport(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "bench.json")
	f, err := os.Create(good)
	if err != nil {
		t.Fatal(err)
	}
	rep := &Report{Commit: "abc", Results: []*Result{{Scenario: "s", Store: SQLite, Metrics: []Metric{{Name: "m", Value: 2, Unit: "ms"}}}}}
	if err := WriteJSON(f, rep); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := ReadReport(good)
	if err != nil || got.Commit != "abc" || len(got.Results) != 1 || got.Results[0].Metrics[0].Value != 2 {
		t.Fatalf("ReadReport = %+v, %v", got, err)
	}
	bad := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(bad, []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadReport(bad); err == nil || !strings.Contains(err.Error(), "not a gantry bench JSON report") {
		t.Errorf("ReadReport(not json) = %v, want an error saying so", err)
	}
	if _, err := ReadReport(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("ReadReport(missing file) gave no error")
	}
}
