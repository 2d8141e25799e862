package main

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/examples/internal/demo"
	"github.com/sluicehq/sluice/shed"
)

// answer is what one request got back.
type answer struct {
	tenant                                 string
	n, status                              int
	warning, rateLimit, policy, retryAfter string
}

// selfTest serves the endpoint on 127.0.0.1:0 with a simulated clock, so
// that a day's quota is spent in a moment. Tenant globex bursts 11 requests
// at one instant; tenant acme sends 101, one every 12 seconds of the
// simulated clock (the refill pace of its burst allowance), and so runs
// into its daily quota. It prints what the responses said and returns
// every answer.
func selfTest(out io.Writer) ([]answer, error) {
	var now atomic.Int64
	now.Store(int64(24 * time.Hour)) // the start of a day on the simulated clock
	h, err := newHandler(shed.WithClock(now.Load))
	if err != nil {
		return nil, err
	}
	srv, err := demo.Serve(h)
	if err != nil {
		return nil, err
	}
	defer srv.Close()
	endpoint := srv.URL + "/report"

	var got []answer
	get := func(tenant string, n int) (answer, error) {
		r, err := srv.Get("/report", "X-Tenant", tenant)
		if err != nil {
			return answer{}, err
		}
		a := answer{tenant: tenant, n: n, status: r.Status,
			warning: r.Header.Get("X-RateLimit-Warning"), rateLimit: r.Header.Get("RateLimit"),
			policy: r.Header.Get("RateLimit-Policy"), retryAfter: r.Header.Get("Retry-After")}
		got = append(got, a)
		return a, nil
	}
	show := func(a answer) {
		fmt.Fprintf(out, "  %-6s #%-3d %d  Retry-After: %-5s RateLimit: %-28s X-RateLimit-Warning: %s\n",
			a.tenant, a.n, a.status, a.retryAfter, a.rateLimit, a.warning)
	}

	fmt.Fprintf(out, "GET %s\n", endpoint)
	fmt.Fprintln(out, "globex sends 11 requests at once (burst allowance 10)")
	for n := 1; n <= 11; n++ {
		a, err := get("globex", n)
		if err != nil {
			return got, err
		}
		if n == 1 {
			fmt.Fprintf(out, "  RateLimit-Policy: %s\n", a.policy)
		}
		if n == 1 || n >= 7 {
			show(a)
		}
	}
	fmt.Fprintln(out, "acme sends 101 requests, one every 12 s of the simulated clock (daily quota 100)")
	for n := 1; n <= 101; n++ {
		a, err := get("acme", n)
		if err != nil {
			return got, err
		}
		if n == 1 || n == 79 || n == 80 || n >= 100 {
			show(a)
		}
		now.Add(int64(12 * time.Second))
	}
	return got, nil
}
