//go:build !linux

package redistest

import "syscall"

// sysProcAttr: only Linux can tie a child's life to its parent's; elsewhere
// the cleanups alone stop the servers.
func sysProcAttr() *syscall.SysProcAttr { return nil }
