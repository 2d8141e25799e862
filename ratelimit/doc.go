// Package ratelimit holds sluice's exact rate algorithms and their
// vocabulary: a Rate (Per), the Decision a request gets and its Reason, a
// GCRA token bucket, fixed and sliding windows, a sliding log, sharded
// variants of the window and the bucket for global limits on many cores,
// and reservations.
//
// Every decision method takes now as int64 nanoseconds on a monotonic clock
// (see the ...At forms); the short forms read the clock once and are
// shorthand for them. Admit paths take no lock and allocate nothing.
// Constructors reject NaN, infinite, zero and negative parameters with an
// error whose text starts with "ratelimit:"; nothing is silently clamped.
//
// Package concurrency holds what bounds inflight work (Semaphore,
// ShardedSemaphore) and the bounded keyed Table that keeps this package's
// states per client. The dependency runs one way: concurrency's Table is
// generic over any state and its tests fill it with this package's, so
// ratelimit never imports concurrency; what both need (the shard-count
// option, the choice of a shard, the allocator's size classes) lives in
// internal packages. ShardedOption is the same type in both packages.
//
// # Algorithms and their states
//
// Each rate algorithm is a configuration (GCRA, FixedWindow, SlidingWindow,
// SlidingLog) that decides over a state the caller keeps (GCRAState and the
// like), so one configuration serves a million keys in a concurrency.Table
// at the cost of one state each. For the common case of one state,
// TokenBucket, FixedWindowLimiter, SlidingWindowLimiter and
// SlidingLogLimiter pair a configuration with its state. They are four
// small types rather than one generic Limiter[S] on purpose: the call site
// names the algorithm (NewTokenBucket(rate, burst) reads as what it is),
// and each call is a direct, inlinable call, where a generic type over an
// interface of its states would dispatch through a dictionary on every
// decision.
//
// # Reservations
//
// A token bucket and a fixed window can also reserve (GCRA.ReserveN,
// FixedWindow.ReserveN): a request that would fit within a caller's max
// wait is admitted now for the exact instant of its turn, and a reservation
// whose work never runs is cancelled (Cancel). The sliding window and the
// sliding log do not reserve.
package ratelimit
