package clock

import (
	"testing"
	"time"
)

func TestFake(t *testing.T) {
	t.Parallel()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f := NewFake(start)
	short, long := f.After(time.Second), f.After(time.Minute)
	f.Advance(30 * time.Second)
	select {
	case got := <-short:
		if !got.Equal(start.Add(30 * time.Second)) {
			t.Errorf("short fired with %v", got)
		}
	default:
		t.Fatal("timer due after 1s did not fire after advancing 30s")
	}
	select {
	case <-long:
		t.Fatal("timer due after 1m fired after 30s")
	default:
	}
	f.Advance(30 * time.Second)
	select {
	case <-long:
	default:
		t.Fatal("timer due after 1m did not fire at 1m")
	}
	if got := f.Now(); !got.Equal(start.Add(time.Minute)) {
		t.Errorf("Now = %v", got)
	}
	select {
	case <-f.After(0):
	default:
		t.Fatal("After(0) did not fire at once")
	}
}
