package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestEnvName(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"json":     "GANTRY_JSON",
		"format":   "GANTRY_FORMAT",
		"max-jobs": "GANTRY_MAX_JOBS",
		"work-dir": "GANTRY_WORK_DIR",
	}
	for flag, want := range tests {
		if got := envName(flag); got != want {
			t.Errorf("envName(%q) = %q, want %q", flag, got, want)
		}
	}
}

func TestFlagsFromEnv(t *testing.T) {
	t.Parallel()
	type config struct {
		addr    string
		maxJobs int
		verbose bool
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		want    config
		wantErr string
	}{
		{
			name: "defaults when nothing is set",
			want: config{addr: "127.0.0.1:8080", maxJobs: 1},
		},
		{
			name: "environment fills flags not on the command line",
			env:  map[string]string{"GANTRY_ADDR": ":9000", "GANTRY_MAX_JOBS": "4", "GANTRY_VERBOSE": "true"},
			want: config{addr: ":9000", maxJobs: 4, verbose: true},
		},
		{
			name: "command line wins over environment",
			args: []string{"--addr", ":7000", "--max-jobs=2"},
			env:  map[string]string{"GANTRY_ADDR": ":9000", "GANTRY_MAX_JOBS": "4"},
			want: config{addr: ":7000", maxJobs: 2},
		},
		{
			name: "empty variable counts as unset",
			env:  map[string]string{"GANTRY_ADDR": "", "GANTRY_MAX_JOBS": ""},
			want: config{addr: "127.0.0.1:8080", maxJobs: 1},
		},
		{
			name: "other prefixes and the help flag are ignored",
			env:  map[string]string{"ADDR": ":1", "GANTRYADDR": ":2", "GANTRY_HELP": "true"},
			want: config{addr: "127.0.0.1:8080", maxJobs: 1},
		},
		{
			name:    "bad value names the variable",
			env:     map[string]string{"GANTRY_MAX_JOBS": "many"},
			wantErr: `invalid value "many" for GANTRY_MAX_JOBS: strconv.ParseInt: parsing "many": invalid syntax`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var got config
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			fs.StringVar(&got.addr, "addr", "127.0.0.1:8080", "")
			fs.IntVar(&got.maxJobs, "max-jobs", 1, "")
			fs.BoolVar(&got.verbose, "verbose", false, "")
			var help bool
			fs.BoolVar(&help, "help", false, "")
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			err := flagsFromEnv(fs, func(name string) (string, bool) {
				v, ok := tt.env[name]
				return v, ok
			})
			if tt.wantErr != "" {
				var usage *usageError
				if !errors.As(err, &usage) {
					t.Fatalf("error = %v, want a usage error", err)
				}
				if err.Error() != tt.wantErr {
					t.Errorf("error = %q, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("config = %+v, want %+v", got, tt.want)
			}
			if help {
				t.Error("GANTRY_HELP set --help")
			}
		})
	}
}

// TestEnvThroughCommandLine checks the helper is wired into every subcommand.
func TestEnvThroughCommandLine(t *testing.T) {
	t.Parallel()
	compile := fakeCompile(nil)
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantPrefix string
	}{
		{"GANTRY_JSON turns on JSON", []string{"validate", "-"}, map[string]string{"GANTRY_JSON": "1"}, `{`},
		{"GANTRY_FORMAT picks the format", []string{"plan", "-"}, map[string]string{"GANTRY_FORMAT": "dot"}, `digraph`},
		{"--format beats GANTRY_FORMAT", []string{"plan", "--format", "text", "-"}, map[string]string{"GANTRY_FORMAT": "dot"}, `demo: `},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := runCLI(t, invocation{args: tt.args, env: tt.env, stdin: "name: demo\n", compile: compile})
			if got.code != exitOK {
				t.Fatalf("exit code = %d, want 0; stderr:\n%s", got.code, got.stderr)
			}
			if !strings.HasPrefix(got.stdout, tt.wantPrefix) {
				t.Errorf("stdout starts %q, want %q", got.stdout, tt.wantPrefix)
			}
		})
	}
}
