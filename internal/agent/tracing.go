package agent

import (
	"context"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/tracing"
)

// startJobSpan starts the span of a job attempt, "job <key> attempt <n>", as a child of
// the run's root span the claim named (its traceparent). Without tracing it is the no-op
// span, and the attributes below are not built.
func (a *Agent) startJobSpan(ctx context.Context, j claimedJob) (context.Context, trace.Span) {
	ctx = tracing.Extract(ctx, j.Traceparent)
	ctx, span := tracing.Tracer().Start(ctx, "job "+j.Key+" attempt "+strconv.Itoa(j.Attempt))
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrRunID.String(j.RunID), tracing.AttrJobID.String(j.ID),
			tracing.AttrJobKey.String(j.Key), tracing.AttrAttempt.Int(j.Attempt), tracing.AttrWorkerID.String(a.workerID))
	}
	return ctx, span
}

// endJobSpan ends a job attempt's span with how it ended: success, failed, cancelled or
// lost (the lease went to another worker); anything but success is an error.
func endJobSpan(span trace.Span, result string) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("gantry.job.result", result))
	if result != "success" {
		span.SetStatus(codes.Error, "job "+result)
	}
	span.End()
}

// startStepSpan starts the span of a step, "step <name>", in the job's span.
func startStepSpan(ctx context.Context, st pipeline.Step) trace.Span {
	_, span := tracing.Tracer().Start(ctx, "step "+st.Name)
	if span.IsRecording() {
		span.SetAttributes(tracing.AttrStepIndex.Int(st.Index))
	}
	return span
}

// endStepSpan ends a step's span with its status and, when its process ran, exit code. A
// failed step is an error, even one whose job continues past it (continue_on_error).
func endStepSpan(span trace.Span, status string, exit *int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attribute.String("gantry.step.status", status))
	if exit != nil {
		span.SetAttributes(attribute.Int("gantry.step.exit_code", *exit))
	}
	if status == "failed" {
		span.SetStatus(codes.Error, "step failed")
	}
	span.End()
}
