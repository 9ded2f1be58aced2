package cli

import (
	"context"
	"log/slog"
	"time"

	"github.com/gantry-ci/gantry/internal/tracing"
)

// traceFlushFor bounds the flush of buffered spans at exit: an unreachable collector must
// not hold up a stop.
const traceFlushFor = 5 * time.Second

// startTracing turns tracing on when the OTEL_* environment asks for it (tracing.Setup)
// and returns what flushes the spans at exit.
func startTracing(ctx context.Context, service string, log *slog.Logger) (stop func(), err error) {
	shutdown, err := tracing.Setup(ctx, service)
	if err != nil {
		return nil, err
	}
	if tracing.Enabled() {
		log.Info("tracing on: exporting spans over OTLP", "service", service)
	}
	return func() {
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), traceFlushFor)
		defer cancel()
		if err := shutdown(fctx); err != nil {
			log.Warn("flush traces", "err", err)
		}
	}, nil
}
