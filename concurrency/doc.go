// Package concurrency holds sluice's lock-free admission primitives: a
// weighted Semaphore that bounds inflight work, sharded variants for global
// caps on many cores, exact per-key rate state (GCRA token bucket, fixed and
// sliding windows, sliding log) and a bounded keyed table to hold that state
// per client.
//
// Every decision method takes now as int64 nanoseconds on a monotonic clock
// (see the ...At forms); the short forms read the clock once and are
// shorthand for them. Admit paths take no lock and allocate nothing.
// A token bucket and a fixed window can also reserve (GCRA.ReserveN,
// FixedWindow.ReserveN): a request that would fit within a caller's max
// wait is admitted now for the exact instant of its turn, and a reservation
// whose work never runs is cancelled (Cancel). The sliding window and the
// sliding log do not reserve.
// Constructors reject NaN, infinite, zero and negative parameters with an
// error whose text starts with "concurrency:"; nothing is silently clamped.
//
// # Algorithms and their states
//
// Each rate algorithm is a configuration (GCRA, FixedWindow, SlidingWindow,
// SlidingLog) that decides over a state the caller keeps (GCRAState and the
// like), so one configuration serves a million keys in a Table at the cost
// of one state each. For the common case of one state, TokenBucket,
// FixedWindowLimiter, SlidingWindowLimiter and SlidingLogLimiter pair a
// configuration with its state. They are four small types rather than one
// generic Limiter[S] on purpose: the call site names the algorithm
// (NewTokenBucket(rate, burst) reads as what it is), and each call is a
// direct, inlinable call, where a generic type over an interface of its
// states would dispatch through a dictionary on every decision.
package concurrency
