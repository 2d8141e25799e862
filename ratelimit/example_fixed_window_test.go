package ratelimit_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

func ExampleFixedWindowLimiter() {
	// 3 exports per minute, counted in aligned minutes.
	exports, err := ratelimit.NewFixedWindowLimiter(3, time.Minute)
	if err != nil {
		panic(err)
	}
	now := int64(50 * time.Second)
	d := exports.AllowN(now, 3)
	fmt.Printf("3 at 0:50: allowed=%v remaining=%d reset-after=%v\n", d.Allowed(), d.Remaining, d.ResetAfter)
	d = exports.AllowN(now, 1)
	fmt.Printf("1 more: allowed=%v retry-after=%v\n", d.Allowed(), d.RetryAfter)
	now = int64(time.Minute) // a new window: the count starts again
	fmt.Println("at 1:00:", exports.AllowN(now, 3).Allowed())
	// Output:
	// 3 at 0:50: allowed=true remaining=0 reset-after=10s
	// 1 more: allowed=false retry-after=10s
	// at 1:00: true
}

func ExampleFixedWindow() {
	// One configuration, one 8-byte state per API key.
	perKey, err := ratelimit.NewFixedWindow(100, time.Hour)
	if err != nil {
		panic(err)
	}
	var key ratelimit.FixedWindowState // the zero value is fresh
	d := perKey.AllowN(&key, int64(30*time.Minute), 40)
	fmt.Printf("limit=%d remaining=%d reset-after=%v\n", d.Limit, d.Remaining, d.ResetAfter)
	// Output:
	// limit=100 remaining=60 reset-after=30m0s
}
