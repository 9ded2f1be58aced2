//go:build unix && !linux

package executor

import "os/exec"

// leaderWaitReaps reports whether waitLeader reaps the leader; when false,
// Run calls cmd.Wait itself after killing the group.
const leaderWaitReaps = true

// waitLeader waits for and reaps the leader. Without waitid(WNOWAIT) the
// group id could in principle be reused between this and Run's final
// SIGKILL to the group; the window is tiny and accepted off Linux.
func waitLeader(cmd *exec.Cmd) error {
	return cmd.Wait()
}
