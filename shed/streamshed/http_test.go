package streamshed_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/streamshed"
)

// byHeader is the attempt of the tests' HTTP requests: the user from
// X-User, the peer's address.
func byHeader(r *http.Request) shed.Attempt {
	ap, _ := netip.ParseAddrPort(r.RemoteAddr)
	return shed.Attempt{User: r.Header.Get("X-User"), IP: ap.Addr()}
}

func eventRequest(user, remote string) *http.Request {
	r := httptest.NewRequest(http.MethodGet, "/events", nil)
	r.Header.Set("X-User", user)
	r.RemoteAddr = remote
	return r
}

// TestMiddlewareHoldsTheTokenUntilTheHandlerReturns: while the stream is
// served its permit is held, and a third stream of the user is refused
// with 429 and Retry-After; after the handler returns, it is back.
func TestMiddlewareHoldsTheTokenUntilTheHandlerReturns(t *testing.T) {
	g, c := newGuard(t, nil, streamshed.WithAttempt(byHeader))
	var inner []int
	var nested *httptest.ResponseRecorder
	depth := 0
	var h http.Handler
	h = g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner = append(inner, int(inflight(c)))
		depth++
		if depth < 3 { // open the user's next stream from inside this one
			nested = httptest.NewRecorder()
			h.ServeHTTP(nested, eventRequest("alice", fmt.Sprintf("192.0.2.1:%d", 1000+depth)))
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte("data: hello\n\n"))
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, eventRequest("alice", "192.0.2.1:1000"))
	if w.Code != http.StatusOK || len(inner) != 2 || inner[0] != 1 || inner[1] != 2 {
		t.Fatalf("outer %d, inflight seen by the handlers %v", w.Code, inner)
	}
	if nested.Code != http.StatusTooManyRequests || nested.Header().Get("Retry-After") != "1" {
		t.Fatalf("third stream: %d, Retry-After %q", nested.Code, nested.Header().Get("Retry-After"))
	}
	if n := inflight(c); n != 0 {
		t.Fatalf("inflight %d after the handlers returned", n)
	}
}

// TestMiddlewareGivesTheTokenBackWhenTheHandlerPanics: the panic goes on,
// the permit does not stay taken.
func TestMiddlewareGivesTheTokenBackWhenTheHandlerPanics(t *testing.T) {
	g, c := newGuard(t, nil, streamshed.WithAttempt(byHeader))
	h := g.Middleware(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }))
	func() {
		defer func() {
			if p := recover(); p != "boom" {
				t.Fatalf("recovered %v", p)
			}
		}()
		h.ServeHTTP(httptest.NewRecorder(), eventRequest("alice", "192.0.2.1:1000"))
	}()
	if s := c.Stats(); s.Inflight != 0 || s.Admitted != 1 {
		t.Fatalf("after the panic: inflight %d, admitted %d", s.Inflight, s.Admitted)
	}
}

// TestAcceptAnswersARateRejectionWithItsRetryAfter: the per-IP rule's
// exact wait, rounded up to seconds.
func TestAcceptAnswersARateRejectionWithItsRetryAfter(t *testing.T) {
	clk := newFrozen()
	g, _ := newGuard(t, clk.Now, streamshed.WithAttempt(byHeader))
	for range 3 {
		conn := g.Accept(httptest.NewRecorder(), eventRequest("bob", "192.0.2.9:1"))
		if conn == nil {
			t.Fatal("refused within the rate")
		}
		conn.Done()
	}
	clk.Add(time.Second / 2)
	w := httptest.NewRecorder()
	if conn := g.Accept(w, eventRequest("bob", "192.0.2.9:1")); conn != nil {
		t.Fatal("admitted over the rate")
	}
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "20" {
		t.Fatalf("%d, Retry-After %q, want 429 and 20 (19.5 s rounded up)", w.Code, w.Header().Get("Retry-After"))
	}
}

// TestMiddlewareCancelsTheStreamAtItsMaxLifetime: a stream that would run
// forever sees its context end at the lifetime, and its permit comes back.
func TestMiddlewareCancelsTheStreamAtItsMaxLifetime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g, c := newGuard(t, nil, streamshed.WithAttempt(byHeader), streamshed.WithMaxLifetime(time.Hour-time.Minute))
		start := time.Now()
		var lived time.Duration
		h := g.Middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
			lived = time.Since(start)
		}))
		h.ServeHTTP(httptest.NewRecorder(), eventRequest("alice", "192.0.2.1:1000"))
		// The lifetime's timer closed the stream and gives the permit back
		// on its own goroutine once the close returned: wait for it.
		synctest.Wait()
		if lived != time.Hour-time.Minute || inflight(c) != 0 {
			t.Fatalf("stream lived %v, inflight %d", lived, inflight(c))
		}
	})
}
