package blobtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ErrNoMinIO means no minio binary was found.
var ErrNoMinIO = errors.New("no minio binary: set GANTRY_MINIO, put minio on PATH, or run `make deps` (it installs the pinned version)")

const (
	minioStartTimeout = 60 * time.Second
	minioStopGrace    = 5 * time.Second
	minioStartTries   = 3
)

// MinIO is a throwaway MinIO server in a temp directory, listening on 127.0.0.1.
type MinIO struct {
	Endpoint  string // host:port of the S3 API, plain HTTP
	AccessKey string
	SecretKey string

	dir    string
	cmd    *exec.Cmd
	exited chan struct{} // closed when the process has been waited for
}

// FindMinIO returns the minio binary: $GANTRY_MINIO, else minio on PATH, else
// $(go env GOPATH)/bin/minio; or an error wrapping ErrNoMinIO.
func FindMinIO() (string, error) {
	if p := os.Getenv("GANTRY_MINIO"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("GANTRY_MINIO=%s: %w", p, err)
		}
		return p, nil
	}
	if p, err := exec.LookPath("minio"); err == nil {
		return p, nil
	}
	for _, gopath := range filepath.SplitList(build.Default.GOPATH) {
		p := filepath.Join(gopath, "bin", "minio")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p, nil
		}
	}
	return "", ErrNoMinIO
}

// StartMinIO starts a server and waits until it is ready. Stop it with Stop.
func StartMinIO(logf func(format string, args ...any)) (*MinIO, error) {
	bin, err := FindMinIO()
	if err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		// A free port is free only until MinIO binds it; a failed start retries on new ones.
		m, err := startMinIO(bin)
		if err == nil {
			logf("blobtest: started MinIO (%s) on %s", bin, m.Endpoint)
			return m, nil
		}
		if try == minioStartTries {
			return nil, err
		}
		logf("blobtest: start MinIO (try %d of %d): %v", try, minioStartTries, err)
	}
}

func startMinIO(bin string) (*MinIO, error) {
	dir, err := os.MkdirTemp("", "gantry-minio-")
	if err != nil {
		return nil, fmt.Errorf("start MinIO: %w", err)
	}
	ports, err := freePorts(2)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	m := &MinIO{
		Endpoint:  net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0])),
		AccessKey: "gantry-test",
		SecretKey: randomHex(16),
		dir:       dir,
		exited:    make(chan struct{}),
	}
	logFile, err := os.Create(filepath.Join(dir, "minio.log"))
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(dir))
	}
	defer logFile.Close()
	m.cmd = exec.Command(bin, "server", filepath.Join(dir, "data"),
		"--address", m.Endpoint,
		"--console-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1])))
	m.cmd.Env = append(os.Environ(),
		"MINIO_ROOT_USER="+m.AccessKey,
		"MINIO_ROOT_PASSWORD="+m.SecretKey,
		"MINIO_BROWSER=off",
		"MINIO_UPDATE=off",
	)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	setParentDeathSignal(m.cmd.SysProcAttr)
	if err := m.cmd.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("start MinIO %s: %w", bin, err), os.RemoveAll(dir))
	}
	go func() {
		_ = m.cmd.Wait()
		close(m.exited)
	}()
	if err := m.waitReady(); err != nil {
		return nil, errors.Join(err, m.Stop())
	}
	return m, nil
}

// waitReady polls MinIO's readiness probe until it answers 200, the process exits, or
// minioStartTimeout passes.
func (m *MinIO) waitReady() error {
	ctx, cancel := context.WithTimeout(context.Background(), minioStartTimeout)
	defer cancel()
	url := "http://" + m.Endpoint + "/minio/health/ready"
	backoff := 10 * time.Millisecond
	var last error
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("status %d", resp.StatusCode)
		}
		last = err
		select {
		case <-m.exited:
			return fmt.Errorf("MinIO exited before it was ready: %s", m.logTail())
		case <-ctx.Done():
			return fmt.Errorf("wait for MinIO on %s: %w (last: %v): %s", m.Endpoint, ctx.Err(), last, m.logTail())
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 200*time.Millisecond)
	}
}

func (m *MinIO) logTail() string {
	b, _ := os.ReadFile(filepath.Join(m.dir, "minio.log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// Stop stops the server, SIGTERM then SIGKILL to its process group, and removes its
// directory.
func (m *MinIO) Stop() error {
	pgid := m.cmd.Process.Pid
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop MinIO: %w", err)
	}
	select {
	case <-m.exited:
	case <-time.After(minioStopGrace):
		if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return fmt.Errorf("kill MinIO: %w", err)
		}
		<-m.exited
	}
	return os.RemoveAll(m.dir)
}

// URL returns the blob.Open URL of a new bucket on this server, with a random name.
func (m *MinIO) URL() string {
	return "s3://t-" + randomHex(8) + "?endpoint=" + m.Endpoint + "&region=us-east-1&secure=false" +
		"&access_key=" + m.AccessKey + "&secret_key=" + m.SecretKey
}

var shared struct {
	once sync.Once
	m    *MinIO
	err  error
}

// SharedMinIO returns the one server of this test process, starting it on first use; a
// package's TestMain calls StopSharedMinIO after the tests ran. Without a minio binary the
// test fails, or is skipped under -short.
func SharedMinIO(t testing.TB) *MinIO {
	t.Helper()
	shared.once.Do(func() { shared.m, shared.err = StartMinIO(t.Logf) })
	if errors.Is(shared.err, ErrNoMinIO) && testing.Short() {
		t.Skipf("skipping under -short: %v", shared.err)
	}
	if shared.err != nil {
		t.Fatalf("MinIO for the S3 blob store tests: %v", shared.err)
	}
	return shared.m
}

// StopSharedMinIO stops the server SharedMinIO started, if any.
func StopSharedMinIO() error {
	if shared.m == nil {
		return nil
	}
	return shared.m.Stop()
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
