package main

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/examples/internal/demo"
)

// result is what the self-test saw.
type result struct {
	burst        map[int]int // status → count, of the concurrent burst
	burstAllowed int
	topUp        int    // further requests admitted one by one until the first 503
	retryAfter   string // of that 503
	nextWindow   int    // status of a request in the next window
}

// selfTest serves the endpoint on 127.0.0.1:0 with the clock held inside
// one window (so that the figures do not depend on the machine's speed),
// sends a burst of 150 requests from 16 concurrent clients, then requests
// one at a time until the first 503, then moves the clock to the next
// window. It prints and returns what it saw.
func selfTest(out io.Writer) (result, error) {
	var now atomic.Int64
	now.Store(int64(time.Hour)) // the start of a window on the held clock
	h, err := newHandler(now.Load)
	if err != nil {
		return result{}, err
	}
	srv, err := demo.Serve(h)
	if err != nil {
		return result{}, err
	}
	defer srv.Close()
	endpoint := srv.URL + "/search?q=sluice"
	get := func() (int, string, error) {
		r, err := srv.Get("/search?q=sluice")
		return r.Status, r.Header.Get("Retry-After"), err
	}

	res := result{burst: map[int]int{}}
	fmt.Fprintf(out, "GET %s, capped at %d per %v\n", endpoint, perWindow, window)
	var (
		mu       sync.Mutex
		wg       sync.WaitGroup
		firstErr error
	)
	for c := range 16 {
		wg.Go(func() {
			for i := c; i < 150; i += 16 {
				status, _, err := get()
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				res.burst[status]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return res, firstErr
	}
	res.burstAllowed = res.burst[http.StatusOK]
	fmt.Fprintf(out, "  burst of 150 from 16 clients: %d × 200, %d × 503\n", res.burst[http.StatusOK], res.burst[http.StatusServiceUnavailable])

	// Under contention a few units can sit in another shard's batch when a
	// request looks; one at a time, every last unit is found.
	for {
		status, ra, err := get()
		if err != nil {
			return res, err
		}
		if status != http.StatusOK {
			res.retryAfter = ra
			fmt.Fprintf(out, "  then one at a time: %d more × 200, then %d Retry-After: %s\n", res.topUp, status, ra)
			break
		}
		res.topUp++
		if res.topUp > perWindow {
			return res, fmt.Errorf("globalcap: more than %d admitted in one window", perWindow)
		}
	}
	fmt.Fprintf(out, "  admitted in this window: %d, the cap exactly\n", res.burstAllowed+res.topUp)

	now.Add(int64(window))
	status, _, err := get()
	if err != nil {
		return res, err
	}
	res.nextWindow = status
	fmt.Fprintf(out, "  next window: %d\n", status)
	return res, nil
}
