package cli

import (
	"strings"

	"github.com/spf13/pflag"
)

// envPrefix starts the environment variable that stands in for each flag.
const envPrefix = "GANTRY_"

// envName is the environment variable read for a flag: --max-jobs is GANTRY_MAX_JOBS.
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// flagsFromEnv sets every flag of fs that was not given on the command line from its
// GANTRY_<FLAG> environment variable, so a deployment can configure gantry without
// wrapping its command line. The command line always wins. An empty variable counts as
// unset, so `GANTRY_FORMAT= gantry plan` behaves like plain `gantry plan`. A value the flag
// rejects is a usage error naming the variable, since that is where the user must look.
func flagsFromEnv(fs *pflag.FlagSet, lookupEnv func(string) (string, bool)) error {
	var err error
	fs.VisitAll(func(f *pflag.Flag) {
		if err != nil || f.Changed || f.Name == "help" {
			return
		}
		name := envName(f.Name)
		val, ok := lookupEnv(name)
		if !ok || val == "" {
			return
		}
		// Value.Set rather than fs.Set: the flag stays "not changed" (it was not on the
		// command line), and the error is not worded as if it came from a flag.
		if serr := f.Value.Set(val); serr != nil {
			err = usagef("invalid value %q for %s: %v", val, name, serr)
		}
	})
	return err
}
