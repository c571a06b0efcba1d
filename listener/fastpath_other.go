//go:build !unix

package listener

// fastPath: elsewhere there is no portable non-blocking write on the socket's
// handle, so every write goes through the backlog and its goroutine. Writes
// still never block; they only cost a goroutine while bytes are waiting.
const fastPath = false

func (a *attempt) once(uintptr) bool { return true }
