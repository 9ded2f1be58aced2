package sqlite

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/storetest"
)

func open(ctx context.Context, dsn string, clk clock.Clock) (store.Store, error) {
	return Open(ctx, dsn, Options{Clock: clk})
}

func TestMain(m *testing.M) {
	storetest.CrashChild(open)
	m.Run()
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewDSN: func(t *testing.T) string { return filepath.Join(t.TempDir(), "gantry.db") },
		Open:   open,
	})
}
