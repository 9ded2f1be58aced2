//go:build !linux

package blobtest

import "syscall"

func setParentDeathSignal(*syscall.SysProcAttr) {}
