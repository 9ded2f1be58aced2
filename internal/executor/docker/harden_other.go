//go:build !linux

package docker

import (
	"errors"
	"log/slog"
)

// mountNosuid cannot mount where this is built.
func mountNosuid(string) (bool, error) {
	return false, errors.New("nosuid mounts are made on Linux only")
}

// unmount has nothing to take down.
func unmount(string) error { return nil }

// dropFileCapabilities has no file capabilities to drop.
func dropFileCapabilities(string) (bool, error) { return false, nil }

// sweepWorkspaceDirs has no mounts to take down.
func sweepWorkspaceDirs(string, *slog.Logger) int { return 0 }
