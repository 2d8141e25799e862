package connguard_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/connguard"
)

// Each request served behind the Guard, with its ConnContext, finds in
// its context when its bytes reached the host: on Linux the kernel's
// receive timestamp, after the client started writing it and before the
// client read its answer, for the first request of a connection and for
// the next one on the same connection; elsewhere nothing (the Guard
// leaves the context as it is).
func TestConnContextTellsWhenEachRequestArrived(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback listener: %v", err)
	}
	g := newGuard(t, new(share), connguard.Unbounded)
	arrived := make(chan int64, 2)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			arrived <- arrivalOf(r)
		}),
		ConnState:         g.ConnState,
		ConnContext:       g.ConnContext,
		ReadHeaderTimeout: 5 * time.Second,
	}
	serve(t, srv, g.Listener(ln))
	// The host stamps packets once some socket asked for it, which the
	// kernel turns on a moment after the first asks (deferred work): a
	// connection's first request may come before. So the test dials until
	// a first request is stamped (a bounded number of times), then checks
	// it and the next one on the same connection.
	for range 50 {
		if stamped := requestTwice(t, ln.Addr().String(), arrived); stamped || runtime.GOOS != "linux" {
			return
		}
	}
	t.Fatal("no request of 50 connections had a receive timestamp")
}

// requestTwice sends two requests on one new connection to addr and checks
// their arrival times (from arrived: -1 no source, 0 unknown): within the
// time the request was written and the time its answer was read. It
// reports false when the first one's was unknown (not yet stamped).
func requestTwice(t *testing.T, addr string, arrived chan int64) bool {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	for i := range 2 { // the connection's first request, then one kept alive
		before := time.Now().UnixNano()
		if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		after := time.Now().UnixNano()
		at := <-arrived
		switch {
		case runtime.GOOS != "linux":
			if at != -1 {
				t.Fatalf("request %d: arrival %d where the system has no receive timestamps", i, at)
			}
		case at == -1:
			t.Fatalf("request %d: no arrival source in the context", i)
		case at == 0 && i == 0:
			return false
		case at < before || at > after:
			t.Fatalf("request %d: arrived at %d, not within [%d, %d] (written, answered)", i, at, before, after)
		}
	}
	return true
}

// A connection that is not the Guard's (another listener's) gets its
// context unchanged.
func TestConnContextIgnoresOtherConnections(t *testing.T) {
	g := newGuard(t, new(share), connguard.Unbounded)
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	ctx := t.Context()
	if got := g.ConnContext(ctx, a); got != ctx {
		t.Fatal("ConnContext changed the context of a connection that is not the Guard's")
	}
	if _, ok := shed.ArrivalsFrom(ctx); ok {
		t.Fatal("a bare context carries arrivals")
	}
}

// Over TLS the server reads the Guard's connection under a *tls.Conn:
// ConnContext unwraps it, and each request's arrival is the receive time
// of the latest TLS record read, within the request's round trip.
func TestConnContextTellsArrivalsUnderTLS(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("receive timestamps are read on Linux only")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback listener: %v", err)
	}
	g := newGuard(t, new(share), connguard.Unbounded)
	arrived := make(chan int64, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- arrivalOf(r)
	}))
	srv.Listener = g.Listener(ln)
	srv.Config.ConnState, srv.Config.ConnContext = g.ConnState, g.ConnContext
	srv.StartTLS()
	defer srv.Close()
	client := srv.Client()
	for range 50 { // until the host stamps packets (see TestConnContextTellsWhenEachRequestArrived)
		before := time.Now().UnixNano()
		resp, err := client.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		after := time.Now().UnixNano()
		switch at := <-arrived; {
		case at == -1:
			t.Fatal("no arrival source in a TLS request's context")
		case at == 0:
			continue
		case at < before || at > after:
			t.Fatalf("arrived at %d, not within [%d, %d]", at, before, after)
		default:
			return
		}
	}
	t.Fatal("no TLS request of 50 had a receive timestamp")
}

// Install keeps a server's own hooks: its ConnState sees every state
// change and its ConnContext's value reaches the handler, beside the
// Guard's arrival times (on Linux) and the Guard's connection count.
func TestInstallKeepsTheServersOwnHooks(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no loopback listener: %v", err)
	}
	g := newGuard(t, new(share), connguard.Unbounded)
	type key struct{}
	var states atomic.Int64
	seen := make(chan bool, 1)
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, arrivals := shed.ArrivalsFrom(r.Context())
			seen <- r.Context().Value(key{}) == "mine" && (arrivals || runtime.GOOS != "linux")
		}),
		ConnState:         func(net.Conn, http.ConnState) { states.Add(1) },
		ConnContext:       func(ctx context.Context, _ net.Conn) context.Context { return context.WithValue(ctx, key{}, "mine") },
		ReadHeaderTimeout: 5 * time.Second,
	}
	g.Install(srv)
	serve(t, srv, g.Listener(ln))
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if !<-seen {
		t.Fatal("the handler lost the server's context value or the Guard's arrivals")
	}
	if states.Load() < 2 { // new, active
		t.Fatalf("the server's ConnState saw %d changes", states.Load())
	}
	if s := g.Stats(); s.Accepted != 1 || s.Open != 1 {
		t.Fatalf("the Guard did not hold the connection: %+v", s)
	}
}

// The whole chain on loopback: a Controller with one Adaptive rule of
// Default behind the Guard (Install). With a queue bound of 2ns every
// request has waited past it by the time the middleware runs (the kernel
// stamped its bytes before the server's goroutine woke, read and parsed
// them), so on Linux it is shed with a 503, unless it is CriticalPlus;
// with the default bound (20ms) an idle server admits it. Elsewhere no
// arrival is known and everything is admitted.
func TestGuardedMiddlewareShedsWhatWaitedPastTheQueueBound(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []adaptive.Option
		crit   bool
		status int
	}{
		{"bound 2ns", []adaptive.Option{adaptive.WithSchedulingTarget(time.Nanosecond)}, false, http.StatusServiceUnavailable},
		{"bound 2ns, CriticalPlus", []adaptive.Option{adaptive.WithSchedulingTarget(time.Nanosecond)}, true, http.StatusOK},
		{"default bound", nil, false, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if runtime.GOOS != "linux" && tc.status != http.StatusOK {
				tc.status = http.StatusOK // no arrival times: nothing waited, as far as anyone knows
			}
			alg, err := adaptive.NewDefault(tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			lim, err := adaptive.NewLimiter(alg)
			if err != nil {
				t.Fatal(err)
			}
			ctl, err := shed.New([]shed.Rule{{Name: "endpoint", Algorithm: shed.Adaptive, Limiter: lim}},
				shed.WithClient(func(*http.Request) shed.Client {
					if tc.crit {
						return shed.Client{Priority: shed.CriticalPlus}
					}
					return shed.Client{}
				}))
			if err != nil {
				t.Fatal(err)
			}
			defer ctl.Close()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Skipf("no loopback listener: %v", err)
			}
			g := newGuard(t, ctl, connguard.Unbounded)
			srv := &http.Server{Handler: ctl.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})), ReadHeaderTimeout: 5 * time.Second}
			g.Install(srv)
			serve(t, srv, g.Listener(ln))
			client := &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second}
			defer client.CloseIdleConnections()
			// The host may stamp the first packets late (see
			// TestConnContextTellsWhenEachRequestArrived): a few requests, the
			// last one counts.
			status := 0
			for range 5 {
				resp, err := client.Get("http://" + ln.Addr().String() + "/")
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				if status = resp.StatusCode; status == tc.status {
					break
				}
			}
			if status != tc.status {
				t.Fatalf("status %d, want %d", status, tc.status)
			}
		})
	}
}

// arrivalOf returns the arrival time r's context carries: -1 when it
// carries no source, 0 when the source does not know.
func arrivalOf(r *http.Request) int64 {
	src, ok := shed.ArrivalsFrom(r.Context())
	if !ok {
		return -1
	}
	at, _ := src.LastArrival() // 0 when not known
	return at
}
