package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"
)

// UseInMemory installs a global TracerProvider that records every span synchronously into
// the returned exporter, with the same ids and propagation as Setup; restore installs the
// no-op provider and the previous propagator (the global default provider cannot be put
// back once replaced). It is for tests: the provider is process-wide, so a test that
// uses it must not run in parallel with others that trace. Call it as
//
//	exp, restore := tracing.UseInMemory()
//	t.Cleanup(restore)
func UseInMemory() (exp *tracetest.InMemoryExporter, restore func()) {
	prevProp := otel.GetTextMapPropagator()
	exp = tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithIDGenerator(idGenerator{}))
	install(tp)
	return exp, func() {
		enabled.Store(false)
		otel.SetTracerProvider(noop.NewTracerProvider())
		otel.SetTextMapPropagator(prevProp)
		_ = tp.Shutdown(context.Background())
	}
}
