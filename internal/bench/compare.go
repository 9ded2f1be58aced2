package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
)

// Change is one metric of a run set beside the same metric of an earlier run.
type Change struct {
	Scenario, Store, Metric, Unit string
	// Old and New are the values; HasOld or HasNew is false when only one run has it.
	Old, New       float64
	HasOld, HasNew bool
}

// Ratio is New/Old; ok is false when either run lacks the metric or Old is zero.
func (c Change) Ratio() (ratio float64, ok bool) {
	if !c.HasOld || !c.HasNew || c.Old == 0 {
		return 0, false
	}
	return c.New / c.Old, true
}

// Better says whether the change is an improvement, judged by the unit: a rate
// (jobs/s, lines/s) is better higher, a time, a size or a share of a CPU better lower.
// ok is false when the unit says neither or nothing changed.
func (c Change) Better() (better, ok bool) {
	r, ok := c.Ratio()
	if !ok || r == 1 {
		return false, false
	}
	switch {
	case strings.HasSuffix(c.Unit, "/s"):
		return r > 1, true
	case c.Unit == "ms" || c.Unit == "s" || c.Unit == "MiB" || strings.HasPrefix(c.Unit, "%"):
		return r < 1, true
	}
	return false, false
}

// ReadReport reads a report written by `gantry bench --json`.
func ReadReport(path string) (*Report, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var rep Report
	if err := json.Unmarshal(raw, &rep); err != nil {
		return nil, fmt.Errorf("%s: not a gantry bench JSON report: %w", path, err)
	}
	return &rep, nil
}

// Compare pairs every metric of cur with the same scenario, store and metric of old, in
// cur's order, followed by the metrics only old has.
func Compare(old, cur *Report) []Change {
	type key struct{ scenario, store, metric string }
	olds := map[key]Metric{}
	var oldOrder []key
	for _, r := range old.Results {
		for _, m := range r.Metrics {
			k := key{r.Scenario, r.Store, m.Name}
			if _, dup := olds[k]; !dup {
				oldOrder = append(oldOrder, k)
			}
			olds[k] = m
		}
	}
	seen := map[key]bool{}
	var out []Change
	for _, r := range cur.Results {
		for _, m := range r.Metrics {
			k := key{r.Scenario, r.Store, m.Name}
			seen[k] = true
			c := Change{Scenario: r.Scenario, Store: r.Store, Metric: m.Name, Unit: m.Unit, New: m.Value, HasNew: true}
			if om, ok := olds[k]; ok {
				c.Old, c.HasOld = om.Value, true
			}
			out = append(out, c)
		}
	}
	for _, k := range oldOrder {
		if !seen[k] {
			om := olds[k]
			out = append(out, Change{Scenario: k.scenario, Store: k.store, Metric: k.metric, Unit: om.Unit, Old: om.Value, HasOld: true})
		}
	}
	return out
}

// WriteComparison prints changes as an aligned table: scenario, store, metric, the old
// and new values, and new/old with whether that is better or worse.
func WriteComparison(w io.Writer, old, cur *Report, changes []Change) error {
	fmt.Fprintf(w, "against %s (commit %s) -> %s (commit %s):\n",
		old.Date.UTC().Format("2006-01-02 15:04 MST"), old.Commit, cur.Date.UTC().Format("2006-01-02 15:04 MST"), cur.Commit)
	return writeChanges(w, "old", "new", "new/old", "", changes)
}

// writeChanges prints changes as an aligned table under the headings given for the old
// and new values and their ratio, the verdicts better and worse prefixed with who.
func writeChanges(w io.Writer, oldHead, newHead, ratioHead, who string, changes []Change) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "scenario\tstore\tmetric\t%s\t%s\t%s\t\n", oldHead, newHead, ratioHead)
	for _, c := range changes {
		oldText, newText := "-", "-"
		if c.HasOld {
			oldText = formatValue(c.Old) + " " + c.Unit
		}
		if c.HasNew {
			newText = formatValue(c.New) + " " + c.Unit
		}
		ratio := ""
		switch r, ok := c.Ratio(); {
		case ok:
			ratio = formatRatio(r)
			if better, ok := c.Better(); ok && better {
				ratio += " " + who + "better"
			} else if ok {
				ratio += " " + who + "worse"
			}
		case !c.HasOld:
			ratio = "new metric"
		case !c.HasNew:
			ratio = "not measured"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t\n", c.Scenario, c.Store, c.Metric, oldText, newText, ratio)
	}
	return tw.Flush()
}

func formatRatio(r float64) string {
	switch {
	case math.IsInf(r, 0) || math.IsNaN(r):
		return fmt.Sprint(r)
	case r >= 100:
		return fmt.Sprintf("%.0fx", r)
	case r >= 10:
		return fmt.Sprintf("%.1fx", r)
	default:
		return fmt.Sprintf("%.2fx", r)
	}
}
