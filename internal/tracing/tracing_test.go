package tracing

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
)

// TestSetupOffByDefault: without the OTEL_* variables that ask for traces, Setup installs
// nothing; an exporter other than otlp is refused.
func TestSetupOffByDefault(t *testing.T) {
	for _, v := range []string{"OTEL_TRACES_EXPORTER", "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		t.Setenv(v, "")
	}
	shutdown, err := Setup(t.Context(), "gantry-test")
	if err != nil || Enabled() {
		t.Fatalf("Setup: enabled %v, err %v; want off", Enabled(), err)
	}
	if err := shutdown(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_TRACES_EXPORTER", "none")
	if _, err := Setup(t.Context(), "gantry-test"); err != nil || Enabled() {
		t.Fatalf("OTEL_TRACES_EXPORTER=none: enabled %v, err %v; want off", Enabled(), err)
	}
	t.Setenv("OTEL_TRACES_EXPORTER", "zipkin")
	if _, err := Setup(t.Context(), "gantry-test"); err == nil {
		t.Fatal("OTEL_TRACES_EXPORTER=zipkin: no error")
	}
}

// TestRunIDs: the traceparent, RunContext and the run span all name the same ids, derived
// from the run id alone.
func TestRunIDs(t *testing.T) {
	id := uuid.MustParse("0196a1c2-3b4d-7e5f-8a9b-0c1d2e3f4a5b")
	tp := Traceparent(id)
	if want := "00-0196a1c23b4d7e5f8a9b0c1d2e3f4a5b-" + RunSpanID(id).String() + "-01"; tp != want {
		t.Fatalf("Traceparent %s, want %s", tp, want)
	}
	if RunSpanID(id) != RunSpanID(uuid.MustParse(id.String())) || RunSpanID(id) == RunSpanID(uuid.New()) {
		t.Fatal("RunSpanID is not a function of the run id")
	}
	fromHeader := trace.SpanContextFromContext(Extract(context.Background(), tp))
	fromRun := trace.SpanContextFromContext(RunContext(context.Background(), id))
	if !fromHeader.Equal(fromRun) || fromRun.TraceID() != RunTraceID(id) || !fromRun.IsRemote() {
		t.Fatalf("extracted %v, RunContext %v", fromHeader, fromRun)
	}

	exp, restore := UseInMemory()
	defer restore()
	_, span := StartRun(RunContext(context.Background(), uuid.New()), id)
	span.End()
	ss := exp.GetSpans()
	if len(ss) != 1 || ss[0].SpanContext.TraceID() != RunTraceID(id) || ss[0].SpanContext.SpanID() != RunSpanID(id) ||
		ss[0].Parent.IsValid() {
		t.Fatalf("run span %+v, want root %s/%s", ss, RunTraceID(id), RunSpanID(id))
	}
}
