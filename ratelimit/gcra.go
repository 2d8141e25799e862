package ratelimit

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

// GCRA is the configuration of an exact token bucket run as the generic cell
// rate algorithm: a bucket of burst tokens refilled at rate. Its per-key
// state is one word, a GCRAState holding the theoretical arrival time, and
// every decision is one load and one compare-and-swap on it.
//
// Guarantee: in any interval of length T (inclusive of both ends) it admits
// at most burst + rate·T tokens (refunded ones aside), under any
// interleaving and whatever order the callers' now values arrive in. The emission interval rate.Per/rate.Count
// is kept in whole nanoseconds, rounded up: the refill is slower than the
// rate by less than 1 ns per token, never faster.
//
// now is nanoseconds on a monotonic clock (clock.Now); it must be
// non-negative and below 2^62+2^61. Time standing still or going backwards
// never adds tokens: the bucket's level is a function of absolute time, so a
// caller with an older now sees the level as it was then.
//
// A GCRA is immutable and safe for concurrent use; one GCRA serves any number
// of GCRAStates. Use NewGCRA; the zero value is not usable.
type GCRA struct {
	interval int64 // emission interval in ns, rounded up
	tau      int64 // burst·interval: how far the arrival time may run ahead of now
	burst    int64
	perToken divider // divides by interval
}

// GCRAState is the per-key state of a GCRA: 8 bytes. Its zero value is a
// full bucket for any now. It is safe for concurrent use with one GCRA and
// must not be copied after first use.
type GCRAState struct {
	tat atomic.Int64 // theoretical arrival time: the bucket is full from tat on
}

// Reset makes s a full bucket again. It is meant for a table that holds the
// state exclusively (when reusing a slot); a concurrent decision may be lost.
func (s *GCRAState) Reset() { s.tat.Store(0) }

// NewGCRA returns the configuration of a token bucket holding burst tokens
// and refilled at rate. It returns an error when the rate's count or period
// is not positive, when the rate is faster than one token per nanosecond,
// when burst is not positive, or when burst tokens take longer than 2^59 ns
// (about 18 years) to refill.
func NewGCRA(rate Rate, burst int64) (*GCRA, error) {
	interval, err := rate.interval()
	if err != nil {
		return nil, err
	}
	if err := checkRateLimit("burst", burst); err != nil {
		return nil, err
	}
	if burst > maxRateSpan/interval {
		return nil, fmt.Errorf("ratelimit: a burst of %d at %v takes longer than the supported %v to refill",
			burst, rate, time.Duration(maxRateSpan))
	}
	return &GCRA{interval: interval, tau: burst * interval, burst: burst, perToken: newDivider(interval)}, nil
}

// Burst returns the bucket's capacity in tokens.
func (g *GCRA) Burst() int64 { return g.burst }

// Interval returns the time one token takes to refill (rate.Per/rate.Count,
// rounded up to a whole nanosecond).
func (g *GCRA) Interval() time.Duration { return time.Duration(g.interval) }

// AllowN takes n tokens from s at now if the bucket holds them, and returns
// the Decision. It never blocks and does not allocate.
//
// A rejected request changes nothing; its RetryAfter is exact: the same
// request at now+RetryAfter is admitted if nothing else happened in between,
// and at any earlier instant it is not. When n exceeds the burst the request
// can never succeed: Reason is ReasonExceedsCapacity and RetryAfter is Never.
// AllowN with n == 0 takes nothing and reports the state (Allowed, with
// Remaining and ResetAfter). A negative n panics: it would be a refill in
// disguise (use Refund).
func (g *GCRA) AllowN(s *GCRAState, now, n int64) Decision {
	if n <= 0 || n > g.burst {
		return g.outOfRange(s, now, n)
	}
	tat, ok := g.take(s, now, n)
	if !ok {
		// It would fit from the arrival time it needs, less tau, on.
		return g.limited(tat, now, max(tat, now)+n*g.interval-g.tau)
	}
	return Decision{ // tat-now is in (0, tau]
		Limit:      g.burst,
		Remaining:  g.perToken.div(g.tau - (tat - now)),
		ResetAfter: time.Duration(tat - now),
	}
}

// take is AllowN's step for 0 < n <= burst: it takes n tokens from s at
// now and returns the new arrival time and true, or, when the bucket does
// not hold them, the arrival time it read and false. The result fits in
// registers, so that ShardedBucket makes its own Decision from it.
func (g *GCRA) take(s *GCRAState, now, n int64) (int64, bool) {
	cost := n * g.interval // n <= burst, so cost <= tau <= maxRateSpan
	for {
		tat := s.tat.Load()
		next := max(tat, now) + cost
		// The request fits if the new arrival time runs at most tau ahead
		// of now.
		if next-g.tau > now {
			return tat, false
		}
		// The CAS is on the arrival time itself, so a caller whose now is
		// older than another's cannot overwrite a later state: the loser
		// recomputes from the winner's tat.
		if s.tat.CompareAndSwap(tat, next) {
			return next, true
		}
	}
}

// limited is the rejection of a request that fits from allowAt on. It is
// kept out of AllowN so that the admit path stays small.
//
//go:noinline
func (g *GCRA) limited(tat, now, allowAt int64) Decision {
	d := g.view(tat, now)
	d.RetryAfter = time.Duration(allowAt - now) // > 0: AllowN rejects only when allowAt > now
	return d
}

// outOfRange handles n <= 0 (a peek, or a panic) and n > burst.
func (g *GCRA) outOfRange(s *GCRAState, now, n int64) Decision {
	if n < 0 {
		panic("ratelimit: GCRA.AllowN with negative n")
	}
	d := g.view(s.tat.Load(), now)
	if n > 0 {
		d.RetryAfter = Never
	}
	return d
}

// Refund gives n tokens taken earlier back to s at now, as when a later
// limit of an all-or-nothing decision rejected the request. It never fills
// the bucket beyond burst: tokens that would overflow are dropped. While
// reservations are pending (ReserveN: the bucket owes tokens beyond empty at
// now) it gives nothing back: a token returned then would let a newcomer take
// a slot before a waiter's, so the waiter's would start early. Refund(0)
// does nothing; a negative n panics.
//
// Its limit: a refund at the admission's own now (the all-or-nothing case)
// is exact, but one that comes later, after the bucket refilled those
// tokens and other admissions took them (a rule that counts only failures
// refunds a success when the request ends), gives them a second use: up to
// n tokens beyond the bound, once. RefundLate narrows that.
func (g *GCRA) Refund(s *GCRAState, now, n int64) {
	if n <= 0 {
		if n < 0 {
			panic("ratelimit: GCRA.Refund with negative n")
		}
		return
	}
	g.refund(s, now, min(n, g.burst)*g.interval)
}

// RefundLate is Refund(s, at, n) for a refund that comes at now, after
// the admission at at: it gives back only what the n tokens still weigh
// at now, the part of them the bucket has not refilled by then. until is
// the instant the admission left the bucket paid off at (at plus its
// Decision's ResetAfter); its tokens were the last n of the debt then, so
// by now all but the last until-now ns of them have come back by
// themselves. A refund that comes once the bucket refilled them gives
// nothing, so the admissions made since keep the tokens they took; one at
// the admission's own now is Refund's. It never gives back more than
// Refund(s, at, n) would.
//
// Its limit: until is where the admission's tokens ended when it was
// made; a refund of an earlier admission since moves them earlier, and the
// state does not say by how much. So after refunds of earlier admissions,
// RefundLate can still give tokens a second use, up to what those refunds
// moved and at most n; without them (or with every refund at its
// admission's now) the bound holds exactly. RefundLate(s, at, now, 0,
// until) does nothing; a negative n panics.
func (g *GCRA) RefundLate(s *GCRAState, at, now, n, until int64) {
	if n <= 0 {
		if n < 0 {
			panic("ratelimit: GCRA.RefundLate with negative n")
		}
		return
	}
	if back := min(min(n, g.burst)*g.interval, until-now); back > 0 {
		g.refund(s, at, back)
	}
}

// refund takes back ns of debt off s at now, clamped at full.
func (g *GCRA) refund(s *GCRAState, now, back int64) {
	for {
		tat := s.tat.Load()
		if tat <= now || tat-g.tau > now {
			return // already full at now, or reserved ahead
		}
		// Clamped at now: the bucket is then exactly full, not fuller.
		if s.tat.CompareAndSwap(tat, max(tat-back, now)) {
			return
		}
	}
}

// Recovered reports whether s is indistinguishable from a fresh state at
// now (the bucket is full), so that a table may evict it.
func (g *GCRA) Recovered(s *GCRAState, now int64) bool {
	return s.tat.Load() <= now
}

// view reports the bucket whose arrival time is tat, at now.
func (g *GCRA) view(tat, now int64) Decision {
	debt := max(0, tat-now) // how far the bucket is from full, in ns
	return Decision{
		Limit:      g.burst,
		Remaining:  g.perToken.div(max(0, g.tau-debt)),
		ResetAfter: time.Duration(debt),
	}
}

// TokenBucket is a single token bucket: a GCRA with its own state, for a
// limit that is not per key. It is safe for concurrent use, lock-free, and
// must not be copied after first use. Use NewTokenBucket; the zero value is
// not usable.
type TokenBucket struct {
	_     [cacheLine]byte
	state GCRAState
	gcra  GCRA // read-only; beside the state so one cache line serves both
	_     [cacheLine]byte
}

// NewTokenBucket returns a full token bucket of burst tokens refilled at
// rate. It returns NewGCRA's errors.
func NewTokenBucket(rate Rate, burst int64) (*TokenBucket, error) {
	g, err := NewGCRA(rate, burst)
	if err != nil {
		return nil, err
	}
	return &TokenBucket{gcra: *g}, nil
}

// AllowN takes n tokens at now if the bucket holds them; see GCRA.AllowN.
func (b *TokenBucket) AllowN(now, n int64) Decision { return b.gcra.AllowN(&b.state, now, n) }

// Allow is shorthand for AllowN(clock.Now(), 1).
func (b *TokenBucket) Allow() Decision { return b.gcra.AllowN(&b.state, clock.Now(), 1) }

// Refund gives back n tokens taken earlier; see GCRA.Refund.
func (b *TokenBucket) Refund(now, n int64) { b.gcra.Refund(&b.state, now, n) }

// RefundLate gives back, at now, what n tokens taken at at still weigh;
// see GCRA.RefundLate.
func (b *TokenBucket) RefundLate(at, now, n, until int64) {
	b.gcra.RefundLate(&b.state, at, now, n, until)
}
