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
	_ = rc.Control(func(fd uintptr) {
		_ = syscall.SetsockoptInt(int(fd), syscall.IPPROTO_TCP, syscall.TCP_DEFER_ACCEPT, deferSeconds)
	})
}
