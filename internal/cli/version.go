package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// version is set at build time with
// -ldflags "-X github.com/gantry-ci/gantry/internal/cli.version=<version>" (see the
// Makefile). It is the one package variable here because the linker can only set those.
var version = "dev"

// versionConfig is empty: version takes no flags, but has a config like every subcommand
// so that adding one later has an obvious place.
type versionConfig struct{}

func (a *app) versionCommand() *cobra.Command {
	var cfg versionConfig
	return &cobra.Command{
		Use:   "version",
		Short: "Print the gantry version and the Go version it was built with",
		Args:  noArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			return a.version(cfg)
		},
	}
}

func (a *app) version(versionConfig) error {
	_, err := fmt.Fprintf(a.stdout, "gantry %s (%s %s/%s)\n",
		buildVersion(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return err
}

// buildVersion prefers the version stamped by the linker; a binary built with
// `go install module@vX.Y.Z` has none but knows its module version.
func buildVersion() string {
	if version != "dev" {
		return version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return version
}
