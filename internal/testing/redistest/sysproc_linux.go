package redistest

import "syscall"

// sysProcAttr kills the server when the test process dies, so an aborted
// test run leaves no stray redis-server behind.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
