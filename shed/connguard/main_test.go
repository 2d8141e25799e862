package connguard_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/connguard"
)

// TestMain runs the tests with the host stamping what it receives (see
// keepStamping) and then checks that no goroutine outlives them.
func TestMain(m *testing.M) {
	stop := keepStamping()
	code := m.Run()
	stop()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// keepStamping has the host stamp the packets it receives for the whole
// run, and returns what ends that. A Linux host turns its receive
// timestamps on some time after the first socket asks for them (deferred
// work: milliseconds, longer on a loaded host) and off after the last one
// asking closes; what arrives meanwhile is not stamped. Without this,
// whether a test's first requests knew their arrival times depended on
// the order the tests ran in, on other processes and on the host's load
// (a shuffled run in CI had two tests of early answers find none in five
// requests). It serves behind a Guard (whose listener asks for the
// timestamps), dials until a request arrives stamped (at most 200
// connections), and keeps the listener open until stop. Elsewhere than
// Linux it does nothing.
func keepStamping() (stop func()) {
	if runtime.GOOS != "linux" {
		return func() {}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return func() {}
	}
	g, err := connguard.New(new(share), connguard.Unbounded)
	if err != nil {
		_ = ln.Close()
		return func() {}
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if src, ok := shed.ArrivalsFrom(r.Context()); ok {
			if _, ok := src.LastArrival(); ok {
				w.WriteHeader(http.StatusNoContent)
			}
		}
	})}
	g.Install(srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(g.Listener(ln))
	}()
	for range 200 {
		if stampedRequest(ln.Addr().String()) {
			break
		}
	}
	return func() {
		_ = srv.Close()
		<-served
	}
}

// stampedRequest sends one request to keepStamping's server on a new
// connection and reports whether it arrived stamped.
func stampedRequest(addr string) bool {
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return false
	}
	defer nc.Close()
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusNoContent
}

// share is a Signal whose share the test sets.
type share struct{ bits atomic.Uint64 }

func (s *share) Shedding() float64 { return float64(s.bits.Load()) / 1e6 }
func (s *share) set(f float64)     { s.bits.Store(uint64(f * 1e6)) }

// pipeListener is an in-memory listener: dial hands Accept one end of a
// net.Pipe and returns the other, the client's. Its Accept takes a
// deadline, as a TCP listener's does.
type pipeListener struct {
	ch       chan net.Conn
	done     chan struct{}
	deadline atomic.Pointer[time.Time]
}

func newPipeListener() *pipeListener {
	return &pipeListener{ch: make(chan net.Conn, 128), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	var expired <-chan time.Time
	if d := l.deadline.Load(); d != nil && !d.IsZero() {
		t := time.NewTimer(time.Until(*d))
		defer t.Stop()
		expired = t.C
	}
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	case <-expired:
		return nil, os.ErrDeadlineExceeded
	}
}

func (l *pipeListener) SetDeadline(t time.Time) error { l.deadline.Store(&t); return nil }

func (l *pipeListener) Close() error   { close(l.done); return nil }
func (l *pipeListener) Addr() net.Addr { return pipeAddr{} }

func (l *pipeListener) dial() net.Conn {
	server, client := net.Pipe()
	l.ch <- server
	return client
}

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }

// acceptor runs Accept in a loop and hands over what it admits.
func acceptor(ln net.Listener) <-chan net.Conn {
	out := make(chan net.Conn, 128)
	go func() {
		defer close(out)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			out <- c
		}
	}()
	return out
}

// readAll reads a client end until the server closes it, in the
// background.
func readAll(c net.Conn) <-chan string {
	out := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(c)
		out <- string(b)
	}()
	return out
}
