package shed_test

import (
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
