package cli

import (
	"context"
	"io"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/gantry-ci/gantry/internal/testdb"
)

// TestServerWaitsForItsDatabase: a `gantry server` started while its PostgreSQL cannot
// be reached says so and tries again, and serves once the database answers, instead of
// exiting for a supervisor to start it again (the cluster fault suite found replicas
// that exited when restarted while the database was away). A database that answers with
// a refusal waiting does not mend is an error at once.
func TestServerWaitsForItsDatabase(t *testing.T) {
	t.Parallel()
	dsn := testdb.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	// A port nothing listens on yet: connections to it are refused.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	u.Host = addr

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var stdout, stderr syncBuffer
	exit := make(chan int, 1)
	go func() {
		exit <- Run(ctx, []string{"server", "--addr", "127.0.0.1:0", "--db", u.String(), "--log-format", "json"}, strings.NewReader(""), &stdout, &stderr)
	}()
	waitLog := func(what string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(stderr.String(), what) {
			select {
			case code := <-exit:
				t.Fatalf("server exited with %d before logging %q:\n%s", code, what, stderr.String())
			case <-time.After(20 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("server did not log %q:\n%s", what, stderr.String())
			}
		}
	}
	waitLog("database unavailable; trying again")

	// The database comes: forward the port to it.
	ln, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen where the server dials: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				_ = c.Close()
				continue
			}
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	waitLog("gantry server listening")
	cancel()
	if code := <-exit; code != exitOK {
		t.Errorf("server exit %d after serving:\n%s", code, stderr.String())
	}

	// No such database: waiting does not mend it.
	u.Host = target
	u.Path = "/no_such_database_here"
	var stderr2 syncBuffer
	code := Run(t.Context(), []string{"server", "--addr", "127.0.0.1:0", "--db", u.String()}, strings.NewReader(""), io.Discard, &stderr2)
	if code == exitOK || !strings.Contains(stderr2.String(), "does not exist") || strings.Contains(stderr2.String(), "trying again") {
		t.Errorf("a database that does not exist: exit %d:\n%s", code, stderr2.String())
	}
}
