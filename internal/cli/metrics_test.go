package cli

import (
	"log/slog"
	"net"
	"testing"

	"github.com/gantry-ci/gantry/internal/metrics/metricstest"
	"github.com/gantry-ci/gantry/internal/metrics/workermetrics"
)

// TestWorkerMetricsAddr: --metrics-addr turns the worker's metrics on and must be
// host:port; the listener serves them at GET /metrics.
func TestWorkerMetricsAddr(t *testing.T) {
	t.Parallel()
	base := workerConfig{Server: "http://x:1", Name: "w", MaxJobs: 1, Executor: "shell"}
	ac, err := base.agentConfig()
	if err != nil || ac.Metrics != nil {
		t.Fatalf("without --metrics-addr: metrics %v, err %v; want none", ac.Metrics, err)
	}
	bad := base
	bad.MetricsAddr = "9091"
	if _, err := bad.agentConfig(); err == nil {
		t.Error("--metrics-addr 9091 accepted; want host:port")
	}
	on := base
	on.MetricsAddr = "127.0.0.1:0"
	ac, err = on.agentConfig()
	if err != nil || ac.Metrics == nil {
		t.Fatalf("with --metrics-addr: metrics %v, err %v", ac.Metrics, err)
	}

	// serveMetrics listens on the address it is given; a free port is found first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	m := workermetrics.New()
	m.ClaimFailed()
	stop, err := serveMetrics(addr, m.Handler(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	f := metricstest.Scrape(t, "http://"+addr+"/metrics", "")
	if got := f.Value("gantry_worker_claim_errors_total"); got != 1 {
		t.Errorf("claim errors = %v, want 1", got)
	}
}
