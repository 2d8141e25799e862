//go:build linux && !386

// Not on linux/386, whose sockets go through socketcall: it has no
// SYS_GETSOCKOPT for acceptQueue.

package connguard_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/sluicehq/sluice/shed/connguard"
)

// TestRespondWaitsForTheRequestBeforeItRefuses: on a TCP listener the
// Guard is handed a connection only once its request arrived, so that a
// client that writes after the handshake reads the 503 instead of a close
// (in a dial storm most refused connections had no request yet at
// accept).
func TestRespondWaitsForTheRequestBeforeItRefuses(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tl := ln.(*net.TCPListener)
	g := newGuard(t, fixedShare(1), connguard.Unbounded)
	gl := g.Listener(ln)
	defer gl.Close()

	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	// The handshake is done, no request sent: Accept must not see it.
	_ = tl.SetDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := gl.Accept(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Accept = %v, want the deadline", err)
	}
	if s := g.Stats(); s.Shed != 0 {
		t.Fatalf("stats %+v: a connection with no request yet was refused", s)
	}
	_ = tl.SetDeadline(time.Time{})
	done := make(chan error, 1)
	go func() { _, err := gl.Accept(); done <- err }()
	if _, err := io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	r, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatalf("the client that wrote after connecting read %v, want the 503", err)
	}
	if r.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("answered %d, want 503", r.StatusCode)
	}
	_ = gl.Close()
	if err := <-done; !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close = %v", err)
	}
	if s := g.Stats(); s.Shed != 1 || s.Unanswered != 0 {
		t.Errorf("stats %+v, want one shed and answered", s)
	}
}

type fixedShare float64

func (f fixedShare) Shedding() float64 { return float64(f) }

// TestBacklogShortensTheKernelsAcceptQueue reads the accept queue's
// length back from the kernel: TCP_INFO of a listening socket carries it
// in tcpi_sacked.
func TestBacklogShortensTheKernelsAcceptQueue(t *testing.T) {
	for _, n := range []int{0, 1, 16} {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		before := acceptQueue(t, ln)
		var opts []connguard.Option
		if n > 0 {
			opts = append(opts, connguard.WithBacklog(n))
		}
		gl := newGuard(t, fixedShare(0), connguard.Unbounded, opts...).Listener(ln)
		got := acceptQueue(t, ln)
		_ = gl.Close()
		switch {
		case n == 0 && got != before:
			t.Errorf("without WithBacklog the accept queue changed from %d to %d", before, got)
		case n > 0 && got != n:
			t.Errorf("WithBacklog(%d): the kernel's accept queue is %d (was %d)", n, got, before)
		}
	}
}

// acceptQueue returns the length of ln's accept queue, from TCP_INFO.
func acceptQueue(t *testing.T, ln net.Listener) int {
	t.Helper()
	rc, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var info syscall.TCPInfo
	var errno syscall.Errno
	_ = rc.Control(func(fd uintptr) {
		size := uint32(syscall.SizeofTCPInfo)
		_, _, errno = syscall.Syscall6(syscall.SYS_GETSOCKOPT, fd, syscall.IPPROTO_TCP, syscall.TCP_INFO,
			uintptr(unsafe.Pointer(&info)), uintptr(unsafe.Pointer(&size)), 0)
	})
	if errno != 0 {
		t.Fatal(errno)
	}
	return int(info.Sacked)
}

// TestPauseOutlivesTheDeadlinesOfATCPListener: the pacing ends the Accept
// of a TCP listener at the end of every open part; the Accept of the
// Guard's listener goes on through those deadlines and returns the next
// connection, not their errors.
func TestPauseOutlivesTheDeadlinesOfATCPListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	expired := make(chan struct{}, 1)
	gl := newGuard(t, fixedShare(0), connguard.Unbounded, connguard.WithPause(time.Millisecond)).
		Listener(&expiryListener{TCPListener: ln.(*net.TCPListener), expired: expired})
	defer gl.Close()
	type result struct {
		c   net.Conn
		err error
	}
	done := make(chan result, 1)
	go func() { c, err := gl.Accept(); done <- result{c, err} }()
	for range 3 { // three deadlines passed inside one Accept of the Guard's
		<-expired
	}
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := <-done
	if r.err != nil {
		t.Fatalf("Accept = %v, want the connection", r.err)
	}
	_ = r.c.Close()
}

// expiryListener tells on expired when its Accept ended at its deadline.
type expiryListener struct {
	*net.TCPListener
	expired chan struct{}
}

func (l *expiryListener) Accept() (net.Conn, error) {
	c, err := l.TCPListener.Accept()
	if errors.Is(err, os.ErrDeadlineExceeded) {
		select {
		case l.expired <- struct{}{}:
		default:
		}
	}
	return c, err
}
