package adaptive_test

import (
	"fmt"
	"time"

	"github.com/sluicehq/sluice/adaptive"
)

// A limiter driven in explicit time: each window of ten requests at a
// steady 10ms lets the default algorithm grow its limit (doubling in slow start)
// up to its maximum.
func Example() {
	alg, err := adaptive.NewDefault(adaptive.WithInitialLimit(4), adaptive.WithLimits(4, 64))
	if err != nil {
		panic(err)
	}
	l, err := adaptive.NewLimiter(alg, adaptive.WithWindowSamples(10, 10))
	if err != nil {
		panic(err)
	}
	now := int64(time.Second)
	for range 30 {
		var toks []adaptive.Token
		for {
			tok, err := l.TryAcquireAt(now, adaptive.Request{})
			if err != nil {
				break // at the limit
			}
			toks = append(toks, tok)
		}
		now += int64(10 * time.Millisecond)
		for _, tok := range toks {
			tok.DoneAt(now, adaptive.Success)
		}
	}
	fmt.Println("limit:", l.Limit(), "inflight:", l.Inflight())
	// Output: limit: 64 inflight: 0
}
