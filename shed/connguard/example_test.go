package connguard_test

import (
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/connguard"
)

// A server whose adaptive rule sheds while the scheduling delay is high,
// behind a Guard of 1000 connections that refuses new connections in the
// share the rule sheds, before net/http reads them.
func Example() {
	c, err := newController()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	g, err := connguard.New(c, 1000, connguard.WithRetryAfter(2*time.Second))
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{Handler: c.Middleware(http.NotFoundHandler()), ReadHeaderTimeout: 5 * time.Second}
	// Idle connections go first at the bound; each request's arrival
	// time reaches Default's queue bound.
	g.Install(srv)
	_ = srv // srv.Serve(g.Listener(ln)) serves behind the Guard
	fmt.Printf("shedding %v, %+v\n", c.Shedding(), g.Stats())
	// Output: shedding 0, {Accepted:0 Open:0 Shed:0 Full:0 IdleClosed:0 Unanswered:0 WriteErrors:0 IdleShed:0 Pauses:0 Paused:0s EarlyAnswers:0}
}

// newController returns a Controller with one Adaptive rule of Default,
// which sheds while the scheduling delay is high.
func newController() (*shed.Controller, error) {
	alg, err := adaptive.NewDefault()
	if err != nil {
		return nil, err
	}
	lim, err := adaptive.NewLimiter(alg)
	if err != nil {
		return nil, err
	}
	return shed.New([]shed.Rule{{Name: "adaptive", Algorithm: shed.Adaptive, Limiter: lim}})
}

// A Guard that, while the Controller sheds, pauses its listener instead of
// refusing: it does not accept for the shed share of every 20 ms, its
// kernel accept queue holds 8 connections (on Linux), and it closes the
// shed share of its connections as they go idle, so that kept-alive
// clients dial into the paused listener too.
func Example_pause() {
	c, err := newController()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	g, err := connguard.New(c, 1000,
		connguard.WithPause(20*time.Millisecond), connguard.WithBacklog(8), connguard.WithIdleShed())
	if err != nil {
		fmt.Println(err)
		return
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{Handler: c.Middleware(http.NotFoundHandler()), ReadHeaderTimeout: 5 * time.Second}
	g.Install(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(g.Listener(ln)) }()
	_ = srv.Close()
	fmt.Println(<-served)
	// Output: http: Server closed
}

// A Guard that answers, in place of the server, the HTTP/1.1 requests the
// Controller sheds for their wait, before net/http reads them: the
// middleware wraps the server's whole handler, so that no request the
// Guard answers was meant for a handler outside it.
func Example_earlyAnswer() {
	c, err := newController()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	g, err := connguard.New(c, 1000, connguard.WithEarlyAnswer())
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{Handler: c.Middleware(http.NotFoundHandler()), ReadHeaderTimeout: 5 * time.Second}
	g.Install(srv) // the connection states tell the Guard when it reads between requests
	_ = srv        // srv.Serve(g.Listener(ln)) serves behind the Guard
	// What the Guard asks of each request it could answer: one whose bytes
	// arrived 50ms before it was read waited past Default's bound (20ms).
	retryAfter, shed := c.ShedWaited(50 * time.Millisecond)
	fmt.Println(shed, retryAfter, g.Stats().EarlyAnswers)
	// Output: true 1s 0
}
