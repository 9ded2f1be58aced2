// Package cli owns the gantry command line: parsing arguments, flags and GANTRY_* environment
// variables into one typed config per subcommand, rendering results, and choosing exit codes.
//
// It must stay a thin shell over the domain packages: no pipeline semantics, scheduling or
// storage logic lives here, only what is needed to call them and to print their answers.
package cli
