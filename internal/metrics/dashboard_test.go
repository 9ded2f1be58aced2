package metrics_test

import (
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestGrafanaDashboard: docs/grafana-dashboard.json loads as a dashboard whose panels are
// the ones docs/scaling.md names, and whose queries use only metrics that
// docs/observability.md lists.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile("../../docs/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		UID    string `json:"uid"`
		Panels []struct {
			ID      int    `json:"id"`
			Type    string `json:"type"`
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("the dashboard is not valid JSON: %v", err)
	}
	if dash.Title == "" || dash.UID == "" || len(dash.Panels) == 0 {
		t.Fatalf("dashboard %q (uid %q) with %d panels", dash.Title, dash.UID, len(dash.Panels))
	}
	scaling, err := os.ReadFile("../../docs/scaling.md")
	if err != nil {
		t.Fatal(err)
	}
	observability, err := os.ReadFile("../../docs/observability.md")
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(gantry_[a-z_]+)`").FindAllStringSubmatch(string(observability), -1) {
		documented[m[1]] = true
	}
	_, panelsDoc, ok := strings.Cut(string(scaling), "## Grafana dashboard")
	if !ok {
		t.Fatal("docs/scaling.md has no Grafana dashboard section")
	}
	named := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\| ([^|]+?) \| `+"`").FindAllStringSubmatch(panelsDoc, -1) {
		named[m[1]] = true
	}
	ids := map[int]bool{}
	metric := regexp.MustCompile(`gantry_[a-z_]+`)
	for _, p := range dash.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if !named[p.Title] {
			t.Errorf("panel %q is not named in docs/scaling.md", p.Title)
		}
		delete(named, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			for _, name := range metric.FindAllString(tg.Expr, -1) {
				base := name
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					base = strings.TrimSuffix(base, suffix)
				}
				if !documented[base] {
					t.Errorf("panel %q queries %s, which docs/observability.md does not list", p.Title, name)
				}
			}
		}
	}
	for title := range named {
		t.Errorf("docs/scaling.md names panel %q, which the dashboard lacks", title)
	}
}
