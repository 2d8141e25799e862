package store

import (
	"math"
	"math/bits"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/ratelimit"
)

// A token bucket whose rate changed in place. Its per-key state is a GCRA
// arrival time, one word: there is no room to mark which keys have been
// converted to a new rate, so none are. Instead the limit's clock changes.
// The states stay in the units of the rate registered (warped nanoseconds,
// one token per iw of them), and a warped clock φ(now) advances iw warped
// nanoseconds per new emission interval of real time. A key that owes k
// tokens (k·iw warped ns) when the rate changes owes them still, and pays
// them back at the new rate; nothing per key is rewritten.
//
// φ never runs faster than real time (φ(now) ≤ now), so it stays in the
// range the GCRA accepts. A new rate faster than 1/iw would need a faster
// clock: then iw itself shrinks to the new interval, which keeps each key's
// debt in time rather than in tokens (conservative: more tokens owed).

// warpedBucket is a GCRA on a warped clock: g counts in warped nanoseconds
// (interval iw, the limit's burst), clock maps real time to warped time.
type warpedBucket struct {
	g     *ratelimit.GCRA
	clock *warpClock
}

// warpClock is φ: from its anchor instant t0 on, φ(t) = φ0 +
// ⌊(t−t0)·num/den⌋ with num ≤ den, and before it φ falls at the same slope
// (rounded down, never below 0). It is anchored at the limit's first
// decision after Update, at that decision's now, continuing the clock
// before it (base, or real time), so that φ has no jump.
type warpClock struct {
	num, den int64
	// realBase: the clock before is real time (the limit's first rate).
	realBase bool
	// base is the clock before, until this one is anchored; cleared then,
	// so that a chain of updates does not keep every earlier clock alive.
	base atomic.Pointer[warpClock]
	at   atomic.Pointer[clockAnchor]
}

type clockAnchor struct{ t0, phi0 int64 }

// anchor returns the clock's anchor, setting it at now if there is none.
func (c *warpClock) anchor(now int64) *clockAnchor {
	if a := c.at.Load(); a != nil {
		return a
	}
	var phi0 int64
	if c.realBase {
		phi0 = now
	} else if b := c.base.Load(); b != nil {
		phi0 = b.phi(now)
	} else {
		return c.at.Load() // base is cleared only once the anchor is set
	}
	// Racing first decisions agree on the one anchor that wins.
	c.at.CompareAndSwap(nil, &clockAnchor{t0: now, phi0: phi0})
	c.base.Store(nil)
	return c.at.Load()
}

// phi returns φ(now).
func (c *warpClock) phi(now int64) int64 { return c.phiAt(c.anchor(now), now) }

// phiAt returns φ(now) from anchor a.
func (c *warpClock) phiAt(a *clockAnchor, now int64) int64 {
	if now >= a.t0 {
		q, _ := mulDiv(now-a.t0, c.num, c.den, false) // num ≤ den: q ≤ now−t0
		return a.phi0 + q
	}
	q, _ := mulDiv(a.t0-now, c.num, c.den, true)
	return max(0, a.phi0-q)
}

// realAt returns the first real instant at which φ reaches x, for x above
// φ(now); false when it lies beyond int64 time.
func (c *warpClock) realAt(a *clockAnchor, x int64) (int64, bool) {
	if x <= a.phi0 {
		// φ(t) ≥ x before t0 ⟺ ⌈(t0−t)·num/den⌉ ≤ φ0−x ⟺ t0−t ≤ ⌊(φ0−x)·den/num⌋.
		q, ok := mulDiv(a.phi0-x, c.den, c.num, false)
		return a.t0 - q, ok && q <= a.t0
	}
	// φ(t) ≥ x after t0 ⟺ (t−t0)·num ≥ (x−φ0)·den.
	q, ok := mulDiv(x-a.phi0, c.den, c.num, true)
	return a.t0 + q, ok && q <= math.MaxInt64-a.t0
}

// sameRatio reports whether a·b == c·d, for non-negative values, without
// overflow.
func sameRatio(a, b, c, d int64) bool {
	h1, l1 := bits.Mul64(uint64(a), uint64(b))
	h2, l2 := bits.Mul64(uint64(c), uint64(d))
	return h1 == h2 && l1 == l2
}

// mulDiv returns x·y/z for non-negative x, y and positive z, rounded down
// (or up), and false when the quotient does not fit an int64.
func mulDiv(x, y, z int64, up bool) (int64, bool) {
	hi, lo := bits.Mul64(uint64(x), uint64(y))
	if hi >= uint64(z) {
		return math.MaxInt64, false
	}
	q, r := bits.Div64(hi, lo, uint64(z))
	if up && r != 0 {
		q++
	}
	if q > math.MaxInt64 {
		return math.MaxInt64, false
	}
	return int64(q), true
}

// AllowN decides n tokens at real time now on the warped clock; RetryAfter
// and ResetAfter are real durations, exact as the GCRA's are.
func (w *warpedBucket) AllowN(s *ratelimit.GCRAState, now, n int64) ratelimit.Decision {
	a := w.clock.anchor(now)
	at := w.clock.phiAt(a, now)
	d := w.g.AllowN(s, at, n)
	if d.RetryAfter > 0 && d.RetryAfter != ratelimit.Never {
		d.RetryAfter = max(1, w.real(a, at, d.RetryAfter, now))
	}
	if d.ResetAfter > 0 {
		d.ResetAfter = w.real(a, at, d.ResetAfter, now)
	}
	return d
}

// real converts a warped wait from warped time at (φ(now)) into the real
// wait from now; Never when it lies beyond int64 time.
func (w *warpedBucket) real(a *clockAnchor, at int64, wait time.Duration, now int64) time.Duration {
	t, ok := w.clock.realAt(a, at+int64(wait)) // at+wait ≤ at+τ: in range
	if !ok {
		return ratelimit.Never
	}
	return time.Duration(t - now)
}

// ReserveN reserves n tokens at the earliest real instant within
// [now+minWait, now+maxWait] at which they fit on the warped clock. The
// waits are real durations: the window is mapped onto the warped clock
// (φ runs no faster than real time, so it is no wider there), and the slot
// back to the first real instant that reaches it, never earlier.
func (w *warpedBucket) ReserveN(s *ratelimit.GCRAState, now, n int64, minWait, maxWait time.Duration) ratelimit.Reservation {
	a := w.clock.anchor(now)
	at := w.clock.phiAt(a, now)
	from := w.clock.phiAt(a, now+int64(minWait)) - at
	until := w.clock.phiAt(a, now+int64(maxWait)) - at
	r := w.g.ReserveN(s, at, n, time.Duration(from), time.Duration(until))
	d := &r.Decision
	if d.RetryAfter > 0 && d.RetryAfter != ratelimit.Never {
		d.RetryAfter = max(1, w.real(a, at, d.RetryAfter, now))
	}
	if d.ResetAfter > 0 {
		d.ResetAfter = w.real(a, at, d.ResetAfter, now)
	}
	if r.Wait > 0 {
		// Within maxWait: φ(now+maxWait) reaches the slot, so the first
		// real instant that does is no later.
		r.Wait = max(minWait, w.real(a, at, r.Wait, now))
	}
	return r
}

// Cancel gives back a reservation at real time now.
func (w *warpedBucket) Cancel(s *ratelimit.GCRAState, now, n int64, r ratelimit.Reservation) {
	w.g.Cancel(s, w.clock.phi(now), n, r)
}

// Refund gives n tokens back at real time now.
func (w *warpedBucket) Refund(s *ratelimit.GCRAState, now, n int64) {
	w.g.Refund(s, w.clock.phi(now), n)
}

// RefundLate gives back at real time now what n tokens taken at real time
// at, paid off at real time until, still weigh (ratelimit.GCRA.RefundLate
// on the warped clock).
func (w *warpedBucket) RefundLate(s *ratelimit.GCRAState, at, now, n, until int64) {
	w.g.RefundLate(s, w.clock.phi(at), w.clock.phi(now), n, w.clock.phi(until))
}

// Recovered reports whether s is a full bucket at real time now.
func (w *warpedBucket) Recovered(s *ratelimit.GCRAState, now int64) bool {
	return w.g.Recovered(s, w.clock.phi(now))
}

// updateBucket returns the token bucket of spec on k's states, whose
// current parameters are g (in warped units when clock is not nil).
func updateBucket(k *rateKeys[ratelimit.GCRAState, *ratelimit.GCRAState], g *ratelimit.GCRA, clock *warpClock,
	spec Spec, b built) (memLimit, error) {
	iw := int64(g.Interval())        // warped ns per token: the state's unit
	next := int64(b.gcra.Interval()) // the new rate's emission interval
	if clock == nil && next == iw {
		return withAlgo(k, b.gcra, spec, b), nil // the rate is unchanged: only the burst
	}
	if clock != nil && sameRatio(iw, clock.den, next, clock.num) {
		// The rate is unchanged (its interval iw·den/num is next): only
		// the burst.
		g, err := ratelimit.NewGCRA(ratelimit.Per(1, time.Duration(iw)), spec.Limit)
		if err != nil {
			return nil, err
		}
		return withAlgo(k, &warpedBucket{g: g, clock: clock}, spec, b), nil
	}
	// Keep the debt in tokens (iw unchanged) unless the new rate is faster
	// than 1/iw: φ would have to outrun real time.
	iw = min(iw, next)
	g, err := ratelimit.NewGCRA(ratelimit.Per(1, time.Duration(iw)), spec.Limit)
	if err != nil {
		return nil, err // iw ≤ next, and spec's burst at next passed NewGCRA
	}
	c := &warpClock{num: iw, den: next, realBase: clock == nil}
	if clock != nil {
		c.base.Store(clock)
	}
	return withAlgo(k, &warpedBucket{g: g, clock: c}, spec, b), nil
}
