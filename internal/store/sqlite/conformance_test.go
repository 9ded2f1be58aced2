package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/sqlite"
	"github.com/gantry-ci/gantry/internal/store/sqlite/sqlitetest"
	"github.com/gantry-ci/gantry/internal/store/storetest"
)

func open(ctx context.Context, dsn string, clk clock.Clock) (store.Store, error) {
	return sqlite.Open(ctx, dsn, sqlite.Options{Clock: clk})
}

func TestMain(m *testing.M) {
	storetest.CrashChild(open)
	m.Run()
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewDSN:         func(t *testing.T) string { return filepath.Join(t.TempDir(), "gantry.db") },
		NewMigratedDSN: func(t *testing.T) string { return sqlitetest.Path(t) },
		Open:           open,
		// One writer numbers changes in commit order from the run's counter.
		ExactChangeFeed: true,
	})
}
