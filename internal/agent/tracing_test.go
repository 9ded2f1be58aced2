package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/tracing"
)

// TestTraceOfADiamondRun: with tracing on, a diamond run's job attempts and steps, run by
// a real worker against a real coordinator, form one trace whose id is the run id: a span
// per job attempt under the run's span, a span per step under its job, the ids as
// attributes, and a failing step's span in error.
//
// Not parallel: the tracer provider is process-wide, and parallel tests of this package
// wait until this one has ended.
func TestTraceOfADiamondRun(t *testing.T) {
	exp, restore := tracing.UseInMemory()
	t.Cleanup(restore)
	b := setup(t)
	b.start(t, 2)

	diamond := b.submit(t, `
jobs:
  a: {runs_on: [linux], steps: [{name: sa, run: 'true'}]}
  b: {runs_on: [linux], steps: [{name: sb, run: 'true'}]}
  c: {runs_on: [linux], needs: [a, b], steps: [{name: sc, run: 'true'}]}
`)
	failing := b.submit(t, "jobs:\n  f: {runs_on: [linux], steps: [{name: sf, run: exit 3}]}\n")
	if r := b.waitRun(t, diamond); r.Status != store.RunSuccess {
		t.Fatalf("diamond run %s, want success", r.Status)
	}
	if r := b.waitRun(t, failing); r.Status != store.RunFailed {
		t.Fatalf("failing run %s, want failed", r.Status)
	}
	jobs, err := b.st.ListJobs(t.Context(), diamond)
	if err != nil {
		t.Fatal(err)
	}
	jobIDs := map[string]string{}
	for _, j := range jobs {
		jobIDs[j.Key] = j.ID.String()
	}

	// A run ends when its last completion is stored; the worker ends that job's span
	// just after, so wait for the spans rather than assume them.
	spans := waitSpans(t, exp, func(ss tracetest.SpanStubs) bool {
		return len(named(ss, diamond, "job ")) == 3 && len(named(ss, failing, "job ")) == 1
	})

	runSpan := tracing.RunSpanID(diamond)
	jobSpans := named(spans, diamond, "job ")
	for _, js := range jobSpans {
		key := strings.Fields(js.Name)[1]
		if js.Name != "job "+key+" attempt 1" {
			t.Errorf("job span %q, want job <key> attempt 1", js.Name)
		}
		if js.Parent.SpanID() != runSpan || js.Parent.TraceID() != tracing.RunTraceID(diamond) {
			t.Errorf("%s: parent %s/%s, want the run's span %s/%s", js.Name, js.Parent.TraceID(), js.Parent.SpanID(),
				tracing.RunTraceID(diamond), runSpan)
		}
		want := map[attribute.Key]attribute.Value{
			tracing.AttrRunID: attribute.StringValue(diamond.String()), tracing.AttrJobID: attribute.StringValue(jobIDs[key]),
			tracing.AttrJobKey: attribute.StringValue(key), tracing.AttrAttempt: attribute.IntValue(1),
		}
		checkAttrs(t, js, want)
		if v, ok := attr(js, tracing.AttrWorkerID); !ok || v.AsString() == "" {
			t.Errorf("%s: no %s", js.Name, tracing.AttrWorkerID)
		}
		if js.Status.Code == codes.Error {
			t.Errorf("%s: status %v, want not an error", js.Name, js.Status)
		}
		var steps []tracetest.SpanStub
		for _, s := range named(spans, diamond, "step ") {
			if s.Parent.SpanID() == js.SpanContext.SpanID() {
				steps = append(steps, s)
			}
		}
		if len(steps) != 1 || steps[0].Name != "step s"+key {
			t.Fatalf("%s: step spans %v, want one, step s%s", js.Name, spanNames(steps), key)
		}
		checkAttrs(t, steps[0], map[attribute.Key]attribute.Value{tracing.AttrStepIndex: attribute.IntValue(0),
			"gantry.step.status": attribute.StringValue("success"), "gantry.step.exit_code": attribute.IntValue(0)})
	}
	if got := spanNames(named(spans, diamond, "step ")); len(got) != 3 {
		t.Errorf("diamond run's step spans %v, want 3", got)
	}

	failed := named(spans, failing, "step ")
	if len(failed) != 1 {
		t.Fatalf("failing run's step spans %v, want one", spanNames(failed))
	}
	if failed[0].Status.Code != codes.Error {
		t.Errorf("failing step's status %v, want error", failed[0].Status)
	}
	checkAttrs(t, failed[0], map[attribute.Key]attribute.Value{"gantry.step.status": attribute.StringValue("failed"),
		"gantry.step.exit_code": attribute.IntValue(3)})
	if fj := named(spans, failing, "job "); fj[0].Status.Code != codes.Error {
		t.Errorf("failing job's status %v, want error", fj[0].Status)
	}
}

// waitSpans polls the exporter until done holds of its spans, for up to 10 s.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, done func(tracetest.SpanStubs) bool) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ss := exp.GetSpans()
		if done(ss) {
			return ss
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans never complete: %v", spanNames(ss))
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-t.Context().Done():
			t.Fatal(t.Context().Err())
		}
	}
}

// named returns the spans of run's trace whose names start with prefix.
func named(ss tracetest.SpanStubs, run uuid.UUID, prefix string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range ss {
		if s.SpanContext.TraceID() == tracing.RunTraceID(run) && strings.HasPrefix(s.Name, prefix) {
			out = append(out, s)
		}
	}
	return out
}

func spanNames(ss []tracetest.SpanStub) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Name
	}
	return out
}

func attr(s tracetest.SpanStub, k attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == k {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

func checkAttrs(t *testing.T, s tracetest.SpanStub, want map[attribute.Key]attribute.Value) {
	t.Helper()
	for k, w := range want {
		if v, ok := attr(s, k); !ok || v != w {
			t.Errorf("%s: %s = %v, want %v", s.Name, k, v.String(), w.String())
		}
	}
}
