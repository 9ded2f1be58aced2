package cli

import (
	"context"
	"testing"
	"time"
)

func TestBurnStopsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	ended := make(chan struct{})
	go func() {
		burn(ctx, 2)
		close(ended)
	}()
	cancel()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("burn still ran 10 s after its context ended")
	}
	if burnSink.Load() == 0 {
		t.Error("the busy loops did no work")
	}
}
