package shed_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/shed"
)

// A handler protected by a per-client token bucket (2 requests, then one
// a minute) and a cap of 100 requests at once.
func Example() {
	sluice, err := shed.New([]shed.Rule{
		{Name: "per-ip", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: 2, Rate: ratelimit.Per(1, time.Minute)},
		{Name: "inflight", Algorithm: shed.Concurrency, Limit: 100},
	})
	if err != nil {
		panic(err)
	}
	hello := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "hello") })
	handler := sluice.Middleware(hello) // http.ListenAndServe(":8080", handler)

	for range 3 {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
		fmt.Printf("%d RateLimit: %s Retry-After: %q\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"))
	}
	// Output:
	// 200 RateLimit: "per-ip";r=1;t=60 Retry-After: ""
	// 200 RateLimit: "per-ip";r=0;t=120 Retry-After: ""
	// 429 RateLimit: "per-ip";r=0;t=60 Retry-After: "60"
}

// Deciding work that is not an HTTP request: a job runner admits jobs per
// tenant and reports each job's outcome.
func ExampleController_Decide() {
	jobs, err := shed.New([]shed.Rule{
		{Name: "per-tenant", Identity: shed.Tenant, Algorithm: shed.FixedWindow, Limit: 2, Window: time.Hour},
	})
	if err != nil {
		panic(err)
	}
	for range 3 {
		d, tok, err := jobs.Decide(context.Background(), shed.Attempt{Tenant: "acme"})
		if err != nil {
			panic(err)
		}
		if !d.Allowed {
			fmt.Println(d.Kind, d.Rule, "retry after", d.RetryAfter > 0)
			continue
		}
		fmt.Println("run job;", d.Remaining, "left")
		tok.Done(shed.Success)
	}
	// Output:
	// run job; 1 left
	// run job; 0 left
	// over_limit per-tenant retry after true
}

// The layered seed limits of the field, a few lines each: login is 20 per
// 15 minutes per IP AND 5 per 15 minutes per account (exact sliding logs,
// failing closed); reports are 5 a minute with bursts of 10 per tenant AND
// 100 a day per tenant AND 30 an hour per IP.
func Example_layered() {
	rules := []shed.Rule{
		{Name: "login-ip", Category: "auth", Identity: shed.IP, Algorithm: shed.SlidingLog, Limit: 20, Window: 15 * time.Minute, Failure: shed.FailClosed},
		{Name: "login-user", Category: "auth", Identity: shed.User, Algorithm: shed.SlidingLog, Limit: 5, Window: 15 * time.Minute, Failure: shed.FailClosed},

		{Name: "report-burst", Category: "report", Identity: shed.Tenant, Algorithm: shed.TokenBucket, Limit: 10, Rate: ratelimit.Per(5, time.Minute)},
		{Name: "report-daily", Category: "report", Identity: shed.Tenant, Algorithm: shed.FixedWindow, Limit: 100, Window: 24 * time.Hour},
		{Name: "report-ip", Category: "report", Identity: shed.IP, Algorithm: shed.SlidingWindow, Limit: 30, Window: time.Hour},
	}
	c, err := shed.New(rules)
	if err != nil {
		panic(err)
	}
	ip := netip.MustParseAddr("198.51.100.7")
	for i := 1; i <= 6; i++ {
		d, tok, _ := c.Decide(context.Background(), shed.Attempt{Category: "auth", IP: ip, User: "alice"})
		tok.Done(shed.Success)
		if !d.Allowed {
			fmt.Printf("login %d: %v by %s\n", i, d.Kind, d.Rule)
		}
	}
	for i := 1; i <= 11; i++ {
		d, tok, _ := c.Decide(context.Background(), shed.Attempt{Category: "report", IP: ip, Tenant: "acme"})
		tok.Done(shed.Success)
		if !d.Allowed {
			fmt.Printf("report %d: %v by %s, retry in %v\n", i, d.Kind, d.Rule, d.RetryAfter.Round(time.Second))
		}
	}
	// Output:
	// login 6: over_limit by login-user
	// report 11: over_limit by report-burst, retry in 12s
}

// A quota endpoint: a client reads what is left of its daily quota
// without spending any of it.
func ExampleController_Peek() {
	api, err := shed.New([]shed.Rule{
		{Name: "daily", Identity: shed.Tenant, Algorithm: shed.FixedWindow, Limit: 100, Window: 24 * time.Hour},
	})
	if err != nil {
		panic(err)
	}
	for range 2 {
		_, tok, _ := api.Decide(context.Background(), shed.Attempt{Tenant: "acme"})
		tok.Done(shed.Success)
	}
	for range 3 { // peeks charge nothing
		d, err := api.Peek(context.Background(), shed.Attempt{Tenant: "acme"})
		if err != nil {
			panic(err)
		}
		fmt.Println(d.Rule, d.Remaining, "of", d.Limit, "left; allowed:", d.Allowed)
	}
	// Output:
	// daily 98 of 100 left; allowed: true
	// daily 98 of 100 left; allowed: true
	// daily 98 of 100 left; allowed: true
}
