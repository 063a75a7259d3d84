// The child's process attributes on Linux: it dies with the test process.

package cluster

import "syscall"

// sysProcAttr kills the cluster when the test process dies.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
