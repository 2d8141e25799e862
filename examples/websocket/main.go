// Command websocket limits WebSocket connections and event streams the way
// the field recommends for long-lived connections: each address opens at
// most 10 connections a minute, each user holds at most 2 open at once
// (event streams included; leases of 2 hours, connections ended after 1),
// and each connection sends at most 50 messages at once, refilled at 10 a
// second, in process. A connection over its message limit is closed with
// 1008 (Policy Violation) and a reason; no message is dropped silently.
//
//	go run ./examples/websocket              # serve on 127.0.0.1:8090
//	go run ./examples/websocket -selftest    # flood it over loopback with a real WebSocket client
package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/coder/websocket"

	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/fingerprint"
	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/streamshed"
)

func main() {
	demo.Command{
		Addr:   "127.0.0.1:8090",
		Drives: "open WebSockets and an event stream against itself and flood one",
		SelfTest: func(out io.Writer) error {
			_, err := selfTest(out)
			return err
		},
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			h, _, err := newHandler()
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "echo WebSocket on ws://%s/echo?user=alice, event stream on http://%s/events?user=alice\n", addr, addr)
			fmt.Fprintf(out, "2 open per user, 10 connections a minute per address, 50 messages at once and 10/s per connection\n")
			fmt.Fprintf(out, "try: curl -N 'http://%s/events?user=alice' (a third one is refused with 429)\n", addr)
			return h, nil
		},
	}.Main()
}

// newHandler returns the endpoints behind sluice and the Controller (whose
// Stats the self-test reads).
func newHandler() (http.Handler, *shed.Controller, error) {
	rules := []shed.Rule{
		{Name: "connect-ip", Category: streamshed.DefaultCategory, Identity: shed.IP,
			Algorithm: shed.TokenBucket, Limit: 10, Rate: ratelimit.Per(10, time.Minute)},
		// LeaseTTL outlives the longest connection (WithMaxLifetime below):
		// a lease cannot be renewed, and must not lapse while its
		// connection is open.
		{Name: "open-user", Category: streamshed.DefaultCategory, Identity: shed.User,
			Algorithm: shed.Concurrency, Limit: 2, LeaseTTL: 2 * time.Hour},
	}
	sluice, err := shed.New(rules)
	if err != nil {
		return nil, nil, err
	}
	res, err := fingerprint.NewResolver()
	if err != nil {
		return nil, nil, err
	}
	guard, err := streamshed.NewGuard(sluice,
		streamshed.WithMaxLifetime(time.Hour),
		streamshed.WithAttempt(func(r *http.Request) shed.Attempt {
			// The user would come from authentication upstream; here it
			// is the query's.
			ip := res.ClientIP(r)
			return shed.Attempt{IP: ip.Group.Addr(), CGNAT: ip.CGNAT, User: r.URL.Query().Get("user")}
		}),
	)
	if err != nil {
		return nil, nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /echo", func(w http.ResponseWriter, r *http.Request) { echo(guard, w, r) })
	mux.Handle("GET /events", guard.Middleware(http.HandlerFunc(events)))
	return mux, sluice, nil
}

// echo is the WebSocket endpoint: it sends every message back. The
// connection is decided before the upgrade, so that a refusal is an HTTP
// 429 or 503 with Retry-After.
func echo(guard *streamshed.Guard, w http.ResponseWriter, r *http.Request) {
	conn := guard.Accept(w, r)
	if conn == nil {
		return // refused, answered
	}
	defer conn.Done() // on every path, a panic included
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		return
	}
	defer ws.CloseNow()
	conn.Bind(func(code int, reason string) error { return ws.Close(websocket.StatusCode(code), reason) })
	ctx := r.Context()
	for {
		typ, msg, err := ws.Read(ctx)
		if err != nil {
			return // the client closed, or the Guard did
		}
		if err := conn.Message(); err != nil {
			return // over the limit: closed with 1008 and a reason
		}
		if err := ws.Write(ctx, typ, msg); err != nil {
			return
		}
	}
}

// events is a server-sent event stream: a tick a second until the client
// goes away (or the Guard ends the stream at its lifetime).
func events(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/event-stream")
	rc := http.NewResponseController(w)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for i := 0; ; i++ {
		if _, err := fmt.Fprintf(w, "data: tick %d\n\n", i); err != nil {
			return
		}
		if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
			return
		}
		select {
		case <-r.Context().Done():
			return
		case <-t.C:
		}
	}
}
