package metrics

import (
	"context"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
)

// Histogram buckets, in seconds.
var (
	// waitBuckets cover dispatch and queue waits: tens of milliseconds when workers are
	// free, up to an hour for a backlog.
	waitBuckets = []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600}
	// durationBuckets cover jobs and steps: a second to two hours.
	durationBuckets = []float64{0.1, 0.5, 1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200}
	// storeBuckets cover one store call: half a millisecond to a few seconds.
	storeBuckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5}
	// httpBuckets are the client's defaults plus long polls and streams.
	httpBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
)

// DefaultStateCacheFor is how long the gauges read from the store at scrape time are
// reused, so that several scrapers (or a fast one) cost one store query.
const DefaultStateCacheFor = 2 * time.Second

// Coordinator holds the coordinator's collectors. Its zero value is not usable: make one
// with NewCoordinator. The methods are safe for concurrent use and cheap enough for the
// claim and log paths: label children with a fixed label set are resolved once, here.
type Coordinator struct {
	reg *prometheus.Registry

	JobsCreated     prometheus.Counter
	jobsFinished    *prometheus.CounterVec
	finished        map[finishKey]prometheus.Counter
	JobWait         prometheus.Histogram
	JobDuration     prometheus.Histogram
	DispatchLatency prometheus.Histogram
	leasesReaped    *prometheus.CounterVec
	reapedExpired   prometheus.Counter
	reapedTimeout   prometheus.Counter
	Heartbeats      prometheus.Counter
	LeaseLost       prometheus.Counter
	LogLines        prometheus.Counter
	LogBytes        prometheus.Counter
	subscribers     *prometheus.GaugeVec
	SSESubscribers  prometheus.Gauge
	WSSubscribers   prometheus.Gauge
	ArtifactBytes   prometheus.Counter
	storeDuration   *prometheus.HistogramVec
	storeErrors     *prometheus.CounterVec
	httpDuration    *prometheus.HistogramVec

	// durSum and durCount mirror JobDuration for the drain estimate, which needs the
	// mean and cannot read a histogram back cheaply.
	durMu    sync.Mutex
	durSum   float64
	durCount uint64

	state *stateCollector
}

type finishKey struct {
	status store.JobStatus
	kind   store.FailureKind
}

// NewCoordinator makes the coordinator's collectors and registers them, with the Go
// runtime and process collectors, on a registry of their own.
func NewCoordinator() *Coordinator {
	m := &Coordinator{
		reg: prometheus.NewRegistry(),
		JobsCreated: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_jobs_created_total",
			Help: "Jobs created by submitted runs (matrix instances count one each)."}),
		jobsFinished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_jobs_finished_total",
			Help: "Job attempts a worker reported ended, by the job's resulting status (retrying: the attempt failed and will be retried) and failure kind."},
			[]string{"result", "failure_kind"}),
		JobWait: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gantry_job_wait_seconds",
			Help: "Time from a job being queued to it running, observed when the attempt ends.", Buckets: waitBuckets}),
		JobDuration: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gantry_job_duration_seconds",
			Help: "Time from a job attempt starting to run to its end, as reported by its worker.", Buckets: durationBuckets}),
		DispatchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gantry_dispatch_latency_seconds",
			Help: "Time from a job being queued to a worker holding it, observed at the claim.", Buckets: waitBuckets}),
		leasesReaped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_leases_reaped_total",
			Help: "Leases the scheduler took back: expired (the worker stopped heartbeating) or timeout (past the job's hard deadline)."},
			[]string{"reason"}),
		Heartbeats: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_heartbeats_total",
			Help: "Lease heartbeats accepted."}),
		LeaseLost: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_lease_lost_total",
			Help: "Worker calls refused because their lease token was stale (HTTP 409 lease_lost)."}),
		LogLines: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_log_lines_ingested_total",
			Help: "Log lines stored (re-sent lines that were already stored are not counted)."}),
		LogBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_log_bytes_ingested_total",
			Help: "Bytes of log line text stored."}),
		subscribers: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "gantry_log_subscribers",
			Help: "Open live subscriptions: SSE log streams and WebSocket subscriptions (logs or run)."},
			[]string{"transport"}),
		ArtifactBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "gantry_artifact_bytes_uploaded_total",
			Help: "Bytes of artifacts confirmed stored in the blob store (deduplicated artifacts are not counted)."}),
		storeDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gantry_store_operation_duration_seconds",
			Help: "Latency of store calls by operation (the store method).", Buckets: storeBuckets}, []string{"op"}),
		storeErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gantry_store_operation_errors_total",
			Help: "Store calls that returned an error, by operation and kind (not_found, lease_lost, conflict, invalid, canceled, other)."},
			[]string{"op", "kind"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gantry_http_request_duration_seconds",
			Help: "HTTP request latency by route pattern and status code (long polls and streams included).", Buckets: httpBuckets},
			[]string{"route", "code"}),
	}
	m.finished = map[finishKey]prometheus.Counter{}
	for _, k := range []finishKey{
		{store.JobSuccess, store.FailureNone},
		{store.JobFailed, store.FailureExit}, {store.JobFailed, store.FailureTimeout}, {store.JobFailed, store.FailureFlaky},
		{store.JobRetrying, store.FailureExit}, {store.JobRetrying, store.FailureTimeout}, {store.JobRetrying, store.FailureFlaky},
		{store.JobCancelled, store.FailureCancelled},
	} {
		m.finished[k] = m.jobsFinished.WithLabelValues(string(k.status), string(k.kind))
	}
	m.reapedExpired = m.leasesReaped.WithLabelValues("expired")
	m.reapedTimeout = m.leasesReaped.WithLabelValues("timeout")
	m.SSESubscribers = m.subscribers.WithLabelValues("sse")
	m.WSSubscribers = m.subscribers.WithLabelValues("websocket")
	m.state = newStateCollector(m)
	m.reg.MustRegister(m.JobsCreated, m.jobsFinished, m.JobWait, m.JobDuration, m.DispatchLatency, m.leasesReaped,
		m.Heartbeats, m.LeaseLost, m.LogLines, m.LogBytes, m.subscribers, m.ArtifactBytes, m.storeDuration,
		m.storeErrors, m.httpDuration, m.state,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Registry returns the registry the collectors are registered on; more may be added.
func (m *Coordinator) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats. A failing store read
// leaves its gauges out of the answer rather than failing the scrape.
func (m *Coordinator) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// JobFinished counts a worker's report that a job attempt ended, and observes the
// attempt's wait and duration from the job's timestamps (now stands in for the end of
// an attempt that is retrying and so has no finished time). A job that never started
// (completed while assigned) is counted but not observed.
func (m *Coordinator) JobFinished(j *store.Job, now time.Time) {
	c, ok := m.finished[finishKey{j.Status, j.FailureKind}]
	if !ok {
		c = m.jobsFinished.WithLabelValues(string(j.Status), string(j.FailureKind))
	}
	c.Inc()
	if j.StartedAt.IsZero() {
		return
	}
	// A lost attempt put back in the queue was queued again after it started.
	if !j.QueuedAt.IsZero() && !j.QueuedAt.After(j.StartedAt) {
		m.JobWait.Observe(j.StartedAt.Sub(j.QueuedAt).Seconds())
	}
	end := j.FinishedAt
	if end.IsZero() {
		end = now
	}
	d := max(0, end.Sub(j.StartedAt).Seconds())
	m.JobDuration.Observe(d)
	m.durMu.Lock()
	m.durSum += d
	m.durCount++
	m.durMu.Unlock()
}

// meanDuration is the mean observed job duration; false before any.
func (m *Coordinator) meanDuration() (float64, bool) {
	m.durMu.Lock()
	defer m.durMu.Unlock()
	if m.durCount == 0 {
		return 0, false
	}
	return m.durSum / float64(m.durCount), true
}

// JobClaimed observes a claimed job's dispatch latency.
func (m *Coordinator) JobClaimed(j *store.Job, now time.Time) {
	if !j.QueuedAt.IsZero() {
		m.DispatchLatency.Observe(max(0, now.Sub(j.QueuedAt).Seconds()))
	}
}

// Reaped counts a reaping pass's leases taken back: expired, and revoked past their
// deadline.
func (m *Coordinator) Reaped(expired, timedOut int) {
	m.reapedExpired.Add(float64(expired))
	m.reapedTimeout.Add(float64(timedOut))
}

// LogsStored counts log lines stored and the bytes of their text.
func (m *Coordinator) LogsStored(lines int, bytes int64) {
	m.LogLines.Add(float64(lines))
	m.LogBytes.Add(float64(bytes))
}

// codes holds status codes as label values, so observing a request does not format one.
var codes = func() (c [600]string) {
	for i := range c {
		c[i] = strconv.Itoa(i)
	}
	return c
}()

// HTTPRequest observes one request. route is the matched pattern ("GET /api/v1/runs/{id}"),
// never the raw path; an empty one (no route matched) is "unmatched".
func (m *Coordinator) HTTPRequest(route string, code int, d time.Duration) {
	if route == "" {
		route = "unmatched"
	}
	c := "other"
	if code >= 0 && code < len(codes) {
		c = codes[code]
	}
	m.httpDuration.WithLabelValues(route, c).Observe(d.Seconds())
}

// StateSource is what the scrape-time gauges read: the store's queue snapshot and its
// worker registry.
type StateSource interface {
	QueueStats(ctx context.Context) (*store.QueueStats, error)
	ListWorkers(ctx context.Context) ([]*store.Worker, error)
}

// StateOptions tune WatchState.
type StateOptions struct {
	// OfflineAfter is how long a worker may go unseen before it counts offline.
	OfflineAfter time.Duration
	// CacheFor is how long one reading is reused (DefaultStateCacheFor when zero).
	CacheFor time.Duration
	Clock    clock.Clock // clock.Real when nil
}

// WatchState makes the queue, job and worker gauges read src at scrape time. A later
// call replaces the source. Until one is given those gauges are absent.
func (m *Coordinator) WatchState(src StateSource, opts StateOptions) {
	if opts.CacheFor <= 0 {
		opts.CacheFor = DefaultStateCacheFor
	}
	if opts.Clock == nil {
		opts.Clock = clock.Real{}
	}
	m.state.mu.Lock()
	defer m.state.mu.Unlock()
	m.state.src, m.state.opts = src, opts
	m.state.cached, m.state.at = nil, time.Time{}
}

// stateCollector reports the gauges computed from the store at scrape time.
type stateCollector struct {
	m *Coordinator

	queueDepth, oldestWait, jobs, workers, drain *prometheus.Desc

	mu     sync.Mutex
	src    StateSource
	opts   StateOptions
	cached []prometheus.Metric
	at     time.Time
	reads  atomic.Int64 // store readings, for tests
}

func newStateCollector(m *Coordinator) *stateCollector {
	return &stateCollector{
		m: m,
		queueDepth: prometheus.NewDesc("gantry_queue_depth",
			"Queued jobs by priority lane and the label set they ask for (labels: sorted, comma-separated).",
			[]string{"priority", "labels"}, nil),
		oldestWait: prometheus.NewDesc("gantry_queue_oldest_wait_seconds",
			"How long the longest-waiting queued job has waited; 0 when none is queued.", nil, nil),
		jobs: prometheus.NewDesc("gantry_jobs",
			"Jobs held by workers (assigned, running) or waiting to be retried (retrying).", []string{"status"}, nil),
		workers: prometheus.NewDesc("gantry_workers",
			"Registered workers by state; offline: not seen for three heartbeat intervals.", []string{"state"}, nil),
		drain: prometheus.NewDesc("gantry_queue_drain_seconds",
			"Estimated time to run every queued job of a label set: queued jobs x mean job duration / job slots of live workers carrying the labels; +Inf when no live worker carries them.",
			[]string{"labels"}, nil),
	}
}

func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.queueDepth, c.oldestWait, c.jobs, c.workers, c.drain} {
		ch <- d
	}
}

func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.src == nil {
		return
	}
	now := c.opts.Clock.Now()
	if c.cached == nil || now.Sub(c.at) >= c.opts.CacheFor || now.Before(c.at) {
		ms, err := c.read(now)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(c.queueDepth, err)
			return
		}
		c.cached, c.at = ms, now
	}
	for _, m := range c.cached {
		ch <- m
	}
}

// read takes one reading of the store and turns it into metrics.
func (c *stateCollector) read(now time.Time) ([]prometheus.Metric, error) {
	c.reads.Add(1)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q, err := c.src.QueueStats(ctx)
	if err != nil {
		return nil, err
	}
	ws, err := c.src.ListWorkers(ctx)
	if err != nil {
		return nil, err
	}
	var out []prometheus.Metric
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		out = append(out, prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...))
	}
	queued := map[string]int{} // by label set, over every lane
	for _, d := range q.Queued {
		set := LabelSet(d.Labels)
		gauge(c.queueDepth, float64(d.Jobs), string(d.Priority), set)
		queued[set] += d.Jobs
	}
	wait := 0.0
	if !q.OldestQueuedAt.IsZero() {
		wait = max(0, now.Sub(q.OldestQueuedAt).Seconds())
	}
	gauge(c.oldestWait, wait)
	gauge(c.jobs, float64(q.Assigned), string(store.JobAssigned))
	gauge(c.jobs, float64(q.Running), string(store.JobRunning))
	gauge(c.jobs, float64(q.Retrying), string(store.JobRetrying))

	states := map[store.WorkerState]int{store.WorkerIdle: 0, store.WorkerBusy: 0, store.WorkerDraining: 0, store.WorkerOffline: 0}
	var live []*store.Worker
	for _, w := range ws {
		state := w.State
		if c.opts.OfflineAfter > 0 {
			state = w.StateAt(now, c.opts.OfflineAfter)
		}
		states[state]++
		if state == store.WorkerIdle || state == store.WorkerBusy {
			live = append(live, w)
		}
	}
	for s, n := range states {
		gauge(c.workers, float64(n), string(s))
	}
	if mean, ok := c.m.meanDuration(); ok {
		for set, n := range queued {
			gauge(c.drain, drainSeconds(n, mean, slotsFor(set, live)), set)
		}
	}
	return out, nil
}

// drainSeconds is queued x mean / slots, +Inf when there are jobs and no slots.
func drainSeconds(queued int, mean float64, slots int) float64 {
	if queued == 0 {
		return 0
	}
	if slots == 0 {
		return math.Inf(1)
	}
	return float64(queued) * mean / float64(slots)
}

// slotsFor counts the job slots (max jobs) of the workers that carry every label of set.
func slotsFor(set string, workers []*store.Worker) int {
	var want []string
	if set != "" {
		want = strings.Split(set, ",")
	}
	n := 0
	for _, w := range workers {
		ok := true
		for _, l := range want {
			if !slices.Contains(w.Labels, l) {
				ok = false
				break
			}
		}
		if ok {
			n += max(1, w.MaxJobs)
		}
	}
	return n
}

// LabelSet is the label value naming a set of worker labels: sorted and comma-separated,
// empty for none.
func LabelSet(labels []string) string {
	if len(labels) == 0 {
		return ""
	}
	if len(labels) == 1 {
		return labels[0]
	}
	s := slices.Clone(labels)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ",")
}
