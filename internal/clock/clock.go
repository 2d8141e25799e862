// Package clock is sluice's single seam to the monotonic clock.
//
// Decision code in sluice takes "now" as int64 nanoseconds and never reads a
// clock itself; the convenience wrappers call Now. Keeping the reading in one
// place makes the same code run in real time, in the simulator's virtual time
// and inside a testing/synctest bubble.
package clock

import "time"

// origin is read once at start-up and never written again; it anchors the
// monotonic readings of Now.
var origin = time.Now()

// offset keeps every reading positive, inside a testing/synctest bubble too
// (where time starts in the year 2000, before origin): 2^62 ns is about 146
// years, so neither sign nor overflow is a concern in practice.
const offset = int64(1) << 62

// Now returns the current instant as nanoseconds on a monotonic clock with an
// arbitrary origin. The value is always positive and never goes backwards in
// one process. Inside a testing/synctest bubble it follows the bubble's fake
// clock. Safe for concurrent use.
func Now() int64 {
	return offset + int64(time.Since(origin))
}
