//go:build linux

package connguard

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"unsafe"
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

// stampArrivals turns the kernel's receive timestamps on for ln's TCP
// socket, before any connection arrives: the connections it accepts
// inherit them, and packets that arrive before a connection is accepted
// (its first request, with TCP_DEFER_ACCEPT) are stamped too, which they
// are not while no socket of the host asked for timestamps. Best effort,
// as deferAccept: it reports whether ln's connections inherit the
// timestamps.
func stampArrivals(ln net.Listener) (stamped bool) {
	control(ln, func(fd int) {
		stamped = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1) == nil
	})
	return stamped
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

// arrivals reads a TCP connection with the kernel's receive timestamp of
// the bytes (SO_TIMESTAMPNS), so that the Guard can tell when a request
// reached the host (conn.LastArrival). Reads are serialized by mu, as the
// socket serializes them anyway; the last timestamp is an atomic.
type arrivals struct {
	raw  syscall.RawConn
	mu   sync.Mutex
	p    []byte
	oob  [64]byte
	n    int
	oobn int
	err  error
	recv func(fd uintptr) bool // a.recvmsg, bound once
	last atomic.Int64          // Unix ns of the latest read's bytes; 0: unknown
}

// timeArrivals returns the arrival timing of nc, or nil when nc is not a
// TCP connection or the kernel refuses the timestamps. With inherited (nc
// was accepted from a listener stampArrivals stamped) it does not ask for
// them again: one system call less per connection, in a dial storm too.
func timeArrivals(nc net.Conn, inherited bool) *arrivals {
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		return nil
	}
	raw, err := tc.SyscallConn()
	if err != nil {
		return nil
	}
	if !inherited {
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1)
		}); err != nil || serr != nil {
			return nil
		}
	}
	a := &arrivals{raw: raw}
	a.recv = a.recvmsg
	return a
}

// read reads into p as the connection's Read does (io.EOF at the end, the
// connection's deadlines), and records the bytes' receive timestamp.
func (a *arrivals) read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.p = p
	err := a.raw.Read(a.recv)
	n, oobn, rerr := a.n, a.oobn, a.err
	a.p = nil
	if err == nil {
		err = rerr
	}
	if err != nil {
		return 0, err
	}
	if n == 0 {
		return 0, io.EOF
	}
	// Bytes without a timestamp (stamped before the host's timestamps
	// were on) make the arrival unknown, never that of earlier bytes.
	at, _ := receiveTime(a.oob[:oobn])
	a.last.Store(at)
	return n, nil
}

// recvmsg is the RawConn.Read callback: false to wait for the socket to
// be readable.
func (a *arrivals) recvmsg(fd uintptr) bool {
	for {
		a.n, a.oobn, _, _, a.err = syscall.Recvmsg(int(fd), a.p, a.oob[:], 0)
		if a.err != syscall.EINTR {
			return a.err != syscall.EAGAIN
		}
	}
}

// receiveTime returns the SCM_TIMESTAMPNS in the control messages oob, in
// Unix ns.
func receiveTime(oob []byte) (int64, bool) {
	hdr := syscall.CmsgLen(0)
	for len(oob) >= hdr {
		h := (*syscall.Cmsghdr)(unsafe.Pointer(&oob[0]))
		l := int(h.Len)
		if l < hdr || l > len(oob) {
			return 0, false
		}
		if h.Level == syscall.SOL_SOCKET && h.Type == syscall.SCM_TIMESTAMPNS && l-hdr >= int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&oob[hdr]))
			return ts.Nano(), true
		}
		oob = oob[min(len(oob), syscall.CmsgSpace(l-hdr)):]
	}
	return 0, false
}

// lastArrival returns the latest receive timestamp, 0 before the first.
func (a *arrivals) lastArrival() int64 { return a.last.Load() }
