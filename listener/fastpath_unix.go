//go:build unix

package listener

import "syscall"

// fastPath: on Unix the first attempt of a write is a plain write(2) on the
// socket, which the Go runtime keeps in non-blocking mode.
const fastPath = true

// once makes one write attempt and reports done whatever happened, so that
// RawConn.Write never waits for the socket to become writable. A full socket
// buffer (EAGAIN) is not an error: nothing was written.
func (a *attempt) once(fd uintptr) bool {
	n, err := syscall.Write(int(fd), a.p)
	if err == syscall.EAGAIN || err == syscall.EINTR {
		n, err = 0, nil
	}
	if n < 0 {
		n = 0
	}
	a.n, a.err = n, err
	return true
}
