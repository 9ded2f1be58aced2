package cli

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// reexecWithoutToken replaces the process with a fresh copy of itself whose command line
// and environment no longer hold the token: /proc/<pid>/cmdline and /proc/<pid>/environ
// are readable by every process of the same user, steps included, and they show a
// process's arguments and initial environment for its whole life. The secret is handed
// over on a pipe, the new process reading it from --token-fd. It returns only on failure.
func reexecWithoutToken(token string) error {
	args := withoutToken(os.Args)
	env := withoutEnv(os.Environ(), envName("token"))
	if token != "" {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return fmt.Errorf("hand the token over: pipe: %w", err)
		}
		// The pipe's buffer (64 KiB) takes the whole token at once, so it is written
		// before the exec and read by the new process at its leisure.
		if _, err := unix.Write(p[1], []byte(token)); err != nil {
			unix.Close(p[0])
			unix.Close(p[1])
			return fmt.Errorf("hand the token over: write: %w", err)
		}
		unix.Close(p[1])
		// The read end alone survives the exec.
		if _, err := unix.FcntlInt(uintptr(p[0]), unix.F_SETFD, 0); err != nil {
			unix.Close(p[0])
			return fmt.Errorf("hand the token over: keep the pipe open: %w", err)
		}
		args = append(args, "--token-fd", strconv.Itoa(p[0]))
	}
	err := unix.Exec("/proc/self/exe", args, env)
	return fmt.Errorf("re-execute without the token in the command line: %w", err)
}

// hideMemory makes the process undumpable. Otherwise any process of the same user — a
// step run by this worker, for one — may read /proc/<worker>/environ and
// /proc/<worker>/mem (ptrace access mode checks pass for the same uid), and with them
// the register token and the worker's credential held in memory. Undumpable, those files
// belong to root and need CAP_SYS_PTRACE. Steps are not affected: exec makes a process
// dumpable again. Running steps as another user (--step-user) is what keeps a root or
// same-user step out entirely.
func hideMemory() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}
