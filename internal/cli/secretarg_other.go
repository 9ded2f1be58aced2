//go:build !linux

package cli

// reexecWithoutToken is Linux only: elsewhere the token stays where it was given, and
// the warning printed says to use --token-file.
func reexecWithoutToken(string) error { return nil }

// hideMemory is Linux only.
func hideMemory() error { return nil }
