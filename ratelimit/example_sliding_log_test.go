package ratelimit_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

func ExampleSlidingLogLimiter() {
	// At most 3 login attempts in any 10 minutes, exactly.
	logins, err := ratelimit.NewSlidingLogLimiter(3, 10*time.Minute)
	if err != nil {
		panic(err)
	}
	minute := int64(time.Minute)
	for _, at := range []int64{0, 1, 2, 3} {
		d := logins.AllowN(at*minute, 1)
		fmt.Printf("attempt at %dm: allowed=%v retry-after=%v\n", at, d.Allowed(), d.RetryAfter)
	}
	// The first attempt leaves the window at 10m, the next at 11m.
	fmt.Println("at 10m:", logins.AllowN(10*minute, 1).Allowed())
	fmt.Println("again at 10m:", logins.AllowN(10*minute, 1).Allowed())
	// Output:
	// attempt at 0m: allowed=true retry-after=0s
	// attempt at 1m: allowed=true retry-after=0s
	// attempt at 2m: allowed=true retry-after=0s
	// attempt at 3m: allowed=false retry-after=7m0s
	// at 10m: true
	// again at 10m: false
}

func ExampleSlidingLog() {
	// Per-account password attempts: 2 in any 5 minutes. A table keeps one
	// SlidingLogState per account; Recovered tells it when one may go.
	attempts, err := ratelimit.NewSlidingLog(2, 5*time.Minute)
	if err != nil {
		panic(err)
	}
	var account ratelimit.SlidingLogState // the zero value is fresh
	minute := int64(time.Minute)
	attempts.AllowN(&account, 0, 1)
	d := attempts.AllowN(&account, 1*minute, 1)
	fmt.Printf("remaining=%d reset-after=%v\n", d.Remaining, d.ResetAfter)
	fmt.Println("recovered at 5m:", attempts.Recovered(&account, 5*minute))
	fmt.Println("recovered at 6m:", attempts.Recovered(&account, 6*minute))
	// Output:
	// remaining=0 reset-after=5m0s
	// recovered at 5m: false
	// recovered at 6m: true
}
