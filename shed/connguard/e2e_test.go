package connguard_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// An http.Server on loopback behind a Guard of one connection: a
// keep-alive client that went idle gives its connection up to a new
// client, and while the Signal sheds everything a new client reads the
// 503 (the refusal read its request first, so the close did not reset the
// response away).
func TestServerBehindTheGuardClosesIdleFirstAndAnswersShedWith503(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback listener: %v", err)
	}
	sig := new(share)
	g := newGuard(t, sig, 1)
	idle := make(chan struct{}, 8)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") }),
		ConnState: func(c net.Conn, s http.ConnState) {
			g.ConnState(c, s)
			if s == http.StateIdle {
				idle <- struct{}{}
			}
		},
		ReadHeaderTimeout: 5 * time.Second,
	}
	gate := &gateListener{Listener: ln, open: make(chan struct{}, 8)}
	serve(t, srv, g.Listener(gate))
	url := "http://" + ln.Addr().String() + "/"
	get := func(c *http.Client) *http.Response {
		t.Helper()
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp
	}
	first := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	second := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	defer first.CloseIdleConnections()
	defer second.CloseIdleConnections()
	gate.open <- struct{}{}
	if r := get(first); r.StatusCode != http.StatusOK {
		t.Fatalf("first client: %d", r.StatusCode)
	}
	<-idle
	// The first connection is idle now (its client keeps it alive); the
	// second client's takes its place.
	gate.open <- struct{}{}
	if r := get(second); r.StatusCode != http.StatusOK {
		t.Fatalf("second client: %d", r.StatusCode)
	}
	if s := g.Stats(); s.IdleClosed != 1 || s.Full != 0 {
		t.Fatalf("stats %+v, want one idle connection closed", s)
	}
	// A shed connection whose request arrived before the accept (as in a
	// dial storm's accept queue) reads the 503.
	sig.set(1)
	nc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := io.WriteString(nc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	gate.open <- struct{}{}
	_ = nc.SetReadDeadline(time.Now().Add(5 * time.Second))
	r, err := http.ReadResponse(bufio.NewReader(nc), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.StatusCode != http.StatusServiceUnavailable || r.Header.Get("Retry-After") != "1" || !r.Close {
		t.Fatalf("shed client: %d, Retry-After %q, close %v; want 503, 1, close", r.StatusCode, r.Header.Get("Retry-After"), r.Close)
	}
	if s := g.Stats(); s.Shed != 1 || s.Unanswered != 0 {
		t.Fatalf("stats %+v, want one shed and answered", s)
	}
	// One whose request has not arrived is closed without a word.
	silent, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	gate.open <- struct{}{}
	_ = silent.SetReadDeadline(time.Now().Add(5 * time.Second))
	if b, err := io.ReadAll(silent); len(b) != 0 || err != nil {
		t.Fatalf("unanswered client read %q, %v; want a plain close", b, err)
	}
	if s := g.Stats(); s.Shed != 2 || s.Unanswered != 1 {
		t.Fatalf("stats %+v, want two shed, one unanswered", s)
	}
	gate.open <- struct{}{} // let Serve's Accept reach its listener's close
}

// gateListener accepts one connection per value sent on open, so that a
// test decides when the Guard sees a connection.
type gateListener struct {
	net.Listener
	open chan struct{}
}

func (l *gateListener) Accept() (net.Conn, error) {
	<-l.open
	return l.Listener.Accept()
}

// serve runs srv on ln until the test ends, then closes it and checks
// that Serve ended as a close ends it.
func serve(t *testing.T, srv *http.Server, ln net.Listener) {
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Close()
		if err := <-served; err != http.ErrServerClosed {
			t.Errorf("Serve: %v", err)
		}
	})
}
