package testdb

import "testing"

func TestWithDatabase(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"postgres://postgres@127.0.0.1:5432/test?sslmode=disable", "postgres://postgres@127.0.0.1:5432/gantry_test_x?sslmode=disable"},
		{"postgres://u:p%40ss@db:5432?sslmode=disable", "postgres://u:p%40ss@db:5432/gantry_test_x?sslmode=disable"},
		{"postgresql://u@db/admin?dbname=admin&sslmode=disable", "postgresql://u@db/gantry_test_x?sslmode=disable"},
	}
	for _, tt := range tests {
		u, err := parseURL(tt.in)
		if err != nil {
			t.Fatalf("parseURL(%q): %v", tt.in, err)
		}
		if got := withDatabase(u, "gantry_test_x").String(); got != tt.want {
			t.Errorf("withDatabase(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if u.String() != tt.in {
			t.Errorf("withDatabase changed its argument to %q", u)
		}
	}
	for _, bad := range []string{"host=db dbname=test", "mysql://db/test"} {
		if _, err := parseURL(bad); err == nil {
			t.Errorf("parseURL(%q) succeeded, want an error", bad)
		}
	}
}
