package ratelimit_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

func ExampleShardedWindow() {
	// At most 2 searches per second across the whole service.
	searches, err := ratelimit.NewShardedWindow(2, time.Second)
	if err != nil {
		panic(err)
	}
	start := int64(10 * time.Second) // now, in monotonic nanoseconds
	for i, at := range []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, time.Second} {
		d := searches.AllowN(start+int64(at), 1)
		fmt.Printf("search %d at +%v: allowed=%v remaining=%d retry after %v\n", i+1, at, d.Allowed(), d.Remaining, d.RetryAfter)
	}
	// Output:
	// search 1 at +0s: allowed=true remaining=1 retry after 0s
	// search 2 at +100ms: allowed=true remaining=0 retry after 0s
	// search 3 at +300ms: allowed=false remaining=0 retry after 700ms
	// search 4 at +1s: allowed=true remaining=1 retry after 0s
}

func ExampleShardedBucket() {
	// 1,000 requests a second with a burst of 256 across the whole service,
	// split over 4 shards of 64 tokens.
	api, err := ratelimit.NewShardedBucket(ratelimit.Per(1000, time.Second), 256, ratelimit.WithShardCount(4))
	if err != nil {
		panic(err)
	}
	now := int64(10 * time.Second) // now, in monotonic nanoseconds
	fmt.Println("a burst of 200:", api.AllowN(now, 200).Allowed())
	fmt.Println("56 more:", api.AllowN(now, 56).Allowed(), "then one:", api.AllowN(now, 1).Allowed())
	api.Refund(now, 10) // a later limit rejected ten of them
	fmt.Println("available:", api.Available(now))
	fmt.Println("after 100 ms:", api.Available(now+int64(100*time.Millisecond)))
	// Output:
	// a burst of 200: true
	// 56 more: true then one: false
	// available: 10
	// after 100 ms: 110
}
