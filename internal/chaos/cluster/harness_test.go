package cluster

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/gantry-ci/gantry/internal/blob/blobtest"
	"github.com/gantry-ci/gantry/internal/executor/docker/dockertest"
	"github.com/gantry-ci/gantry/internal/testbin"
)

// The suite's images. Gantry's: FROM scratch, the gantry binary (static) and busybox,
// which both the workers' shell steps and the container jobs run. The host one: FROM
// scratch with only /etc/passwd and the links of a merged-/usr Debian, for PostgreSQL and
// MinIO, whose binaries come from the host's /usr (bound read-only) and the MinIO `make
// deps` built: nothing is pulled.
const (
	gantryImage = "gantry-cluster/gantry:1"
	hostImage   = "gantry-cluster/host:1"
	labelSuite  = "gantry.cluster" // every container and network of a suite run carries its id
	pgUID       = "999"
	minioUser   = "gantry-cluster"
	minioBucket = "gantry"
	serverPort  = "8080"
)

// node is one container of the cluster.
type node struct {
	name    string // r1, w2, d1, pg, minio: also its host name and DNS name
	kind    string // replica, worker, docker-worker, db, blobs
	id      string // the container's id
	ip      netip.Addr
	aliases []string
}

// cluster is one suite run's containers and the network they share.
type cluster struct {
	t      *testing.T
	cli    *client.Client
	id     string
	dir    string // on the host: the ledger, databases' data, the docker workers' work dirs
	netID  string
	subnet netip.Prefix
	nodes  []*node
	byName map[string]*node

	pgURL  string // from the host
	admin  string // an admin token
	ledger *ledgerServer
	cfg    config

	mu      sync.Mutex
	workers map[string]string // worker id -> node name, from the workers' logs
}

// config sizes one suite run.
type config struct {
	replicas, workers, dockerWorkers, maxJobs int
	leaseTTL, heartbeat, grace                time.Duration
	// faults is how long the nemesis runs; warmup how long runs are submitted before it
	// starts; settle the bound on every job ending once the faults stop.
	faults, warmup, settle time.Duration
	pace                   time.Duration // between two submitted runs
	kinds                  []string
	keep                   bool
}

// gantryBinary is the bytes of testbin.Gantry's binary: statically linked (no cgo) and
// stripped, so that it runs in an image that holds nothing else but busybox.
var gantryBinary = sync.OnceValues(func() ([]byte, error) {
	bin, err := testbin.Gantry()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(bin)
})

// buildImages makes the suite's two images, rebuilding Gantry's only when the binary
// changed.
func buildImages(t *testing.T, cli *client.Client) {
	t.Helper()
	began := time.Now()
	bin, err := gantryBinary()
	if err != nil {
		t.Fatal(err)
	}
	dockertest.Build(t, dockertest.Spec{Name: gantryImage, Files: map[string]string{"usr/local/bin/gantry": string(bin)}})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if _, err := cli.ImageInspect(ctx, hostImage); err != nil {
		if !cerrdefs.IsNotFound(err) {
			t.Fatalf("inspect %s: %v", hostImage, err)
		}
		rootfs, err := hostRootfs()
		if err != nil {
			t.Fatal(err)
		}
		res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: bytes.NewReader(rootfs), SourceName: "-"}, hostImage, client.ImageImportOptions{})
		if err != nil {
			t.Fatalf("import %s: %v", hostImage, err)
		}
		_, _ = io.Copy(io.Discard, res)
		res.Close()
	}
	t.Logf("images %s (gantry %d MB) and %s ready in %s", gantryImage, len(bin)>>20, hostImage, time.Since(began).Round(time.Millisecond))
}

// hostRootfs is the host image's file system: the merged-/usr links, /etc/passwd with
// the user PostgreSQL runs as, and /tmp.
func hostRootfs() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	mtime := time.Unix(0, 0)
	for _, d := range []struct {
		name string
		mode int64
	}{{"etc/", 0o755}, {"tmp/", 0o1777}, {"usr/", 0o755}, {"data/", 0o755}, {"proc/", 0o755}, {"sys/", 0o755}, {"dev/", 0o755}} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d.name, Mode: d.mode, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	for _, l := range []string{"bin", "lib", "lib64", "sbin"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: l, Linkname: "usr/" + l, Mode: 0o777, ModTime: mtime}); err != nil {
			return nil, err
		}
	}
	files := map[string]string{
		"etc/passwd": "root:x:0:0:root:/root:/bin/sh\npostgres:x:" + pgUID + ":" + pgUID + ":postgres:/data:/bin/sh\n",
		"etc/group":  "root:x:0:\npostgres:x:" + pgUID + ":\n",
	}
	for _, name := range []string{"etc/group", "etc/passwd"} {
		c := files[name]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o644, Size: int64(len(c)), ModTime: mtime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write([]byte(c)); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// newCluster creates the network and starts PostgreSQL, MinIO, the replicas and the
// workers, and the ledger server the container jobs write to. Everything is removed when
// the test ends, unless cfg.keep.
func newCluster(t *testing.T, cfg config) *cluster {
	t.Helper()
	cli := dockertest.Client(t)
	buildImages(t, cli)
	for _, p := range []string{"/usr/lib/postgresql"} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the cluster suite runs the host's PostgreSQL in a container: %v (make deps installs it)", err)
		}
	}
	minio, err := blobtest.FindMinIO()
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, cli: cli, id: randomHex(4), dir: t.TempDir(), cfg: cfg, byName: map[string]*node{}, workers: map[string]string{}}
	if err := os.Chmod(c.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.teardown)
	c.createNetwork()

	pgData := c.hostDir("pgdata")
	if err := os.Chown(pgData, 999, 999); err != nil {
		t.Fatal(err)
	}
	pg := c.add(&node{name: "pg", kind: "db"})
	// initdb on the first start only; a restart after a kill recovers from the WAL.
	c.run(pg, &container.Config{Image: hostImage, User: pgUID + ":" + pgUID, Env: []string{"LANG=C"},
		Cmd: []string{"/bin/sh", "-c", `set -e
PG=$(ls -d /usr/lib/postgresql/*/bin | tail -n 1)
if [ ! -f /data/PG_VERSION ]; then
	"$PG/initdb" -D /data -U postgres --auth=trust -E UTF8 --locale=C >/dev/null
	echo "host all all 0.0.0.0/0 trust" >> /data/pg_hba.conf
fi
exec "$PG/postgres" -D /data -c listen_addresses=* -c unix_socket_directories= -c max_connections=300`}},
		[]string{"/usr:/usr:ro", pgData + ":/data"})

	blobs := c.hostDir("minio")
	mn := c.add(&node{name: "minio", kind: "blobs"})
	c.run(mn, &container.Config{Image: hostImage, Env: []string{"MINIO_ROOT_USER=" + minioUser, "MINIO_ROOT_PASSWORD=" + minioSecret,
		"MINIO_BROWSER=off", "MINIO_UPDATE=off", "HOME=/data"},
		Cmd: []string{"/minio", "server", "/data", "--address", ":9000", "--console-address", ":9001"}},
		[]string{"/usr:/usr:ro", minio + ":/minio:ro", blobs + ":/data"})

	c.pgURL = "postgres://postgres@" + pg.ip.String() + ":5432/gantry?sslmode=disable"
	c.waitPostgres()
	c.waitHTTP("minio", "http://"+mn.ip.String()+":9000/minio/health/live", 60*time.Second)
	c.admin = c.token("admin")
	register := c.token("register")

	for i := range cfg.replicas {
		r := c.add(&node{name: fmt.Sprintf("r%d", i+1), kind: "replica", aliases: []string{"gantry"}})
		c.run(r, c.serverConfig(), nil)
	}
	for _, r := range c.of("replica") {
		c.waitHTTP(r.name, "http://"+r.ip.String()+":"+serverPort+"/readyz", 60*time.Second)
	}

	// The ledger server listens where the job containers, on the engine's default bridge,
	// reach the host.
	gw := c.bridgeGateway()
	if c.ledger, err = startLedgerServer(net.JoinHostPort(gw, "0")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.ledger.close)

	ledgerDir := c.hostDir("ledger")
	if err := os.Chmod(ledgerDir, 0o777); err != nil {
		t.Fatal(err)
	}
	var replicaURLs []string
	for _, r := range c.of("replica") {
		replicaURLs = append(replicaURLs, "http://"+r.name+":"+serverPort)
	}
	for i := range cfg.workers + cfg.dockerWorkers {
		w := &node{name: fmt.Sprintf("w%d", i+1), kind: "worker"}
		if i >= cfg.workers {
			w = &node{name: fmt.Sprintf("d%d", i-cfg.workers+1), kind: "docker-worker"}
		}
		c.add(w)
		// Workers reach the replicas the two ways a deployment would: the first of each
		// kind by the list of replica URLs, the others by the one DNS name over them all.
		server := "http://gantry:" + serverPort
		if i == 0 || i == cfg.workers {
			server = strings.Join(replicaURLs, ",")
		}
		args := []string{"gantry", "worker", "--server", server, "--name", w.name,
			"--max-jobs", fmt.Sprint(cfg.maxJobs), "--log-format", "json"}
		binds := []string{ledgerDir + ":/ledger"}
		if w.kind == "docker-worker" {
			// The engine resolves a job's workspace on its own host: the work directory
			// has the same path in the worker's container as on the host. A docker worker
			// takes only container jobs (it has not the shell label), so that a fault on
			// it cuts containers short.
			work := c.hostDir("work-" + w.name)
			args = append(args, "--executor", "docker", "--work-dir", work, "--docker-warm-pool", "1")
			binds = append(binds, "/var/run/docker.sock:/var/run/docker.sock", work+":"+work)
		} else {
			args = append(args, "--labels", "shell", "--work-dir", "/work")
		}
		c.run(w, &container.Config{Image: gantryImage, Cmd: args, Env: []string{"GANTRY_TOKEN=" + register}}, binds)
	}
	c.waitWorkers(60 * time.Second)
	return c
}

// minioSecret is MinIO's root password in every suite run: the store holds nothing but
// the suite's blobs, on a network of its own.
const minioSecret = "gantry-cluster-secret"

// serverConfig is a replica's container: `gantry server` on PostgreSQL and MinIO, with
// auth on and a short lease, so that fences and reaps happen within the suite's time.
func (c *cluster) serverConfig() *container.Config {
	cfg := c.cfg
	return &container.Config{Image: gantryImage,
		Env: []string{"AWS_ACCESS_KEY_ID=" + minioUser, "AWS_SECRET_ACCESS_KEY=" + minioSecret},
		Cmd: []string{"gantry", "server", "--addr", "0.0.0.0:" + serverPort,
			"--db", "postgres://postgres@pg:5432/gantry?sslmode=disable",
			"--blobs", "s3://" + minioBucket + "?endpoint=minio:9000&secure=false&path_style=true",
			"--auth", "on", "--public-url", "http://gantry:" + serverPort,
			"--lease-ttl", cfg.leaseTTL.String(), "--heartbeat-every", cfg.heartbeat.String(),
			"--reap-every", "500ms", "--reap-grace", cfg.grace.String(), "--log-format", "json"}}
}

func (c *cluster) add(n *node) *node {
	// .1 is the gateway; the nodes take .10 and up in the order they are added.
	n.ip = c.subnet.Addr().Next()
	for range 9 + len(c.nodes) {
		n.ip = n.ip.Next()
	}
	n.aliases = append([]string{n.name}, n.aliases...)
	c.nodes = append(c.nodes, n)
	c.byName[n.name] = n
	return n
}

// of lists the nodes of a kind.
func (c *cluster) of(kind string) []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.kind == kind {
			out = append(out, n)
		}
	}
	return out
}

// hostDir makes a directory of the suite run's on the host.
func (c *cluster) hostDir(name string) string {
	d := filepath.Join(c.dir, name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		c.t.Fatal(err)
	}
	return d
}

// createNetwork makes the suite run's bridge network on a /24 of 10.231.0.0/16 that no
// other network holds.
func (c *cluster) createNetwork() {
	ctx, cancel := context.WithTimeout(c.t.Context(), time.Minute)
	defer cancel()
	var b [1]byte
	_, _ = rand.Read(b[:])
	for i := range 256 {
		third := (int(b[0]) + i) % 256
		c.subnet = netip.MustParsePrefix(fmt.Sprintf("10.231.%d.0/24", third))
		res, err := c.cli.NetworkCreate(ctx, "gantry-cluster-"+c.id, client.NetworkCreateOptions{Driver: "bridge",
			Labels: map[string]string{labelSuite: c.id},
			IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: c.subnet, Gateway: c.subnet.Addr().Next()}}}})
		if err == nil {
			c.netID = res.ID
			return
		}
		if !strings.Contains(err.Error(), "overlap") {
			c.t.Fatalf("create the cluster's network: %v", err)
		}
	}
	c.t.Fatal("create the cluster's network: every /24 of 10.231.0.0/16 is taken")
}

// endpoint is n's settings on the cluster's network: its fixed address and DNS names.
func (c *cluster) endpoint(n *node) *network.EndpointSettings {
	return &network.EndpointSettings{IPAMConfig: &network.EndpointIPAMConfig{IPv4Address: n.ip}, Aliases: n.aliases}
}

// run creates and starts n's container.
func (c *cluster) run(n *node, cfg *container.Config, binds []string) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(c.t.Context(), time.Minute)
	defer cancel()
	cfg.Hostname = n.name
	cfg.Labels = map[string]string{labelSuite: c.id, "gantry.cluster.node": n.name}
	res, err := c.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:             "gantry-cluster-" + c.id + "-" + n.name,
		Config:           cfg,
		HostConfig:       &container.HostConfig{Binds: binds, NetworkMode: container.NetworkMode(c.netID)},
		NetworkingConfig: &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{c.netID: c.endpoint(n)}},
	})
	if err != nil {
		c.t.Fatalf("create %s: %v", n.name, err)
	}
	n.id = res.ID
	if _, err := c.cli.ContainerStart(ctx, n.id, client.ContainerStartOptions{}); err != nil {
		c.t.Fatalf("start %s: %v", n.name, err)
	}
}

// bridgeGateway is the host's address on the engine's default bridge.
func (c *cluster) bridgeGateway() string {
	ctx, cancel := context.WithTimeout(c.t.Context(), 30*time.Second)
	defer cancel()
	res, err := c.cli.NetworkInspect(ctx, "bridge", client.NetworkInspectOptions{})
	if err != nil {
		c.t.Fatalf("inspect the default bridge: %v", err)
	}
	for _, cfg := range res.Network.IPAM.Config {
		if cfg.Gateway.Is4() {
			return cfg.Gateway.String()
		}
	}
	// An engine that chose the bridge's address itself does not say it: it is the
	// address of the bridge's interface on the host.
	name := res.Network.Options["com.docker.network.bridge.name"]
	if name == "" {
		name = "docker0"
	}
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		c.t.Fatalf("the default bridge's interface %s: %v", name, err)
	}
	addrs, err := ifc.Addrs()
	if err != nil {
		c.t.Fatalf("the addresses of %s: %v", name, err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	c.t.Fatalf("the default bridge (%s) has no IPv4 address: %v", name, addrs)
	return ""
}

// waitHTTP polls url until it answers 200.
func (c *cluster) waitHTTP(what, url string, within time.Duration) {
	c.t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(within)
	var last error
	for time.Now().Before(deadline) {
		res, err := hc.Get(url)
		if err == nil {
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return
			}
			err = fmt.Errorf("%s", res.Status)
		}
		last = err
		time.Sleep(200 * time.Millisecond) // a poll under a deadline
	}
	c.t.Fatalf("%s did not answer %s within %s: %v\n%s", what, url, within, last, c.logs(c.byName[what], 40))
}

// teardown removes the suite run's containers, those its docker workers' jobs left, and
// its network, unless the run keeps them for a look.
func (c *cluster) teardown() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if c.cfg.keep {
		c.t.Logf("keeping the cluster (network gantry-cluster-%s, containers labelled %s=%s)", c.id, labelSuite, c.id)
		return
	}
	// The docker workers' ids come from their logs, which go with their containers.
	dockerWorkers := c.workerIDs("docker-worker")
	var ids []string
	cs, err := c.cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: client.Filters{}.Add("label", labelSuite+"="+c.id)})
	if err == nil {
		for _, ct := range cs.Items {
			ids = append(ids, ct.ID)
		}
	}
	for _, id := range ids {
		if _, err := c.cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil && !cerrdefs.IsNotFound(err) {
			c.t.Errorf("remove container %s: %v", id, err)
		}
	}
	// What the docker workers made: they are gone, so their objects are the suite's to
	// remove.
	for id := range dockerWorkers {
		for _, l := range dockertest.Leftovers(c.t, c.cli, id) {
			kind, name, _ := strings.Cut(l, " ")
			var err error
			switch kind {
			case "container":
				_, err = c.cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			case "network":
				_, err = c.cli.NetworkRemove(ctx, name, client.NetworkRemoveOptions{})
			case "volume":
				_, err = c.cli.VolumeRemove(ctx, name, client.VolumeRemoveOptions{Force: true})
			}
			if err != nil && !cerrdefs.IsNotFound(err) {
				c.t.Logf("remove %s: %v", l, err)
			}
		}
	}
	if c.netID != "" {
		if _, err := c.cli.NetworkRemove(ctx, c.netID, client.NetworkRemoveOptions{}); err != nil && !cerrdefs.IsNotFound(err) {
			c.t.Errorf("remove the cluster's network: %v", err)
		}
	}
}

// logs returns the last n lines a node's container printed, over all its restarts.
func (c *cluster) logs(n *node, tail int) string {
	if n == nil || n.id == "" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	opts := client.ContainerLogsOptions{ShowStdout: true, ShowStderr: true}
	if tail > 0 {
		opts.Tail = fmt.Sprint(tail)
	}
	rc, err := c.cli.ContainerLogs(ctx, n.id, opts)
	if err != nil {
		return fmt.Sprintf("(logs of %s: %v)", n.name, err)
	}
	defer rc.Close()
	var out bytes.Buffer
	if _, err := stdcopy.StdCopy(&out, &out, rc); err != nil {
		fmt.Fprintf(&out, "(logs of %s: %v)", n.name, err)
	}
	return out.String()
}

// registeredAs finds worker ids in a worker's JSON log.
var registeredAs = regexp.MustCompile(`"msg":"worker registered","worker":"([^"]+)"`)

// workerIDs maps the ids the workers of a kind ("" for all) registered under, over all
// their restarts, to their node names, read from their logs.
func (c *cluster) workerIDs(kind string) map[string]string {
	out := map[string]string{}
	for _, n := range c.nodes {
		if n.kind != "worker" && n.kind != "docker-worker" || kind != "" && n.kind != kind {
			continue
		}
		for _, m := range registeredAs.FindAllStringSubmatch(c.logs(n, 0), -1) {
			out[m[1]] = n.name
		}
	}
	c.mu.Lock()
	for id, name := range out {
		c.workers[id] = name
	}
	c.mu.Unlock()
	return out
}

// waitWorkers waits until every worker has registered.
func (c *cluster) waitWorkers(within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	want := c.cfg.workers + c.cfg.dockerWorkers
	for {
		ids := c.workerIDs("")
		names := map[string]bool{}
		for _, n := range ids {
			names[n] = true
		}
		if len(names) == want {
			return
		}
		if time.Now().After(deadline) {
			var b strings.Builder
			for _, n := range c.nodes {
				if (n.kind == "worker" || n.kind == "docker-worker") && !names[n.name] {
					fmt.Fprintf(&b, "--- %s:\n%s\n", n.name, c.logs(n, 30))
				}
			}
			c.t.Fatalf("%d of %d workers registered within %s:\n%s", len(names), want, within, b.String())
		}
		time.Sleep(250 * time.Millisecond) // a poll under a deadline
	}
}

// workerName returns the node a worker id belongs to, reading the logs again when it is
// not known yet (a worker restarted since).
func (c *cluster) workerName(id string) string {
	c.mu.Lock()
	name, ok := c.workers[id]
	c.mu.Unlock()
	if ok || id == "" {
		return name
	}
	return c.workerIDs("")[id]
}

// inject and heal implement injector on the cluster's containers.
func (c *cluster) inject(ctx context.Context, f fault) error {
	n := c.byName[f.Target]
	if n == nil {
		return fmt.Errorf("no node %s", f.Target)
	}
	var err error
	switch f.action() {
	case actKill:
		_, err = c.cli.ContainerKill(ctx, n.id, client.ContainerKillOptions{Signal: "SIGKILL"})
	case actPause:
		_, err = c.cli.ContainerPause(ctx, n.id, client.ContainerPauseOptions{})
	case actPartition:
		_, err = c.cli.NetworkDisconnect(ctx, c.netID, client.NetworkDisconnectOptions{Container: n.id, Force: true})
	default:
		err = fmt.Errorf("unknown action %q", f.action())
	}
	return err
}

func (c *cluster) heal(ctx context.Context, f fault) error {
	n := c.byName[f.Target]
	if n == nil {
		return fmt.Errorf("no node %s", f.Target)
	}
	var err error
	switch f.action() {
	case actKill:
		// docker kill returns before the container is down; start it once it is.
		for try := 0; ; try++ {
			_, err = c.cli.ContainerStart(ctx, n.id, client.ContainerStartOptions{})
			if err == nil || try == 50 || ctx.Err() != nil {
				break
			}
			time.Sleep(100 * time.Millisecond) // a retry under the heal's deadline
		}
	case actPause:
		_, err = c.cli.ContainerUnpause(ctx, n.id, client.ContainerUnpauseOptions{})
	case actPartition:
		_, err = c.cli.NetworkConnect(ctx, c.netID, client.NetworkConnectOptions{Container: n.id, EndpointConfig: c.endpoint(n)})
	}
	return err
}

// running lists the containers the engine runs now that carry one of Gantry's labels,
// by host name (the first 12 characters of the id, which the job container's steps see
// as theirs).
func (c *cluster) running(ctx context.Context) ([]string, error) {
	cs, err := c.cli.ContainerList(ctx, client.ContainerListOptions{Filters: client.Filters{}.Add("label", "gantry.role")})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, ct := range cs.Items {
		out = append(out, ct.ID[:12])
	}
	return out, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
