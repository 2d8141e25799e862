//go:build linux

package connguard

import (
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// Reading a connection with its receive timestamps allocates nothing per
// read, returns what was sent, and io.EOF once the peer closed.
func TestArrivalReadsAllocateNothingAndEndWithEOF(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("receive timestamps are read on Linux only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback listener: %v", err)
	}
	defer ln.Close()
	g, err := New(fixed(0), Unbounded)
	if err != nil {
		t.Fatal(err)
	}
	gl := g.Listener(ln)
	peer, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	if _, err := peer.Write([]byte("x")); err != nil { // TCP_DEFER_ACCEPT: the first bytes let Accept return
		t.Fatal(err)
	}
	nc, err := gl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := nc.(*conn)
	if c.arr == nil {
		t.Fatal("a TCP connection on Linux is read without timestamps")
	}
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 16)
	read := func() {
		if n, err := nc.Read(buf); n != 1 || err != nil || buf[0] != 'x' {
			t.Fatalf("read %d %q %v", n, buf[:n], err)
		}
	}
	read()
	x := []byte("x")
	if a := testing.AllocsPerRun(50, func() {
		if _, err := peer.Write(x); err != nil {
			t.Fatal(err)
		}
		read()
	}); a != 0 {
		t.Fatalf("%v allocations per read", a)
	}
	_ = peer.Close()
	if n, err := nc.Read(buf); n != 0 || err != io.EOF {
		t.Fatalf("after the peer closed: %d %v, want io.EOF", n, err)
	}
}

// receiveTime finds the timestamp among control messages, and refuses
// truncated or malformed ones without reading past them.
func TestReceiveTimeParsesOnlyWholeMessages(t *testing.T) {
	if _, ok := receiveTime(nil); ok {
		t.Fatal("a timestamp in no control message")
	}
	if _, ok := receiveTime(make([]byte, 3)); ok {
		t.Fatal("a timestamp in 3 bytes")
	}
	zero := make([]byte, 64) // a header of length 0: malformed
	if _, ok := receiveTime(zero); ok {
		t.Fatal("a timestamp in a zero header")
	}
	// Another message first, then the timestamp: found past the first.
	other := cmsg(syscall.SOL_SOCKET, syscall.SCM_RIGHTS, make([]byte, 4))
	stamp := cmsg(syscall.SOL_SOCKET, syscall.SCM_TIMESTAMPNS, timespecBytes(syscall.Timespec{Sec: 7, Nsec: 9}))
	if at, ok := receiveTime(append(other, stamp...)); !ok || at != 7_000_000_009 {
		t.Fatalf("receiveTime = %d, %v; want 7000000009", at, ok)
	}
	// A timestamp message cut short is refused, not read past its end.
	if _, ok := receiveTime(stamp[:len(stamp)-8]); ok {
		t.Fatal("a truncated timestamp message read")
	}
}

// cmsg returns one control message of level and typ carrying data, padded
// as the kernel pads it.
func cmsg(level, typ int32, data []byte) []byte {
	b := make([]byte, syscall.CmsgSpace(len(data)))
	h := (*syscall.Cmsghdr)(unsafe.Pointer(&b[0]))
	h.Level, h.Type = level, typ
	h.SetLen(syscall.CmsgLen(len(data)))
	copy(b[syscall.CmsgLen(0):], data)
	return b
}

// timespecBytes returns ts as the kernel lays it out in a control message.
func timespecBytes(ts syscall.Timespec) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(&ts)), unsafe.Sizeof(ts))
}

// BenchmarkRead reads one byte the peer wrote, from a TCP connection read
// plainly and from one read with its receive timestamps (recvmsg).
func BenchmarkRead(b *testing.B) {
	for _, stamped := range []bool{false, true} {
		name := "read"
		if stamped {
			name = "recvmsg"
		}
		b.Run(name, func(b *testing.B) {
			peer, nc := loopbackPair(b, false) // nc asks for its own timestamps
			var r io.Reader = nc
			if stamped {
				a := timeArrivals(nc, false)
				if a == nil {
					b.Fatal("no timestamps")
				}
				r = readerFunc(a.read)
			}
			x, buf := []byte("x"), make([]byte, 16)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := peer.Write(x); err != nil {
					b.Fatal(err)
				}
				if _, err := r.Read(buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

type readerFunc func([]byte) (int, error)

func (f readerFunc) Read(p []byte) (int, error) { return f(p) }

// A connection accepted from a listener stampArrivals stamped has the
// receive timestamps on without asking (what timeArrivals relies on to
// skip its own setsockopt), and the Guard's listener times its arrivals.
func TestAcceptedConnectionsInheritTheListenersTimestamps(t *testing.T) {
	peer, nc := loopbackPair(t, true)
	raw, err := nc.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	on, gerr := 0, error(nil)
	if err := raw.Control(func(fd uintptr) {
		on, gerr = syscall.GetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS)
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if on != 1 {
		t.Fatalf("SO_TIMESTAMPNS of the accepted connection: %d, want 1", on)
	}
	a := timeArrivals(nc, true)
	if a == nil {
		t.Fatal("no arrival timing")
	}
	if _, err := peer.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := a.read(make([]byte, 4)); err != nil {
		t.Fatal(err)
	}
	if a.lastArrival() == 0 {
		t.Fatal("the byte read has no arrival time")
	}
}

// loopbackPair returns the two ends of a TCP connection on loopback, the
// accepted one second, closed when the test ends; with stamped, the
// listener had stampArrivals before the connection arrived.
func loopbackPair(tb testing.TB, stamped bool) (peer, accepted net.Conn) {
	tb.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Skipf("no loopback listener: %v", err)
	}
	defer ln.Close()
	if stamped && !stampArrivals(ln) {
		tb.Fatal("the listener refused the timestamps")
	}
	peer, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = peer.Close() })
	accepted, err = ln.Accept()
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = accepted.Close() })
	return peer, accepted
}
