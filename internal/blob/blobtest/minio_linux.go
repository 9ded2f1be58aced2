package blobtest

import "syscall"

// setParentDeathSignal kills MinIO when the test process dies without stopping it.
func setParentDeathSignal(a *syscall.SysProcAttr) { a.Pdeathsig = syscall.SIGKILL }
