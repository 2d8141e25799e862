package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sluicehq/sluice/examples/internal/demo"
)

// outcome is what the self-test measured.
type outcome struct {
	limit, admitted, overshoot, allowed int
	lag                                 time.Duration
}

// errOvershoot is the self-test's failure: more admitted than the bound.
var errOvershoot = errors.New("regions: the overshoot exceeds the bound")

// perClient is how many requests each of the self-test's four clients
// sends, one each 10 ms: two seconds on an idle machine. A count, not a
// duration, so that a slow machine sends the same 800 requests, later.
const perClient = 200

// selfTest serves both regions on loopback and floods tenant acme from two
// clients per region, 200 requests each 10 ms apart: 800 requests
// against a daily quota of 500. It prints one line,
//
//	regions: limit= admitted_total= overshoot= sync_lag_ms=
//
// and returns errOvershoot when more were admitted than the bound allows:
// the limit less the headroom plus what one region admitted in one
// W = period + read delay + twice the latency (a round trip to the global
// store), in its busiest W, the busier region's.
func selfTest(out io.Writer, redisAddr string) (outcome, error) {
	w, err := newWorld(redisAddr)
	if err != nil {
		return outcome{}, err
	}
	defer w.close()
	var srvs []*demo.Loopback
	defer func() {
		for _, s := range srvs {
			s.Close()
		}
	}()
	for _, h := range w.handlers {
		s, err := demo.Serve(h)
		if err != nil {
			return outcome{}, err
		}
		srvs = append(srvs, s)
	}
	admitted := make([][]time.Time, len(srvs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failed error
	for i, s := range srvs {
		for range 2 {
			wg.Go(func() {
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for range perClient {
					<-tick.C
					r, err := s.Get("/report", "X-Tenant", "acme")
					mu.Lock()
					switch {
					case err != nil:
						failed = err
					case r.Status == http.StatusOK:
						admitted[i] = append(admitted[i], time.Now())
					case r.Status != http.StatusTooManyRequests:
						failed = fmt.Errorf("regions: %s answered %d", w.names[i], r.Status)
					}
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if failed != nil {
		return outcome{}, failed
	}
	o := outcome{limit: dailyLimit}
	for i, ts := range admitted {
		o.admitted += len(ts)
		o.lag = max(o.lag, w.stores[i].Stats().Lag)
	}
	o.overshoot = max(0, o.admitted-dailyLimit)
	// The bound: limit − headroom + what all regions but one admitted in
	// their busiest W.
	win := period + period/4 + 2*latency
	most := make([]int, len(admitted))
	for i, ts := range admitted {
		slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
		for k, j := 0, 0; k < len(ts); k++ {
			for ts[k].Sub(ts[j]) > win {
				j++
			}
			most[i] = max(most[i], k-j+1)
		}
	}
	o.allowed = max(0, slices.Max(most)-dailyLimit/10) // two regions: all but one is one, either
	fmt.Fprintf(out, "regions: limit=%d admitted_total=%d overshoot=%d sync_lag_ms=%d\n",
		o.limit, o.admitted, o.overshoot, o.lag.Milliseconds())
	if o.overshoot > o.allowed {
		return o, fmt.Errorf("%w: %d over the limit, at most %d allowed", errOvershoot, o.overshoot, o.allowed)
	}
	return o, nil
}
