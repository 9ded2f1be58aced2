//go:build !linux

package docker

// thisProcess is "" where there is no /proc to tell whether a process lives: objects go
// without LabelProcess there.
func thisProcess() string { return "" }

// processOf is "" too.
func processOf(int) string { return "" }

// processGone is false: nothing is known to be gone.
func processGone(string) bool { return false }
