package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestShutdownClosesUnusedConns: a connection that never sent a request does not hold up
// shutdown (http.Server.Shutdown alone waits 5 s for it), while a request in flight is
// still answered.
func TestShutdownClosesUnusedConns(t *testing.T) {
	t.Parallel()
	release, entered := make(chan struct{}), make(chan struct{})
	var fresh newConns
	srv := &http.Server{ConnState: fresh.track, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			close(entered)
			<-release
		}
		_, _ = io.WriteString(w, "ok")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	base := "http://" + ln.Addr().String()

	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	slow := make(chan string, 1)
	go func() {
		res, err := http.Get(base + "/slow")
		if err != nil {
			slow <- err.Error()
			return
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		slow <- string(b)
	}()
	// Wait until both connections are the server's: the idle one new, the slow one active.
	<-entered
	deadline := time.Now().Add(10 * time.Second)
	for {
		fresh.mu.Lock()
		n := len(fresh.conns)
		fresh.mu.Unlock()
		if n == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server tracks %d unused connections, want 1", n)
		}
		time.Sleep(5 * time.Millisecond)
	}

	done := make(chan error, 1)
	began := time.Now()
	go func() { done <- fresh.shutdown(context.Background(), srv) }()
	select {
	case err := <-done:
		t.Fatalf("shutdown returned (%v) while a request was in flight", err)
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	if got := <-slow; got != "ok" {
		t.Errorf("the request in flight got %q, want ok", got)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("shutdown: %v", err)
		}
		t.Logf("shutdown took %s", time.Since(began))
	case <-time.After(4 * time.Second):
		t.Fatal("shutdown waited on a connection that never sent a request")
	}
	if _, err := idle.Read(make([]byte, 1)); err == nil {
		t.Error("the unused connection is still open")
	}
}

// TestRunExitsPromptly: `gantry run` returns soon after it prints the run's result, every
// time. It used to wait up to 5 s for a connection one of its own clients had opened and
// never used, in about one run of 20.
func TestRunExitsPromptly(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	b.WriteString("name: many\njobs:\n")
	for i := range 20 {
		fmt.Fprintf(&b, "  j%d: {steps: [{run: 'true'}]}\n", i)
	}
	file := filepath.Join(t.TempDir(), "many.yml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	const runs = 8
	// Far above the few tens of milliseconds a stop takes, far below the 5 s hang.
	const bound = 2500 * time.Millisecond
	for i := range runs {
		out := &resultWatch{}
		var stderr syncBuffer
		code := Run(t.Context(), []string{"run", "--workers", "4", file}, strings.NewReader(""), out, &stderr)
		ended := time.Now()
		if code != exitOK {
			t.Fatalf("run %d: exit %d\n%s%s", i, code, out.String(), stderr.String())
		}
		at := out.resultAt()
		if at.IsZero() {
			t.Fatalf("run %d printed no result line:\n%s", i, out.String())
		}
		if lag := ended.Sub(at); lag > bound {
			t.Errorf("run %d returned %s after printing its result, want under %s", i, lag, bound)
		}
	}
}

// resultWatch keeps what is written to it and the time the run's result line came.
type resultWatch struct {
	mu sync.Mutex
	b  strings.Builder
	at time.Time
}

func (w *resultWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if w.at.IsZero() && strings.Contains(w.b.String(), " success in ") {
		w.at = time.Now()
	}
	return len(p), nil
}

func (w *resultWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *resultWatch) resultAt() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.at
}
