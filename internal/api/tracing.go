package api

import (
	"context"
	"net/http"
	"strconv"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantry-ci/gantry/internal/tracing"
)

// startRequestSpan starts a server span for r, a child of the trace context the caller
// sent if any, and returns r carrying it. Called only when tracing is on.
func startRequestSpan(r *http.Request) (*http.Request, trace.Span) {
	ctx := otel.GetTextMapPropagator().Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	ctx, span := tracing.Tracer().Start(ctx, "HTTP "+r.Method, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("http.request.method", r.Method)))
	return r.WithContext(ctx), span
}

// endRequestSpan names the span for the route that matched (never the raw path, which
// carries ids) and ends it with the answer's status; a 5xx is an error.
func endRequestSpan(span trace.Span, r *http.Request, code int) {
	if r.Pattern != "" {
		span.SetName(r.Pattern)
		span.SetAttributes(attribute.String("http.route", r.Pattern))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", code))
	if code >= 500 {
		span.SetStatus(codes.Error, strconv.Itoa(code))
	}
	span.End()
}

// traceRunCreated records a new run's root span, "run", with the ids every process derives
// from the run id, linked to the request that created it. Job and step spans, started
// later by workers, are its children.
func traceRunCreated(ctx context.Context, id uuid.UUID) {
	if !tracing.Enabled() {
		return
	}
	_, span := tracing.StartRun(ctx, id, trace.WithLinks(trace.LinkFromContext(ctx)))
	span.End()
}
