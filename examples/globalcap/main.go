// Command globalcap caps a whole endpoint, every client together, at 100
// requests per second: a search backend that can take that much and no
// more, whoever asks. The cap is a ratelimit.ShardedWindow used directly,
// an exact fixed-window counter built for many cores hitting one limit: its
// common path writes only a shard-local cache line. (A shed rule
// {Identity: shed.Global, Algorithm: shed.FixedWindow} decides on one too,
// with the refund that layered rules need; this example shows the
// primitive alone.) Over the cap, the answer is 503 with Retry-After: the
// server protects itself, no client is at fault.
//
//	go run ./examples/globalcap              # serve on 127.0.0.1:8085
//	go run ./examples/globalcap -selftest    # drive a burst against itself
package main

import (
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/ratelimit"
)

// The cap: perWindow requests per window, for every client together.
const (
	perWindow = 100
	window    = time.Second
)

func main() {
	demo.Command{
		Addr:     "127.0.0.1:8085",
		Drives:   "drive a burst against itself",
		SelfTest: func(out io.Writer) error { _, err := selfTest(out); return err },
		Serve: func(out io.Writer, addr string) (http.Handler, error) {
			h, err := newHandler(clock.Now)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(out, "search on http://%s/search, capped at %d requests per %v for all clients together\n", addr, perWindow, window)
			fmt.Fprintf(out, "try: curl -sZ --parallel-max 16 -o /dev/null -w '%%{http_code}\\n' 'http://%s/search?q=[1-150]' 2>/dev/null | sort | uniq -c\n", addr)
			return h, nil
		},
	}.Main()
}

// newHandler returns the search endpoint behind the global cap, reading
// the time from now (monotonic nanoseconds).
func newHandler(now func() int64) (http.Handler, error) {
	sw, err := ratelimit.NewShardedWindow(perWindow, window)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /search", capped(sw, now, http.HandlerFunc(search)))
	return mux, nil
}

// capped lets a request through to next only while the window has room.
func capped(sw *ratelimit.ShardedWindow, now func() int64, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d := sw.AllowN(now(), 1)
		if !d.Allowed() {
			// Delta-seconds, rounded up: never earlier than the next window.
			w.Header().Set("Retry-After", strconv.FormatInt(int64((d.RetryAfter+time.Second-1)/time.Second), 10))
			http.Error(w, "search is at capacity, retry later", http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// search is the endpoint itself.
func search(w http.ResponseWriter, r *http.Request) {
	fmt.Fprintf(w, "results for %q\n", r.URL.Query().Get("q"))
}
