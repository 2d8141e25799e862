// Package clock is sluice's single seam to the monotonic clock.
//
// Decision code in sluice takes "now" as int64 nanoseconds and never reads a
// clock itself; the convenience wrappers call Now. Keeping the reading in one
// place makes the same code run in real time, in the simulator's virtual time
// and inside a testing/synctest bubble.
package clock

import "time"

// origin is read once at start-up and never written again; it anchors the
// monotonic readings of Now to the Unix epoch.
var origin = time.Now()

// originUnix is origin as nanoseconds since the Unix epoch.
var originUnix = origin.UnixNano()

// Now returns the current instant as nanoseconds since the Unix epoch (UTC),
// measured by the monotonic clock from one wall-clock reading at start-up:
// it never goes backwards in one process, and a later step of the wall
// clock (NTP, an operator) does not move it. Because its origin is the Unix
// epoch, limits whose windows are aligned at multiples of their length start
// their windows on UTC boundaries (a day window at midnight UTC), as a
// network store deciding on its server's Unix clock does. The value is
// positive for any date after 1970; inside a testing/synctest bubble it
// follows the bubble's fake clock (which starts at midnight UTC,
// 2000-01-01). Safe for concurrent use.
func Now() int64 {
	return originUnix + int64(time.Since(origin))
}
