package api

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gantry-ci/gantry/internal/actions"
	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/logs/logchunks"
	"github.com/gantry-ci/gantry/internal/metrics"
	"github.com/gantry-ci/gantry/internal/outbound"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/secret"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/tracing"
	"github.com/gantry-ci/gantry/internal/tracing/tracestore"
	"go.opentelemetry.io/otel/trace"
)

// DefaultMaxBodyBytes bounds request bodies: a maximal pipeline (1 MiB) plus room for the
// JSON envelope around it.
const DefaultMaxBodyBytes = 1<<20 + 64<<10

// Config configures a Server.
type Config struct {
	Store  store.Store
	Logger *slog.Logger // discards when nil
	Clock  clock.Clock  // clock.Real when nil
	// MaxBodyBytes bounds request bodies; larger ones get 413. Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// CompileLimits are passed to pipeline.Compile for submitted definitions.
	CompileLimits pipeline.Limits
	// LeaseTTL, HeartbeatEvery and TimeoutGrace are the lease protocol's timings
	// (DefaultLeaseTTL, DefaultHeartbeatEvery, DefaultTimeoutGrace when zero).
	LeaseTTL       time.Duration
	HeartbeatEvery time.Duration
	TimeoutGrace   time.Duration
	// ReapGrace is how long past the TTL a lease that was not renewed is left to its
	// worker before the job is taken back (DefaultReapGrace when zero): the worker
	// fences itself before its TTL ends, so the two attempts never overlap.
	ReapGrace time.Duration
	// CancelGrace is the default time between SIGTERM and SIGKILL (DefaultCancelGrace).
	CancelGrace time.Duration
	// Logs stores and serves job logs; when nil, a service keeping them in the store's
	// log chunks is made (and closed by Close).
	Logs *logs.Service
	// KeepAlive is how often an idle log stream sends a comment (DefaultKeepAlive).
	KeepAlive time.Duration
	// EndCheck is how often an idle log stream asks the store whether its attempt ended
	// (DefaultEndCheck).
	EndCheck time.Duration
	// TokenCheck is how often an open log stream or WebSocket reads its token again, so
	// that one revoked or expired while it is open ends it (DefaultTokenCheck).
	TokenCheck time.Duration
	// Auth requires a bearer token on every route but the health checks. Off, anyone who
	// can reach the address may do anything: only for loopback.
	Auth bool
	// AllowedOrigins are origins (scheme://host[:port]) besides the server's own whose
	// pages may write: a dashboard served from another name, a proxy that rewrites Host.
	AllowedOrigins []string
	// AllowedHosts are Host names answered with auth off besides loopback names and the
	// address a connection came in on.
	AllowedHosts []string
	// Outbound is the admin's allow-list of the coordinator's own network for outbound
	// webhooks (as the outbox's dispatcher has it): a subscription whose URL names an
	// address of that network it does not allow, or holds credentials, is refused.
	Outbound outbound.Policy
	// DataDirs are the directories the coordinator writes (the SQLite file's, logs,
	// blobs). While writes fail for lack of space, /readyz writes a small probe file in
	// each to learn when they would work again.
	DataDirs []string
	// Blobs stores artifacts' content; the artifact routes answer 503 without one. A
	// store that serves its own signed URLs (blob.Handler) is mounted on BlobPrefix
	// (DefaultBlobPrefix), which must be the prefix the store signs URLs for.
	Blobs      blob.Store
	BlobPrefix string
	// BlobURLTTL is how long pre-signed blob URLs stay valid (DefaultBlobURLTTL).
	BlobURLTTL time.Duration
	// ArtifactTTL is how long artifacts are kept when their job sets no expire_in; zero
	// keeps them until deleted.
	ArtifactTTL time.Duration
	// UI serves the web dashboard on every GET path the API does not own; its pages call
	// the API with the user's token, so it is mounted without one. Nil serves none.
	UI http.Handler
	// Metrics receives the coordinator's metrics, served at GET /metrics; when nil the
	// server makes its own. The server times its store calls into it (InstrumentStore).
	Metrics *metrics.Coordinator
	// MirrorsDir holds the coordinator's bare git mirrors, from which webhooks read
	// pipeline files (DefaultMirrorsDir when empty). HookFetchTimeout bounds a webhook's
	// wait for git (DefaultHookFetchTimeout when zero).
	MirrorsDir       string
	HookFetchTimeout time.Duration
	// Actions resolves the actions a run's steps use and pins them when the run is
	// created (actions.Resolver.Pin); nil resolves them from actions.DefaultSource
	// through MirrorsDir.
	Actions *actions.Resolver
	// AllowPlainHTTP are the hosts a project's repository token may be sent to over
	// plain http:// (host, or host:port). Elsewhere a token goes over https only: a
	// project that names one for an http:// repo_url is refused, and no fetch or
	// checkout sends it.
	AllowPlainHTTP []string
	// PublicBadges serves project badges (badge.svg) without a token when auth is on.
	PublicBadges bool
	// Secrets seals and opens secrets; without it the secret routes answer 503 and a job
	// that needs a secret fails.
	Secrets *secret.Keyring
}

// Server serves the HTTP API on top of a store. It keeps no state of its own.
type Server struct {
	store   store.Store
	log     *slog.Logger
	clock   clock.Clock
	maxBody int64
	limits  pipeline.Limits
	mux     *http.ServeMux
	logs    *logs.Service
	ownLogs bool // logs was made here and is closed by Close
	metrics *metrics.Coordinator
	// drained ends when the server starts to shut down (Drain): requests that wait
	// answer with what they have.
	drained context.Context
	drain   context.CancelFunc

	keepAlive time.Duration
	endCheck  time.Duration
	// tokenCheck: see Config.TokenCheck.
	tokenCheck time.Duration

	blobs                   blob.Store
	blobPrefix              string
	blobURLTTL, artifactTTL time.Duration

	leaseTTL, heartbeatEvery, timeoutGrace, cancelGrace time.Duration
	reapGrace                                           time.Duration
	auth                                                bool
	allowedOrigins, allowedHosts                        []string
	outbound                                            outbound.Policy
	// claims is the one piece of per-process state: which workers hold claims open
	// here. Losing it in a restart loses nothing, as those connections close too.
	claims claimSlots
	// seen throttles marking workers seen; losing it costs one extra write per worker.
	seen lastSeen
	// storage says whether writes fail for lack of space, for /readyz.
	storage  storageState
	dataDirs []string
	// tokens spares the store token writes and lease-holder reads; losing it costs a few.
	tokens tokenState
	hooks  hookSettings
	// actions pins the actions runs use (actions.go).
	actions *actions.Resolver
	// secrets is the secrets keyring (nil: none configured).
	secrets *secret.Keyring
	// routeTable lists the registered routes and their access, for Routes.
	routeTable []Route
	// conns tracks the WebSocket connections, which outlive their requests (the HTTP
	// server does not wait for a hijacked connection): Close ends them and waits.
	conns connTracker
	// rules applies projects' quarantine rules after their jobs complete, outliving
	// the completions' requests: Close stops it and waits.
	rules *ruleRunner
	// compiled keeps the plans of definitions submitted lately.
	compiled compileCache
}

// connTracker counts long-lived connections and ends them on close.
type connTracker struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	stop   chan struct{} // closed by close
}

// add registers a connection; it reports false once the tracker is closed. The
// returned channel is closed when the connection must end.
func (c *connTracker) add() (<-chan struct{}, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, false
	}
	if c.stop == nil {
		c.stop = make(chan struct{})
	}
	c.wg.Add(1)
	return c.stop, true
}

func (c *connTracker) done() { c.wg.Done() }

// close asks every connection to end and waits until they have.
func (c *connTracker) close() {
	c.mu.Lock()
	if !c.closed {
		c.closed = true
		if c.stop == nil {
			c.stop = make(chan struct{})
		}
		close(c.stop)
	}
	c.mu.Unlock()
	c.wg.Wait()
}

// New returns a Server for cfg, filling defaults for zero fields.
func New(cfg Config) *Server {
	drained, drain := context.WithCancel(context.Background())
	s := &Server{
		drained: drained,
		drain:   drain,
		store:   cfg.Store,
		log:     cfg.Logger,
		clock:   cfg.Clock,
		maxBody: cfg.MaxBodyBytes,
		limits:  cfg.CompileLimits,
		mux:     http.NewServeMux(),

		leaseTTL:       cmp.Or(cfg.LeaseTTL, DefaultLeaseTTL),
		heartbeatEvery: cmp.Or(cfg.HeartbeatEvery, DefaultHeartbeatEvery),
		timeoutGrace:   cmp.Or(cfg.TimeoutGrace, DefaultTimeoutGrace),
		cancelGrace:    cmp.Or(cfg.CancelGrace, DefaultCancelGrace),
		reapGrace:      cfg.ReapGrace,
		auth:           cfg.Auth,
		allowedOrigins: normalizeOrigins(cfg.AllowedOrigins),
		allowedHosts:   normalizeOrigins(cfg.AllowedHosts),
		outbound:       cfg.Outbound,
		dataDirs:       cfg.DataDirs,
		logs:           cfg.Logs,
		keepAlive:      cmp.Or(cfg.KeepAlive, DefaultKeepAlive),
		endCheck:       cmp.Or(cfg.EndCheck, DefaultEndCheck),
		tokenCheck:     cmp.Or(cfg.TokenCheck, DefaultTokenCheck),
		blobs:          cfg.Blobs,
		blobPrefix:     cmp.Or(cfg.BlobPrefix, DefaultBlobPrefix),
		blobURLTTL:     cmp.Or(cfg.BlobURLTTL, DefaultBlobURLTTL),
		artifactTTL:    cfg.ArtifactTTL,
		metrics:        cfg.Metrics,
		hooks:          newHookSettings(cfg.MirrorsDir, cfg.HookFetchTimeout, cfg.AllowPlainHTTP),
		secrets:        cfg.Secrets,
	}
	if s.reapGrace <= 0 {
		s.reapGrace = DefaultReapGrace(s.leaseTTL)
	}
	s.actions = cfg.Actions
	if s.actions == nil {
		src, _ := actions.ParseSource("")
		s.actions = &actions.Resolver{Source: src, MirrorsDir: s.hooks.mirrors, Logger: cfg.Logger}
	}
	if s.metrics == nil {
		s.metrics = metrics.NewCoordinator()
	}
	s.store = tracestore.Instrument(metrics.InstrumentStore(cfg.Store, s.metrics))
	if s.logs == nil {
		s.logs = logs.NewService(logs.Config{Storage: logchunks.New(s.store).WithBlobs(cfg.Blobs), Notifier: s.store,
			Logger: cfg.Logger, Stored: s.metrics.LogsStored})
		s.ownLogs = true
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.logs.UseSecrets(s.logSecrets)
	s.logs.UseAnnotations(s.keepAnnotations)
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	s.metrics.WatchState(s.store, metrics.StateOptions{OfflineAfter: s.offlineAfter(), Clock: s.clock})
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBodyBytes
	}
	s.rules = newRuleRunner(s)
	s.routes(cfg)
	return s
}

// routes registers every endpoint with the roles that may call it.
func (s *Server) routes(cfg Config) {
	// The project of a run is named in its body: createRun checks developer on it.
	s.handle("POST /api/v1/runs", users, s.createRun)
	s.handle("GET /api/v1/runs", users, s.listRuns)
	s.handle("GET /api/v1/runs/{id}", on(thingRun, store.RoleViewer), s.getRun)
	s.handle("GET /api/v1/projects/{name}/runs/{number}", on(thingProject, store.RoleViewer), s.getRunByNumber)
	s.handle("POST /api/v1/runs/{id}/cancel", on(thingRun, store.RoleDeveloper), s.cancelRun)
	s.handle("POST /api/v1/runs/{id}/retry", on(thingRun, store.RoleDeveloper), s.retryRun)
	s.handle("GET /api/v1/jobs/{id}", on(thingJob, store.RoleViewer), s.getJob)
	s.handle("POST /api/v1/jobs/{id}/cancel", on(thingJob, store.RoleDeveloper), s.cancelJob)
	s.handle("POST /api/v1/jobs/{id}/retry", on(thingJob, store.RoleDeveloper), s.retryJob)
	// Workers and statistics are every project's: for tokens that see every project.
	s.handle("GET /api/v1/workers", globalReaders, s.listWorkers)
	s.handle("GET /api/v1/stats", globalReaders, s.stats)
	s.handle("GET /api/v1/stats/scaling", globalReaders, s.scaling)
	s.handle("GET /healthz", public, s.healthz)
	s.handle("GET /readyz", public, s.readyz)
	// Scrapers send a read token (Prometheus' authorization config) when auth is on.
	s.handle("GET /metrics", globalReaders, s.metrics.Handler().ServeHTTP)
	s.agentRoutes()
	s.rerunRoutes()
	s.inboxRoutes()
	s.tokenRoutes()
	s.logRoutes()
	s.annotationRoutes()
	s.summaryRoutes()
	s.testRoutes()
	s.quarantineRoutes()
	s.wsRoutes()
	s.artifactRoutes()
	s.projectRoutes()
	s.outboxRoutes()
	s.badgeRoutes(cfg.PublicBadges)
	s.workflowRoutes()
	s.secretRoutes()
	s.variableRoutes()
	s.auditRoutes()
	s.environmentRoutes()
	s.cacheRoutes()
	s.approvalRoutes()
	s.memberRoutes()
	if ui := cfg.UI; ui != nil {
		s.mux.Handle("GET /", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/api/") {
				writeError(w, http.StatusNotFound, codeNotFound, "no such route: "+r.URL.Path, nil)
				return
			}
			ui.ServeHTTP(w, r)
		}))
	}
}

// Drain ends the requests that wait: a claim waiting for a job, a worker's control poll
// and a read of a run waiting for a change answer at once with what they have, and a log
// stream ends as a connection that dropped does, which its client opens again. A graceful shutdown
// (http.Server.Shutdown, which waits for every request under way) then need not wait out
// their waits; register it with http.Server.RegisterOnShutdown. Requests that come after
// it do not wait.
func (s *Server) Drain() { s.drain() }

// untilDrained is ctx, also cancelled when the server drains; stop releases it.
func (s *Server) untilDrained(ctx context.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(ctx)
	unhook := context.AfterFunc(s.drained, cancel)
	return ctx, func() {
		unhook()
		cancel()
	}
}

// Close stops what the server started itself (the default log service and the
// evaluations of quarantine rules) and ends the open WebSocket connections, waiting for
// them, so that none reads the store after it returns.
func (s *Server) Close() {
	s.Drain()
	s.rules.close()
	s.conns.close()
	if s.ownLogs {
		s.logs.Close()
	}
}

// handle registers a route and who may call it.
func (s *Server) handle(pattern string, who access, h http.HandlerFunc) {
	s.note(pattern, who)
	s.mux.HandleFunc(pattern, s.guard(who, h))
}

// note adds a route to the route table.
func (s *Server) note(pattern string, who access) {
	s.routeTable = append(s.routeTable, Route{Pattern: pattern, Access: who.String(), Thing: string(who.thing)})
}

// Handler returns the API's handler: the routes wrapped in request logging, panic
// recovery, the rules that keep other sites' pages out (admit), and JSON answers for
// unknown routes and wrong methods.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := s.clock.Now()
		sw := &statusWriter{ResponseWriter: w}
		var span trace.Span
		if tracing.Enabled() {
			r, span = startRequestSpan(r)
		}
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.ErrorContext(r.Context(), "handler panicked",
					"method", r.Method, "path", r.URL.Path, "panic", v)
				if !sw.wroteHeader {
					writeError(sw, http.StatusInternalServerError, codeInternal, "internal error", nil)
				}
			}
			d := s.clock.Now().Sub(start)
			s.metrics.HTTPRequest(r.Pattern, sw.status(), d)
			if span != nil {
				endRequestSpan(span, r, sw.status())
			}
			s.log.DebugContext(r.Context(), "request",
				"method", r.Method, "route", r.Pattern, "status", sw.status(), "duration", d)
		}()
		if !s.admit(sw, r) {
			return
		}
		s.mux.ServeHTTP(&muxErrorWriter{statusWriter: sw, r: r}, r)
		s.noteWrite(r, sw.status())
	})
}

// noteWrite tells the storage state how a write went. A write that worked clears a
// storage-full state of its kind (an upload to the blob store, or anything else); a
// claim or control poll may answer without writing, so they say nothing. The blob
// store's upload handler answers 503 only when its disk is full.
func (s *Server) noteWrite(r *http.Request, status int) {
	if !isWrite(r.Method) {
		return
	}
	blobs := strings.HasPrefix(r.URL.Path, s.blobPrefix)
	switch {
	case status >= 200 && status < 300 && blobs:
		s.storage.wrote(storageBlobs)
	case status >= 200 && status < 300:
		if r.Pattern != "POST /api/v1/agent/claim" && r.Pattern != "POST /api/v1/agent/control" {
			s.storage.wrote(storageData)
		}
	case status == http.StatusServiceUnavailable && blobs:
		s.storage.failed(storageBlobs, s.clock.Now(), errBlobDiskFull)
	}
}

var errBlobDiskFull = errors.New("the blob store's disk is full")

// statusWriter remembers the status a handler wrote, for the request log.
type statusWriter struct {
	http.ResponseWriter
	code        int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.code, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) status() int {
	if !w.wroteHeader {
		return http.StatusOK
	}
	return w.code
}

// Unwrap lets http.ResponseController reach the connection (flushing, deadlines).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// muxErrorWriter turns the mux's own plain-text 404 and 405 answers into the JSON error
// format. The mux sets r.Pattern before calling a handler, and leaves it empty when no
// route matched, so an empty pattern at WriteHeader time means the answer is the mux's.
type muxErrorWriter struct {
	*statusWriter
	r       *http.Request
	swallow bool
}

func (w *muxErrorWriter) WriteHeader(code int) {
	if w.r.Pattern == "" && !w.swallow {
		switch code {
		case http.StatusNotFound:
			w.swallow = true
			w.Header().Del("X-Content-Type-Options")
			writeError(w.statusWriter, code, codeNotFound, "no such route: "+w.r.URL.Path, nil)
			return
		case http.StatusMethodNotAllowed:
			w.swallow = true
			w.Header().Del("X-Content-Type-Options")
			writeError(w.statusWriter, code, codeMethodNotAllowed,
				"method "+w.r.Method+" not allowed; allowed: "+w.Header().Get("Allow"), nil)
			return
		}
	}
	w.statusWriter.WriteHeader(code)
}

func (w *muxErrorWriter) Write(b []byte) (int, error) {
	if w.swallow {
		return len(b), nil
	}
	return w.statusWriter.Write(b)
}

func (w *muxErrorWriter) Unwrap() http.ResponseWriter { return w.statusWriter }
