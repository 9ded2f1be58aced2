package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
)

// TestDiskFull: a write that finds the disk full fails with store.ErrFull and keeps
// nothing; once space is freed, writes work again and what was committed before is
// there. The database lives on a small tmpfs the test mounts (it needs root).
func TestDiskFull(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs on %s (the test needs root): %v: %s", dir, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount %s: %v: %s", dir, err, out)
		}
	})
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "gantry.db"), sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	token := func(n int) *store.Token {
		return &store.Token{Name: fmt.Sprint("t", n), Role: store.RoleRead, Hash: fmt.Sprintf("%064x", n)}
	}
	if err := st.CreateToken(ctx, token(1)); err != nil {
		t.Fatal(err)
	}

	filler, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	for {
		if _, err := filler.Write(buf); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatal(err)
			}
			break
		}
	}
	filler.Close()
	// Enough writes to need new pages whatever room the WAL had left.
	var full error
	for n := 2; n < 200 && full == nil; n++ {
		full = st.CreateToken(ctx, token(n))
	}
	if !errors.Is(full, store.ErrFull) {
		t.Fatalf("write on a full disk: %v, want store.ErrFull", full)
	}

	if err := os.Remove(filler.Name()); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateToken(ctx, token(1000)); err != nil {
		t.Fatalf("write after space was freed: %v", err)
	}
	for _, n := range []int{1, 1000} {
		if _, err := st.LookupToken(ctx, token(n).Hash); err != nil {
			t.Errorf("token %d: %v", n, err)
		}
	}
}
