package queueing

import (
	"math"
	"time"
)

// drainRate estimates how fast a busy queue hands out units: an
// exponentially weighted mean of the time between consecutive grants,
// per unit granted, measured only while waiters were present (idle gaps
// would otherwise read as a slow drain). Not safe for concurrent use; the
// queue calls it under its lock with now.
type drainRate struct {
	nsPerUnit float64
	last      int64
	busy      bool
	samples   int
}

// drainAlpha weighs the newest sample; 0.2 follows a change within about
// ten grants without chasing a single outlier.
const drainAlpha = 0.2

// start marks the queue busy from now (a waiter arrived to an empty queue).
func (r *drainRate) start(now int64) {
	if !r.busy {
		r.busy, r.last = true, now
	}
}

// granted records a grant of units at now; stillBusy says whether waiters
// remain.
func (r *drainRate) granted(now, units int64, stillBusy bool) {
	if r.busy && units > 0 {
		s := float64(now-r.last) / float64(units)
		if r.samples == 0 {
			r.nsPerUnit = s
		} else {
			r.nsPerUnit += drainAlpha * (s - r.nsPerUnit)
		}
		r.samples++
	}
	r.last, r.busy = now, stillBusy
}

// idle marks the queue empty without a grant (the last waiter left).
func (r *drainRate) idle() { r.busy = false }

// wait returns the expected time for units to drain, and false while there
// is no estimate yet. An estimate past math.MaxInt64 ns is MaxInt64: the
// conversion of a larger float to an integer is undefined.
func (r *drainRate) wait(units int64) (time.Duration, bool) {
	if r.samples == 0 {
		return 0, false
	}
	if est := r.nsPerUnit * float64(units); est < math.MaxInt64 {
		return time.Duration(est), true
	}
	return time.Duration(math.MaxInt64), true
}
