package executor

import (
	"os/exec"

	"golang.org/x/sys/unix"
)

// leaderWaitReaps reports whether waitLeader reaps the leader; when false,
// Run calls cmd.Wait itself after killing the group.
const leaderWaitReaps = false

// waitLeader blocks until the leader has exited, leaving it a zombie so that
// its pid stays reserved while Run signals its group.
func waitLeader(cmd *exec.Cmd) error {
	for {
		var info unix.Siginfo
		err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if err != unix.EINTR {
			// Any other error (ECHILD) means there is nothing left to wait
			// for; cmd.Wait reports it.
			return nil
		}
	}
}
