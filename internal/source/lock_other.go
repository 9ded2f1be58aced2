//go:build !unix

package source

import (
	"os"
	"os/exec"
)

// setProcessGroup has no process groups to use here; a cancel kills git alone.
func setProcessGroup(*exec.Cmd) {}

// tryFlock has no flock here: mirrors are safe between goroutines of one process only.
func tryFlock(*os.File) (bool, error) { return true, nil }
