package adaptive

import "time"

// Algorithm computes a concurrency limit from windows of samples.
//
// Implementations are pure: no clock reads, no goroutines, no I/O; the
// result depends only on the windows seen so far. They are not safe for
// concurrent use: a Limiter calls Update from one goroutine at a time (at a
// window boundary), and the simulator from its single event loop.
type Algorithm interface {
	// Limit returns the current limit, always within the algorithm's bounds.
	Limit() int
	// Update folds one window into the state and returns the new limit.
	Update(w Window) int
}

// Shedder is an Algorithm that also sheds a share of admissions whatever the
// limit: the actuator for an overload that no concurrency limit binds, such
// as a CPU-bound server whose inflight never exceeds its cores while its
// queue grows in the Go run queue and the sockets, in front of the limited
// code. A Limiter reads ShedFraction after each Update and sheds that share
// of its admissions (ErrShed). Default is one.
type Shedder interface {
	Algorithm
	// ShedFraction returns the share of admissions to shed, in [0, 1].
	ShedFraction() float64
}

// QueueBounder is an Algorithm that also bounds how long a request may
// have waited in the server before it reached the Limiter
// (Request.Queued: in the kernel's socket buffers, the accept queue and
// the Go run queue): the Limiter sheds a request that waited longer
// (ErrShed), at once and whatever the limit, unless its priority is above
// Critical. It is the per-request actuator for the overload that
// Shedder's share acts on window by window: a request that waited that
// long is evidence of the queue by itself, and shedding it keeps the wait
// of the admitted ones bounded from the first request of a surge on. The
// Limiter reads QueueBound in NewLimiter and after each Update, so the
// bound may follow the windows (Window.ShedByWait counts its sheds); one
// that is zero in NewLimiter bounds nothing, ever (shed's middleware then
// does not measure waits). Default is one.
type QueueBounder interface {
	Algorithm
	// QueueBound returns the longest wait to admit; zero or less: none.
	QueueBound() time.Duration
}

// runtimeUser is an Algorithm that asks its Limiter to read the Go
// runtime's signals without WithRuntimeSignals.
type runtimeUser interface {
	usesRuntime() bool
}
