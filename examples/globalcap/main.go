// Command globalcap caps a whole endpoint, every client together, at 100
// requests per second: a search backend that can take that much and no
// more, whoever asks. The cap is a concurrency.ShardedWindow used directly,
// an exact fixed-window counter built for many cores hitting one limit: its
// common path writes only a shard-local cache line. (shed's Global rate
// rules use the unsharded limiters instead, because shed gives back what a
// request took when a later rule rejects it, and a ShardedWindow has no
// refund.) Over the cap, the answer is 503 with Retry-After: the server
// protects itself, no client is at fault.
//
//	go run ./examples/globalcap              # serve on 127.0.0.1:8085
//	go run ./examples/globalcap -selftest    # drive a burst against itself
package main

import (
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/internal/clock"
)

// The cap: perWindow requests per window, for every client together.
const (
	perWindow = 100
	window    = time.Second
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8085", "listen address")
	selftest := flag.Bool("selftest", false, "serve on 127.0.0.1:0, drive a burst against itself, print what happened and exit")
	flag.Parse()
	if *selftest {
		if _, err := selfTest(os.Stdout); err != nil {
			log.Fatal(err)
		}
		return
	}
	h, err := newHandler(clock.Now)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("search on http://%s/search, capped at %d requests per %v for all clients together\n", *addr, perWindow, window)
	fmt.Printf("try: curl -sZ --parallel-max 16 -o /dev/null -w '%%{http_code}\\n' 'http://%s/search?q=[1-150]' 2>/dev/null | sort | uniq -c\n", *addr)
	log.Fatal((&http.Server{Addr: *addr, Handler: h, ReadHeaderTimeout: 5 * time.Second}).ListenAndServe())
}

// newHandler returns the search endpoint behind the global cap, reading
// the time from now (monotonic nanoseconds).
func newHandler(now func() int64) (http.Handler, error) {
	sw, err := concurrency.NewShardedWindow(perWindow, window)
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("GET /search", capped(sw, now, http.HandlerFunc(search)))
	return mux, nil
}

// capped lets a request through to next only while the window has room.
func capped(sw *concurrency.ShardedWindow, now func() int64, next http.Handler) http.Handler {
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
