package cli

import (
	"context"
	"net"
	"net/http"
	"sync"
	"time"
)

// newConns tracks the server's connections that have not yet read a byte of a request.
//
// http.Server.Shutdown treats such a connection as busy until it is 5 seconds old (Go
// issue 22682). HTTP clients open them all the time: a transport that dials while it
// waits for an idle connection keeps the new one for later, unused. `gantry run` would
// then wait up to 5 seconds after its run had ended, so shutdown closes them itself.
type newConns struct {
	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// track is an http.Server ConnState hook.
func (n *newConns) track(c net.Conn, s http.ConnState) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if s == http.StateNew {
		if n.conns == nil {
			n.conns = map[net.Conn]struct{}{}
		}
		n.conns[c] = struct{}{}
		return
	}
	delete(n.conns, c)
}

// closeAll closes the connections that have read nothing yet. Nothing is lost: the
// server has not started reading a request on them, and a client's transport retries a
// request whose connection closed before it was written.
func (n *newConns) closeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for c := range n.conns {
		_ = c.Close()
		delete(n.conns, c)
	}
}

// shutdown stops srv gracefully, as http.Server.Shutdown does, except that connections
// that never carried a request do not hold it up. Connections opened while it runs are
// closed by the next sweep.
func (n *newConns) shutdown(ctx context.Context, srv *http.Server) error {
	done := make(chan error, 1)
	go func() { done <- srv.Shutdown(ctx) }()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		n.closeAll()
		select {
		case err := <-done:
			return err
		case <-tick.C:
		}
	}
}
