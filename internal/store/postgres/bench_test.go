package postgres

import (
	"context"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/storebench"
	"github.com/gantry-ci/gantry/internal/testdb"
)

func BenchmarkStore(b *testing.B) {
	storebench.Run(b, func(b *testing.B) store.Store {
		s, err := Open(context.Background(), testdb.Postgres(b), Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = s.Close() })
		return s
	})
}
