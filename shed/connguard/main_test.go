package connguard_test

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

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
