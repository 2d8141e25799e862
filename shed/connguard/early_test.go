package connguard_test

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/connguard"
)

// earlyServer serves a Controller of one Adaptive rule of Default with
// the scheduling target given (its queue bound is twice that) behind a
// Guard of maxConns connections with WithEarlyAnswer, on loopback, with
// install or without, and the server as opts set it; the handler counts its calls. It returns the
// server's address.
func earlyServer(t *testing.T, target time.Duration, install bool, maxConns int, opts ...func(*http.Server)) (*shed.Controller, *connguard.Guard, *atomic.Int64, string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("no arrival times here: nothing is known to have waited")
	}
	alg, err := adaptive.NewDefault(adaptive.WithSchedulingTarget(target))
	if err != nil {
		t.Fatal(err)
	}
	lim, err := adaptive.NewLimiter(alg)
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := shed.New([]shed.Rule{{Name: "endpoint", Algorithm: shed.Adaptive, Limiter: lim}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctl.Close() })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback listener: %v", err)
	}
	g := newGuard(t, ctl, maxConns, connguard.WithEarlyAnswer())
	served := new(atomic.Int64)
	srv := &http.Server{
		Handler:           ctl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served.Add(1) })),
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      5 * time.Second,
	}
	for _, o := range opts {
		o(srv)
	}
	if install {
		g.Install(srv)
	} else {
		srv.ConnContext = g.ConnContext // arrival times, but no ConnState: the state is unknown
	}
	serve(t, srv, g.Listener(ln))
	return ctl, g, served, ln.Addr().String()
}

// dial opens a connection to addr for the test, and a reader of its
// responses.
func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return nc, bufio.NewReader(nc)
}

// exchange writes req on nc and reads one response to method (its body
// read whole).
func exchange(t *testing.T, nc net.Conn, br *bufio.Reader, req, method string) (*http.Response, []byte) {
	t.Helper()
	_ = nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(nc, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, body
}

// untilEarly sends GETs on a new connection until one is answered early
// (the host may stamp its first packets late, and a request whose arrival
// is unknown goes to the server): the first early answer.
func untilEarly(t *testing.T, g *connguard.Guard, addr string) (net.Conn, *bufio.Reader, *http.Response, []byte) {
	t.Helper()
	nc, br := dial(t, addr)
	for range 5 {
		before := g.Stats().EarlyAnswers
		resp, body := exchange(t, nc, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", http.MethodGet)
		if g.Stats().EarlyAnswers > before {
			return nc, br, resp, body
		}
	}
	t.Fatal("no request answered early in five")
	return nil, nil, nil, nil
}

// With a queue bound of 2ns every request has waited past it when the
// Guard reads it: the Guard answers each bodiless HTTP/1.1 request on the
// kept-alive connection, pipelined ones too, with the 503 the middleware
// writes (its fields and document; no document to HEAD), and the handler
// never runs; the Controller counts each as shed by the wait. A request
// with a body goes to the server, whose middleware sheds it.
func TestEarlyAnswerShedsBeforeTheServerReads(t *testing.T) {
	ctl, g, served, addr := earlyServer(t, time.Nanosecond, true, connguard.Unbounded)
	nc, br, resp, body := untilEarly(t, g, addr)
	rec := httptest.NewRecorder()
	shed.Decision{Kind: shed.Shedding}.WriteRejection(rec)
	want := func(resp *http.Response, body []byte, head bool) {
		t.Helper()
		wantBody := rec.Body.Bytes()
		if head {
			wantBody = nil
		}
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || resp.Close ||
			resp.Header.Get("Content-Type") != rec.Header().Get("Content-Type") || !bytes.Equal(body, wantBody) {
			t.Fatalf("answer %d %v, close %v, body %q; want the middleware's 503", resp.StatusCode, resp.Header, resp.Close, body)
		}
	}
	want(resp, body, false)
	before, shedBefore := g.Stats().EarlyAnswers, ctl.Stats().Shedding
	resp, body = exchange(t, nc, br, "HEAD / HTTP/1.1\r\nHost: x\r\n\r\n", http.MethodHead)
	want(resp, body, true)
	// Two pipelined in one write: both answered, in order.
	if _, err := io.WriteString(nc, strings.Repeat("GET /p HTTP/1.1\r\nHost: x\r\n\r\n", 2)); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		want(resp, body, false)
	}
	if got := g.Stats().EarlyAnswers - before; got != 3 {
		t.Fatalf("%d early answers, want 3", got)
	}
	if got := ctl.Stats().Shedding - shedBefore; got != 3 {
		t.Fatalf("the Controller counted %d sheds, want 3", got)
	}
	// A body: the server reads it, and its middleware sheds it.
	resp, _ = exchange(t, nc, br, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", http.MethodPost)
	if resp.StatusCode != http.StatusServiceUnavailable || g.Stats().EarlyAnswers-before != 3 {
		t.Fatalf("the request with a body: %d, %d early answers; want the middleware's 503", resp.StatusCode, g.Stats().EarlyAnswers-before)
	}
	if served.Load() != 0 {
		t.Fatalf("the handler ran %d times", served.Load())
	}
	if rs := ctl.Stats().Rules[0]; rs.ShedByWait != ctl.Stats().Shedding {
		t.Fatalf("shed by wait %d of %d shed", rs.ShedByWait, ctl.Stats().Shedding)
	}
}

// With the default bound (20ms) nothing on an idle server waited past it:
// every request reaches the handler, the Guard answers none.
func TestEarlyAnswerLeavesWhatDidNotWaitToTheServer(t *testing.T) {
	_, g, served, addr := earlyServer(t, 10*time.Millisecond, true, connguard.Unbounded)
	nc, br := dial(t, addr)
	for range 5 {
		if resp, _ := exchange(t, nc, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", http.MethodGet); resp.StatusCode != http.StatusOK {
			t.Fatalf("status %d, want 200", resp.StatusCode)
		}
	}
	if served.Load() != 5 || g.Stats().EarlyAnswers != 0 {
		t.Fatalf("%d served, %d answered early; want 5, 0", served.Load(), g.Stats().EarlyAnswers)
	}
}

// Without the Guard's ConnState the Guard cannot tell a read between
// requests from one of a request's body: it answers nothing, and the
// middleware sheds what waited.
func TestEarlyAnswerNeedsTheConnectionState(t *testing.T) {
	ctl, g, _, addr := earlyServer(t, time.Nanosecond, false, connguard.Unbounded)
	nc, br := dial(t, addr)
	for range 5 {
		exchange(t, nc, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", http.MethodGet)
	}
	if g.Stats().EarlyAnswers != 0 || ctl.Stats().Shedding == 0 {
		t.Fatalf("%d answered early, %d shed by the middleware; want 0, some", g.Stats().EarlyAnswers, ctl.Stats().Shedding)
	}
}

// WithEarlyAnswer needs a Signal that decides by the wait.
func TestEarlyAnswerNeedsAWaitShedder(t *testing.T) {
	if _, err := connguard.New(new(share), 10, connguard.WithEarlyAnswer()); err == nil || !strings.HasPrefix(err.Error(), "connguard: ") {
		t.Fatalf("New: %v, want an error", err)
	}
}

// A client answered early for longer than the server's idle and write
// timeouts keeps its connection: each answer gets a write deadline of its
// own, and the next request the read deadline the server gave the one
// before (the loop is bounded by count and time).
func TestEarlyAnswerKeepsTheServersTimeoutsPerRequest(t *testing.T) {
	// Long enough for a loaded machine to send the next request in time,
	// short enough that the loop outlives it three times over.
	const timeout = 250 * time.Millisecond
	_, g, _, addr := earlyServer(t, time.Nanosecond, true, connguard.Unbounded, func(srv *http.Server) {
		srv.IdleTimeout, srv.WriteTimeout, srv.ReadHeaderTimeout = timeout, timeout, timeout
	})
	nc, br, _, _ := untilEarly(t, g, addr)
	before := g.Stats().EarlyAnswers
	start, n := time.Now(), 0
	for ; n < 50000 && time.Since(start) < 3*timeout; n++ {
		if resp, _ := exchange(t, nc, br, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", http.MethodGet); resp.StatusCode != http.StatusServiceUnavailable {
			t.Fatalf("request %d: %d", n, resp.StatusCode)
		}
	}
	if time.Since(start) < 3*timeout {
		t.Skipf("%d requests took less than %v: the timeouts were not reached", n, 3*timeout)
	}
	if got := g.Stats().EarlyAnswers - before; got != uint64(n) {
		t.Fatalf("%d of %d answered early", got, n)
	}
}

// An HTTP/2 connection (cleartext, prior knowledge) is never answered
// early: the Guard leaves it to the server at its first bytes, and the
// middleware sheds over HTTP/2.
func TestEarlyAnswerLeavesHTTP2ToTheServer(t *testing.T) {
	ctl, g, _, addr := earlyServer(t, time.Nanosecond, true, connguard.Unbounded, func(srv *http.Server) {
		srv.Protocols = new(http.Protocols)
		srv.Protocols.SetHTTP1(true)
		srv.Protocols.SetUnencryptedHTTP2(true)
	})
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	for range 5 {
		resp, err := client.Get("http://" + addr + "/")
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("served over %s", resp.Proto)
		}
	}
	if g.Stats().EarlyAnswers != 0 || ctl.Stats().Shedding == 0 {
		t.Fatalf("%d answered early, %d shed by the middleware; want 0, some", g.Stats().EarlyAnswers, ctl.Stats().Shedding)
	}
}

// A connection whose requests the Guard answered is between requests, as
// one whose requests the server answered: idle, so that at the bound it
// makes room for a new one. (Left as new, it could never be closed, and
// a bound full of such connections refused every new client.)
// An early answer finishes a request as the server's answer does: the
// connection that carried it is the most recently used, not the one the
// bound closes first (see TestAtTheBoundTheConnectionIdleTheLongestIsClosed).
func TestEarlyAnsweredConnectionIsTheLatestUsedAtTheBound(t *testing.T) {
	_, g, _, addr := earlyServer(t, time.Nanosecond, true, 2)
	a, abr, _, _ := untilEarly(t, g, addr)
	b, _, _, _ := untilEarly(t, g, addr)
	before := g.Stats().EarlyAnswers
	exchange(t, a, abr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", http.MethodGet)
	if g.Stats().EarlyAnswers == before {
		t.Fatal("a's second request was not answered early")
	}
	_, _, _, _ = untilEarly(t, g, addr) // a third client: b, idle the longest, makes room
	if s := g.Stats(); s.IdleClosed != 1 || s.Full != 0 {
		t.Fatalf("stats %+v, want one connection closed for the third", s)
	}
	_ = b.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := b.Read(make([]byte, 1)); err == nil {
		t.Fatal("b, idle the longest, is still open")
	}
	exchange(t, a, abr, "GET / HTTP/1.1\r\nHost: x\r\n\r\n", http.MethodGet) // a, answered early just before, is open
}

func TestEarlyAnsweredConnectionIsIdleAtTheBound(t *testing.T) {
	_, g, _, addr := earlyServer(t, time.Nanosecond, true, 1)
	first, _, _, _ := untilEarly(t, g, addr)
	_, _, _, _ = untilEarly(t, g, addr) // the second client takes the first one's place
	if s := g.Stats(); s.IdleClosed != 1 || s.Full != 0 {
		t.Fatalf("stats %+v, want the first connection closed for the second", s)
	}
	_ = first.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := first.Read(make([]byte, 1)); err == nil {
		t.Fatal("the first connection is still open")
	}
}
