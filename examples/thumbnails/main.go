// Command thumbnails protects a CPU-bound endpoint: each request renders a
// thumbnail (simulated by a fixed amount of hashing, about 2 ms of one
// core), as image resizing, PDF rendering and inference on the CPU do.
// Such a server seldom holds more requests in its handlers than it has
// cores (each runs on one until it is done), so a concurrency limit never
// binds: under overload the queue is in front of every handler (the accept
// queue, the sockets, the Go run queue), and the server renders
// thumbnails for clients that have given up. The protection:
//
//   - an Adaptive rule of adaptive.Default with no options, through
//     Controller.Middleware wrapping the whole handler;
//
//   - a connguard.Guard on the listener (Guard.Install, Guard.Listener).
//     It tells the middleware when each request's bytes reached the host
//     (on Linux, from the kernel's receive timestamps), so that Default
//     sheds at once, with 503 and Retry-After, a request that waited past
//     its queue bound (20 ms; 2.5 ms while an overload lasts) instead of
//     rendering it late; it holds at most 4000 connections and refuses new
//     ones in the share Default sheds; and with WithEarlyAnswer it answers
//     such a request on a kept-alive connection itself, before net/http
//     reads it, at a fraction of what the middleware's 503 costs.
//
// In bench's out-of-process benchmark (bench/cmd/overload: one core, 1 ms
// of CPU per request, Poisson arrivals, a 1 s client deadline) this setup
// kept 0.97 of the endpoint's capacity at 5x load and 0.85 at 10x at a p99
// of 5 ms, where every peer served at a p99 of 0.79 to 1 s.
//
//	go run ./examples/thumbnails              # serve on 127.0.0.1:8087
//	go run ./examples/thumbnails -selftest    # pipeline a burst and see what waited too long
package main

import (
	"crypto/sha256"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/sluicehq/sluice/adaptive"
	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/shed"
	"github.com/sluicehq/sluice/shed/connguard"
)

const (
	// renderRounds is the work of one thumbnail: sha256 rounds, about 2
	// ms of one core. Real work, so that a render the scheduler holds up
	// takes longer, as a real one would.
	renderRounds = 25000
	// maxConns is the Guard's bound: the requests the server must still
	// answer at its worst, shed or not, times how long each holds its
	// connection (see connguard's doc).
	maxConns = 4000
)

func main() {
	var p *protected
	demo.Command{
		Addr:     "127.0.0.1:8087",
		Drives:   "pipeline a burst of requests against itself",
		SelfTest: func(out io.Writer) error { _, err := selfTest(out); return err },
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			var err error
			if p, err = newProtected(); err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "thumbnails on http://%s/thumb?img=NAME: about 2ms of CPU each, Default behind a Guard of %d connections\n", addr, maxConns)
			fmt.Fprintf(out, "try: curl 'http://%s/thumb?img=a'; past capacity (about 500 a second a core) the excess is 503 at once\n", addr)
			return p.handler, nil
		},
		Configure: func(srv *http.Server) error { p.guard.Install(srv); return nil },
		Listener:  func(ln net.Listener) net.Listener { return p.guard.Listener(ln) },
	}.Main()
}

// protected is the endpoint behind its protection: the Controller of its
// adaptive rule, the Guard for its listener and server, and the handler to
// serve (the middleware around the endpoint).
type protected struct {
	ctl     *shed.Controller
	guard   *connguard.Guard
	handler http.Handler
}

// newProtected builds the endpoint behind Default and a Guard that answers
// early. Close its Controller when done.
func newProtected() (*protected, error) {
	alg, err := adaptive.NewDefault()
	if err != nil {
		return nil, err
	}
	lim, err := adaptive.NewLimiter(alg)
	if err != nil {
		return nil, err
	}
	ctl, err := shed.New([]shed.Rule{{Name: "thumbnails", Algorithm: shed.Adaptive, Limiter: lim}})
	if err != nil {
		return nil, err
	}
	g, err := connguard.New(ctl, maxConns, connguard.WithEarlyAnswer())
	if err != nil {
		_ = ctl.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /thumb", thumbnail)
	// The middleware wraps the whole handler, as WithEarlyAnswer needs:
	// every request the Guard may answer was meant for it.
	return &protected{ctl: ctl, guard: g, handler: ctl.Middleware(mux)}, nil
}

// thumbnail renders the thumbnail of the image the query names. Where the
// Guard knows when the request's bytes reached the host, the answer says
// how long it waited before its render began (Server-Timing: wait).
func thumbnail(w http.ResponseWriter, r *http.Request) {
	if src, ok := shed.ArrivalsFrom(r.Context()); ok {
		if at, ok := src.LastArrival(); ok {
			w.Header().Set("Server-Timing", fmt.Sprintf("wait;dur=%.1f", float64(time.Now().UnixNano()-at)/1e6))
		}
	}
	sum := render(r.URL.Query().Get("img"))
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	fmt.Fprintf(w, "thumbnail %x\n", sum[:8])
}

// render does a thumbnail's work for img.
func render(img string) [sha256.Size]byte {
	sum := sha256.Sum256([]byte(img))
	for range renderRounds - 1 {
		sum = sha256.Sum256(sum[:])
	}
	return sum
}
