//go:build linux

package connguard

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// shedsEveryWait is a Signal that refuses no connection and sheds every
// request for its wait.
type shedsEveryWait struct{}

func (shedsEveryWait) Shedding() float64 { return 0 }

func (shedsEveryWait) ShedWaited(time.Duration) (time.Duration, bool) { return time.Second, true }

// smallSendBuffers gives each connection it accepts a send buffer of
// 4 KiB (the kernel doubles it), so that answers nobody reads fill it
// after a few hundred.
type smallSendBuffers struct{ net.Listener }

func (l smallSendBuffers) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if tc, ok := nc.(*net.TCPConn); ok {
		_ = tc.SetWriteBuffer(4096)
	}
	return nc, err
}

// A client that sends requests and never reads the answers cannot hold
// the server's goroutine: once the socket buffers are full, the early
// answer's write gives up at its deadline, the Guard counts a write
// error, and the server closes the connection. The requests are 128
// bytes each, one a write, so that a read of net/http's 4 KiB ends
// between two and the Guard answers them all (a read that ended inside
// one would leave the rest of the read to net/http).
func TestEarlyAnswerGivesUpOnAClientThatDoesNotRead(t *testing.T) {
	g, err := New(shedsEveryWait{}, Unbounded, WithEarlyAnswer())
	if err != nil {
		t.Fatal(err)
	}
	g.earlyWrite = 100 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback listener: %v", err)
	}
	var served atomic.Int64
	srv := &http.Server{
		Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) }),
		// net/http's own writes give up too, should a request reach it.
		WriteTimeout: 2 * time.Second,
	}
	g.Install(srv)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(g.Listener(smallSendBuffers{ln})) }()
	defer func() {
		_ = srv.Close()
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	}()

	head := "GET / HTTP/1.1\r\nHost: x\r\nX-Pad: "
	req := head + strings.Repeat("p", 128-len(head)-len("\r\n\r\n")) + "\r\n\r\n"
	if len(req) != 128 || netHTTPBuffer%len(req) != 0 {
		t.Fatalf("a request of %d bytes", len(req))
	}
	dial := func() net.Conn {
		nc, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = nc.SetDeadline(time.Now().Add(20 * time.Second))
		return nc
	}
	// A request on a connection of its own until one is answered early:
	// the host turns its receive timestamps on a moment after the first
	// socket asks (a deferred switch), and a request of unknown arrival
	// goes to the server, which would then hold the connection's next
	// first byte in its background read.
	for end := time.Now().Add(5 * time.Second); g.Stats().EarlyAnswers == 0 && time.Now().Before(end); {
		nc := dial()
		if _, err := io.WriteString(nc, req); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(nc), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = nc.Close()
	}
	if g.Stats().EarlyAnswers == 0 {
		t.Fatal("no request answered early in 5 s")
	}
	nc := dial()
	defer nc.Close()
	before := served.Load()
	// Pipelined, one request a write (a segment each, so that a read
	// ends between two), until the server's close makes a write fail.
	var werr error
	for range 1 << 18 {
		if _, werr = io.WriteString(nc, req); werr != nil {
			break
		}
	}
	if werr == nil {
		t.Fatal("32 MiB of requests went out to a server answering a client that never reads")
	}
	var ne net.Error
	if errors.As(werr, &ne) && ne.Timeout() {
		t.Fatalf("the client's write timed out (%v): the server held the connection; stats %+v; served %d", werr, g.Stats(), served.Load())
	}
	s := g.Stats()
	if s.EarlyAnswers < 100 {
		t.Errorf("stats %+v, want more than a hundred early answers", s)
	}
	// Bytes the host did not stamp (its timestamps switch is deferred, and
	// other tests' sockets toggle it) go to the server, which answers the
	// requests among them itself: then net/http's write may be the one
	// that finds the buffers full, and its own deadline closes the
	// connection. Otherwise the Guard's write gave up.
	if n := served.Load() - before; n == 0 && s.WriteErrors != 1 {
		t.Errorf("stats %+v, want the early answer's write to have given up once", s)
	} else if n > 0 {
		t.Logf("%d requests reached the server (unstamped); write errors %d", n, s.WriteErrors)
	}
}
