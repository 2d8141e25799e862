package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/examples/internal/demo"
)

// call is what one request got back.
type call struct {
	status     int
	retryAfter string
	took       time.Duration
}

// result is what the self-test saw.
type result struct {
	burstShed, burstServed []call          // burst of 8: answered while the renders were held, and after
	uploads                []time.Duration // of the burst, since the renders were let go, in order
	waitShed, waitServed   []call          // the max-wait step
	queueShed              uint64          // waits that ended in a rejection (Stats)
}

// selfTest serves the endpoint on 127.0.0.1:0 with a renderer it holds
// busy until it lets go, so that who waits and who is refused does not
// depend on the machine's speed. It sends a burst of 8 while the 2 renders
// are held (2 render, 4 wait, 2 are refused), lets go and watches the 6
// uploads go out at the archive's pace; then sends 3 while the renders are
// held past the max wait (the one waiting is refused after it). It prints
// and returns what it saw.
func selfTest(out io.Writer) (result, error) {
	var (
		res      result
		mu       sync.Mutex
		gate     chan struct{} // renders wait for it to close
		release  time.Time
		uploaded []time.Duration // since release
	)
	hold := func() { mu.Lock(); gate = make(chan struct{}); mu.Unlock() }
	letGo := func() { mu.Lock(); release = time.Now(); close(gate); mu.Unlock() }
	render := func(ctx context.Context) ([]byte, error) {
		mu.Lock()
		g := gate
		mu.Unlock()
		select {
		case <-g:
			return []byte("%PDF-1.7\n"), nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	upload := func(context.Context, []byte) error {
		mu.Lock()
		uploaded = append(uploaded, time.Since(release))
		mu.Unlock()
		return nil
	}
	svc, err := newService(render, upload)
	if err != nil {
		return res, err
	}
	srv, err := demo.Serve(svc.handler())
	if err != nil {
		return res, err
	}
	defer srv.Close()
	endpoint := srv.URL + "/pdf"

	answers := make(chan call, 8)
	var wg sync.WaitGroup
	defer wg.Wait()
	send := func(n int) {
		for range n {
			wg.Go(func() {
				start := time.Now()
				r, err := srv.Get("/pdf")
				if err != nil {
					answers <- call{status: 0, retryAfter: err.Error()}
					return
				}
				answers <- call{status: r.Status, retryAfter: r.Header.Get("Retry-After"), took: time.Since(start)}
			})
		}
	}
	receive := func(n int) ([]call, error) {
		var got []call
		for range n {
			select {
			case c := <-answers:
				if c.status == 0 {
					return got, fmt.Errorf("pdf: request failed: %s", c.retryAfter)
				}
				got = append(got, c)
			case <-time.After(10 * time.Second):
				return got, fmt.Errorf("pdf: no answer after 10 s")
			}
		}
		return got, nil
	}
	// waitFor polls the render limit's state until the queue looks as
	// expected.
	waitFor := func(inflight int64, waiting int) error {
		if !demo.Await(func() bool {
			r := svc.limit.Stats().Rules[0]
			return r.Inflight == inflight && r.Waiting == waiting
		}) {
			return fmt.Errorf("pdf: the queue never reached %d rendering and %d waiting", inflight, waiting)
		}
		return nil
	}

	fmt.Fprintf(out, "GET %s: %d renders at once, %d may wait up to %v, uploads paced at %d/s\n",
		endpoint, renders, queueLength, maxWait, uploads)
	fmt.Fprintln(out, "a burst of 8 while both renders are busy")
	hold()
	send(8)
	if res.burstShed, err = receive(2); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "  %s at once: the queue is full\n", summary(res.burstShed))
	if err := waitFor(renders, queueLength); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "  %d rendering, %d waiting; the renders finish\n", renders, queueLength)
	letGo()
	if res.burstServed, err = receive(6); err != nil {
		return res, err
	}
	mu.Lock()
	res.uploads = slices.Sorted(slices.Values(uploaded))
	var at []string
	for _, u := range res.uploads {
		at = append(at, fmt.Sprintf("+%dms", u.Milliseconds()))
	}
	mu.Unlock()
	fmt.Fprintf(out, "  %s; uploads at %s\n", summary(res.burstServed), strings.Join(at, " "))

	fmt.Fprintf(out, "3 requests while both renders are busy for longer than the max wait\n")
	hold()
	send(3)
	if err := waitFor(renders, 1); err != nil {
		return res, err
	}
	if res.waitShed, err = receive(1); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "  %s after %.1fs in the queue\n", summary(res.waitShed), res.waitShed[0].took.Seconds())
	letGo()
	if res.waitServed, err = receive(2); err != nil {
		return res, err
	}
	fmt.Fprintf(out, "  %s once the renders finish\n", summary(res.waitServed))
	res.queueShed = svc.limit.Stats().QueueShed
	return res, nil
}

// summary counts calls by status: "6 × 200", "2 × 503 (Retry-After: 1)".
func summary(calls []call) string {
	var parts []string
	for _, status := range []int{200, 503} {
		n, ra := 0, ""
		for _, c := range calls {
			if c.status == status {
				n++
				ra = c.retryAfter
			}
		}
		if n == 0 {
			continue
		}
		s := fmt.Sprintf("%d × %d", n, status)
		if ra != "" {
			s += " (Retry-After: " + ra + ")"
		}
		parts = append(parts, s)
	}
	if len(parts) == 0 {
		return fmt.Sprintf("%d other answers", len(calls))
	}
	return strings.Join(parts, ", ")
}
