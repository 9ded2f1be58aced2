package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/gantry-ci/gantry/internal/store/storetest"
)

// TestAuditAppendOnly runs statements on the database file with a connection of its
// own, as anyone who can open the file could: the triggers refuse them.
func TestAuditAppendOnly(t *testing.T) {
	t.Parallel()
	storetest.AuditAppendOnly(t, storetest.Harness{
		NewDSN: func(t *testing.T) string { return filepath.Join(t.TempDir(), "gantry.db") },
		Open:   open,
	}, func(ctx context.Context, dsn, stmt string) error {
		db, err := sql.Open("sqlite", dsn)
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, stmt)
		return err
	}, false)
}
