package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync/atomic"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of Gantry's spans.
const Name = "github.com/gantry-ci/gantry"

// Attribute keys on Gantry's spans.
const (
	AttrRunID     = attribute.Key("gantry.run.id")
	AttrJobID     = attribute.Key("gantry.job.id")
	AttrJobKey    = attribute.Key("gantry.job.key")
	AttrAttempt   = attribute.Key("gantry.attempt")
	AttrStepIndex = attribute.Key("gantry.step.index")
	AttrWorkerID  = attribute.Key("gantry.worker.id")
)

// enabled is set while an SDK provider is installed, so the hot paths (every request,
// every store call) skip even the no-op tracer's context allocation when tracing is off.
var enabled atomic.Bool

// Enabled reports whether Setup (or UseInMemory) installed a tracer provider.
func Enabled() bool { return enabled.Load() }

// Tracer returns Gantry's tracer from the global provider: the no-op tracer unless
// tracing is on.
func Tracer() trace.Tracer { return otel.Tracer(Name) }

// wanted reports whether the environment asks for traces: OTEL_TRACES_EXPORTER=otlp, or an
// OTLP endpoint set without OTEL_TRACES_EXPORTER saying otherwise.
func wanted() (bool, error) {
	switch exp := strings.TrimSpace(os.Getenv("OTEL_TRACES_EXPORTER")); exp {
	case "otlp":
		return true, nil
	case "none":
		return false, nil
	case "":
		return os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != "", nil
	default:
		return false, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: Gantry exports traces with otlp only (or none)", exp)
	}
}

// Setup turns tracing on when the OTEL_* environment asks for it (OTEL_TRACES_EXPORTER=otlp,
// or OTEL_EXPORTER_OTLP_ENDPOINT or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT set): it installs a
// global TracerProvider exporting over OTLP/HTTP and the W3C trace-context propagator.
// service names the process unless OTEL_SERVICE_NAME does. Otherwise it installs nothing
// and the global no-op tracer stays. shutdown flushes the spans still buffered; it is
// never nil.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	noop := func(context.Context) error { return nil }
	on, err := wanted()
	if err != nil || !on {
		return noop, err
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := os.Getenv(v); p != "" && p != "http/protobuf" {
			return noop, fmt.Errorf("%s=%s: Gantry exports OTLP over http/protobuf only", v, p)
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return noop, fmt.Errorf("create the OTLP trace exporter: %w", err)
	}
	// The environment (OTEL_SERVICE_NAME, OTEL_RESOURCE_ATTRIBUTES) comes last so that it
	// overrides the default service name.
	res, err := resource.New(ctx, resource.WithTelemetrySDK(),
		resource.WithAttributes(attribute.String("service.name", service)), resource.WithFromEnv())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return noop, fmt.Errorf("describe the process for traces: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res),
		sdktrace.WithIDGenerator(idGenerator{}))
	install(tp)
	return func(ctx context.Context) error {
		enabled.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

// install makes tp the global provider and turns on W3C trace-context propagation.
func install(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	enabled.Store(true)
}

// RunTraceID is the trace id of every span about run id: the UUID's 16 bytes. Every
// process derives it alone, so a run's spans meet in one trace without storing anything.
func RunTraceID(id uuid.UUID) trace.TraceID { return trace.TraceID(id) }

// RunSpanID is the span id of a run's root span, "run", derived from the run id.
func RunSpanID(id uuid.UUID) trace.SpanID {
	sum := sha256.Sum256(append([]byte("gantry run span\x00"), id[:]...))
	var s trace.SpanID
	copy(s[:], sum[:8])
	if !s.IsValid() {
		s[7] = 1
	}
	return s
}

// runSpanContext is the span context of run id's root span.
func runSpanContext(id uuid.UUID) trace.SpanContext {
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: RunTraceID(id), SpanID: RunSpanID(id),
		TraceFlags: trace.FlagsSampled, Remote: true})
}

// RunContext returns ctx carrying run id's root span as a remote parent: spans started
// from it join the run's trace, on whatever process starts them.
func RunContext(ctx context.Context, id uuid.UUID) context.Context {
	return trace.ContextWithRemoteSpanContext(ctx, runSpanContext(id))
}

// Traceparent is the W3C traceparent header naming run id's root span as the parent.
func Traceparent(id uuid.UUID) string {
	sc := runSpanContext(id)
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// Extract returns ctx carrying the remote parent a W3C traceparent names; ctx unchanged
// when it names none. It does not depend on the global propagator, so a worker joins the
// coordinator's trace whatever the global setup.
func Extract(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return propagation.TraceContext{}.Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// StartRun starts run id's root span, "run", with the span id every process derives for
// it (RunSpanID). It is a new root whatever ctx carries; opts add to its options.
func StartRun(ctx context.Context, id uuid.UUID, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx = context.WithValue(ctx, fixedIDsKey{}, runSpanContext(id))
	opts = append([]trace.SpanStartOption{trace.WithNewRoot(), trace.WithAttributes(AttrRunID.String(id.String()))}, opts...)
	return Tracer().Start(ctx, "run", opts...)
}

type fixedIDsKey struct{}

// idGenerator makes random ids, except for a span started under fixedIDsKey, which gets
// the ids the context names: the run span's ids are derived, not drawn.
type idGenerator struct{}

func (idGenerator) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	if sc, ok := ctx.Value(fixedIDsKey{}).(trace.SpanContext); ok {
		return sc.TraceID(), sc.SpanID()
	}
	var t trace.TraceID
	binary.BigEndian.PutUint64(t[:8], rand.Uint64())
	binary.BigEndian.PutUint64(t[8:], rand.Uint64()|1)
	return t, randomSpanID()
}

func (idGenerator) NewSpanID(ctx context.Context, traceID trace.TraceID) trace.SpanID {
	if sc, ok := ctx.Value(fixedIDsKey{}).(trace.SpanContext); ok && sc.TraceID() == traceID {
		return sc.SpanID()
	}
	return randomSpanID()
}

func randomSpanID() trace.SpanID {
	var s trace.SpanID
	binary.BigEndian.PutUint64(s[:], rand.Uint64()|1)
	return s
}
