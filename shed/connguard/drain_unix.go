//go:build unix

package connguard

import (
	"net"
	"syscall"
)

// drainBytes is how much of a refused connection's request drain reads:
// a request line and headers; a larger body may still reset the
// connection on close.
const drainBytes = 4096

// drain reads what the client of a refused connection sent already, in one
// non-blocking read, and reports whether it read anything (a connection
// that is not a socket is taken to have sent its request). Reading the
// request first matters twice: a client reads a response that comes
// before its request as a broken connection (net/http's does), and
// closing a socket with unread bytes resets it, which can destroy the 503
// before the client reads it.
func drain(nc net.Conn) bool {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return true
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return true
	}
	var buf [drainBytes]byte
	n := 0
	_ = rc.Read(func(fd uintptr) bool {
		n, _ = syscall.Read(int(fd), buf[:])
		return true // one attempt: never wait for the client
	})
	return n > 0
}
