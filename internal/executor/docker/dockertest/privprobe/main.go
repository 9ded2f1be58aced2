// Command privprobe tells the tests what privileges it runs with. It is built static
// (CGO_ENABLED=0) into the test images and onto the host, where tests make it
// set-user-ID root or give it file capabilities and see whether that raises anything:
// unlike busybox, it never drops what exec gave it.
//
//	privprobe id                 prints "uid=R euid=E capeff=HEX"
//	privprobe read FILE          prints id's line, then "read: CONTENT" or "read: denied"
//	privprobe as UID CMD ARG...  becomes UID (its group too, no other groups), then execs CMD
//	privprobe setcap FILE        gives FILE the file capability CAP_SETUID (permitted, effective)
package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		fail("usage: privprobe id | read FILE | as UID CMD ARG... | setcap FILE")
	}
	switch os.Args[1] {
	case "id":
		fmt.Println(id())
	case "read":
		fmt.Println(id())
		b, err := os.ReadFile(os.Args[2])
		if err != nil {
			fmt.Println("read: denied")
			return
		}
		fmt.Println("read: " + strings.TrimSpace(string(b)))
	case "as":
		uid, err := strconv.Atoi(os.Args[2])
		if err != nil {
			fail(err.Error())
		}
		if err := syscall.Setgroups(nil); err != nil {
			fail("setgroups: " + err.Error())
		}
		if err := syscall.Setgid(uid); err != nil {
			fail("setgid: " + err.Error())
		}
		if err := syscall.Setuid(uid); err != nil {
			fail("setuid: " + err.Error())
		}
		if err := syscall.Exec(os.Args[3], os.Args[3:], os.Environ()); err != nil {
			fail("exec " + os.Args[3] + ": " + err.Error())
		}
	case "setcap":
		// struct vfs_cap_data, revision 2: magic and flags (effective), then permitted
		// and inheritable for capabilities 0-31 and 32-63.
		const capSetuid = 7
		data := make([]byte, 20)
		le32(data[0:], 0x02000000|1)
		le32(data[4:], 1<<capSetuid)
		if err := syscall.Setxattr(os.Args[2], "security.capability", data, 0); err != nil {
			fail("setcap: " + err.Error())
		}
		fmt.Println("setcap: done")
	default:
		fail("unknown command " + os.Args[1])
	}
}

func id() string {
	capEff := "?"
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
				capEff = strings.TrimSpace(v)
			}
		}
	}
	return fmt.Sprintf("uid=%d euid=%d capeff=%s", os.Getuid(), os.Geteuid(), capEff)
}

func le32(b []byte, v uint32) {
	b[0], b[1], b[2], b[3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
}

func fail(msg string) {
	fmt.Fprintln(os.Stderr, "privprobe: "+msg)
	os.Exit(2)
}
