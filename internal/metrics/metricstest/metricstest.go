// Package metricstest scrapes a /metrics endpoint in tests and reads values out of it.
// It is for tests only.
package metricstest

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Families is one scrape, by metric name.
type Families map[string]*dto.MetricFamily

// Scrape GETs url (a /metrics endpoint), with a bearer token when one is given, and
// parses the text exposition format. It fails the test on any error.
func Scrape(t testing.TB, url, token string) Families {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "text/plain")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: status %d", url, res.StatusCode)
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatalf("parse the scrape of %s: %v", url, err)
	}
	return fams
}

// find returns the series of name whose labels include every pair of labels (name,
// value, name, value...), or nil.
func (f Families) find(name string, labels ...string) *dto.Metric {
	fam, ok := f[name]
	if !ok {
		return nil
	}
next:
	for _, m := range fam.GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			found := false
			for _, lp := range m.GetLabel() {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					found = true
					break
				}
			}
			if !found {
				continue next
			}
		}
		return m
	}
	return nil
}

// Has reports whether a series of name with the labels exists.
func (f Families) Has(name string, labels ...string) bool { return f.find(name, labels...) != nil }

// Value returns a counter's or gauge's value; 0 when the series is absent.
func (f Families) Value(name string, labels ...string) float64 {
	m := f.find(name, labels...)
	switch {
	case m == nil:
		return 0
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	return 0
}

// Histogram returns a histogram's sample count and sum; zeros when absent.
func (f Families) Histogram(name string, labels ...string) (count uint64, sum float64) {
	m := f.find(name, labels...)
	if m == nil || m.Histogram == nil {
		return 0, 0
	}
	return m.Histogram.GetSampleCount(), m.Histogram.GetSampleSum()
}

// Sum adds the values (counters, gauges) or sample counts (histograms) of every series of
// name whose labels include the given pairs.
func (f Families) Sum(name string, labels ...string) float64 {
	fam, ok := f[name]
	if !ok {
		return 0
	}
	total := 0.0
	for _, m := range fam.GetMetric() {
		if !(Families{name: &dto.MetricFamily{Metric: []*dto.Metric{m}}}).Has(name, labels...) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}

// String describes a series for failure messages.
func (f Families) String(name string, labels ...string) string {
	m := f.find(name, labels...)
	if m == nil {
		return fmt.Sprintf("%s%v: absent", name, labels)
	}
	return fmt.Sprintf("%s%v: %v", name, labels, m)
}
