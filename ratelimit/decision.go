package ratelimit

import (
	"math"
	"time"
)

// Never is the RetryAfter of a request that can never succeed, such as one
// that costs more than the limiter's whole capacity.
const Never = time.Duration(math.MaxInt64)

// Reason says why a Decision came out the way it did.
type Reason uint8

const (
	// ReasonAllowed: the request was admitted.
	ReasonAllowed Reason = iota
	// ReasonLimited: the limit is reached now; RetryAfter says when the same
	// request would succeed.
	ReasonLimited
	// ReasonExceedsCapacity: the request costs more than the limit can ever
	// grant at once; it will never succeed and RetryAfter is Never.
	ReasonExceedsCapacity
)

// String returns a short lower-case name for r.
func (r Reason) String() string {
	switch r {
	case ReasonAllowed:
		return "allowed"
	case ReasonLimited:
		return "limited"
	case ReasonExceedsCapacity:
		return "exceeds capacity"
	}
	return "unknown"
}

// Decision is the outcome of one rate decision, with what an HTTP layer needs
// to build RateLimit and Retry-After headers. It is a plain value of four
// words, small enough for the compiler to pass and return it in registers;
// copying it is free.
//
// Whether the request was admitted and why are encoded in RetryAfter rather
// than held in fields of their own: RetryAfter == 0 means admitted (Allowed
// and ReasonAllowed), RetryAfter == Never means the request can never succeed
// (ReasonExceedsCapacity), and any other, positive RetryAfter means limited
// for now (ReasonLimited). A rejection therefore always has RetryAfter > 0;
// where the exact wait would round to zero, a limiter reports 1 ns. The zero
// Decision is an admission against a limit of 0.
type Decision struct {
	// Limit is the capacity the decision was made against: the burst of a
	// token bucket, the number of requests per window of a window limiter.
	Limit int64
	// Remaining is how many more unit-cost requests would be admitted right
	// now, after this decision.
	Remaining int64
	// RetryAfter is zero when the request was admitted. Otherwise it is the
	// exact wait (at least 1 ns) after which the same request would be
	// admitted if nothing else happened in between; never earlier than the
	// truth. Never for requests that can never succeed.
	RetryAfter time.Duration
	// ResetAfter is how long until the state is fully recovered (Remaining
	// back at Limit) if nothing else is admitted.
	ResetAfter time.Duration
}

// Allowed reports whether the request was admitted (and charged): whether
// RetryAfter is zero.
func (d Decision) Allowed() bool { return d.RetryAfter == 0 }

// Reason says why d came out the way it did: ReasonAllowed when RetryAfter is
// zero, ReasonExceedsCapacity when it is Never, ReasonLimited otherwise.
func (d Decision) Reason() Reason {
	switch d.RetryAfter {
	case 0:
		return ReasonAllowed
	case Never:
		return ReasonExceedsCapacity
	}
	return ReasonLimited
}
