package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/shed/statuspage"
)

// Load is the self-test's traffic: users well-behaved users, each sending
// one request at a time with a pause between (more of them at once than
// the backend has slots, so that latency grows and the adaptive limit
// moves), and one abusive user, "mallory", sending from several goroutines
// with a far shorter pause.
const (
	users        = 12
	userPause    = 30 * time.Millisecond
	abusers      = 2
	abuserPause  = 5 * time.Millisecond
	maxPerWorker = 5000 // a bound on any worker's requests
)

// load sends the self-test's traffic to srv until ctx is done, and returns
// when every worker has stopped.
func load(ctx context.Context, srv *demo.Loopback) {
	var wg sync.WaitGroup
	for i := range users {
		wg.Go(func() { send(ctx, srv, fmt.Sprintf("user-%d", i+1), userPause) })
	}
	for range abusers {
		wg.Go(func() { send(ctx, srv, "mallory", abuserPause) })
	}
	wg.Wait()
}

// send sends user's requests to srv one at a time, pause apart, until ctx
// is done or it has sent maxPerWorker.
func send(ctx context.Context, srv *demo.Loopback, user string, pause time.Duration) {
	for range maxPerWorker {
		if ctx.Err() != nil {
			return
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/api", nil)
		if err != nil {
			return
		}
		req.Header.Set("X-User", user)
		if _, err := srv.Do(req); err != nil {
			continue // cancelled at the end
		}
		if pause > 0 {
			select {
			case <-ctx.Done():
			case <-time.After(pause):
			}
		}
	}
}

// report reads the status page's JSON report from srv.
func report(srv *demo.Loopback) (statuspage.Report, error) {
	var rep statuspage.Report
	r, err := srv.Get("/debug/sluice/json")
	if err != nil {
		return rep, err
	}
	if r.Status != http.StatusOK {
		return rep, fmt.Errorf("GET /debug/sluice/json: %d", r.Status)
	}
	return rep, json.Unmarshal(r.Body, &rep)
}

// selfTest serves the service on 127.0.0.1:0 with its page sampling, drives
// the load for d, prints the rules as the page's report shows them, and
// returns the reports read at the start and at the end.
func selfTest(out io.Writer, d time.Duration) ([2]statuspage.Report, error) {
	var reps [2]statuspage.Report
	svc, err := newService()
	if err != nil {
		return reps, err
	}
	srv, err := demo.Serve(svc.handler)
	if err != nil {
		return reps, err
	}
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); svc.page.Run(ctx) }()
	go func() { defer wg.Done(); load(ctx, srv) }()
	if reps[0], err = report(srv); err != nil {
		cancel()
		wg.Wait()
		return reps, err
	}
	wg.Wait()
	if reps[1], err = report(srv); err != nil {
		return reps, err
	}
	t := reps[1].Totals
	fmt.Fprintf(out, "after %v: %d admitted, %d over limit, %d shed, %d penalized; %d samples\n",
		d, t.Admitted, t.OverLimit, t.Shedding, t.Penalized, reps[1].Samples)
	for _, r := range reps[1].Rules {
		fmt.Fprintf(out, "  %-8s %s %-12s limit %3d  allowed %5d  rejected %5d\n", r.Name, r.Identity, r.Algorithm, r.Limit, r.Allowed, r.Rejected)
	}
	mean := time.Duration(0)
	if t.QueueWaits > 0 {
		mean = time.Duration(t.QueueWaitSeconds / float64(t.QueueWaits) * float64(time.Second)).Round(time.Microsecond)
	}
	fmt.Fprintf(out, "  queue: %d waited for a permit (%v on average), %d shed from it\n", t.QueueWaits, mean, t.QueueShed)
	if p := reps[1].Penalty; p != nil {
		fmt.Fprintf(out, "  penalty box: %d of %d users tracked, %d timeouts\n", p.Keys, p.Capacity, p.Timeouts)
	}
	fmt.Fprintf(out, "status page: %s/debug/sluice/ (closed now)\n", srv.URL)
	return reps, nil
}
