// Package tracing owns Gantry's OpenTelemetry setup: the exporter chosen by the OTEL_*
// environment, the run-derived trace ids that join a run's spans across processes, and
// the store decorator (tracestore). It must not decide what to trace beyond store calls;
// callers start their own spans.
package tracing
