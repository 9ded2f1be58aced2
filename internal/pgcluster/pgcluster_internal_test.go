package pgcluster

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
		want   string   // relative to the fake root; "" means ErrNoPostgres
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
				if !errors.Is(err, ErrNoPostgres) {
					t.Fatalf("findBinDir = %q, %v; want ErrNoPostgres", got, err)
				}
				return
			}
			if want := filepath.Join(root, tt.want); err != nil || got != want {
				t.Fatalf("findBinDir = %q, %v; want %q", got, err, want)
			}
		})
	}
}

func TestQuoteConf(t *testing.T) {
	t.Parallel()
	if got, want := quoteConf("/tmp/it's"), "'/tmp/it''s'"; got != want {
		t.Errorf("quoteConf = %s, want %s", got, want)
	}
}
