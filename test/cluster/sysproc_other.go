//go:build !linux

// The child's process attributes elsewhere: no parent-death signal, so a test that dies before Stop leaves it running.

package cluster

import "syscall"

func sysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
