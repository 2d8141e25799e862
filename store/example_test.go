package store_test

import (
	"context"
	"fmt"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/store"
)

// A login endpoint limited per IP and per account, all or nothing, plus a
// concurrency lease around the work.
func Example() {
	ctx := context.Background()
	m := store.NewMemory()
	perIP, _ := m.Register(ctx, store.Spec{Name: "login-ip", Algorithm: store.SlidingLog, Limit: 20, Window: 15 * time.Minute})
	perAccount, _ := m.Register(ctx, store.Spec{Name: "login-account", Algorithm: store.SlidingLog, Limit: 2, Window: 15 * time.Minute})
	workers, _ := m.Register(ctx, store.Spec{Name: "login-workers", Algorithm: store.Concurrency, Limit: 4, LeaseTTL: 30 * time.Second})

	var (
		req store.Request
		res store.Result
	)
	now := int64(time.Hour) // the caller's monotonic clock, in ns
	for attempt := 1; attempt <= 3; attempt++ {
		req = store.Request{Now: now}
		req.Add(perIP, "ip:203.0.113.7", 1)
		req.Add(perAccount, "acct:alice", 1)
		req.Add(workers, "", 1) // one global key
		if err := m.Decide(ctx, &req, &res); err != nil {
			panic(err)
		}
		d := res.Decision()
		if res.Allowed {
			fmt.Printf("attempt %d: allowed, %d left on hit %d\n", attempt, d.Remaining, res.Decider)
			_ = m.Release(ctx, res.Hits[2].Lease, now) // the work is done
		} else {
			fmt.Printf("attempt %d: rejected by hit %d (%v), retry in %v\n", attempt, res.Decider, d.Reason(), d.RetryAfter)
		}
		now += int64(time.Minute)
	}
	// The rejected attempt charged nothing: the IP limit counts two.
	req = store.Request{Now: now}
	req.Add(perIP, "ip:203.0.113.7", 0)
	_ = m.Decide(ctx, &req, &res)
	fmt.Println("ip remaining:", res.Hits[0].Decision.Remaining, res.Hits[0].Decision.Reason() == ratelimit.ReasonAllowed)
	// Output:
	// attempt 1: allowed, 1 left on hit 1
	// attempt 2: allowed, 0 left on hit 1
	// attempt 3: rejected by hit 1 (limited), retry in 13m0s
	// ip remaining: 18 true
}

// A daily quota raised in place: the tenant keeps what it used.
func ExampleMemory_Update() {
	ctx := context.Background()
	m := store.NewMemory()
	spec := store.Spec{Name: "tenant-daily", Algorithm: store.FixedWindow, Limit: 3, Window: 24 * time.Hour}
	id, _ := m.Register(ctx, spec)
	now := int64(time.Hour)
	try := func() bool {
		req := store.Request{Now: now}
		req.Add(id, "tenant:acme", 1)
		var res store.Result
		if err := m.Decide(ctx, &req, &res); err != nil {
			panic(err)
		}
		return res.Allowed
	}
	used := 0
	for try() {
		used++
	}
	fmt.Println("used of 3:", used)

	spec.Limit = 4
	if err := m.Update(ctx, id, spec); err != nil {
		panic(err)
	}
	more := 0
	for try() {
		more++
	}
	fmt.Println("more after raising to 4:", more)

	spec.Window = time.Hour // how it counts: not in place
	fmt.Println(m.Update(ctx, id, spec))
	// Output:
	// used of 3: 3
	// more after raising to 4: 1
	// store: limit "tenant-daily": its window (24h0m0s to 1h0m0s) cannot change in place; register a new limit (its keys start fresh)
}
