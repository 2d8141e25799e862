package concurrency

import (
	"fmt"
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
		return 0, fmt.Errorf("concurrency: rate count must be positive, got %d", r.Count)
	}
	if r.Per <= 0 {
		return 0, fmt.Errorf("concurrency: rate period must be positive, got %v", r.Per)
	}
	per := int64(r.Per)
	if r.Count > per {
		return 0, fmt.Errorf("concurrency: rate %v is faster than one event per nanosecond", r)
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
		return fmt.Errorf("concurrency: %s must be positive, got %d", what, limit)
	}
	return nil
}

func checkRateWindow(window time.Duration) error {
	if window <= 0 {
		return fmt.Errorf("concurrency: window must be positive, got %v", window)
	}
	if int64(window) > maxRateSpan {
		return fmt.Errorf("concurrency: window %v is longer than the supported %v", window, time.Duration(maxRateSpan))
	}
	return nil
}
