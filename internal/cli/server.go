package cli

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/gantry-ci/gantry/internal/actions"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/blob"
	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/logs"
	"github.com/gantry-ci/gantry/internal/logs/logchunks"
	"github.com/gantry-ci/gantry/internal/metrics"
	"github.com/gantry-ci/gantry/internal/notify"
	"github.com/gantry-ci/gantry/internal/outbound"
	"github.com/gantry-ci/gantry/internal/pipeline"
	"github.com/gantry-ci/gantry/internal/scheduler"
	"github.com/gantry-ci/gantry/internal/secret"
	gitsource "github.com/gantry-ci/gantry/internal/source"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/postgres"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
)

// serverConfig is everything `gantry server` acts on.
type serverConfig struct {
	Addr           string
	DB             string
	LeaseTTL       time.Duration
	HeartbeatEvery time.Duration
	ReapEvery      time.Duration
	CancelGrace    time.Duration
	LogLevel       string
	LogFormat      string
	// ReapGrace is how long past its TTL a lease is left before its job is taken back;
	// zero is api.DefaultReapGrace (an eighth of the TTL).
	ReapGrace time.Duration
	// Auth is on, off or auto: on unless the address is loopback.
	Auth string
	// AllowedOrigins are comma-separated origins, besides the server's own, whose pages
	// may write (a dashboard behind a proxy that changes the Host); with auth off their
	// host names are answered too.
	AllowedOrigins string
	// LogsDir holds job logs as files; empty keeps them in the database (PostgreSQL) or
	// next to the SQLite file.
	LogsDir    string
	LogMaxSize string
	// Throwaway says the data directory is deleted when the process ends (gantry run):
	// nothing in it is synced to disk, which would outlive nothing, and logs are rows of
	// its database unless LogsDir is set.
	Throwaway    bool
	LogRetention time.Duration
	// Blobs is the blob store's URL; empty keeps blobs next to the SQLite file (and turns
	// artifacts off with PostgreSQL).
	Blobs             string
	ArtifactsExpireIn time.Duration
	// CacheMaxSize bounds each project's cache entries ("0" does not); CacheMaxAge
	// deletes an entry not saved or restored for that long (0 keeps it).
	CacheMaxSize string
	CacheMaxAge  time.Duration
	// UI is the web dashboard the API serves; nil serves none.
	UI http.Handler
	// Dashboard is --dashboard: gantry server serves the web dashboard (UI) unless it is
	// false, when every page of it is a 404 that says so.
	Dashboard bool
	// Mirrors holds the git mirrors webhooks read pipeline files from; empty puts them
	// next to the SQLite file, or under $TMPDIR with PostgreSQL.
	Mirrors string
	// ActionsSource is where the actions steps use are fetched from (actions.ParseSource:
	// a URL template with {owner} and {repo}, a mirror's base URL, or a directory of
	// bare repositories); empty is actions.DefaultSource.
	ActionsSource string
	// ScheduleEvery is how often this replica looks at every schedule (zero:
	// scheduler.DefaultCronEvery).
	ScheduleEvery time.Duration
	// PublicURL is where people reach this server; commit statuses and webhooks link
	// to run pages under it. Empty is the listening address.
	PublicURL string
	// PublicBadges serves project badges without a token when auth is on.
	PublicBadges bool
	// OutboxMaxAttempts, OutboxBackoff and OutboxHold tune the delivery of statuses and
	// webhooks (notify.Config).
	OutboxMaxAttempts int
	OutboxBackoff     time.Duration
	OutboxHold        time.Duration
	// OutboundAllow lists the addresses of the coordinator's own network (CIDR prefixes,
	// addresses, host names, comma-separated) that commit statuses and outbound webhooks
	// may reach; none by default.
	OutboundAllow string
	// AllowPlainHTTP lists the hosts (host or host:port, comma-separated) a project's
	// repository token may be sent to over plain http://; none by default.
	AllowPlainHTTP string
	// OutboundLoopbackWithoutAuth allows loopback besides OutboundAllow when
	// authentication is off (gantry up on loopback).
	OutboundLoopbackWithoutAuth bool
	// SecretsKeyFile holds the key-encryption key of secrets (else GANTRY_SECRETS_KEY);
	// CreateSecretsKey makes it when missing. SecretsOldKeyFiles still open secrets
	// during a rotation (secret.go).
	SecretsKeyFile     string
	CreateSecretsKey   bool
	SecretsOldKeyFiles []string
}

func (a *app) serverCommand() *cobra.Command {
	cfg := serverConfig{
		Addr: "127.0.0.1:8080", DB: "sqlite://.gantry/gantry.db", LogLevel: "info", Auth: "auto",
		LeaseTTL: api.DefaultLeaseTTL, HeartbeatEvery: api.DefaultHeartbeatEvery, ReapEvery: scheduler.DefaultReapEvery, ScheduleEvery: scheduler.DefaultCronEvery,
		CancelGrace: api.DefaultCancelGrace, LogMaxSize: "50Mi", ArtifactsExpireIn: 30 * 24 * time.Hour,
		CacheMaxSize: defaultCacheMaxSize, CacheMaxAge: scheduler.DefaultCacheMaxAge,
		OutboxMaxAttempts: notify.DefaultMaxAttempts, OutboxBackoff: notify.DefaultBackoff, OutboxHold: notify.DefaultHold,
		Dashboard: true,
	}
	cmd := &cobra.Command{
		Use:   "server",
		Short: "Run the coordinator: the HTTP API and the scheduler loops",
		Long: "Server runs a coordinator: the REST API on --addr and the loops that reap lost\n" +
			"jobs, revoke timed-out ones and queue due retries. It keeps no state of its own:\n" +
			"everything is in the store, so any number of servers can share a PostgreSQL\n" +
			"database, and a server that stops loses nothing.\n\n" +
			"--db is sqlite://PATH (embedded; sqlite:///abs/path or sqlite://rel/path) or a\n" +
			"postgres:// URL.\n\n" +
			"Workers lease jobs for --lease-ttl and renew the lease every --heartbeat-every;\n" +
			"a worker that cannot renew a lease stops its job before the TTL ends, and the\n" +
			"job goes back to the queue --reap-grace after the TTL (within --reap-every).\n\n" +
			"--auth on requires a bearer token on every call (create them with gantry token\n" +
			"create); off is allowed only on a loopback address; auto, the default, is on\n" +
			"unless the address is loopback.\n\n" +
			"The web dashboard is served on --addr too, at every path the API does not own\n" +
			"(with auth on it asks for a token first); --dashboard=false turns it off, for an\n" +
			"API-only replica.\n\n" +
			"Job logs are kept as files in --logs-dir (default: a logs directory next to the\n" +
			"SQLite file) or, with PostgreSQL and no --logs-dir, in the database where every\n" +
			"replica reads them. --log-max-size caps one job attempt's log; --log-retention\n" +
			"deletes logs, and the step summaries of their jobs, older than that (0 keeps\n" +
			"them).\n\n" +
			"Artifacts are stored by content in --blobs: file:///dir (default: a blobs\n" +
			"directory next to the SQLite file), whose signed URLs this server serves on\n" +
			"/blobs/, or s3://bucket?endpoint=host:port&region=R&secure=false with credentials\n" +
			"from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY. Workers upload and download\n" +
			"straight to it through pre-signed URLs. Artifacts whose job sets no expire_in\n" +
			"are deleted after --artifacts-expire-in (0 keeps them); blobs no artifact names\n" +
			"any more are deleted a day later.\n\n" +
			"Jobs' caches are archives in the same blob store. Every hour the entries a project\n" +
			"has not restored or saved for --cache-max-age are deleted, then its least recently\n" +
			"used ones until what is left fits in --cache-max-size; their archives go with the\n" +
			"unused blobs.\n\n" +
			"Commit statuses and outbound webhooks never reach loopback, link-local (cloud\n" +
			"metadata), private or other special-purpose addresses, checked on the address\n" +
			"dialed, unless --outbound-allow lists them: a forge or receiver inside your network\n" +
			"(10.0.0.0/8, ghe.internal) must be listed. They follow no redirect and use no proxy.",
		Example: "  gantry server --db sqlite:///var/lib/gantry/gantry.db\n" +
			"  gantry server --addr :8080 --db postgres://gantry@db/gantry",
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := cfg.validate(); err != nil {
				return err
			}
			cfg.UI = dashboardOff()
			if cfg.Dashboard {
				cfg.UI = dashboard()
			}
			return a.server(cmd.Context(), cfg)
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfg.Addr, "addr", cfg.Addr, "address to listen on")
	f.StringVar(&cfg.DB, "db", cfg.DB, "store: sqlite://PATH or postgres://...")
	f.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "how long a worker's lease on a job lasts without a heartbeat")
	f.DurationVar(&cfg.HeartbeatEvery, "heartbeat-every", cfg.HeartbeatEvery, "how often workers are told to renew their leases")
	f.DurationVar(&cfg.ReapEvery, "reap-every", cfg.ReapEvery, "how often expired leases are reaped")
	f.DurationVar(&cfg.ReapGrace, "reap-grace", cfg.ReapGrace, "how long past --lease-ttl a lease not renewed is left to its worker before its job runs again (0: an eighth of --lease-ttl)")
	f.DurationVar(&cfg.CancelGrace, "cancel-grace", cfg.CancelGrace, "time between SIGTERM and SIGKILL for jobs that set no cancel_grace")
	f.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "debug, info, warn or error")
	f.StringVar(&cfg.LogFormat, "log-format", "auto", logFormatUsage)
	f.StringVar(&cfg.Auth, "auth", cfg.Auth, "on, off or auto (on unless --addr is loopback)")
	f.StringVar(&cfg.AllowedOrigins, "allowed-origins", "", "comma-separated origins (https://ci.example.com) whose pages may write besides the server's own")
	f.StringVar(&cfg.LogsDir, "logs-dir", cfg.LogsDir, "directory for job logs (default: next to the SQLite file; in the database with PostgreSQL)")
	f.StringVar(&cfg.LogMaxSize, "log-max-size", cfg.LogMaxSize, "most log one job attempt keeps, e.g. 50Mi")
	f.DurationVar(&cfg.LogRetention, "log-retention", cfg.LogRetention, "delete job logs and step summaries older than this, e.g. 720h (0 keeps them)")
	f.StringVar(&cfg.Blobs, "blobs", cfg.Blobs, "blob store for artifacts: file:///dir or s3://bucket?endpoint=host:port (default: next to the SQLite file)")
	f.StringVar(&cfg.Mirrors, "mirrors", "", "directory of the git mirrors webhooks read pipeline files from (default: next to the SQLite file; $TMPDIR/gantry-mirrors with PostgreSQL)")
	f.StringVar(&cfg.ActionsSource, "actions-source", "", actionsSourceUsage)
	f.DurationVar(&cfg.ScheduleEvery, "schedule-every", cfg.ScheduleEvery, "how often on: schedule entries are looked at; every replica looks, and each tick fires once")
	f.StringVar(&cfg.PublicURL, "public-url", "", "URL people reach this server at; commit statuses and webhooks link to run pages under it (default: http://ADDR)")
	f.BoolVar(&cfg.Dashboard, "dashboard", cfg.Dashboard, "serve the web dashboard on --addr; --dashboard=false serves the API only")
	f.BoolVar(&cfg.PublicBadges, "public-badges", false, "serve project badges (badge.svg) without a token when auth is on")
	f.StringVar(&cfg.SecretsKeyFile, "secrets-key-file", "", "key-encryption key of secrets: 32 random bytes, raw or base64, mode 0600 (default: GANTRY_SECRETS_KEY; neither: secrets off)")
	f.StringArrayVar(&cfg.SecretsOldKeyFiles, "secrets-old-key-file", nil, "a previous key that still opens secrets during gantry secret rotate-key (repeatable)")
	f.IntVar(&cfg.OutboxMaxAttempts, "outbox-max-attempts", cfg.OutboxMaxAttempts, "attempts a commit status or webhook gets before it is dead-lettered")
	f.DurationVar(&cfg.OutboxBackoff, "outbox-backoff", cfg.OutboxBackoff, "cap of the first retry's wait for statuses and webhooks; it doubles with each attempt (full jitter)")
	f.DurationVar(&cfg.OutboxHold, "outbox-hold", cfg.OutboxHold, "how long a status or webhook being sent is hidden from other replicas; one lost in a crash is retried after it")
	f.StringVar(&cfg.AllowPlainHTTP, "allow-plain-http", "", "comma-separated hosts (git.lan or git.lan:8080) a project's repository token may be sent to over plain http:// (default: none; tokens go over https only)")
	f.StringVar(&cfg.OutboundAllow, "outbound-allow", "", "comma-separated CIDR prefixes, addresses and host names of this server's own network that commit statuses and outbound webhooks may reach (default: none; e.g. 10.0.0.0/8,ghe.internal)")
	f.DurationVar(&cfg.ArtifactsExpireIn, "artifacts-expire-in", cfg.ArtifactsExpireIn, "delete artifacts this long after they were kept, unless their job sets expire_in (0 keeps them)")
	f.StringVar(&cfg.CacheMaxSize, "cache-max-size", cfg.CacheMaxSize, "most each project's caches keep, e.g. 10Gi; the least recently used go first (0: no bound)")
	f.DurationVar(&cfg.CacheMaxAge, "cache-max-age", cfg.CacheMaxAge, "delete a cache entry not saved or restored for this long, e.g. 168h (0 keeps it)")
	return cmd
}

func (c *serverConfig) validate() error {
	if c.ReapEvery <= 0 || c.LeaseTTL <= 0 || c.HeartbeatEvery <= 0 || c.CancelGrace <= 0 {
		return usagef("--lease-ttl, --heartbeat-every, --reap-every and --cancel-grace must be positive")
	}
	if c.ReapGrace < 0 {
		return usagef("--reap-grace must not be negative")
	}
	if c.ScheduleEvery < 0 || c.ScheduleEvery > time.Minute {
		// A tick noticed more than trigger.OnTimeWindow late counts as missed.
		return usagef("--schedule-every must be between 0 (the default, 15s) and 1m")
	}
	if c.HeartbeatEvery*2 > c.LeaseTTL {
		// A single late heartbeat must not lose the lease.
		return usagef("--heartbeat-every (%s) must be at most half of --lease-ttl (%s)", c.HeartbeatEvery, c.LeaseTTL)
	}
	if _, err := logLevel(c.LogLevel); err != nil {
		return err
	}
	if err := checkLogFormat(c.LogFormat); err != nil {
		return err
	}
	if n, err := pipeline.ParseSize(c.LogMaxSize); err != nil || n < 1<<20 {
		return usagef("--log-max-size %q: want a size of at least 1Mi, such as 50Mi", c.LogMaxSize)
	}
	if c.LogRetention < 0 {
		return usagef("--log-retention must not be negative")
	}
	if c.ArtifactsExpireIn < 0 {
		return usagef("--artifacts-expire-in must not be negative")
	}
	if _, err := c.cachePolicy(); err != nil {
		return err
	}
	if c.OutboxMaxAttempts < 1 || c.OutboxBackoff <= 0 || c.OutboxHold < time.Second {
		return usagef("--outbox-max-attempts and --outbox-backoff must be positive and --outbox-hold at least 1s")
	}
	if c.PublicURL != "" {
		if u, err := url.Parse(c.PublicURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return usagef("--public-url %q: want http(s)://host[:port][/path]", c.PublicURL)
		}
	}
	if c.Blobs != "" && !strings.HasPrefix(c.Blobs, "file://") && !strings.HasPrefix(c.Blobs, "s3://") {
		return usagef("--blobs %q: want file:///dir or s3://bucket?endpoint=host:port", c.Blobs)
	}
	if err := checkAuthMode(c.Auth, c.Addr); err != nil {
		return err
	}
	if !c.dbSchemeOK() {
		return usagef("--db %q: want sqlite://PATH or postgres://...", c.DB)
	}
	if _, _, err := c.origins(); err != nil {
		return err
	}
	if _, err := outbound.Parse(c.OutboundAllow); err != nil {
		return usagef("--outbound-allow: %v", err)
	}
	if _, err := c.plainHTTPHosts(); err != nil {
		return err
	}
	if _, err := actions.ParseSource(c.ActionsSource); err != nil {
		return usagef("--actions-source: %v", err)
	}
	return nil
}

// actionsSourceUsage says what --actions-source takes.
const actionsSourceUsage = "where the actions steps use come from: a URL with {owner} and {repo}, a mirror's base URL (Gitea, Forgejo), or a directory of bare repositories owner/repo.git (default: " + actions.DefaultSource + ")"

// plainHTTPHosts parses --allow-plain-http into host or host:port entries.
func (c *serverConfig) plainHTTPHosts() ([]string, error) {
	var hosts []string
	for _, h := range strings.Split(c.AllowPlainHTTP, ",") {
		if h = strings.TrimSpace(h); h == "" {
			continue
		}
		u, err := url.Parse("http://" + h)
		if err != nil || u.Host != h || u.Hostname() == "" || u.User != nil {
			return nil, usagef("--allow-plain-http: %q is not a host: want a name or address, with a port or not, such as git.lan or 10.0.0.5:3000", h)
		}
		hosts = append(hosts, h)
	}
	return hosts, nil
}

// origins parses --allowed-origins into the origins and their hosts.
func (c *serverConfig) origins() (origins, hosts []string, err error) {
	for _, o := range strings.Split(c.AllowedOrigins, ",") {
		if o = strings.TrimSuffix(strings.TrimSpace(o), "/"); o == "" {
			continue
		}
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
			return nil, nil, usagef("--allowed-origins: %q is not an origin: want scheme://host[:port], such as https://ci.example.com", o)
		}
		origins = append(origins, o)
		hosts = append(hosts, u.Host)
	}
	return origins, hosts, nil
}

func logLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return 0, usagef("--log-level %q: want debug, info, warn or error", s)
	}
	return l, nil
}

func (c *serverConfig) dbSchemeOK() bool {
	return strings.HasPrefix(c.DB, "sqlite://") || strings.HasPrefix(c.DB, "postgres://") || strings.HasPrefix(c.DB, "postgresql://")
}

// outboundAllow is --outbound-allow, with loopback added where OutboundLoopbackWithoutAuth
// says so.
func (c *serverConfig) outboundAllow() string {
	if c.OutboundLoopbackWithoutAuth && !c.authOn() {
		return strings.Trim(c.OutboundAllow+",127.0.0.0/8,::1", ",")
	}
	return c.OutboundAllow
}

// authOn resolves --auth.
func (c *serverConfig) authOn() bool {
	return c.Auth == "on" || (c.Auth == "auto" && !loopback(c.Addr))
}

// loopback reports whether addr listens only on a loopback interface.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// checkAuthMode checks an --auth value for a server listening on addr: on, auto, or off
// on a loopback address only.
func checkAuthMode(auth, addr string) error {
	switch auth {
	case "on", "auto":
	case "off":
		if !loopback(addr) {
			return usagef("--auth off is allowed only on a loopback address, not %q: anyone who can reach it could run commands", addr)
		}
	default:
		return usagef("--auth %q: want on, off or auto", auth)
	}
	return nil
}

// openStore opens the store a --db value names.
func openStore(ctx context.Context, db string, opts sqlite.Options) (store.Store, error) {
	if path, ok := strings.CutPrefix(db, "sqlite://"); ok {
		if err := ensureDir(path); err != nil {
			return nil, err
		}
		return sqlite.Open(ctx, path, opts)
	}
	return postgres.Open(ctx, db, opts)
}

// openStoreWaiting opens the store, trying again while its database is unavailable
// (not there yet, cut off, recovering), as a worker waits for its coordinator: a replica
// started beside its database, or restarted while the database is away, comes up once
// the database does, instead of exiting for its supervisor to start again. Any other
// error (a bad URL, a wrong password, no such database) ends it at once.
func openStoreWaiting(ctx context.Context, db string, opts sqlite.Options, log *slog.Logger) (store.Store, error) {
	backoff := 500 * time.Millisecond
	for {
		st, err := openStore(ctx, db, opts)
		if err == nil || !errors.Is(err, store.ErrUnavailable) || ctx.Err() != nil {
			return st, err
		}
		log.Warn("database unavailable; trying again", "err", err, "in", backoff)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return nil, err
		}
		backoff = min(backoff*2, 10*time.Second)
	}
}

func (a *app) server(ctx context.Context, cfg serverConfig) error {
	log := newLogger(a.stderr, cfg.LogLevel, cfg.LogFormat)
	stopTracing, err := startTracing(ctx, "gantry-server", log)
	if err != nil {
		return err
	}
	defer stopTracing()
	c, err := startCoordinator(ctx, cfg, log)
	if err != nil {
		return err
	}
	select {
	case err = <-c.served:
		c.stop(ctx)
	case <-ctx.Done():
		log.Info("shutting down")
		err = c.stop(ctx)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// coordinator is a running `gantry server`: the store, the HTTP API and the scheduler
// loops. `gantry up` runs one beside its workers.
type coordinator struct {
	base   string // http://host:port
	store  store.Store
	log    *slog.Logger
	served chan error // the HTTP server's end, if it ends on its own
	stop   func(ctx context.Context) error
}

// startCoordinator opens the store, log and blob storage that cfg names and serves the API
// and the scheduler loops until stop.
func startCoordinator(ctx context.Context, cfg serverConfig, log *slog.Logger) (*coordinator, error) {
	st, err := openStoreWaiting(ctx, cfg.DB, sqlite.Options{Clock: clock.Real{}, Logger: log}, log)
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	// One registry for the API, the log service and the scheduler loops, all of which
	// use the timed store.
	m := metrics.NewCoordinator()
	st = metrics.InstrumentStore(st, m)
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	closers = append(closers, func() {
		if err := st.Close(); err != nil {
			log.Error("close store", "err", err)
		}
	})
	ln, err := net.Listen("tcp", cfg.Addr)
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("listen: %w", err)
	}
	blobs, err := openBlobs(cfg, log)
	if err != nil {
		_ = ln.Close()
		closeAll()
		return nil, err
	}
	if blobs == nil {
		log.Warn("no blob store: artifacts are off; set --blobs to keep them")
	} else {
		closers = append(closers, func() { _ = blobs.Close() })
	}
	logSvc, closeLogs, err := openLogs(cfg, st, blobs, log, m.LogsStored)
	if err != nil {
		_ = ln.Close()
		closeAll()
		return nil, err
	}
	closers = append(closers, closeLogs)
	origins, hosts, _ := cfg.origins() // validated
	// The mirrors hold the projects' source: private, like the rest of the data.
	if err := mkdirPrivate(cfg.mirrorsDir()); err != nil {
		_ = ln.Close()
		closeAll()
		return nil, fmt.Errorf("create mirrors directory: %w", err)
	}
	keys, err := cfg.secretsKeyring(log)
	if err != nil {
		_ = ln.Close()
		closeAll()
		return nil, err
	}
	if keys != nil {
		// Webhook secrets stored in plain text (before sealing, or by a coordinator
		// without a key) are sealed, and ones under an older key rewrapped. One that
		// cannot be opened is left as it is and refuses hooks, saying so in the log.
		sealed, rewrapped, failed, err := keys.SealWebhookSecrets(ctx, st)
		switch {
		case err != nil:
			log.Error("seal webhook secrets", "err", err)
		case sealed+rewrapped+failed > 0:
			log.Info("sealed webhook secrets", "sealed", sealed, "rewrapped", rewrapped, "cannot_open", failed)
		}
	}
	// What of this server's own network commit statuses and webhooks may reach, both
	// when a subscription is set (api) and when anything is sent (notify).
	allow, _ := outbound.Parse(cfg.outboundAllow())            // validated
	plainHTTP, _ := cfg.plainHTTPHosts()                       // validated
	actionsSource, _ := actions.ParseSource(cfg.ActionsSource) // validated
	resolver := &actions.Resolver{Source: actionsSource, MirrorsDir: cfg.mirrorsDir(), Logger: log}
	apiSrv := api.New(api.Config{Store: st, Logger: log, LeaseTTL: cfg.LeaseTTL, HeartbeatEvery: cfg.HeartbeatEvery, ReapGrace: cfg.ReapGrace,
		CancelGrace: cfg.CancelGrace, Auth: cfg.authOn(), Logs: logSvc,
		Blobs: blobs, ArtifactTTL: cfg.ArtifactsExpireIn, UI: cfg.UI, Metrics: m, DataDirs: cfg.dataDirs(),
		AllowedOrigins: origins, AllowedHosts: hosts, MirrorsDir: cfg.mirrorsDir(), PublicBadges: cfg.PublicBadges,
		Secrets: keys, Outbound: allow, AllowPlainHTTP: plainHTTP, Actions: resolver})
	var fresh newConns
	srv := &http.Server{
		ConnState:         fresh.track,
		Handler:           apiSrv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       time.Minute,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	// Shutdown waits for every request under way: the long-polls (claims, waiting reads
	// of runs, log streams) answer at once instead of holding it up to their waits.
	srv.RegisterOnShutdown(apiSrv.Drain)
	loops := scheduler.New(scheduler.Config{Store: st, Logger: log, ReapEvery: cfg.ReapEvery, StartGrace: cfg.LeaseTTL, Reaped: m.Reaped})
	loopCtx, stopLoops := context.WithCancel(context.WithoutCancel(ctx))
	loopsDone := make(chan struct{})
	go func() {
		defer close(loopsDone)
		loops.Run(loopCtx)
	}()
	// Every replica fires schedules; the store lets exactly one take each tick.
	publicURL := cmp.Or(cfg.PublicURL, "http://"+ln.Addr().String())
	cron := scheduler.NewCron(scheduler.CronConfig{Store: st, Logger: log, Every: cfg.ScheduleEvery, MirrorsDir: cfg.mirrorsDir(), Pin: resolver.Pin, Workflows: resolver.Workflows,
		PublicURL: publicURL,
		Credentials: func(ctx context.Context, p *store.Project) (gitsource.Credentials, error) {
			c, err := secret.RepoCredentials(ctx, st.GetSecret, keys, p)
			c.AllowPlainHTTP = gitsource.PlainHTTPAllowed(p.RepoURL, plainHTTP)
			return c, err
		}})
	cronDone := make(chan struct{})
	go func() {
		defer close(cronDone)
		cron.Run(loopCtx)
	}()
	// The background loops below end with loopCtx; stop waits for them before it closes
	// the store they use and returns, after which nothing may write to the log.
	var background sync.WaitGroup
	if cfg.LogRetention > 0 {
		background.Go(func() { purgeLogs(loopCtx, logSvc, st, cfg.LogRetention, log) })
	}
	if blobs != nil {
		policy, _ := cfg.cachePolicy() // validated
		background.Go(func() { collectArtifacts(loopCtx, st, blobs, policy, log) })
	}
	// Statuses and webhooks the store enqueued with each change; a message this process
	// was sending when it stopped is retried after OutboxHold, here or on a replica.
	// Runs of on: workflow_run too: the schedule loop's reading of the projects' files
	// starts them.
	outbox := notify.New(notify.Config{Store: st, Logger: log, PublicURL: publicURL,
		MaxAttempts: cfg.OutboxMaxAttempts, Backoff: cfg.OutboxBackoff, Hold: cfg.OutboxHold, Secrets: keys, Outbound: allow,
		Changes: apiSrv.ChangedPaths, WorkflowRuns: cron})
	background.Go(func() { outbox.Run(loopCtx) })
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("gantry server listening", "addr", ln.Addr().String(), "db", redactURL(cfg.DB), "auth", cfg.authOn())
	if !cfg.authOn() {
		log.Warn("authentication is off: anyone who can reach this loopback address can submit and run jobs")
	}
	c := &coordinator{base: "http://" + ln.Addr().String(), store: st, log: log, served: served}
	c.stop = func(ctx context.Context) error {
		shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		err := fresh.shutdown(shutdownCtx, srv)
		cancel()
		// What the API started beyond its requests (WebSockets, rule evaluations) ends
		// before the store it reads is closed.
		apiSrv.Close()
		stopLoops()
		<-loopsDone
		<-cronDone
		background.Wait()
		closeAll()
		return err
	}
	return c, nil
}

// openLogs makes the log service: files in a directory in embedded mode, chunks in the
// database (shared by replicas) with PostgreSQL unless --logs-dir says otherwise, moved
// to the blob store when their attempt ends; chunks left in the database for a
// throwaway data directory.
func openLogs(cfg serverConfig, st store.Store, blobs blob.Store, log *slog.Logger, stored func(int, int64)) (*logs.Service, func(), error) {
	maxBytes, _ := pipeline.ParseSize(cfg.LogMaxSize)
	dir := cfg.LogsDir
	if path, ok := strings.CutPrefix(cfg.DB, "sqlite://"); ok && dir == "" {
		dir = filepath.Join(filepath.Dir(path), "logs")
	}
	var storage logs.Storage = logchunks.New(st).WithBlobs(blobs)
	if cfg.Throwaway && cfg.LogsDir == "" {
		// A data directory deleted when its process ends (gantry run) keeps its logs as
		// rows of its database, as appended: nothing reads them after the process, and a
		// row costs less than the file and directory each job attempt would get (0.86x
		// the CPU per job of a chain of 50, 0.83x of 200 independent jobs, measured
		// alternately; BENCHMARKS.md).
		storage, dir = logchunks.New(st).WithoutCompaction(), ""
	}
	if dir != "" {
		var syncEvery time.Duration
		if cfg.Throwaway {
			syncEvery = logs.NeverSync
		}
		fs, err := logs.OpenFileStorage(dir, syncEvery, log)
		if err != nil {
			return nil, nil, err
		}
		storage = fs
	}
	svc := logs.NewService(logs.Config{Storage: storage, Notifier: st, MaxBytes: maxBytes, Logger: log, Stored: stored})
	return svc, func() {
		svc.Close()
		if err := storage.Close(); err != nil {
			log.Error("close log storage", "err", err)
		}
	}, nil
}

// openBlobs opens the blob store --blobs names: by default a directory next to the SQLite
// file, and none with PostgreSQL. A directory store keeps its URL-signing key inside it,
// so that servers sharing the directory sign alike and URLs outlive a restart.
func openBlobs(cfg serverConfig, log *slog.Logger) (blob.Store, error) {
	u := cfg.Blobs
	if u == "" {
		path, ok := strings.CutPrefix(cfg.DB, "sqlite://")
		if !ok {
			return nil, nil
		}
		abs, err := filepath.Abs(filepath.Join(filepath.Dir(path), "blobs"))
		if err != nil {
			return nil, err
		}
		u = "file://" + abs
	}
	opts := blob.Options{Logger: log}
	if dir, ok := strings.CutPrefix(u, "file://"); ok {
		if err := mkdirPrivate(dir); err != nil {
			return nil, fmt.Errorf("blob store: %w", err)
		}
		key, err := throwawayKey(cfg, blob.KeySize)
		if key == nil && err == nil {
			key, err = blob.LoadOrCreateKey(filepath.Join(dir, "signing.key"))
		}
		if err != nil {
			return nil, fmt.Errorf("blob store: %w", err)
		}
		opts.Secret = key
	}
	bs, err := blob.Open(u, opts)
	if err != nil {
		return nil, fmt.Errorf("blob store: %w", err)
	}
	return bs, nil
}

// throwawayKey is a new random key of size bytes for a throwaway data directory, whose
// keys need outlive nothing and so need no file, written and synced; nil otherwise.
func throwawayKey(cfg serverConfig, size int) ([]byte, error) {
	if !cfg.Throwaway {
		return nil, nil
	}
	key := make([]byte, size)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("make a key: %w", err)
	}
	return key, nil
}

// mirrorsDir is where the coordinator keeps its git mirrors: --mirrors, else a mirrors
// directory next to the SQLite file, else (PostgreSQL) api.DefaultMirrorsDir.
func (c *serverConfig) mirrorsDir() string {
	if c.Mirrors != "" {
		return c.Mirrors
	}
	if path, ok := strings.CutPrefix(c.DB, "sqlite://"); ok {
		path, _, _ = strings.Cut(path, "?")
		return filepath.Join(filepath.Dir(path), "mirrors")
	}
	return api.DefaultMirrorsDir()
}

// dataDirs are the directories on local disk this coordinator writes (the SQLite file's,
// logs, blobs), which /readyz probes while writes fail for lack of space.
func (c *serverConfig) dataDirs() []string {
	var dirs []string
	if path, ok := strings.CutPrefix(c.DB, "sqlite://"); ok {
		path, _, _ = strings.Cut(path, "?")
		dir := filepath.Dir(path)
		dirs = append(dirs, dir)
		if c.LogsDir == "" {
			dirs = append(dirs, filepath.Join(dir, "logs"))
		}
		if c.Blobs == "" {
			dirs = append(dirs, filepath.Join(dir, "blobs"))
		}
	}
	if c.LogsDir != "" {
		dirs = append(dirs, c.LogsDir)
	}
	if dir, ok := strings.CutPrefix(c.Blobs, "file://"); ok {
		dirs = append(dirs, dir)
	}
	return dirs
}

// defaultCacheMaxSize is scheduler.DefaultCacheMaxSize as --cache-max-size reads it.
const defaultCacheMaxSize = "10Gi"

// cachePolicy reads --cache-max-size and --cache-max-age.
func (c *serverConfig) cachePolicy() (scheduler.CachePolicy, error) {
	p := scheduler.CachePolicy{MaxAge: c.CacheMaxAge}
	if c.CacheMaxAge < 0 {
		return p, usagef("--cache-max-age must not be negative")
	}
	if c.CacheMaxSize != "" && c.CacheMaxSize != "0" {
		n, err := pipeline.ParseSize(c.CacheMaxSize)
		if err != nil || n <= 0 {
			return p, usagef("--cache-max-size %q: want a size such as 10Gi, or 0 for no bound", c.CacheMaxSize)
		}
		p.MaxBytes = n
	}
	return p, nil
}

// collectArtifacts evicts the cache entries policy no longer keeps, deletes expired
// artifacts, and then the blobs nothing names any more, now and then every hour.
func collectArtifacts(ctx context.Context, st store.Store, bs blob.Store, policy scheduler.CachePolicy, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		if n, err := scheduler.EvictCaches(ctx, st, policy, time.Now()); err != nil {
			log.Error("evict caches", "err", err)
		} else if n > 0 {
			log.Info("evicted cache entries", "entries", n)
		}
		res, err := scheduler.CollectArtifacts(ctx, st, bs, time.Now(), scheduler.BlobGrace)
		if err != nil {
			log.Error("collect expired artifacts", "err", err)
		} else if res.Artifacts > 0 || res.Blobs > 0 {
			log.Info("deleted expired artifacts", "artifacts", res.Artifacts, "blobs", res.Blobs, "bytes", res.Bytes)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// purgeLogs deletes logs, and the step summaries and test results that go with them,
// older than retention, now and then every hour.
func purgeLogs(ctx context.Context, svc *logs.Service, summaries summaryPurger, retention time.Duration, log *slog.Logger) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		purgeBefore(ctx, svc, summaries, time.Now().Add(-retention), log)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// purgeBefore deletes the logs, step summaries and test results older than cut.
func purgeBefore(ctx context.Context, svc *logs.Service, summaries summaryPurger, cut time.Time, log *slog.Logger) {
	n, err := svc.Purge(ctx, cut)
	if err != nil {
		log.Error("purge old logs", "err", err)
	} else if n > 0 {
		log.Info("purged old logs", "count", n, "before", cut)
	}
	if n, err := summaries.DeleteSummariesBefore(ctx, cut); err != nil {
		log.Error("purge old step summaries", "err", err)
	} else if n > 0 {
		log.Info("purged old step summaries", "count", n, "before", cut)
	}
	if n, err := summaries.DeleteTestResultsBefore(ctx, cut); err != nil {
		log.Error("purge old test results", "err", err)
	} else if n > 0 {
		log.Info("purged old test results", "count", n, "before", cut)
	}
}

// summaryPurger deletes step summaries and test results kept before a time
// (store.Summaries, store.TestResults).
type summaryPurger interface {
	DeleteSummariesBefore(ctx context.Context, before time.Time) (int, error)
	DeleteTestResultsBefore(ctx context.Context, before time.Time) (int, error)
}

// redactURL hides a password in a database URL before it is logged.
func redactURL(s string) string {
	at := strings.LastIndex(s, "@")
	scheme := strings.Index(s, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return s
	}
	userinfo := s[scheme+3 : at]
	if user, _, ok := strings.Cut(userinfo, ":"); ok {
		return s[:scheme+3] + user + ":xxxxx" + s[at:]
	}
	return s
}

// ensureDir creates the directory a database file will live in.
func ensureDir(path string) error {
	dir := filepath.Dir(path)
	if err := mkdirPrivate(dir); err != nil {
		return fmt.Errorf("create data directory %s: %w", dir, err)
	}
	return nil
}

// mkdirPrivate creates dir and its missing parents with mode 0700, whatever the umask:
// they hold the database, logs, artifacts and keys. Directories that exist already keep
// their mode (they may be the user's own, such as the working directory).
func mkdirPrivate(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirPrivate(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return os.Chmod(dir, 0o700)
}
