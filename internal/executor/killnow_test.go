package executor

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestKillNow: a step whose context ends with ErrKillNow is killed at once, though it
// ignores SIGTERM and its grace is a minute; any other cause still gets the grace.
func TestKillNow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancelCause(t.Context())
	var out strings.Builder
	started := make(chan struct{})
	w := killNowWriter(func(p []byte) (int, error) {
		if strings.Contains(string(p), "ready") {
			select {
			case <-started:
			default:
				close(started)
			}
		}
		return out.Write(p)
	})
	done := make(chan Result, 1)
	go func() {
		res, err := Shell{}.Run(ctx, Step{Script: "trap '' TERM; echo ready; sleep 300", Stdout: w, Grace: time.Minute})
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	select {
	case <-started:
	case <-time.After(30 * time.Second):
		t.Fatal("the step did not start within 30s")
	}
	began := time.Now()
	cancel(ErrKillNow)
	select {
	case res := <-done:
		if !res.Cancelled || res.Signal != "killed" {
			t.Errorf("result %+v, want cancelled by SIGKILL", res)
		}
		if d := time.Since(began); d > 10*time.Second {
			t.Errorf("the step took %s to die, want it killed at once", d)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a step cancelled with ErrKillNow still ran 30s later (its grace is a minute)")
	}
}

type killNowWriter func([]byte) (int, error)

func (f killNowWriter) Write(p []byte) (int, error) { return f(p) }
