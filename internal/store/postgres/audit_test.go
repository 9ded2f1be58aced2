package postgres

import (
	"context"
	"testing"

	"github.com/gantry-ci/gantry/internal/store/storetest"
	"github.com/gantry-ci/gantry/internal/testdb"
	"github.com/jackc/pgx/v5"
)

// TestAuditAppendOnly runs statements on the database with a connection of its own, as
// anyone holding its credentials could: the triggers refuse them.
func TestAuditAppendOnly(t *testing.T) {
	t.Parallel()
	storetest.AuditAppendOnly(t, storetest.Harness{
		NewDSN: func(t *testing.T) string { return testdb.Postgres(t) },
		Open:   open,
	}, func(ctx context.Context, dsn, stmt string) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		_, err = conn.Exec(ctx, stmt)
		return err
	}, true)
}
