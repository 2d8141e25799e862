package ratelimit

import (
	"fmt"
	"math/bits"
	"time"
)

// Rate is a number of events per period, such as Per(100, time.Second).
// Count and Per are integers, so NaN and infinite rates cannot be written;
// constructors reject a zero or negative Count or Per with an error.
type Rate struct {
	// Count is how many events the period holds.
	Count int64
	// Per is the period.
	Per time.Duration
}

// Per returns the Rate of count events per period.
func Per(count int64, period time.Duration) Rate {
	return Rate{Count: count, Per: period}
}

// String formats r as "count/period", for example "100/1s".
func (r Rate) String() string {
	return fmt.Sprintf("%d/%v", r.Count, r.Per)
}

// interval returns the emission interval of r in whole nanoseconds, rounded
// up so that the rounding can only slow the refill: the error is under 1 ns
// per event, never an extra admission.
func (r Rate) interval() (int64, error) {
	if r.Count <= 0 {
		return 0, fmt.Errorf("ratelimit: rate count must be positive, got %d", r.Count)
	}
	if r.Per <= 0 {
		return 0, fmt.Errorf("ratelimit: rate period must be positive, got %v", r.Per)
	}
	per := int64(r.Per)
	if r.Count > per {
		return 0, fmt.Errorf("ratelimit: rate %v is faster than one event per nanosecond", r)
	}
	return (per + r.Count - 1) / r.Count, nil
}

// maxRateSpan bounds every duration a rate primitive keeps in its state (a
// token bucket's burst times its emission interval, a window): 2^59 ns, about
// 18 years. With now below 2^62+2^61 ns (clock.Now stays there for 73 years
// of process uptime) no sum of now and such spans can overflow int64.
const maxRateSpan = int64(1) << 59

func checkRateLimit(what string, limit int64) error {
	if limit <= 0 {
		return fmt.Errorf("ratelimit: %s must be positive, got %d", what, limit)
	}
	return nil
}

// MinWindow is the shortest window NewFixedWindow, NewSlidingWindow,
// NewSlidingLog and NewShardedWindow accept: 1 ms. A window of a few
// nanoseconds is shorter than a clock read or a decision; such a value is
// almost always a mistyped unit (Window: 15 meaning 15 seconds), and as a
// limit it would mean nothing, so it is an error rather than a limiter
// that lets everything through.
const MinWindow = time.Millisecond

func checkRateWindow(window time.Duration) error {
	if window <= 0 {
		return fmt.Errorf("ratelimit: window must be positive, got %v", window)
	}
	if window < MinWindow {
		return fmt.Errorf("ratelimit: window %v is shorter than the supported %v", window, MinWindow)
	}
	if int64(window) > maxRateSpan {
		return fmt.Errorf("ratelimit: window %v is longer than the supported %v", window, time.Duration(maxRateSpan))
	}
	return nil
}

// divider divides non-negative int64 values by a fixed positive divisor
// with one multiplication instead of a division (about half the latency on
// the admit path). For a divisor d that is not a power of two it uses
// m = ⌈2^(63+l)/d⌉ with l = ⌈log2 d⌉; since m·d − 2^(63+l) < d ≤ 2^l,
// ⌊x·m/2^(63+l)⌋ = ⌊x/d⌋ for every 0 ≤ x < 2^63 (Granlund and Montgomery,
// "Division by invariant integers using multiplication", theorem 4.2).
// Powers of two are a shift.
type divider struct {
	m     uint64 // 0 for a power of two
	shift uint
}

func newDivider(d int64) divider {
	if d&(d-1) == 0 {
		return divider{shift: uint(bits.TrailingZeros64(uint64(d)))}
	}
	l := uint(bits.Len64(uint64(d - 1))) // ⌈log2 d⌉ ≥ 2
	// 2^(63+l) is (hi 2^(l-1), lo 0); hi < d, so Div64 cannot overflow.
	m, r := bits.Div64(1<<(l-1), 0, uint64(d))
	if r != 0 {
		m++
	}
	return divider{m: m, shift: l - 1} // the high word is already >> 64
}

// div returns x/d for 0 ≤ x.
func (v divider) div(x int64) int64 {
	if v.m == 0 {
		return int64(uint64(x) >> v.shift)
	}
	hi, _ := bits.Mul64(uint64(x), v.m)
	return int64(hi >> v.shift)
}
