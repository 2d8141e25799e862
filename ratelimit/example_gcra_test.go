package ratelimit_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

func ExampleTokenBucket() {
	// 2 requests per second on average, bursts of up to 3.
	bucket, err := ratelimit.NewTokenBucket(ratelimit.Per(2, time.Second), 3)
	if err != nil {
		panic(err)
	}
	now := int64(0) // Allow reads the clock; AllowN takes now explicitly.
	for i := 1; i <= 4; i++ {
		d := bucket.AllowN(now, 1)
		fmt.Printf("request %d: allowed=%v remaining=%d retry-after=%v\n", i, d.Allowed(), d.Remaining, d.RetryAfter)
	}
	now += int64(500 * time.Millisecond) // one token refilled
	fmt.Println("after 500ms:", bucket.AllowN(now, 1).Allowed())
	fmt.Println("more than the burst:", bucket.AllowN(now, 4).Reason())
	// Output:
	// request 1: allowed=true remaining=2 retry-after=0s
	// request 2: allowed=true remaining=1 retry-after=0s
	// request 3: allowed=true remaining=0 retry-after=0s
	// request 4: allowed=false remaining=0 retry-after=500ms
	// after 500ms: true
	// more than the burst: exceeds capacity
}

func ExampleGCRA() {
	// One configuration, one small state per client: what a keyed table
	// stores. The zero GCRAState is a full bucket.
	perClient, err := ratelimit.NewGCRA(ratelimit.Per(10, time.Minute), 2)
	if err != nil {
		panic(err)
	}
	clients := map[string]*ratelimit.GCRAState{"alice": {}, "bob": {}}
	now := int64(0)
	for _, name := range []string{"alice", "alice", "alice", "bob"} {
		d := perClient.AllowN(clients[name], now, 1)
		fmt.Printf("%s: allowed=%v retry-after=%v\n", name, d.Allowed(), d.RetryAfter)
	}
	// A later limit rejected alice's request: give her token back.
	perClient.Refund(clients["alice"], now, 1)
	fmt.Println("alice after refund:", perClient.AllowN(clients["alice"], now, 1).Allowed())
	// Output:
	// alice: allowed=true retry-after=0s
	// alice: allowed=true retry-after=0s
	// alice: allowed=false retry-after=6s
	// bob: allowed=true retry-after=0s
	// alice after refund: true
}

func ExampleTokenBucket_ReserveN() {
	// 10 a second, no burst: a caller that may wait up to 200 ms is given
	// the exact instant of its turn instead of a rejection.
	bucket, err := ratelimit.NewTokenBucket(ratelimit.Per(10, time.Second), 1)
	if err != nil {
		panic(err)
	}
	now := int64(0)
	for i := 1; i <= 4; i++ {
		r := bucket.ReserveN(now, 1, 0, 200*time.Millisecond)
		fmt.Printf("request %d: allowed=%v wait=%v retry-after=%v\n", i, r.Allowed(), r.Wait, r.Decision.RetryAfter)
	}
	// Output:
	// request 1: allowed=true wait=0s retry-after=0s
	// request 2: allowed=true wait=100ms retry-after=0s
	// request 3: allowed=true wait=200ms retry-after=0s
	// request 4: allowed=false wait=0s retry-after=300ms
}
