package shed_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/concurrency"
	"github.com/sluicehq/sluice/shed"
)

// A handler protected by a per-client token bucket (2 requests, then one
// a minute) and a cap of 100 requests at once.
func Example() {
	sluice, err := shed.New([]shed.Rule{
		{Name: "per-ip", Identity: shed.IP, Algorithm: shed.TokenBucket, Limit: 2, Rate: concurrency.Per(1, time.Minute)},
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
	// 429 RateLimit: "per-ip";r=0;t=120 Retry-After: "60"
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
