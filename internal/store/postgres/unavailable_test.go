package postgres

import (
	"errors"
	"net"
	"net/url"
	"testing"

	"github.com/gantry-ci/gantry/internal/store"
	"github.com/gantry-ci/gantry/internal/testdb"
	"github.com/jackc/pgx/v5/pgproto3"
)

// refusingServer answers every connection's startup with a FATAL error of code, as a
// PostgreSQL server does while it starts up (57P03) or when a password is wrong (28P01),
// and returns its address.
func refusingServer(t *testing.T, code string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				be := pgproto3.NewBackend(c, c)
				if _, err := be.ReceiveStartupMessage(); err != nil {
					return
				}
				be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", SeverityUnlocalized: "FATAL", Code: code, Message: "refused with " + code})
				_ = be.Flush()
			}()
		}
	}()
	return ln.Addr().String()
}

// TestOpenUnavailable: a database that is not there, not reachable or not taking
// connections yet makes Open fail with store.ErrUnavailable, for the server to wait on;
// one that answers with a refusal waiting does not mend (no such database, a wrong
// password) fails without it.
func TestOpenUnavailable(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	noDB, err := url.Parse(testdb.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	noDB.Path = "/gantry_no_such_database"

	tests := []struct {
		name, url   string
		unavailable bool
	}{
		{"nothing listens", "postgres://gantry@" + closedAddr + "/gantry?sslmode=disable&connect_timeout=5", true},
		{"no such host", "postgres://gantry@no-such-host.invalid:5432/gantry?sslmode=disable&connect_timeout=5", true},
		{"starting up (57P03)", "postgres://gantry@" + refusingServer(t, "57P03") + "/gantry?sslmode=disable", true},
		{"too many connections (53300)", "postgres://gantry@" + refusingServer(t, "53300") + "/gantry?sslmode=disable", true},
		{"wrong password (28P01)", "postgres://gantry@" + refusingServer(t, "28P01") + "/gantry?sslmode=disable", false},
		{"no such database (3D000)", noDB.String(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, err := Open(t.Context(), tt.url, Options{})
			if err == nil {
				st.Close()
				t.Fatal("Open succeeded")
			}
			if got := errors.Is(err, store.ErrUnavailable); got != tt.unavailable {
				t.Errorf("errors.Is(%v, store.ErrUnavailable) = %v, want %v", err, got, tt.unavailable)
			}
		})
	}
}
