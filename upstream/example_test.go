package upstream_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
	"github.com/sluicehq/sluice/upstream"
)

// Example calls an upstream that publishes a limit of 100 requests
// per second (with a burst of 5) through a Transport, behind a
// RetryTransport whose retries draw from a budget.
func Example() {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer api.Close()

	// Any RoundTripper: here the test server's own, whose connections
	// close with the server.
	paced, err := upstream.NewTransport(api.Client().Transport, ratelimit.Per(100, time.Second),
		upstream.WithBurst(5),             // the upstream allows bursts of 5
		upstream.WithMaxWait(time.Second), // fail fast rather than queue longer
	)
	if err != nil {
		panic(err)
	}
	retrying, err := upstream.NewRetryTransport(paced) // retries <= 10% of requests
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: retrying}
	for range 10 {
		resp, err := client.Get(api.URL)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
	}
	s := paced.Stats()
	fmt.Printf("sent %d, 429s %d, throttled %d\n", s.Sent, s.Got429, s.Throttled)
	fmt.Printf("retries %d\n", retrying.Stats().Retries)
	// Output:
	// sent 10, 429s 0, throttled 0
	// retries 0
}
