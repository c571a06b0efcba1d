//go:build unix

package auth

import (
	"io/fs"
	"os"
	"syscall"
)

// keepOwner gives f the owner and group of old, when the process may:
// root replacing a file that a service account reads must not leave it
// readable by root only. Failure is ignored.
func keepOwner(f *os.File, old fs.FileInfo) {
	if st, ok := old.Sys().(*syscall.Stat_t); ok {
		_ = f.Chown(int(st.Uid), int(st.Gid))
	}
}
