//go:build linux

package connguard

import (
	"net"
	"syscall"
)

// deferSeconds is how long the kernel holds a new TCP connection for its
// first bytes before it hands the connection over anyway.
const deferSeconds = 1

// deferAccept asks the kernel to hand ln's TCP connections to Accept only
// once their first bytes arrived (TCP_DEFER_ACCEPT), so that Respond finds
// the request there. It is best effort: a listener that is not a TCP
// socket, or a failing setsockopt, leaves ln as it was.
func deferAccept(ln net.Listener) {
	control(ln, func(fd int) {
		_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, deferSeconds)
	})
}

// setBacklog calls listen(2) again on ln's TCP socket with a backlog of n:
// on a listening socket that only changes the length of the kernel's
// accept queue. It is best effort, as deferAccept.
func setBacklog(ln net.Listener, n int) {
	control(ln, func(fd int) { _ = syscall.Listen(fd, n) })
}

// control runs f on the file descriptor of ln when ln is a TCP socket, and
// does nothing otherwise.
func control(ln net.Listener, f func(fd int)) {
	if _, ok := ln.Addr().(*net.TCPAddr); !ok {
		return
	}
	sc, ok := ln.(syscall.Conn)
	if !ok {
		return
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) { f(int(fd)) })
}
