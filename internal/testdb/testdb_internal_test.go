package testdb

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFindBinDir(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		path   []string // directories on a fake PATH holding initdb and pg_ctl
		lib    []string // versions installed under a fake /usr/lib/postgresql
		broken []string // versions whose bin has initdb but no pg_ctl
		want   string   // relative to the fake root; "" means errNoPostgres
	}{
		{name: "nothing", want: ""},
		{name: "highest version", lib: []string{"9.6", "15", "16", "10"}, want: "lib/16/bin"},
		{name: "skips an incomplete install", lib: []string{"15"}, broken: []string{"17"}, want: "lib/15/bin"},
		{name: "PATH first", path: []string{"local/bin"}, lib: []string{"16"}, want: "local/bin"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			install := func(dir string, progs ...string) {
				if err := os.MkdirAll(filepath.Join(root, dir), 0o755); err != nil {
					t.Fatal(err)
				}
				for _, p := range progs {
					if err := os.WriteFile(filepath.Join(root, dir, p), nil, 0o755); err != nil {
						t.Fatal(err)
					}
				}
			}
			for _, d := range tt.path {
				install(d, "initdb", "pg_ctl")
			}
			for _, v := range tt.lib {
				install(filepath.Join("lib", v, "bin"), "initdb", "pg_ctl")
			}
			for _, v := range tt.broken {
				install(filepath.Join("lib", v, "bin"), "initdb")
			}
			lookPath := func(name string) (string, error) {
				for _, d := range tt.path {
					if p := filepath.Join(root, d, name); isExecutable(p) {
						return p, nil
					}
				}
				return "", errors.New("not found")
			}

			got, err := findBinDir(lookPath, filepath.Join(root, "lib", "*", "bin"))
			if tt.want == "" {
				if !errors.Is(err, errNoPostgres) {
					t.Fatalf("findBinDir = %q, %v; want errNoPostgres", got, err)
				}
				return
			}
			if want := filepath.Join(root, tt.want); err != nil || got != want {
				t.Fatalf("findBinDir = %q, %v; want %q", got, err, want)
			}
		})
	}
}

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

func TestQuoteConf(t *testing.T) {
	t.Parallel()
	if got, want := quoteConf("/tmp/it's"), "'/tmp/it''s'"; got != want {
		t.Errorf("quoteConf = %s, want %s", got, want)
	}
}
