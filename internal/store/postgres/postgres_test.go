package postgres

import (
	"context"
	"testing"

	"github.com/gantry-ci/gantry/internal/clock"
	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/store/storetest"
	"github.com/gantry-ci/gantry/internal/testdb"
)

func open(ctx context.Context, dsn string, clk clock.Clock) (store.Store, error) {
	return Open(ctx, dsn, Options{Clock: clk})
}

func TestMain(m *testing.M) {
	storetest.CrashChild(open)
	testdb.Main(m)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		NewDSN:         func(t *testing.T) string { return testdb.Postgres(t) },
		NewMigratedDSN: migratedDSN,
		Open:           open,
		Replicas:       true,
	})
}

// migratedDSN is a fresh database copied from a template the store has migrated once per
// test process: migrating costs more than most tests.
func migratedDSN(t *testing.T) string {
	return testdb.PostgresFrom(t, "gantry-migrated", func(ctx context.Context, dsn string) error {
		st, err := Open(ctx, dsn, Options{})
		if err != nil {
			return err
		}
		return st.Close()
	})
}
