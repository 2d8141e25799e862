// Package queueing adds bounded waiting to any admission primitive.
//
// A Queue wraps an Admitter (a concurrency.Semaphore, a sharded semaphore,
// an adaptive limiter) and lets callers wait a bounded time for a permit
// instead of being rejected at once. Waiting cannot collapse the service:
// the queue has a hard length, an optional max wait, optional CoDel
// (controlled delay) shedding, deadline-aware rejection, priority classes
// with a graded cut-off and a reserve for critical work, named
// partitions with guaranteed shares, and work-conserving fair share among
// a dynamic set of weighted tenants (WithFairShare, Lane.Tenant). A permit released through the queue is
// handed directly to the next eligible waiter, so there is no thundering
// herd and nobody barges past a waiter.
//
// The ordering (FIFO, LIFO, adaptive LIFO) and the shedding rules are
// options of one Queue type rather than separate types. The time-dependent
// rules are pure values that take now as int64 monotonic nanoseconds (CoDel,
// Share, Pacer.ReserveAt), so a simulator can drive them in virtual time;
// the blocking forms read internal/clock and use timers, so they also run
// under testing/synctest.
//
// # Virtual time
//
// Tests run a real Queue inside a testing/synctest bubble: clock.Now and
// the waiters' timers follow the bubble's fake clock, so the decisions are
// those of production, without sleeping. A simulator with its own event
// loop composes the pure parts instead, each taking now and reading no
// clock: CoDel (Empty whenever its model queue is empty, Standing to choose
// LIFO or FIFO, Deadline to schedule when a waiter is shed), Share for the
// priority cut-off, and Pacer.ReserveAt for pacing.
//
// Pacer is the other half of backpressure: a leaky bucket that lets work
// out at an exact rate with no bursts.
//
// Errors from constructors and options start with "queueing:". A shed
// request gets an error for which errors.Is(err, ErrShed) holds, plus a
// more specific sentinel (ErrQueueFull, ErrTimeout, ErrCongested,
// ErrDeadline, ErrDisplaced).
package queueing
