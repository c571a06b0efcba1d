package redistest

import "syscall"

// sysProcAttr makes the kernel SIGKILL a redis-server when the test binary
// dies without running its cleanups (a panic, a -timeout, a SIGKILL), so no
// server outlives the tests that started it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
