package api_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/gantry-ci/gantry/internal/api"
	"github.com/gantry-ci/gantry/internal/store/postgres"
	"github.com/gantry-ci/gantry/internal/testdb"
)

// cutProxy forwards TCP connections to a server until cut, which closes every
// connection and refuses new ones, as a database host that went away does.
type cutProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns []net.Conn
	cut   bool
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	t.Cleanup(p.close)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				_ = c.Close()
				continue
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				_ = c.Close()
				continue
			}
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
	return p
}

// sever closes every connection through the proxy and refuses new ones.
func (p *cutProxy) sever() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

func (p *cutProxy) close() {
	_ = p.ln.Close()
	p.sever()
}

// TestStoreUnreachable: while the database cannot be reached, the API answers 503
// unavailable with Retry-After, saying so, not 500 internal error: a client or a load
// balancer retries, and nobody is told of a bug that is not one. Found by the cluster
// fault suite, whose submissions failed "check token: internal error" on every replica
// while PostgreSQL was cut off.
func TestStoreUnreachable(t *testing.T) {
	t.Parallel()
	dsn := testdb.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutProxy(t, u.Host)
	u.Host = proxy.ln.Addr().String()
	st, err := postgres.Open(context.Background(), u.String(), postgres.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	b := setupWith(t, func(c *api.Config) { c.Store = st })
	if r := b.get(t, "/api/v1/runs"); r.status != http.StatusOK {
		t.Fatalf("list runs with the database up: %d %s", r.status, r.body)
	}
	proxy.sever()
	for _, req := range []struct{ method, path, body string }{
		{http.MethodGet, "/api/v1/runs", ""},
		{http.MethodPost, "/api/v1/runs", "name: x\njobs: {a: {steps: [{run: 'true'}]}}\n"},
		{http.MethodGet, "/api/v1/workers", ""},
	} {
		r := b.do(t, req.method, req.path, "application/yaml", req.body, nil)
		expectError(t, r, http.StatusServiceUnavailable, "unavailable")
		if r.header.Get("Retry-After") == "" {
			t.Errorf("%s %s: no Retry-After", req.method, req.path)
		}
	}
}
