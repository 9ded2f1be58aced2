package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/storebench"
)

func BenchmarkStore(b *testing.B) {
	storebench.Run(b, func(b *testing.B) store.Store {
		s, err := Open(context.Background(), filepath.Join(b.TempDir(), "bench.db"), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}
