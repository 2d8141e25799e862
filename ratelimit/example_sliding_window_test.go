package ratelimit_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

func ExampleSlidingWindowLimiter() {
	// 10 searches per minute, estimated over the last minute.
	searches, err := ratelimit.NewSlidingWindowLimiter(10, time.Minute)
	if err != nil {
		panic(err)
	}
	searches.AllowN(int64(30*time.Second), 10) // a full first minute
	// At 1:30 the previous minute still weighs half: 5 of 10 are left.
	now := int64(90 * time.Second)
	d := searches.AllowN(now, 0)
	fmt.Printf("at 1:30: remaining=%d\n", d.Remaining)
	d = searches.AllowN(now, 6)
	fmt.Printf("6 at 1:30: allowed=%v retry-after=%v\n", d.Allowed(), d.RetryAfter)
	// Output:
	// at 1:30: remaining=5
	// 6 at 1:30: allowed=false retry-after=6s
}

func ExampleSlidingWindow() {
	// One configuration, one 8-byte state per client.
	perClient, err := ratelimit.NewSlidingWindow(100, time.Second)
	if err != nil {
		panic(err)
	}
	var client ratelimit.SlidingWindowState // the zero value is fresh
	d := perClient.AllowN(&client, int64(250*time.Millisecond), 1)
	fmt.Printf("allowed=%v remaining=%d\n", d.Allowed(), d.Remaining)
	// Output:
	// allowed=true remaining=99
}
