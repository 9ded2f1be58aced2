package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
)

// thisProcess is what LabelProcess says of this process (processOf).
var thisProcess = sync.OnceValue(func() string { return processOf(os.Getpid()) })

// processOf is what LabelProcess says of process pid, which runs as this process's user:
// "HOST/BOOT/PIDNS/UID/PID/START", the host name (for people), the machine's boot id, the
// inode of this process's pid namespace, the effective uid, the pid and the process's
// start time (clock ticks since boot, from /proc). Pid and start time name one process
// of one boot for good: a pid taken again has another start time. "" when /proc does not
// tell.
func processOf(pid int) string {
	boot, ns, err := bootAndPIDNamespace()
	if err != nil {
		return ""
	}
	start, err := startTime(pid)
	if err != nil {
		return ""
	}
	host, _ := os.Hostname()
	host = strings.ReplaceAll(host, "/", "_")
	return fmt.Sprintf("%s/%s/%s/%d/%d/%s", host, boot, ns, os.Geteuid(), pid, start)
}

// processGone says whether label, a LabelProcess value, names a process that is known to
// be gone: one of this boot of this machine, in this process's pid namespace, whose pid
// no process with its start time holds any more. A process this one cannot see (of
// another machine, boot or pid namespace, or another user's where /proc hides those) is
// not known to be gone.
func processGone(label string) bool {
	f := strings.Split(label, "/")
	if len(f) != 6 {
		return false
	}
	boot, ns, err := bootAndPIDNamespace()
	if err != nil || f[1] != boot || f[2] != ns {
		return false
	}
	uid, err := strconv.Atoi(f[3])
	if err != nil || uid != os.Geteuid() && os.Geteuid() != 0 {
		return false
	}
	pid, err := strconv.Atoi(f[4])
	if err != nil || pid <= 0 {
		return false
	}
	start, err := startTime(pid)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true
	case err != nil:
		return false
	}
	return start != f[5]
}

// bootAndPIDNamespace are the machine's boot id and this process's pid namespace.
func bootAndPIDNamespace() (boot, ns string, err error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", "", err
	}
	link, err := os.Readlink("/proc/self/ns/pid") // pid:[4026531836]
	if err != nil {
		return "", "", err
	}
	ns = strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
	if ns == "" || ns == link {
		return "", "", fmt.Errorf("pid namespace %q", link)
	}
	return strings.TrimSpace(string(b)), ns, nil
}

// startTime is process pid's start time, in clock ticks since boot (field 22 of
// /proc/PID/stat).
func startTime(pid int) (string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", err
	}
	// The command name, field 2, is in parentheses and may hold anything.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return "", fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(b[i+1:])) // from field 3 on
	if len(fields) < 20 {
		return "", fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields)+2)
	}
	return fields[22-3], nil
}
