// Package workermetrics holds a worker's Prometheus collectors, on a registry of their
// own. It links nothing of the coordinator's (the store, its records): a worker counts
// only what it does.
package workermetrics

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Worker holds a worker agent's collectors. Make one with New. Every method is a
// no-op on a nil *Worker, so an agent without metrics calls them all the same.
type Worker struct {
	reg *prometheus.Registry

	jobs              *prometheus.CounterVec
	jobsRunning       prometheus.Gauge
	steps             *prometheus.HistogramVec
	logLinesShipped   prometheus.Counter
	logLinesDropped   prometheus.Counter
	artifactBytesUp   prometheus.Counter
	artifactBytesDown prometheus.Counter
	claimErrors       prometheus.Counter
	reportErrors      prometheus.Counter
}

// Worker job results, the result label of gantry_worker_jobs_total: what the worker
// reported, or lost when it lost the lease and reported nothing.
var workerResults = []string{"success", "failed", "cancelled", "lost"}

// Step results, the result label of gantry_worker_step_duration_seconds.
var stepResults = []string{"success", "failed", "cancelled"}

// durationBuckets cover steps, as the coordinator's cover jobs: a second to two hours.
var durationBuckets = []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}

// New makes a worker's collectors and registers them, with the Go runtime and
// process collectors, on a registry of their own.
func New() *Worker {
	m := &Worker{
		reg: prometheus.NewRegistry(),
		jobs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_worker_jobs_total",
			Help: "Jobs this worker ran to an end, by result (lost: the lease was lost, nothing reported)."}, []string{"result"}),
		jobsRunning: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gantry_worker_jobs_running",
			Help: "Jobs this worker is running."}),
		steps: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gantry_worker_step_duration_seconds",
			Help: "Time a step's process ran, by result.", Buckets: durationBuckets}, []string{"result"}),
		logLinesShipped: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_worker_log_lines_shipped_total",
			Help: "Log lines the coordinator acknowledged storing."}),
		logLinesDropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_worker_log_lines_dropped_total",
			Help: "Log lines given up on: the log's size limit, a lost lease, a refused batch, a spool failure."}),
		artifactBytesUp: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_worker_artifact_bytes_uploaded_total",
			Help: "Bytes of artifacts uploaded to the blob store."}),
		artifactBytesDown: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_worker_artifact_bytes_downloaded_total",
			Help: "Bytes of needed jobs' artifacts downloaded into workspaces."}),
		claimErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_worker_claim_errors_total",
			Help: "Claims that failed (the coordinator unreachable or refusing)."}),
		reportErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_worker_report_errors_total",
			Help: "Job reports (start, step, heartbeat, completion) that failed, retries included."}),
	}
	for _, r := range workerResults {
		m.jobs.WithLabelValues(r)
	}
	for _, r := range stepResults {
		m.steps.WithLabelValues(r)
	}
	m.reg.MustRegister(m.jobs, m.jobsRunning, m.steps, m.logLinesShipped, m.logLinesDropped, m.artifactBytesUp,
		m.artifactBytesDown, m.claimErrors, m.reportErrors,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry the collectors are registered on.
func (m *Worker) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Worker) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}

// JobEnded counts a job this worker ran to result (success, failed, cancelled, lost).
func (m *Worker) JobEnded(result string) {
	if m != nil {
		m.jobs.WithLabelValues(result).Inc()
	}
}

// StepEnded observes a step's run time by result.
func (m *Worker) StepEnded(result string, seconds float64) {
	if m != nil {
		m.steps.WithLabelValues(result).Observe(seconds)
	}
}

// JobStarted counts a job as running; JobEnded stops counting it.
func (m *Worker) JobStarted() {
	if m != nil {
		m.jobsRunning.Inc()
	}
}

// JobStopped counts a running job as no longer running.
func (m *Worker) JobStopped() {
	if m != nil {
		m.jobsRunning.Dec()
	}
}

// LogShipped counts an attempt's log lines: acknowledged by the coordinator, and dropped.
func (m *Worker) LogShipped(acked, dropped int64) {
	if m != nil {
		m.logLinesShipped.Add(float64(acked))
		m.logLinesDropped.Add(float64(dropped))
	}
}

// ArtifactUploaded counts bytes uploaded to the blob store.
func (m *Worker) ArtifactUploaded(bytes int64) {
	if m != nil {
		m.artifactBytesUp.Add(float64(bytes))
	}
}

// ArtifactDownloaded counts bytes downloaded from the blob store.
func (m *Worker) ArtifactDownloaded(bytes int64) {
	if m != nil {
		m.artifactBytesDown.Add(float64(bytes))
	}
}

// ClaimFailed counts a failed claim.
func (m *Worker) ClaimFailed() {
	if m != nil {
		m.claimErrors.Inc()
	}
}

// ReportFailed counts a failed report about a job.
func (m *Worker) ReportFailed() {
	if m != nil {
		m.reportErrors.Inc()
	}
}
